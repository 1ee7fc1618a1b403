"""CLBench context regimes for text policies on BSM-official (docs/spectrum.md §A.10): ``icl`` and ``icl_notepad``.

A *context* turns bench queries and feedback into the message list a chat model sees, and records the
model's parsed action. ``rftlab.policies.spectrum.reference.ChatBenchPolicy`` wraps a chat model into a bench policy
with one of these contexts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from rftlab.envs.spectrum.bench import BenchObservation, BenchQuery, ScanReport

NOTEPAD_OPEN = "=== YOUR NOTEPAD ==="
NOTEPAD_CLOSE = "=" * 19
FEEDBACK_PREFIX = "FEEDBACK: "
PREVIOUS_FEEDBACK_PREFIX = "FEEDBACK FROM PREVIOUS INSTANCE:\n"
EMPTY_PROMPT = "(no content)"


class ScanReportWithNotepad(ScanReport):
    """``icl_notepad`` response schema: the task fields flattened plus an optional notepad update."""

    notepad_update: str | None = Field(
        default=None,
        description="Optional new notepad text. When given it replaces the whole notepad; null keeps it.",
    )


ModelT = TypeVar("ModelT", bound=BaseModel)


def _feedback(observation: BenchObservation) -> str:
    """The feedback in ``observation``; only the observation right after ``reset`` has none."""
    if observation.content is None:
        raise ValueError("the observation carries no feedback (the first one of a run)")
    return observation.content


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class IclContext:
    """``icl``: one linear message list; prompts as ``user``, actions as their JSON, feedback as
    ``user: "FEEDBACK: …"``. FIFO truncation drops the oldest message while the estimated tokens of
    system + messages + schema exceed ``max_tokens − reserve_tokens`` (off when ``max_tokens`` is None);
    the newest message is never dropped."""

    def __init__(
        self,
        system_prompt: str = "",
        *,
        max_tokens: int | None = None,
        reserve_tokens: int = 500,
        count_tokens: Callable[[str], int] = _approx_tokens,
        schema_tokens: int = 0,
    ):
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.reserve_tokens = reserve_tokens
        self.count_tokens = count_tokens
        self.schema_tokens = schema_tokens
        self.messages: list[dict[str, str]] = []
        self.truncations = 0

    response_schema: type[ScanReport] = ScanReport

    def _system(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []

    def _truncate(self) -> None:
        if self.max_tokens is None:
            return
        budget = self.max_tokens - self.reserve_tokens

        def total() -> int:
            msgs = self._system() + self.messages
            return sum(self.count_tokens(m["content"]) for m in msgs) + self.schema_tokens

        while len(self.messages) > 1 and total() > budget:  # the newest message always stays
            self.messages.pop(0)
            self.truncations += 1

    def query_messages(self, query: BenchQuery) -> list[dict[str, str]]:
        self.messages.append({"role": "user", "content": query.prompt or EMPTY_PROMPT})
        self._truncate()
        return self._system() + [dict(m) for m in self.messages]

    def record_action(self, action: BaseModel) -> None:
        self.messages.append({"role": "assistant", "content": action.model_dump_json()})

    def record_observation(self, observation: BenchObservation) -> None:
        self.messages.append({"role": "user", "content": FEEDBACK_PREFIX + _feedback(observation)})


class IclNotepadContext:
    """``icl_notepad``: every BSM scan is an instance, so after each scan the message list is wiped and
    the stripped feedback is stashed; the next prompt is ``"FEEDBACK FROM PREVIOUS INSTANCE:\\n{obs}"``,
    ``"=== YOUR NOTEPAD ===\\n{notepad}\\n==================="`` (only when non-empty) and the query,
    joined by blank lines. A non-null ``notepad_update`` replaces the notepad (no cap). ``stateless``
    also clears the notepad and drops cross-instance feedback."""

    response_schema: type[ScanReport] = ScanReportWithNotepad

    def __init__(
        self,
        system_prompt: str = "",
        *,
        clear_context_between_instances: bool = True,
        clear_notepad_between_instances: bool = False,
        stateless: bool = False,
    ):
        self.system_prompt = system_prompt
        self.clear_context = clear_context_between_instances
        self.clear_notepad = clear_notepad_between_instances or stateless
        self.stateless = stateless
        self.messages: list[dict[str, str]] = []
        self.notepad = ""
        self.stashed: str | None = None

    def query_messages(self, query: BenchQuery) -> list[dict[str, str]]:
        parts = []
        if self.stashed is not None:
            parts.append(PREVIOUS_FEEDBACK_PREFIX + self.stashed)
            self.stashed = None
        if self.notepad:
            parts.append(f"{NOTEPAD_OPEN}\n{self.notepad}\n{NOTEPAD_CLOSE}")
        parts.append(query.prompt or EMPTY_PROMPT)
        self.messages.append({"role": "user", "content": "\n\n".join(parts)})
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [dict(m) for m in self.messages]

    def record_action(self, action: BaseModel) -> None:
        update = getattr(action, "notepad_update", None)
        if update is not None:
            self.notepad = update
        self.messages.append({"role": "assistant", "content": action.model_dump_json()})

    def record_observation(self, observation: BenchObservation) -> None:
        if observation.instance_complete and self.clear_context:
            self.messages = []
            self.stashed = None if self.stateless else _feedback(observation).strip()
            if self.clear_notepad:
                self.notepad = ""
        else:
            self.messages.append({"role": "user", "content": FEEDBACK_PREFIX + _feedback(observation)})


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def parse_structured(raw: Any, schema: type[ModelT]) -> tuple[ModelT | None, str | None]:
    """Parse a model reply (dict or text) into ``schema``; unwraps a one-key provider envelope and a fenced
    or bare JSON object in text. Returns ``(action, error)``."""
    obj: Any = raw
    if isinstance(raw, str):
        text = raw.strip()
        m = _FENCE.search(text)
        candidate = m.group(1) if m else text[text.find("{") : text.rfind("}") + 1] if "{" in text else ""
        try:
            obj = json.loads(candidate)
        except ValueError:
            return None, "reply is not JSON"
    if isinstance(obj, Mapping) and "transmitters" not in obj and len(obj) == 1:
        inner = next(iter(obj.values()))
        if isinstance(inner, Mapping) and "transmitters" in inner:
            obj = inner
    try:
        return schema.model_validate(obj), None
    except ValidationError as exc:
        return (
            None,
            f"schema validation failed: {exc.errors()[0].get('msg', 'error') if exc.errors() else exc}",
        )
