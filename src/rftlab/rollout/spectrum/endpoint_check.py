"""``rftlab endpoint check``: does an OpenAI-compatible endpoint answer a spectrum scan with a well-formed
``submit_report`` tool call? (The seed's connection check; the policy client itself is
``rftlab.policies.endpoint.EndpointPolicy``.)

Three checks, each ``{name, passed, required, detail}``:

1. ``models`` (informative): ``GET /models`` answers and lists the model — a model that is not listed is a
   warning, never an ``ok`` (some providers list no deployments);
2. ``chat``: a chat completion with the ``submit_report`` tool on scan 1 of a real band answers;
3. ``tool_call``: the reply holds a ``submit_report`` call whose arguments give ``center_freqs`` as a list
   of numbers; the detail says how that report scores on the band.

The reply is read from the JSON the endpoint sent (``with_raw_response``), in every shape real servers
use: ``content`` a string, null or a list of text parts; ``arguments`` a JSON string or already an object
(said in the detail: it is not the OpenAI shape); ``tool_calls`` anything — a value that is not a list
fails the check with one line, never a traceback. Every text that reaches the report is redacted of every
encoded form of the key (and of every credential variable) *before* it is cut to length, so a key at the
cut cannot print in part (``rftlab.runs.secrets.redact_text``). The base URL is reported with any
user-info password masked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, normalize_center_freqs, tool_schemas
from rftlab.policies.endpoint import DEFAULT_KEY_ENV, EndpointKeyError, make_client, resolve_key
from rftlab.runs.secrets import redact_text, redact_url

CHECK_ROW = "endpoint_check_0"
CHECK_SYSTEM_PROMPT = (
    "You monitor one radio band. Each scan lists detected peaks. Call submit_report(center_freqs) with the "
    "centre frequencies (MHz) of the transmitters you believe occupy the band; each region is 8 MHz wide. "
    "Answer with the tool call only. /no_think"
)
SUBMIT = "submit_report"
DETAIL_CHARS = 400


@dataclass
class CheckReport:
    """The outcome of ``check_endpoint``: ``checks`` is a list of ``{name, passed, detail}``."""

    base_url: str
    model: str
    api_key_env: str
    key_from_env: bool
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks if c.get("required", True))

    def add(self, name: str, passed: bool, detail: str, required: bool = True) -> None:
        self.checks.append({"name": name, "passed": passed, "required": required, "detail": detail})

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "key_from_env": self.key_from_env,
            "passed": self.passed,
            "checks": self.checks,
        }


class _Clean:
    """Redact first, then cut: every text that reaches the report goes through here."""

    def __init__(self, secrets: Sequence[str]):
        self.secrets = list(secrets)

    def __call__(self, text: Any, limit: int = DETAIL_CHARS) -> str:
        # redact the text exactly as received (a key may hold characters that whitespace-folding would
        # change), then fold whitespace, then cut
        clean = " ".join(redact_text(str(text), self.secrets).split())
        return clean if len(clean) <= limit else clean[: limit - 3] + "..."

    def error(self, exc: BaseException) -> str:
        status = getattr(exc, "status_code", None)
        return self(f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {exc}")


def _raw_json(response: Any) -> Any:
    """The JSON body of a ``with_raw_response`` result (``ValueError`` when it is not JSON)."""
    http = getattr(response, "http_response", response)
    return json.loads(http.text)


def check_models(client: Any, model: str, report: CheckReport, clean: _Clean) -> None:
    """Check 1 (informative): the model list, and whether ``model`` is in it."""
    try:
        body = _raw_json(client.models.with_raw_response.list())
        data = body.get("data") if isinstance(body, Mapping) else None
        if not isinstance(data, list):
            report.add("models", False, "GET /models answered without a 'data' list", required=False)
            return
        ids = [m.get("id") for m in data if isinstance(m, Mapping)]
    except Exception as exc:  # noqa: BLE001 - any failure is this check's finding
        report.add("models", False, clean.error(exc), required=False)
        return
    listed = model in ids
    detail = f"{len(ids)} model(s) listed; " + (
        "the model is listed" if listed else f"the model {clean(model, 100)!r} is not listed"
    )
    report.add("models", listed, detail, required=False)


def ask_for_a_report(client: Any, model: str, max_tokens: int) -> tuple[Any, SpectrumRFTEnv, float]:
    """Check 2's request: scan 1 of the check band with the ``submit_report`` tool. Returns the reply's
    JSON, the env (to score the report) and the latency in seconds."""
    cfg = SpectrumRFTConfig(memory="echo")
    env = SpectrumRFTEnv(cfg)
    scan = env.reset(CHECK_ROW).text
    t0 = time.monotonic()
    response = client.chat.completions.with_raw_response.create(
        model=model,
        messages=[{"role": "system", "content": CHECK_SYSTEM_PROMPT}, {"role": "user", "content": scan}],
        tools=tool_schemas(cfg),
        max_tokens=max_tokens,
        temperature=0.0,
    )
    return _raw_json(response), env, time.monotonic() - t0


def first_choice(body: object) -> tuple[Mapping[str, Any] | None, str]:
    """``(choices[0].message, finish_reason)`` of a reply, or ``(None, why)`` when there is none."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None, "the reply has no choices[0]"
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return None, "choices[0] has no message object"
    return message, str(choices[0].get("finish_reason"))


