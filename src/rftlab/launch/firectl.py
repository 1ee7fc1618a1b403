"""``firectl`` through a subprocess: argv builders, one runner seam, JSON parsing, key redaction.

Design (``docs/platforms.md`` §1.2, §1.8): argv builders are pure (``list[str]``), the one process call
is an injectable ``runner`` (``subprocess.run`` without a shell, with a timeout), and the executable is
resolved at call time from ``$RFTLAB_FIRECTL`` or ``PATH``, so a fake earlier on ``PATH`` wins in tests.
``--api-key`` is passed explicitly (firectl was seen to ignore ``FIREWORKS_API_KEY``) and masked in every
recorded argv, error message and captured output.

    fc = Firectl(account_id="acct", api_key=os.environ["FIREWORKS_API_KEY"])
    fc.dataset_create("rftlab-spectrum-scaf48", "rows.jsonl")
    fc.job_create("rftlab-a-1234abcd", job_create_flags(spec, account_id="acct"))
    job = fc.job_get("rftlab-a-1234abcd")          # dict, camelCase or snake_case keys
    job_state(job), job_progress(job)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.launch.spectrum.spec import SpectrumArmSpec

SECRET_FLAGS = frozenset({"--api-key", "--wandb-api-key"})
# Our rule (docs/platforms.md §1.4): PAUSED can be resumed, so it is not terminal.
TERMINAL_JOB_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "EXPIRED", "EARLY_STOPPED", "DELETED"})
SUCCESS_JOB_STATES = frozenset({"COMPLETED"})
NOUNS = {"rftj": "reinforcement-fine-tuning-job", "dataset": "dataset", "deployment": "deployment"}
PLURAL_LIST = {"reinforcement-fine-tuning-job": "reinforcement-fine-tuning-jobs", "dataset": "datasets"}
STYLES = ("noun-verb", "verb-noun")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class FirectlError(RuntimeError):
    """A firectl call failed (not found, timed out, non-zero exit, or unparseable output). The message
    never contains a key."""


@dataclass(frozen=True)
class CmdResult:
    """One finished process call. ``argv`` is already redacted."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0


Runner = Callable[[Sequence[str], float], CmdResult]


