"""Whether a job's context length holds the longest episode it will train on (docs/platforms.md §1.3).

The bound for one episode is the tokens of every message it holds (text content and tool-call arguments,
plus ``MESSAGE_OVERHEAD`` tokens of chat-template framing per message) plus ``max_output_tokens`` for the
last reply written at full length, plus, when the model is offered tools, their JSON schemas and
``TOOLS_OVERHEAD`` tokens of the template's tool preamble. Earlier replies count as long as the rendered episode's replies are: a
family's renderer plays a reference policy, so a model that writes longer replies needs more room.

Tokens are counted with the base model's own tokenizer when a copy is available locally
(``transformers``, local files only; ``HF_TOKENIZERS`` maps Fireworks model ids to Hugging Face names).
Otherwise the bound is one token per UTF-8 byte: a byte-level BPE tokenizer, such as Qwen's, never makes
more tokens than the text has bytes, so this bound can only overcount.

A renderer (``rftlab.launch.fireworks.EPISODE_RENDERERS``) returns a list of episodes, or a
``RenderedEpisodes`` that also names the tools offered with every episode and what one episode is (poker's
are the inputs of single model calls, its hand windows).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

MESSAGE_OVERHEAD = 8  # role markers, end-of-turn and tool-call framing of one message
HF_TOKENIZERS = {
    "accounts/fireworks/models/qwen3-1p7b": "Qwen/Qwen3-1.7B",
    "accounts/fireworks/models/qwen3-4b": "Qwen/Qwen3-4B",
    "accounts/fireworks/models/qwen3-8b": "Qwen/Qwen3-8B",
}
# The chat template's tool preamble (instructions around the schemas, the tool-call format): Qwen3's is 372
# bytes of text (tests/launch/test_poker_context.py measures it with tinker-cookbook's Qwen3 renderer), so 512
# bounds its tokens under either counting.
TOOLS_OVERHEAD = 512
BYTE_BOUND = "one token per UTF-8 byte (no local tokenizer for the base model; never undercounts)"


@dataclass(frozen=True)
class RenderedEpisodes:
    """A renderer's episodes with the tools offered beside each one and the name of one episode."""

    episodes: Sequence[Sequence[Mapping[str, Any]]]
    tools: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    unit: str = "rendered episodes"


def message_text(message: Mapping[str, Any]) -> str:
    """The text a message puts in the model's context: its content and its tool calls."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    else:
        text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if calls:
        text += json.dumps(calls, ensure_ascii=False, sort_keys=True, default=str)
    return text


@cache
def local_tokenizer(base_model: str) -> Callable[[str], int] | None:
    """A token counter from the base model's tokenizer when a local copy exists, else ``None``."""
    name = HF_TOKENIZERS.get(base_model)
    if name is None:
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:  # not installed, not cached, or unreadable: fall back to the byte bound
        return None
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def _byte_count(text: str) -> int:
    return len(text.encode("utf-8"))


def tools_tokens(tools: Sequence[Mapping[str, Any]], count: Callable[[str], int]) -> int:
    """Tokens of the tool block: each schema as JSON, plus ``TOOLS_OVERHEAD`` once (0 without tools)."""
    if not tools:
        return 0
    return TOOLS_OVERHEAD + sum(count(json.dumps(t, ensure_ascii=False)) for t in tools)


def episode_tokens(messages: Sequence[Mapping[str, Any]], count: Callable[[str], int]) -> int:
    """Tokens of an episode's messages, framing included (the reply still to be written is not)."""
    return sum(count(message_text(m)) + MESSAGE_OVERHEAD for m in messages)


def context_check(
    episodes: Iterable[Sequence[Mapping[str, Any]]] | RenderedEpisodes,
    *,
    base_model: str,
    max_context_length: int,
    max_output_tokens: int,
    counter: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """A preflight check (``{name, passed, detail, ...}``): the longest episode plus a full-length reply
    fits in ``max_context_length`` (with a ``RenderedEpisodes``, its tools in every episode)."""
    rendered = episodes if isinstance(episodes, RenderedEpisodes) else RenderedEpisodes(list(episodes))
    count = counter or local_tokenizer(base_model)
    method = "the base model's tokenizer" if count else BYTE_BOUND
    count = count or _byte_count
    tools = tools_tokens(rendered.tools, count)
    sizes = [episode_tokens(list(ep), count) + tools for ep in rendered.episodes]
    if not sizes:
        return {"name": "context_length_holds_episode", "passed": False,
                "detail": "no episode could be rendered for the context check"}  # fmt: skip
    longest = max(sizes) + max_output_tokens
    ok = longest <= max_context_length
    detail = (
        f"longest of {len(sizes)} {rendered.unit}: {max(sizes)} tokens + {max_output_tokens} output tokens "
        f"= {longest} {'<=' if ok else '>'} max_context_length {max_context_length} (counted with {method})"
    )
    if not ok:
        detail += "; raise fireworks.max_context_length in the spec (up to the model's limit) or lower max_output_tokens"
    return {
        "name": "context_length_holds_episode",
        "passed": ok,
        "detail": detail,
        "longest_episode_tokens": longest,
        "max_context_length": max_context_length,
        "counting": method,
    }
