"""Fireworks evaluators: one per evaluator code, checked ACTIVE before a job may use it (docs/platforms.md §1.9).

An evaluator's id is the spec's evaluator id plus the first 8 hex digits of ``evaluator_code_sha256()``:
the SHA-256 of the code an uploaded evaluator runs (the import closure of every entry module under
``rftlab.rollout.eval_entries``, plus the pinned requirements). Arms whose evaluator code is the same share
one evaluator; a code change gets a new evaluator, so an upload never has to delete (``--force``) an
evaluator that another arm's running job still uses. ``--force`` is used only to replace a build that
failed (no job can run on it).

``fetch_evaluator`` reads one evaluator through the fireworks-ai SDK (``GET
/v1/accounts/<acct>/evaluators/<id>``; ``$FIREWORKS_BASE_URL`` or ``$FIREWORKS_API_BASE`` names another
server). Its documented states are ``BUILDING``, ``ACTIVE`` and ``BUILD_FAILED``. ``wait_until_active``
polls while it builds, with a bounded timeout, and refuses a missing or failed one.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from rftlab.runs.secrets import redact_text

KEY_ENV = "FIREWORKS_API_KEY"
BASE_URL_ENVS = ("FIREWORKS_BASE_URL", "FIREWORKS_API_BASE")
EVALUATOR_TIMEOUT_S = 600.0  # as long as eval-protocol's ``create rft`` waits for ACTIVE
EVALUATOR_POLL_S = 10.0
# eval-protocol 0.3.33 (evaluation.py, Evaluator.create) logs this warning when the signed-URL PUT of the
# code tarball (or validateUpload) fails, then returns normally: the evaluator exists with no code.
CODE_UPLOAD_FAILED = "Code upload failed (evaluator created but code not uploaded)"

Lookup = Callable[[str, str], Mapping[str, Any] | None]


class EvaluatorRefused(RuntimeError):
    """The evaluator is missing, failed its build, stayed BUILDING too long or cannot be read."""


@cache
def evaluator_code_sha256(requirements: tuple[str, ...]) -> str:
    """SHA-256 of what an uploaded evaluator runs: the import closure of every entry module (path and bytes)
    and the requirements (cached per process)."""
    from rftlab.runs.codehash import SRC, import_closure

    entries = sorted(p.stem for p in (SRC / "rftlab" / "rollout" / "eval_entries").glob("*.py"))
    source = "".join(f"import rftlab.rollout.eval_entries.{name}\n" for name in entries if name != "__init__")
    digest = hashlib.sha256()
    for path in import_closure(source, SRC):
        digest.update(path.relative_to(SRC).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update("\n".join(requirements).encode("utf-8"))
    return digest.hexdigest()


def coded_evaluator_id(base_id: str, requirements: Sequence[str]) -> str:
    """``<base_id>-<first 8 hex of evaluator_code_sha256>``; the base id must leave room (54 characters)."""
    if len(base_id) > 54:
        raise EvaluatorRefused(
            f"evaluator id {base_id!r} is longer than 54 characters: the code hash suffix (9 characters) must "
            "fit in Fireworks' 63"
        )
    return f"{base_id}-{evaluator_code_sha256(tuple(requirements))[:8]}"


def _base_url() -> str | None:
    for name in BASE_URL_ENVS:
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
    return None


def fetch_evaluator(
    account_id: str, evaluator_id: str, base_url: str | None = None
) -> Mapping[str, Any] | None:
    """The evaluator as camelCase JSON data, or ``None`` when the API says it does not exist (404).
    Any other failure raises ``EvaluatorRefused`` with a one-line reason (the key scrubbed). ``base_url``:
    the API's address (default: the base-URL environment variables, else Fireworks')."""
    try:
        import fireworks
    except ImportError:
        raise EvaluatorRefused(
            "checking the evaluator needs the fireworks-ai SDK: pip install -e '.[fireworks]'"
        ) from None
    key = os.environ.get(KEY_ENV, "")
    try:
        client = fireworks.Fireworks(
            api_key=key, account_id=account_id, base_url=base_url or _base_url(), max_retries=1, timeout=60.0
        )
        found = client.evaluators.get(evaluator_id)
    except fireworks.NotFoundError:
        return None
    except fireworks.APIStatusError as exc:
        raise EvaluatorRefused(
            f"reading evaluator {evaluator_id!r} failed: HTTP {exc.status_code} "
            f"({redact_text(str(exc), [key])[:300]})"
        ) from None
    except Exception as exc:  # connection errors, a key httpx cannot put in a header, ...
        reason = redact_text(str(exc), [key])[:300] or type(exc).__name__
        raise EvaluatorRefused(f"reading evaluator {evaluator_id!r} failed: {reason}") from None
    return found.model_dump(by_alias=True, exclude_none=True, mode="json")


def evaluator_state(evaluator: Mapping[str, Any]) -> str:
    """``state`` upper case, without a ``STATE_`` prefix (``""`` when absent)."""
    state = evaluator.get("state")
    return state.upper().removeprefix("STATE_") if isinstance(state, str) else ""


def _status_text(evaluator: Mapping[str, Any]) -> str:
    status = evaluator.get("status")
    if isinstance(status, Mapping):
        return str(status.get("message") or status.get("code") or "")[:500]
    return ""


def wait_until_active(
    account_id: str,
    evaluator_id: str,
    *,
    lookup: Lookup = fetch_evaluator,
    timeout: float = EVALUATOR_TIMEOUT_S,
    every: float = EVALUATOR_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[str], None] | None = None,
) -> Mapping[str, Any]:
    """The evaluator once it is ``ACTIVE``; polls while it builds (every ``every`` s, at most ``timeout``
    s); ``EvaluatorRefused`` when it is missing, failed its build or is still building at the deadline."""
    name = f"accounts/{account_id}/evaluators/{evaluator_id}"
    deadline = clock() + timeout
    while True:
        evaluator = lookup(account_id, evaluator_id)
        if evaluator is None:
            raise EvaluatorRefused(
                f"evaluator {name} does not exist on Fireworks: upload it first "
                "('rftlab fireworks upload-evaluator SPEC'); nothing was created"
            )
        state = evaluator_state(evaluator)
        if state == "ACTIVE":
            return evaluator
        if state == "BUILD_FAILED":
            why = _status_text(evaluator)
            raise EvaluatorRefused(
                f"evaluator {name} failed its build{f' ({why})' if why else ''}: fix it and upload again "
                "('rftlab fireworks upload-evaluator SPEC' replaces a failed build); nothing was created"
            )
        if clock() >= deadline:
            raise EvaluatorRefused(
                f"evaluator {name} is still {state or 'not ready'} after {timeout:g} s; launch again once "
                "it is ACTIVE; nothing was created"
            )
        if on_wait is not None:
            on_wait(f"evaluator {evaluator_id} is {state or 'not ready'}; waiting {every:g} s")
        sleep(every)


def code_upload_failed(*outputs: str) -> bool:
    """Whether eval-protocol's output says the evaluator was created without its code."""
    return any(CODE_UPLOAD_FAILED in (text or "") for text in outputs)