def redact(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of ``--api-key`` / ``--wandb-api-key`` (both ``--flag V`` and
    ``--flag=V`` forms) replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        name, eq, _ = arg.partition("=")
        if hide_next:
            out.append("***")
            hide_next = False
        elif name in SECRET_FLAGS:
            out.append(f"{name}=***" if eq else arg)
            hide_next = not eq
        else:
            out.append(arg)
    return out


def scrub(text: str, secrets: Sequence[str | None]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def resolve_executable(name: str = "firectl") -> str:
    """``$RFTLAB_FIRECTL`` when set, else ``name`` found on ``PATH``; a clear error otherwise."""
    override = os.environ.get("RFTLAB_FIRECTL")
    if override:
        return override
    found = shutil.which(name)
    if not found:
        raise FirectlError(
            f"{name} not found on PATH: install the Fireworks CLI or point RFTLAB_FIRECTL at the binary"
        )
    return found


def subprocess_runner(argv: Sequence[str], timeout: float) -> CmdResult:
    """Run ``argv`` (no shell), capture its output, never raise for a non-zero exit."""
    start = time.monotonic()
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise FirectlError(f"cannot run {argv[0]!r}: no such executable") from None
    except PermissionError:
        raise FirectlError(f"cannot run {argv[0]!r}: not executable") from None
    except subprocess.TimeoutExpired:
        raise FirectlError(f"{' '.join(redact(argv))} timed out after {timeout:g} s") from None
    return CmdResult(tuple(redact(argv)), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def parse_json_output(stdout: str, what: str) -> Any:
    """The JSON document in ``stdout`` (from its first ``{`` or ``[``: a banner line may precede it)."""
    starts = [i for i in (stdout.find("{"), stdout.find("[")) if i >= 0]
    if not starts:
        raise FirectlError(f"{what}: no JSON in firectl output ({stdout.strip()[:200]!r})")
    try:
        return json.loads(stdout[min(starts) :])
    except json.JSONDecodeError as exc:
        raise FirectlError(f"{what}: firectl printed malformed JSON ({exc.msg} at char {exc.pos})") from None


@dataclass
class Firectl:
    """A configured firectl. ``log`` receives one record per call (redacted argv, exit code, seconds,
    scrubbed stderr tail) — the launcher appends them to ``provider/firectl_calls.jsonl``."""

    account_id: str
    api_key: str | None = None
    exe: str | None = None  # None: resolved at call time ($RFTLAB_FIRECTL or PATH)
    style: str = "noun-verb"
    runner: Runner = subprocess_runner
    timeout: float = 120.0
    log: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {self.style!r}")
        if not self.account_id or any(c.isspace() for c in self.account_id):
            raise ValueError(
                "a Fireworks account id is needed (set FIREWORKS_ACCOUNT_ID or pass --account-id)"
            )

    def __repr__(self) -> str:  # never show the key
        return f"Firectl(account_id={self.account_id!r}, style={self.style!r})"

    # ------------------------------------------------------------------------------------- argv
    def argv(self, noun: str, verb: str, *args: str, json_out: bool = True) -> list[str]:
        noun = NOUNS.get(noun, noun)
        if self.style == "verb-noun" and verb == "list":
            noun = PLURAL_LIST.get(noun, noun)
        head = [noun, verb] if self.style == "noun-verb" else [verb, noun]
        tail = ["-a", self.account_id] + (["--api-key", self.api_key] if self.api_key else [])
        exe = self.exe or resolve_executable()
        return [exe, *head, *args, *tail, *(["-o", "json"] if json_out else [])]

    # -------------------------------------------------------------------------------------- run
    def run(self, argv: Sequence[str]) -> CmdResult:
        secrets = [self.api_key]
        try:
            res = self.runner(argv, self.timeout)
        except FirectlError as exc:
            self._record(redact(argv), None, 0.0, str(exc))
            raise FirectlError(scrub(str(exc), secrets)) from None
        stderr = scrub(res.stderr, secrets)
        res = CmdResult(
            tuple(redact(res.argv)), res.returncode, scrub(res.stdout, secrets), stderr, res.seconds
        )
        self._record(list(res.argv), res.returncode, res.seconds, stderr[-2000:])
        if res.returncode != 0:
            tail = stderr.strip()[-2000:] or res.stdout.strip()[-500:]
            raise FirectlError(f"{' '.join(res.argv[1:3])} failed (exit {res.returncode}): {tail}")
        return res

    def _record(self, argv: list[str], rc: int | None, seconds: float, stderr: str) -> None:
        if self.log is not None:
            self.log({"argv": argv, "returncode": rc, "seconds": round(seconds, 3), "stderr": stderr})

    def _json(self, noun: str, verb: str, *args: str) -> Any:
        res = self.run(self.argv(noun, verb, *args))
        return parse_json_output(res.stdout, f"{noun} {verb}")

    # --------------------------------------------------------------------------------- datasets
    def dataset_create(self, dataset_id: str, path: str | Path) -> Any:
        return self._json("dataset", "create", dataset_id, str(path))

    def dataset_get(self, dataset_id: str) -> Any:
        return self._json("dataset", "get", dataset_id)

    def dataset_list(self) -> Any:
        return self._json("dataset", "list")

    def dataset_download(self, dataset_id: str, out_dir: str | Path) -> list[Path]:
        """Download into ``out_dir`` (``-o json`` is not passed to download); the JSONL files it wrote."""
        out = Path(out_dir)
        self.run(
            self.argv("dataset", "download", dataset_id, "--output-dir", str(out), "--quiet", json_out=False)
        )
        return sorted(out.rglob("*.jsonl"))

    # ------------------------------------------------------------------------------------- jobs
    def job_create(self, job_id: str, flags: Sequence[str]) -> Any:
        return self._json("rftj", "create", "--job-id", job_id, *flags)

    def job_get(self, job_id: str) -> Any:
        return self._json("rftj", "get", job_id)

    def job_list(self) -> Any:
        return self._json("rftj", "list")

    def job_cancel(self, job_id: str) -> CmdResult:
        return self.run(self.argv("rftj", "cancel", job_id, json_out=False))


# ------------------------------------------------------------------------------- job arguments


def evaluator_name(spec: SpectrumArmSpec, account_id: str) -> str:
    """The evaluator resource of the spec, with a ``<acct>`` placeholder filled with the account id."""
    fw = _fireworks(spec)
    return fw.evaluator.replace("<acct>", account_id)


def job_id_for(spec: SpectrumArmSpec) -> str:
    """A deterministic job id: ``rftlab-<arm>-<first 8 hex of the spec hash>`` (lower case, dashes)."""
    arm = re.sub(r"[^a-z0-9]+", "-", spec.arm.lower()).strip("-") or "arm"
    job = f"rftlab-{arm}-{spec.sha256()[:8]}"
    if not _ID_RE.match(job):
        raise ValueError(f"cannot make a valid job id from arm {spec.arm!r}")
    return job


def job_create_flags(
    spec: SpectrumArmSpec,
    *,
    account_id: str,
    wandb_api_key: str | None = None,
    dataset_id: str | None = None,
) -> list[str]:
    """Every hyper-parameter of the arm as ``firectl rftj create`` flags (docs/platforms.md §1.3: pass every
    value explicitly; defaults differ between doc pages). ``--job-id`` is added by ``job_create``."""
    fw = _fireworks(spec)
    flags = [
        "--base-model", fw.base_model,
        "--dataset", dataset_id or fw.dataset_id,
        "--evaluator", evaluator_name(spec, account_id),
        "--output-model", fw.output_model,
        "--epochs", str(spec.epochs),
        "--learning-rate", _num(spec.learning_rate),
        "--temperature", _num(spec.temperature),
        "--max-output-tokens", str(fw.max_output_tokens),
        "--response-candidates-count", str(spec.response_candidates),
        "--max-concurrent-rollouts", str(fw.max_concurrent_rollouts),
    ]  # fmt: skip
    if fw.lora_rank is not None:
        flags += ["--lora-rank", str(fw.lora_rank)]
    if fw.wandb_project:
        flags += ["--wandb", "--wandb-project", fw.wandb_project]
        if fw.wandb_entity:
            flags += ["--wandb-entity", fw.wandb_entity]
        if wandb_api_key:
            flags += ["--wandb-api-key", wandb_api_key]
    return flags


def _num(x: float) -> str:
    """A float flag value as Python writes it (``1.0``, ``0.0001``, ``1e-06``): exact and unambiguous."""
    return repr(float(x))


def _fireworks(spec: SpectrumArmSpec):
    if spec.fireworks is None:
        raise ValueError(f"arm {spec.arm!r} has no 'fireworks' section: it can only run on the local backend")
    return spec.fireworks


# ------------------------------------------------------------------------------ job JSON reading


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    """``obj[camel]`` or its snake_case spelling (firectl's -o json casing is unverified)."""
    if camel in obj:
        return obj[camel]
    snake = re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()
    return obj.get(snake)


def job_state(job: Mapping[str, Any]) -> str:
    """``state`` without the ``JOB_STATE_`` prefix, upper case (``""`` when absent)."""
    return str(job.get("state") or "").upper().removeprefix("JOB_STATE_")


def job_progress(job: Mapping[str, Any]) -> dict[str, Any]:
    """``jobProgress`` fields the poller uses; missing or ill-typed values become ``None``."""
    progress = _get(job, "jobProgress")
    progress = progress if isinstance(progress, Mapping) else {}

    def as_int(value: Any) -> int | None:
        try:
            return int(value) if value is not None and not isinstance(value, bool) else None
        except (TypeError, ValueError):
            return None

    return {"epoch": as_int(progress.get("epoch")), "percent": as_int(progress.get("percent"))}


def accelerator_seconds(job: Mapping[str, Any]) -> dict[str, float]:
    """``acceleratorSeconds`` as floats (the API sends strings); unparseable values are dropped."""
    raw = _get(job, "acceleratorSeconds")
    out: dict[str, float] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                out[str(name)] = float(value)
            except (TypeError, ValueError):
                continue
    return out


def output_metrics(job: Mapping[str, Any]) -> Any:
    """``outputMetrics`` (an undocumented string): its JSON value when it parses, else the raw text."""
    raw = _get(job, "outputMetrics")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def status_message(job: Mapping[str, Any]) -> str:
    status = job.get("status")
    if isinstance(status, Mapping):
        return str(status.get("message") or status.get("code") or "")
    return ""


def rollout_dataset_id(job_id: str, epoch: int) -> str:
    """Per-epoch rollout dataset of a job: ``rft-evalv3-<job>-epoch-<k>`` (``k`` from 0)."""
    return f"rft-evalv3-{job_id.rsplit('/', 1)[-1]}-epoch-{int(epoch)}"
