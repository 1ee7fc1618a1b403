"""``firectl`` through a subprocess: argv builders, one runner seam, JSON parsing, key redaction.

Design (``docs/platforms.md`` §1.2, §1.8): argv builders are pure (``list[str]``), the one process call
is an injectable ``runner`` (``subprocess.run`` without a shell, with a timeout and an environment), and
the executable is resolved at call time from ``$RFTLAB_FIRECTL`` or ``PATH``, so a fake earlier on
``PATH`` wins in tests.

The key never goes on the command line, where every local user reads it (``ps``, ``/proc/<pid>/cmdline``).
firectl reads its default key and account from ``~/.fireworks/auth.ini`` (``firectl set-api-key`` writes
it; docs/platforms.md §1.2), plain ``key = value`` lines. So each call gets a private temporary home: a
folder only this user can open (``0700``) holding ``.fireworks/auth.ini`` (``0600``) with ``api_key`` and
``account_id``, passed to firectl as ``HOME`` and removed when the call ends (``key_via="auth-file"``, the
default). ``key_via="argv"`` is the fallback for a firectl that ignores the file: it passes
``--api-key`` and says so once, loudly, before the first call. The W&B key has no such route
(``--wandb-api-key`` is the only way firectl takes it), which is also said once, loudly, before the job
is created. Every recorded argv has both flags masked (``redact``), and every captured output and error
message is scrubbed of every encoded form of every key (``rftlab.runs.secrets.redact_text``).

    fc = Firectl(account_id="acct", api_key=os.environ["FIREWORKS_API_KEY"])
    fc.dataset_create("rftlab-spectrum-scaf48", "rows.jsonl")
    fc.job_create("rftlab-a-1234abcd", job_create_flags(spec, account_id="acct"))
    job = fc.job_get("rftlab-a-1234abcd")          # dict, camelCase or snake_case keys
    job_state(job), job_progress(job)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from rftlab.launch.specs import FireworksArmSpec, resolved_job_settings
from rftlab.runs.atomic import atomic_write_text
from rftlab.runs.secrets import redact_text
from rftlab.runs.strictjson import refuse_constant

SECRET_FLAGS = frozenset({"--api-key", "--wandb-api-key"})
# Our rule (docs/platforms.md §1.4): PAUSED can be resumed, so it is not terminal; ARCHIVED is (a job the
# platform archived never runs again), so it ends a poll instead of reading as pending until a false stall.
TERMINAL_JOB_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "EXPIRED", "EARLY_STOPPED", "DELETED", "ARCHIVED"}
)
SUCCESS_JOB_STATES = frozenset({"COMPLETED"})
# ``firectl reinforcement-fine-tuning-job resume`` "resumes a failed reinforcement fine-tuning job" (its
# docs page); other terminal states get a new attempt instead.
RESUMABLE_JOB_STATES = frozenset({"FAILED"})
LIST_PAGE_SIZE = 200  # per ``dataset list`` call; every page is read (``Firectl.dataset_list``)
MAX_LIST_PAGES = 1000
NOUNS = {"rftj": "reinforcement-fine-tuning-job", "dataset": "dataset", "deployment": "deployment"}
PLURAL_LIST = {"reinforcement-fine-tuning-job": "reinforcement-fine-tuning-jobs", "dataset": "datasets"}
STYLES = ("noun-verb", "verb-noun")
KEY_VIA = ("auth-file", "argv")
AUTH_FILE = Path(".fireworks") / "auth.ini"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
KEY_ON_ARGV_WARNING = (
    "WARNING: the Fireworks key is passed to firectl as --api-key (--key-via argv): while each firectl call "
    "runs, every local user can read the key in the process list (ps, /proc/<pid>/cmdline). Use the default "
    "--key-via auth-file on a shared machine."
)
WANDB_ON_ARGV_WARNING = (
    "WARNING: firectl takes the W&B key only as --wandb-api-key, so while the job-create call runs every local "
    "user can read WANDB_API_KEY in the process list (ps, /proc/<pid>/cmdline). Unset WANDB_API_KEY to create "
    "the job without it (configure W&B on the Fireworks side instead), or launch from a machine you do not share."
)
_WARNED: set[str] = set()


def warn_once(message: str, warn: Callable[[str], None] | None = None) -> None:
    """Print ``message`` to stderr (or ``warn``) the first time it is given in this process."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    (warn or (lambda m: print(m, file=sys.stderr, flush=True)))(message)


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