def message_text(message: Mapping[str, Any]) -> str:
    """``content`` as text: a string, null, or a list of parts (their ``text`` joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "") if isinstance(p, Mapping) else (p if isinstance(p, str) else "")
            for p in content
        )
    return "" if content is None else str(content)


def check_tool_call(
    message: Mapping[str, Any], env: SpectrumRFTEnv, report: CheckReport, clean: _Clean
) -> None:
    """Check 3: a ``submit_report`` call with ``center_freqs`` a list of numbers, scored on the band."""
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        report.add(
            "tool_call", False, f"tool_calls is a {type(calls).__name__}, not a list: {clean(calls, 200)}"
        )
        return
    mine = [
        c
        for c in calls or []
        if isinstance(c, Mapping)
        and isinstance(c.get("function"), Mapping)
        and c["function"].get("name") == SUBMIT
    ]
    if not mine:
        report.add("tool_call", False, f"no {SUBMIT} tool call; text: {clean(message_text(message), 200)!r}")
        return
    raw = mine[0]["function"].get("arguments")
    note = ""
    if isinstance(raw, Mapping):
        args: Any = raw
        note = " (arguments arrived as a JSON object, not the OpenAI JSON string)"
    else:
        try:
            args = json.loads(raw if isinstance(raw, str | bytes) else "")
        except (ValueError, RecursionError):
            report.add("tool_call", False, f"arguments are not JSON: {clean(raw, 200)!r}")
            return
    centres = args.get("center_freqs") if isinstance(args, Mapping) else None
    if not _number_list(centres):
        report.add(
            "tool_call",
            False,
            f"center_freqs is not a list of numbers: {clean(json.dumps(args, default=str), 200)!r}",
        )
        return
    cfg = env.config
    occ, avail = env.score_report(
        normalize_center_freqs(centres, max_report=cfg.max_report, band=cfg.band_width)[0]
    )
    report.add(
        "tool_call",
        True,
        f"{SUBMIT} with {len(centres)} centre(s); scan 1 occupied-IoU {occ:.4f}, available-IoU {avail:.4f}{note}",
    )


def _number_list(value: object) -> TypeGuard[list[float]]:
    import math

    return isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value
    )


def check_endpoint(
    base_url: str,
    model: str,
    *,
    api_key_env: str = DEFAULT_KEY_ENV,
    timeout: float = 60.0,
    max_tokens: int = 1024,
    client: Any = None,
) -> CheckReport:
    """Run the three checks (module docstring). Never raises for an endpoint's failure; every message is
    redacted of the key before it is cut."""
    try:
        key, from_env = resolve_key(api_key_env)
    except EndpointKeyError as exc:  # a key no HTTP header can carry: said once, nothing is sent
        report = CheckReport(redact_url(base_url), model, api_key_env, True)
        report.add("client", False, str(exc))
        return report
    clean = _Clean([key] if from_env else [])
    report = CheckReport(redact_url(base_url), model, api_key_env, from_env)
    try:
        client = client or make_client(base_url, api_key_env=api_key_env, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - e.g. a malformed URL
        report.add("client", False, clean.error(exc))
        return report
    check_models(client, model, report, clean)
    try:
        body, env, latency = ask_for_a_report(client, model, max_tokens)
    except Exception as exc:  # noqa: BLE001 - a refused, failed or non-JSON answer is this check's finding
        report.add("chat", False, clean.error(exc))
        report.add("tool_call", False, "no reply to inspect")
        return report
    message, finish = first_choice(body)
    if message is None:
        report.add("chat", False, finish)
        report.add("tool_call", False, "no reply to inspect")
        return report
    report.add("chat", True, f"answered in {latency:.2f} s (finish_reason {clean(finish, 40)})")
    check_tool_call(message, env, report, clean)
    return report
