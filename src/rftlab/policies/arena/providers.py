"""Arena reply providers: anything that turns an arena prompt (chat messages) into reply text.

``OracleProvider`` returns the reference target (it validates the evaluation harness), ``ScriptedProvider``
is an in-process policy that reads only the prompt (the scripted local-priority team policy rendered as
protocol replies) and ``EndpointProvider`` calls any OpenAI-compatible ``/chat/completions`` URL greedily
with thinking disabled. The frozen evaluation (``rftlab.rollout.arena.evaluation``) and the local arena
server (``rftlab.policies.arena.server``) use them. Sections (§) are those of ``docs/arena.md``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Protocol

from rftlab.envs.arena.protocol import BROADCAST_PHASE
from rftlab.envs.arena.rules import TRANSFER, WAIT
from rftlab.envs.arena.world import COMPROMISED, EXPOSED, SECURE, compact_json
from rftlab.policies.arena.scripted import STYLE_BONUS, priority_score

OPENAI_MAX_TOKENS = 192
DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_API_KEY_ENV = "RFTLAB_ARENA_API_KEY"
ENDPOINT_TIMEOUT_S = 180.0


class Provider(Protocol):
    """Reply text for one prompt. ``target`` is the reference reply; only the oracle may look at it."""

    name: str

    def complete(self, messages: list[dict[str, str]], target: str) -> str: ...

    def describe(self) -> dict[str, Any]: ...


class OracleProvider:
    """Returns the reference target: every condition must score strict 1.0 and regret 0 (§10.4)."""

    name = "oracle"

    def complete(self, messages: list[dict[str, str]], target: str) -> str:
        return target

    def describe(self) -> dict[str, Any]:
        return {"provider": "oracle", "model": "oracle"}


# ---------------------------------------------------------------- prompt-only scripted policy


def _priority(entry: Mapping[str, Any], observation: Mapping[str, Any], style: str) -> tuple[int, str, str]:
    """The local-priority key (§6) of one displayed action, computed from the prompt alone."""
    known = {n["node"]: n for n in observation["known_nodes"]}
    me = observation["self"]
    kind, target = entry["type"], entry.get("target")
    obs = known.get(target) if kind != TRANSFER else None
    mates = {t["id"]: t for t in observation["adjacent_teammates"]}
    score = priority_score(
        kind,
        value=obs["value"] if obs else 0,
        critical=int(bool(obs["critical"])) if obs else 0,
        exposed=bool(obs) and obs["status"] == EXPOSED,
        receiver_resource=mates.get(target, {"resource": 4})["resource"] if kind == TRANSFER else None,
        own_resource=me["resource"],
    )
    score += STYLE_BONUS[style].get(kind, 0)
    return (score, kind, target if target is not None else me["position"])


def _ranked(user: Mapping[str, Any], style: str) -> list[dict[str, Any]]:
    return sorted(user["legal_actions"], key=lambda e: _priority(e, user["observation"], style), reverse=True)


def action_json(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "id"}


def scripted_broadcast_reply(user: Mapping[str, Any], style: str = "balanced") -> str:
    """The reference broadcast of the agent's local-priority action (§8.5), from the prompt alone."""
    observation = user["observation"]
    team = observation["self"]["team"]
    best = action_json(_ranked(user, style)[0])
    target = best.get("target")

    def useful(o: Mapping[str, Any]) -> bool:
        return o["node"] == target or o["owner"] != team or o["status"] != SECURE or bool(o["critical"])

    ranked = sorted(
        observation["known_nodes"],
        key=lambda o: (
            o["node"] == target,
            o["status"] in (COMPROMISED, EXPOSED) or bool(o["critical"]),
            o["observed_turn"],
            o["node"],
        ),
        reverse=True,
    )
    facts = [o for o in ranked if useful(o)][:3]
    is_wait = best["type"] == WAIT
    reply = {
        "facts": facts,
        "intent": None if is_wait else best,
        "request_resource": 1 if observation["self"]["resource"] == 0 and is_wait else 0,
    }
    return compact_json(reply)


def scripted_action_reply(user: Mapping[str, Any], style: str = "balanced", use_inbox: bool = True) -> str:
    """The best local-priority action whose (kind, target) no lower-id teammate declared as its intent."""
    me = user["observation"]["self"]["id"]
    claimed = set()
    if use_inbox:
        for message in user.get("inbox") or []:
            intent = (message.get("broadcast") or {}).get("intent")
            if message.get("sender", "") < me and isinstance(intent, dict) and intent.get("type") != WAIT:
                claimed.add((intent.get("type"), intent.get("target")))
    for entry in _ranked(user, style):
        if entry["type"] == WAIT or (entry["type"], entry.get("target")) not in claimed:
            return compact_json({"action_id": entry["id"]})
    return compact_json({"action_id": "A0"})  # unreachable: WAIT is always displayed


class ScriptedProvider:
    """In-process local policy: the scripted local-priority team policy, reading only the prompt JSON."""

    name = "local"

    def __init__(self, style: str = "balanced", use_inbox: bool = True):
        if style not in STYLE_BONUS:
            raise ValueError(f"unknown style {style!r}")
        self.style, self.use_inbox = style, use_inbox

    def complete(self, messages: list[dict[str, str]], target: str) -> str:
        user = json.loads(messages[-1]["content"])
        if user.get("phase") == BROADCAST_PHASE:
            return scripted_broadcast_reply(user, self.style)
        return scripted_action_reply(user, self.style, self.use_inbox)

    def describe(self) -> dict[str, Any]:
        return {
            "provider": "local",
            "model": f"scripted-{self.style}" + ("" if self.use_inbox else "-no-inbox"),
            "decoding": "deterministic",
        }


# ---------------------------------------------------------------- OpenAI-compatible endpoint


class EndpointError(RuntimeError):
    """The endpoint failed (HTTP error, unreachable, or a body that is not a chat completion)."""


class EndpointProvider:
    """POST ``<base_url>/chat/completions`` with temperature 0 and thinking disabled (§10.4 ``openai``)."""

    name = "endpoint"

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        max_tokens: int = OPENAI_MAX_TOKENS,
        timeout: float = ENDPOINT_TIMEOUT_S,
        seed: int | None = None,
    ):
        self.model, self.base_url = model, base_url.rstrip("/")
        self.api_key_env, self.max_tokens, self.timeout, self.seed = api_key_env, max_tokens, timeout, seed

    def _key(self) -> str:
        return os.environ.get(self.api_key_env) or "local"

    def complete(self, messages: list[dict[str, str]], target: str) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "stream": False,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        if self.seed is not None:
            body["seed"] = self.seed
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key()}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise EndpointError(f"{self.base_url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EndpointError(f"{self.base_url}: unreachable ({exc})") from None
        except ValueError:
            raise EndpointError(f"{self.base_url}: the reply is not JSON") from None
        try:
            content = payload["choices"][0]["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise EndpointError(f"{self.base_url}: the reply has no choices[0].message") from None
        return content if isinstance(content, str) else ""  # not stripped (JSON whitespace is tolerated)

    def describe(self) -> dict[str, Any]:
        return {
            "provider": "endpoint",
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "enable_thinking": False,
        }