Runner = Callable[[Sequence[str], float, Mapping[str, str] | None], CmdResult]


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
    """``text`` with every encoded form of each secret (and of every credential variable) masked."""
    return redact_text(text, [s for s in secrets if s])


def _argv_secrets(argv: Sequence[str]) -> list[str]:
    """The values given to ``--api-key`` / ``--wandb-api-key`` in ``argv``."""
    found = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in SECRET_FLAGS:
            if eq:
                found.append(value)
            elif i + 1 < len(argv):
                found.append(argv[i + 1])
    return found


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


def subprocess_runner(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> CmdResult:
    """Run ``argv`` (no shell), capture its output, never raise for a non-zero exit."""
    start = time.monotonic()
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            env=None if env is None else dict(env),
        )
    except FileNotFoundError:
        raise FirectlError(f"cannot run {argv[0]!r}: no such executable") from None
    except PermissionError:
        raise FirectlError(f"cannot run {argv[0]!r}: not executable") from None
    except subprocess.TimeoutExpired:
        raise FirectlError(f"{' '.join(redact(argv))} timed out after {timeout:g} s") from None
    return CmdResult(tuple(redact(argv)), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


HOME_PREFIX = "rftlab-firectl-"


def clean_stale_homes(folder: str | Path | None = None) -> list[Path]:
    """Remove the private homes left by processes that were killed (``kill -9`` skips every ``finally``):
    this user's ``rftlab-firectl-<pid>-*`` folders whose process is gone. Returns what was removed."""
    removed = []
    base = Path(folder or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = re.fullmatch(re.escape(HOME_PREFIX) + r"(\d+)-.+", entry.name)
        if not match or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            os.kill(int(match.group(1)), 0)
            continue  # its process is alive: not stale
        except ProcessLookupError:
            pass
        except (OSError, OverflowError):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextlib.contextmanager
def private_home(api_key: str, account_id: str) -> Iterator[Path]:
    """A temporary home only this user can open, with ``.fireworks/auth.ini`` (``0600``) holding the key and
    the account; removed on exit, whatever happens — and, should this process be killed, by the next
    call (``clean_stale_homes``: the folder name carries the pid)."""
    for label, value in (("key", api_key), ("account id", account_id)):
        if (
            value != value.strip()
            or any(ch in value for ch in "\r\n\x00")
            or (len(value) > 1 and value[0] == value[-1] and value[0] in "'\"")
        ):
            raise FirectlError(
                f"the Fireworks {label} cannot be written to firectl's auth file (one 'name = value' line): it "
                "holds a line break, surrounding spaces or surrounding quotes; check the variable"
            )
    clean_stale_homes()
    home = Path(tempfile.mkdtemp(prefix=f"{HOME_PREFIX}{os.getpid()}-"))  # mode 0700
    try:
        (home / AUTH_FILE.parent).mkdir(mode=0o700)
        text = f"api_key = {api_key}\naccount_id = {account_id}\n"
        # the one file that must hold the key: it never leaves this private folder
        atomic_write_text(home / AUTH_FILE, text, check_secrets=False, make_parents=False, mode=0o600)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def parse_json_output(stdout: str, what: str) -> Any:
    """The JSON document in ``stdout`` (from its first ``{`` or ``[``: a banner line may precede it)."""
    starts = [i for i in (stdout.find("{"), stdout.find("[")) if i >= 0]
    if not starts:
        raise FirectlError(f"{what}: no JSON in firectl output ({stdout.strip()[:200]!r})")
    try:
        return json.loads(stdout[min(starts) :], parse_constant=refuse_constant)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        why = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)[:200]
        raise FirectlError(f"{what}: firectl printed malformed JSON ({why or type(exc).__name__})") from None


class FirectlClient(Protocol):
    """What ``FireworksLauncher`` asks of a firectl: ``Firectl`` itself, or ``fireworks_sdk.SdkTransport``,
    which does the same with the ``fireworks-ai`` SDK."""

    account_id: str
    exe: str | None

    def argv(self, noun: str, verb: str, *args: str, json_out: bool = True) -> list[str]: ...
    def version(self) -> str: ...
    def dataset_create(self, dataset_id: str, path: str | Path) -> Any: ...
    def dataset_get(self, dataset_id: str) -> Any: ...
    def dataset_list(self) -> Any: ...
    def dataset_download(self, dataset_id: str, out_dir: str | Path) -> list[Path]: ...
    def job_create(self, job_id: str, flags: Sequence[str]) -> Any: ...
    def job_get(self, job_id: str) -> Any: ...
    def job_list(self) -> Any: ...
    def job_cancel(self, job_id: str) -> Any: ...
    def job_resume(self, job_id: str) -> Any: ...


@dataclass
class Firectl:
    """A configured firectl. ``log`` receives one record per call (redacted argv, exit code, seconds,
    scrubbed stderr tail) — the launcher appends them to ``provider/firectl_calls.jsonl``. ``key_via``:
    ``"auth-file"`` (default, module docstring) or ``"argv"``; ``warn`` receives the loud warnings
    (default: stderr)."""

    account_id: str
    api_key: str | None = None
    exe: str | None = None  # None: resolved at call time ($RFTLAB_FIRECTL or PATH)
    style: str = "noun-verb"
    runner: Runner = subprocess_runner
    timeout: float = 120.0
    log: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    key_via: str = "auth-file"
    warn: Callable[[str], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {self.style!r}")
        if self.key_via not in KEY_VIA:
            raise ValueError(f"key_via must be one of {KEY_VIA}, got {self.key_via!r}")
        if not self.account_id or not re.fullmatch(r"[A-Za-z0-9<][A-Za-z0-9._<>-]*", self.account_id):
            raise ValueError(
                "a Fireworks account id is needed (set FIREWORKS_ACCOUNT_ID or pass --account-id): letters, "
                f"digits, '.', '_' and '-', not starting with '-' (got {self.account_id!r})"
            )

    def __repr__(self) -> str:  # never show the key
        return f"Firectl(account_id={self.account_id!r}, style={self.style!r})"

    # ------------------------------------------------------------------------------------- argv
    def argv(self, noun: str, verb: str, *args: str, json_out: bool = True) -> list[str]:
        """``[exe, <noun verb or verb noun>, *args, -a <account>, (-o json)]``; a command without a noun
        (``version``) is given as ``noun`` with ``verb`` empty."""
        noun = NOUNS.get(noun, noun)
        if self.style == "verb-noun" and verb == "list":
            noun = PLURAL_LIST.get(noun, noun)
        if not verb:
            head = [noun]
        else:
            head = [noun, verb] if self.style == "noun-verb" else [verb, noun]
        key_flag = ["--api-key", self.api_key] if self.api_key and self.key_via == "argv" else []
        tail = ["-a", self.account_id, *key_flag]
        exe = self.exe or resolve_executable()
        return [exe, *head, *args, *tail, *(["-o", "json"] if json_out else [])]

    # -------------------------------------------------------------------------------------- run
    @contextlib.contextmanager
    def _environment(self) -> Iterator[dict[str, str] | None]:
        if not self.api_key:
            yield None
        elif self.key_via == "argv":
            warn_once(KEY_ON_ARGV_WARNING, self.warn)
            yield None
        else:
            with private_home(self.api_key, self.account_id) as home:
                yield {**os.environ, "HOME": str(home)}

    def run(self, argv: Sequence[str]) -> CmdResult:
        secrets = [self.api_key, *_argv_secrets(argv)]
        try:
            with self._environment() as env:
                res = self.runner(argv, self.timeout, env)
        except FirectlError as exc:
            message = scrub(str(exc), secrets)
            self._record(redact(argv), None, 0.0, message)
            raise FirectlError(message) from None
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
        return self._json("dataset", "create", _safe_id(dataset_id), str(path))

    def dataset_get(self, dataset_id: str) -> Any:
        return self._json("dataset", "get", _safe_id(dataset_id))

    def dataset_list(self) -> list[Any]:
        """Every dataset of the account, read page by page (``--page-size``/``--page-token``, following
        ``nextPageToken`` until it is empty): one page would miss epoch datasets on a busy account."""
        items: list[Any] = []
        token, seen = "", set()
        for _ in range(MAX_LIST_PAGES):
            args = ["--page-size", str(LIST_PAGE_SIZE)] + (["--page-token", token] if token else [])
            page = self._json("dataset", "list", *args)
            if isinstance(page, list):  # a bare list: no paging information, all there is
                return items + page
            if not isinstance(page, Mapping):
                raise FirectlError("dataset list: firectl printed JSON that is not an object")
            found = page.get("datasets") or []
            items += found if isinstance(found, list) else []
            token = str(_get(page, "nextPageToken") or "")
            if not token:
                return items
            if token in seen:
                raise FirectlError(f"dataset list: page token {token[:40]!r} came back twice; stopped")
            seen.add(token)
        raise FirectlError(f"dataset list: more than {MAX_LIST_PAGES} pages; stopped")

    def version(self) -> str:
        """``firectl version`` (first line, at most 200 characters), for ``run.json``."""
        res = self.run(self.argv("version", "", json_out=False))
        text = (res.stdout.strip() or res.stderr.strip()).splitlines()
        return text[0][:200] if text else ""

    def dataset_download(self, dataset_id: str, out_dir: str | Path) -> list[Path]:
        """Download into ``out_dir`` (``-o json`` is not passed to download); the JSONL files it wrote."""
        out = Path(out_dir)
        self.run(
            self.argv(
                "dataset",
                "download",
                _safe_id(dataset_id),
                "--output-dir",
                str(out),
                "--quiet",
                json_out=False,
            )
        )
        return sorted(out.rglob("*.jsonl"))

    # ------------------------------------------------------------------------------------- jobs
    def job_create(self, job_id: str, flags: Sequence[str]) -> Any:
        if "--wandb-api-key" in flags or any(f.startswith("--wandb-api-key=") for f in flags):
            warn_once(WANDB_ON_ARGV_WARNING, self.warn)
        return self._json("rftj", "create", "--job-id", _safe_id(job_id), *flags)

    def job_get(self, job_id: str) -> Any:
        return self._json("rftj", "get", _safe_id(job_id))

    def job_list(self) -> Any:
        return self._json("rftj", "list")

    def job_cancel(self, job_id: str) -> CmdResult:
        return self.run(self.argv("rftj", "cancel", _safe_id(job_id), json_out=False))

    def job_resume(self, job_id: str) -> CmdResult:
        """``rftj resume <job>``; its docs page lists no ``-o`` flag, so none is passed."""
        return self.run(self.argv("rftj", "resume", _safe_id(job_id), json_out=False))


def _safe_id(value: str) -> str:
    """A resource id or name passed as a positional argument: never something firectl reads as a flag."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*", value):
        raise FirectlError(
            f"refusing to pass {value!r} to firectl: an id must start with a letter or digit and hold only "
            "letters, digits, '.', '_', '-' and '/'"
        )
    return value


# ------------------------------------------------------------------------------- job arguments


def evaluator_name(spec: FireworksArmSpec, account_id: str) -> str:
    """The evaluator resource of the spec, with a ``<acct>`` placeholder filled with the account id."""
    fw = _fireworks(spec)
    return fw.evaluator.replace("<acct>", account_id)


def _attempt_suffix(attempt: int) -> str:
    if not isinstance(attempt, int) or isinstance(attempt, bool) or not 1 <= attempt <= 99:
        raise ValueError(f"attempt must be an integer from 1 to 99, got {attempt!r}")
    return "" if attempt == 1 else f"-a{attempt}"


def job_id_for(spec: FireworksArmSpec, attempt: int = 1) -> str:
    """A deterministic job id: ``rftlab-<arm>-<first 8 hex of the spec hash>`` (lower case, dashes), with
    ``-a<n>`` for attempt ``n`` >= 2 (``launch --new-attempt`` after a failed job)."""
    arm = re.sub(r"[^a-z0-9]+", "-", spec.arm.lower()).strip("-") or "arm"
    job = f"rftlab-{arm}-{spec.sha256()[:8]}{_attempt_suffix(attempt)}"
    if not _ID_RE.match(job):
        raise ValueError(f"cannot make a valid job id from arm {spec.arm!r}")
    return job


def output_model_for(spec: FireworksArmSpec, attempt: int = 1) -> str:
    """The output model id: the spec's ``output_model``, the first 8 hex of the spec hash, and the attempt
    suffix, so an edited spec (or a new attempt) never writes over another job's model."""
    fw = _fireworks(spec)
    model = f"{fw.output_model}-{spec.sha256()[:8]}{_attempt_suffix(attempt)}"
    if not _ID_RE.match(model):
        raise ValueError(
            f"output model id {model!r} is longer than 63 characters: shorten the spec's output_model "
            f"({fw.output_model!r}) to at most {63 - len(model) + len(fw.output_model)} characters"
        )
    return model


WANDB_KEY_ENV = "WANDB_API_KEY"


def wandb_problem(spec: FireworksArmSpec, wandb_api_key: str | None) -> str | None:
    """Why the spec's W&B settings cannot be sent (``None`` when they can). The create page makes
    ``--wandb-api-key``, ``--wandb-entity`` and ``--wandb-project`` each required once any W&B flag is
    given; the key comes from ``$WANDB_API_KEY`` only (never from a spec file)."""
    fw = _fireworks(spec)
    if not (fw.wandb_project or fw.wandb_entity):
        return None
    missing = [
        name
        for name, value in (
            ("fireworks.wandb_project", fw.wandb_project),
            ("fireworks.wandb_entity", fw.wandb_entity),
            (f"${WANDB_KEY_ENV}", wandb_api_key),
        )
        if not value
    ]
    if not missing:
        return None
    return (
        f"W&B logging needs a project, an entity and a key together (firectl requires --wandb-api-key, "
        f"--wandb-entity and --wandb-project once any W&B flag is set); missing: {', '.join(missing)}. "
        f"Set the missing spec field(s) and export {WANDB_KEY_ENV}, or remove the W&B fields from the spec"
    )


def learning_rate_problem(learning_rate: float) -> str | None:
    """A learning rate of 0 is refused on Fireworks: the job's settings travel as a proto3 message, where
    0.0 cannot be told from "unset", so the platform would train at its default (1e-4) instead."""
    if learning_rate == 0.0:
        return (
            "learning_rate 0 cannot be sent to Fireworks: in the job's proto3 message 0.0 reads as unset, so "
            "the platform would train at its default learning rate; run a zero-learning-rate control on the "
            "local backend, or use a tiny positive rate (the probe arm uses 1e-09)"
        )
    return None


def job_create_flags(
    spec: FireworksArmSpec,
    *,
    account_id: str,
    wandb_api_key: str | None = None,
    dataset_id: str | None = None,
    evaluator: str | None = None,
    attempt: int = 1,
) -> list[str]:
    """Every hyper-parameter of the arm as ``firectl rftj create`` flags (docs/platforms.md §1.3: pass every
    value explicitly; defaults differ between doc pages): the spec's value, else ``JOB_DEFAULTS``.
    ``--job-id`` is added by ``job_create``. Raises ``ValueError`` for a W&B setting firectl would refuse
    or a learning rate of 0 (``wandb_problem``, ``learning_rate_problem``)."""
    fw = _fireworks(spec)
    for problem in (wandb_problem(spec, wandb_api_key), learning_rate_problem(spec.learning_rate)):
        if problem:
            raise ValueError(problem)
    settings = resolved_job_settings(fw)
    flags = [
        "--base-model", fw.base_model,
        "--dataset", dataset_id or fw.dataset_id,
        "--evaluator", evaluator or evaluator_name(spec, account_id),
        "--output-model", output_model_for(spec, attempt),
        "--epochs", str(spec.epochs),
        "--learning-rate", _num(spec.learning_rate),
        "--lora-rank", str(settings["lora_rank"]),
        "--max-context-length", str(settings["max_context_length"]),
        "--batch-size", str(settings["batch_size"]),
        "--temperature", _num(spec.temperature),
        "--top-p", _num(settings["top_p"]),
        "--top-k", str(settings["top_k"]),
        "--max-output-tokens", str(fw.max_output_tokens),
        "--response-candidates-count", str(spec.response_candidates),
        "--rl-loss-method", settings["loss_method"],
        "--rl-kl-beta", _num(settings["kl_beta"]),
        "--chunk-size", str(settings["chunk_size"]),
        "--max-concurrent-rollouts", str(fw.max_concurrent_rollouts),
    ]  # fmt: skip
    if fw.wandb_project:  # wandb_problem: project, entity and key are all present
        flags += ["--wandb", "--wandb-project", fw.wandb_project, "--wandb-entity", str(fw.wandb_entity)]
        flags += ["--wandb-api-key", str(wandb_api_key)]
    return flags


def _num(x: float) -> str:
    """A float flag value as Python writes it (``1.0``, ``0.0001``, ``1e-06``): exact and unambiguous."""
    return repr(float(x))


def _fireworks(spec: FireworksArmSpec):
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
    """``state`` without the ``JOB_STATE_`` prefix, upper case (``""`` when absent or not a state name)."""
    state = job.get("state")
    if not isinstance(state, str) or not re.fullmatch(r"[A-Za-z_]{1,64}", state):
        return ""
    return state.upper().removeprefix("JOB_STATE_")


MAX_EPOCHS = 1000  # the arm specs' upper bound (launch/spectrum/spec.py, launch/poker/spec.py)
MAX_ACCELERATOR_SECONDS = 1e12  # ~30,000 GPU-years: anything larger is not a measurement


def _bounded_int(value: object, lo: int, hi: int, name: str, problems: list[str]) -> int | None:
    """``value`` as an integer in ``lo..hi`` (ints, integral floats, digit strings), else ``None`` with the
    reason appended to ``problems`` (a missing value is not a problem)."""
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,18}\s*", value):
        number = int(value)
    if number is None or not lo <= number <= hi:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        problems.append(f"{name} {shown} is not an integer in {lo}..{hi}; ignored")
        return None
    return number


class JobProgress(TypedDict):
    """``job_progress``: the validated epoch and percent (``None`` when unusable) and why not."""

    epoch: int | None
    percent: int | None
    problems: list[str]


def job_progress(job: Mapping[str, Any], epochs: int | None = None) -> JobProgress:
    """``jobProgress`` fields the poller uses, validated: ``epoch`` an integer in ``0..epochs`` (the spec's
    epochs; ``MAX_EPOCHS`` when unknown), ``percent`` in ``0..100``. A missing, ill-typed or out-of-range
    value becomes ``None`` and is named in ``problems`` (never trusted, never used to size anything)."""
    progress = _get(job, "jobProgress")
    progress = progress if isinstance(progress, Mapping) else {}
    problems: list[str] = []
    top = epochs if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs >= 0 else MAX_EPOCHS
    epoch = _bounded_int(progress.get("epoch"), 0, top, "jobProgress.epoch", problems)
    percent = _bounded_int(progress.get("percent"), 0, 100, "jobProgress.percent", problems)
    return {"epoch": epoch, "percent": percent, "problems": problems}


def accelerator_seconds(job: Mapping[str, Any], problems: list[str] | None = None) -> dict[str, float]:
    """``acceleratorSeconds`` as floats (the API sends strings); a value that is not a finite number in
    ``0..MAX_ACCELERATOR_SECONDS`` is dropped (and named in ``problems`` when given)."""
    raw = _get(job, "acceleratorSeconds")
    out: dict[str, float] = {}
    if isinstance(raw, Mapping):
        for name, value in list(raw.items())[:64]:
            try:
                number = float(value) if not isinstance(value, bool) and len(str(value)) <= 40 else math.nan
            except (TypeError, ValueError, OverflowError):
                number = math.nan
            if math.isfinite(number) and 0.0 <= number <= MAX_ACCELERATOR_SECONDS:
                out[str(name)[:64]] = number
            elif problems is not None:
                problems.append(
                    f"acceleratorSeconds[{str(name)[:64]!r}] {str(value)[:40]!r} is not a number of seconds; ignored"
                )
    return out


def output_metrics(job: Mapping[str, Any]) -> Any:
    """``outputMetrics`` (an undocumented string): its JSON value when it parses, else the raw text."""
    raw = _get(job, "outputMetrics")
    if isinstance(raw, str):
        try:
            return json.loads(raw, parse_constant=refuse_constant)
        except (ValueError, RecursionError):  # not JSON, a NaN, a 5000-digit number, nested too deeply
            return raw
    return raw


def status_message(job: Mapping[str, Any]) -> str:
    """``status.message`` (or its code), at most 2000 characters."""
    status = job.get("status")
    if isinstance(status, Mapping):
        return str(status.get("message") or status.get("code") or "")[:2000]
    return ""


def rollout_dataset_id(job_id: str, epoch: int) -> str:
    """Per-epoch rollout dataset of a job: ``rft-evalv3-<job>-epoch-<k>`` (``k`` from 0)."""
    return f"rft-evalv3-{job_id.rsplit('/', 1)[-1]}-epoch-{int(epoch)}"
