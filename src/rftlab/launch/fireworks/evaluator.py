"""The arm's Fireworks evaluator: its id and resource name, the episode renderers of the context check, and
the upload through eval-protocol in a child process (``rftlab.launch.ep_upload``) with its record."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rftlab.launch import evaluators
from rftlab.launch.firectl import (
    FirectlClient,
    FirectlError,
)
from rftlab.launch.fireworks.common import (
    ACCOUNT_ENV,
    ENTRY_POINTS,
    EVALUATOR_REQUIREMENTS,
    KEY_ENV,
    LaunchRefused,
)
from rftlab.launch.fireworks.datasets import _RESOURCE_ID
from rftlab.launch.specs import FireworksArmSpec


def _fireworks_section(spec: FireworksArmSpec):
    if spec.fireworks is None:
        raise LaunchRefused(f"arm {spec.arm!r} has no 'fireworks' section: it runs only on the local backend")
    return spec.fireworks


def _spec_evaluator_id(spec: FireworksArmSpec) -> str:
    """The evaluator id the spec names (last part of its evaluator resource), checked: it must already be
    in the form eval-protocol normalises ids to (lower-case letters, digits and single '-', starting with
    a letter, at most 54 characters with room for the code hash), else the upload would create an
    evaluator under another id than the one the job names."""
    ev_id = _fireworks_section(spec).evaluator.rsplit("/", 1)[-1]
    if not _RESOURCE_ID.match(ev_id) or "--" in ev_id or ev_id.endswith("-") or len(ev_id) > 54:
        raise LaunchRefused(
            f"evaluator id {ev_id!r} in the spec is not a normalised Fireworks id (lower-case letters, "
            "digits and single '-', starting with a letter, at most 54 characters: the code hash is added)"
        )
    return ev_id


def evaluator_id(spec: FireworksArmSpec, account_id: str = "") -> str:
    """The evaluator id a job of this spec uses: the spec's id plus the first 8 hex digits of the evaluator
    code's SHA-256 (``rftlab.launch.evaluators``), so arms share an evaluator only when its code is the
    same, and an upload never replaces an evaluator another arm's job runs on."""
    try:
        return evaluators.coded_evaluator_id(_spec_evaluator_id(spec), EVALUATOR_REQUIREMENTS)
    except evaluators.EvaluatorRefused as exc:
        raise LaunchRefused(str(exc)) from None


def evaluator_resource(spec: FireworksArmSpec, account_id: str) -> str:
    """``accounts/<acct>/evaluators/<evaluator_id>`` (the spec's ``<acct>`` placeholder filled)."""
    account = _fireworks_section(spec).evaluator.split("/")[1].replace("<acct>", account_id)
    return f"accounts/{account}/evaluators/{evaluator_id(spec, account_id)}"


# The episode renderer of each (experiment, interface) for the context-length check, as "module.function".
EPISODE_RENDERERS = {
    ("spectrum_memory", "turn"): "rftlab.launch.spectrum.episodes.rendered_episodes",
    ("poker", "mcp"): "rftlab.launch.poker.episodes.rendered_episodes",
}


def _firectl_version(fc: FirectlClient) -> str:
    """``firectl version`` for ``run.json`` (the failure's text when it cannot be read)."""
    try:
        return fc.version() or "unknown (firectl version printed nothing)"
    except FirectlError as exc:
        return f"unknown ({str(exc)[:200]})"


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def missing_entry(experiment: str, interface: str, entry: str | None = None) -> str | None:
    """Why this experiment/interface has no evaluator to upload yet (``None`` when its entry module exists
    in this package): a job pointing at an evaluator that was never uploaded would only fail on Fireworks.
    ``entry`` overrides the ``ENTRY_POINTS`` lookup (an arm spec's own ``evaluator_entry``)."""
    import rftlab

    entry = entry or ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        return f"no @evaluation_test entry for experiment {experiment!r} with interface {interface!r}"
    module_file = Path(rftlab.__file__).parent.parent / entry.split("::", 1)[0]
    if not module_file.is_file():
        return (
            f"the evaluator entry {entry} is not built yet: nothing can be uploaded or launched for "
            f"{experiment!r} on the {interface!r} interface"
        )
    return None


UPLOAD_MODULE = "rftlab.launch.ep_upload"


def evaluator_upload_argv(
    experiment: str,
    interface: str,
    ev_id: str,
    python: str = "python",
    entry: str | None = None,
    force: bool = False,
) -> list[str]:
    """eval-protocol's ``upload`` of the interface's entry (or ``entry``, an arm's own), run through
    ``rftlab.launch.ep_upload`` so the explicit ``--id`` is really applied (eval-protocol 0.3.33's own CLI
    ignores it, docs/platforms.md §1.9), with an explicit empty ``--env-file`` (so no ``.env`` secret is
    uploaded, G11). ``python`` is the interpreter (``upload_evaluator`` uses the running one). ``force``
    (delete and recreate) only replaces a failed build (``upload_evaluator``). Never ``create rft
    --dry-run``: it is not dry (G8)."""
    entry = entry or ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        raise LaunchRefused(f"no evaluator entry for experiment {experiment!r} with interface {interface!r}")
    return [python, "-m", UPLOAD_MODULE, "upload", "--entry", entry, "--id", ev_id,
            "--env-file", ".env.empty", *(["--force"] if force else []), "--yes"]  # fmt: skip


def child_env(extra: Mapping[str, str] | None = None, *, inherit: bool = True) -> dict[str, str]:
    """The environment of a child process the project starts: the running interpreter's folder first on
    ``PATH`` (eval-protocol starts bare ``python``/``pytest``; without an activated venv they would be the
    system's), ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``extra``. ``inherit=False`` starts from ``PATH``
    and ``HOME`` only."""
    base = dict(os.environ) if inherit else {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    bin_dir = str(Path(sys.executable).parent)
    path = base.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        base["PATH"] = bin_dir + (os.pathsep + path if path else "")
    base.setdefault("HOME", tempfile.gettempdir())
    base["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    base.update(extra or {})
    return base


def _tail_lines(text: str, lines: int = 25, chars: int = 4000) -> str:
    """The last ``lines`` whole lines of ``text`` (at most about ``chars``): never cut inside a line."""
    kept: list[str] = []
    size = 0
    for line in reversed(text.rstrip().splitlines()):
        if len(kept) >= lines or (kept and size + len(line) > chars):
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(reversed(kept))


def upload_failure_message(returncode: int, stdout: str, stderr: str, ev_id: str, account_id: str) -> str:
    """What went wrong in a failed upload, from eval-protocol's own output: its stdout (where it prints
    "Failed to upload ...") and stderr, whole lines, plus the likely fix for a credentials error."""
    parts = [f"eval-protocol upload of evaluator {ev_id!r} failed (exit {returncode})"]
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        tail = _tail_lines(text)
        if tail:
            parts.append(f"--- eval-protocol {name} (last lines) ---\n{tail}")
    both = f"{stdout}\n{stderr}"
    if re.search(r"credentials|401|403|Unauthori[sz]ed|Forbidden|PermissionDenied|api.key", both, re.I):
        parts.append(
            f"Hint: check FIREWORKS_API_KEY; the evaluator is created in the account the key belongs to "
            f"(the job expects {account_id!r}). docs/platforms.md §1.9 notes that non-admin keys may be refused."
        )
    return "\n".join(parts)


def stage_evaluator(package_dir: Path, staging: Path) -> Path:
    """Lay out a clean evaluator folder for ``eval-protocol upload`` (which tars the cwd): the ``rftlab``
    package sources, a pinned ``requirements.txt`` and an empty env file — and nothing else (no ``.env``)."""
    staging.mkdir(parents=True, exist_ok=True)
    if any(staging.iterdir()):
        raise ValueError(f"{staging} is not empty: stage the evaluator into a fresh folder")
    shutil.copytree(
        package_dir,
        staging / "rftlab",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".env*"),
    )
    (staging / "requirements.txt").write_text("\n".join(EVALUATOR_REQUIREMENTS) + "\n", encoding="utf-8")
    (staging / ".env.empty").write_text("", encoding="utf-8")
    return staging


# passed on to the upload when set: another Fireworks API server (eval-protocol's ``--server``)
PASSTHROUGH_ENV = ("FIREWORKS_API_BASE",)


def upload_evaluator(
    spec: FireworksArmSpec,
    account_id: str,
    *,
    runner: Callable[..., Any] | None = None,
    python: str | None = None,
    timeout: float = 900.0,
    lookup: evaluators.Lookup | None = None,
) -> dict[str, Any]:
    """Stage the evaluator and run eval-protocol's upload (``evaluator_upload_argv``) in the staging
    folder with ``python`` (default: the running interpreter, so no activated venv is needed), in an
    environment holding only PATH (the interpreter's folder first), HOME, the Fireworks key and account,
    ``LITELLM_LOCAL_MODEL_COST_MAP`` and ``$FIREWORKS_API_BASE`` when set. Returns the redacted call
    record (argv, exit code, stdout and stderr); a failure raises ``LaunchRefused`` with eval-protocol's
    own output (whole lines), and so does an upload whose code never arrived (eval-protocol exits 0 after
    logging ``evaluators.CODE_UPLOAD_FAILED``).

    The evaluator is looked up first (``lookup``, default ``evaluators.fetch_evaluator``): one that is
    ACTIVE or BUILDING holds this very code (its id carries the code hash) and is not uploaded again
    (``record["skipped"]`` says why); one in any other state (a failed build, no code) is replaced with
    ``--force``; when the lookup itself fails the upload runs without ``--force``."""
    import subprocess

    import rftlab

    fw = spec.fireworks
    if fw is None:
        raise LaunchRefused(f"arm {spec.arm!r} has no 'fireworks' section")
    key = os.environ.get(KEY_ENV)
    if not key:
        raise LaunchRefused(f"{KEY_ENV} is not set: export it in your shell (never write it to a file)")
    python = python or sys.executable
    if python == sys.executable and runner is None and importlib.util.find_spec("eval_protocol") is None:
        raise LaunchRefused(
            f"eval-protocol is not installed for this interpreter ({sys.executable}): "
            "pip install -e '.[fireworks]'"
        )
    ev_id = evaluator_id(spec, account_id)
    entry = getattr(spec, "evaluator_entry", None)
    try:
        existing = (lookup or evaluators.fetch_evaluator)(account_id, ev_id)
    except evaluators.EvaluatorRefused:
        existing = None  # cannot tell: upload without --force (eval-protocol reports a conflict)
    state = evaluators.evaluator_state(existing) if existing is not None else None
    if state in ("ACTIVE", "BUILDING"):
        skipped = f"evaluator {ev_id} already exists ({state}) with this code; not uploaded again"
        return {"argv": [], "evaluator_id": ev_id, "returncode": 0, "stdout": "", "stderr": "",
                "skipped": skipped}  # fmt: skip
    force = existing is not None
    argv = evaluator_upload_argv(spec.experiment, fw.interface, ev_id, python, entry=entry, force=force)
    extra = {KEY_ENV: key, ACCOUNT_ENV: account_id}
    extra.update({k: os.environ[k] for k in PASSTHROUGH_ENV if os.environ.get(k)})
    env = child_env(extra, inherit=False)
    with tempfile.TemporaryDirectory(prefix="rftlab-evaluator-") as tmp:
        staging = stage_evaluator(Path(rftlab.__file__).parent, Path(tmp) / "evaluator")
        run = runner or subprocess.run
        try:
            proc = run(
                argv, cwd=staging, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise LaunchRefused(f"cannot run {python!r}: no such interpreter") from None
        except subprocess.TimeoutExpired:
            raise LaunchRefused(f"eval-protocol upload timed out after {timeout:g} s") from None
    return _upload_record(proc, key, argv, ev_id, account_id)


def _upload_record(proc: Any, key: str, argv: list[str], ev_id: str, account_id: str) -> dict[str, Any]:
    """The redacted record of a finished upload; ``LaunchRefused`` with eval-protocol's own words when it
    failed or when its output says the code never arrived (``evaluators.CODE_UPLOAD_FAILED``)."""
    stdout, stderr = proc.stdout.replace(key, "***"), proc.stderr.replace(key, "***")
    record = {
        "argv": argv,
        "evaluator_id": ev_id,
        "returncode": proc.returncode,
        "stdout": _tail_lines(stdout, lines=200, chars=20000),
        "stderr": _tail_lines(stderr, lines=200, chars=20000),
    }
    no_code = evaluators.code_upload_failed(stdout, stderr)
    if proc.returncode != 0 or no_code:
        message = upload_failure_message(proc.returncode, stdout, stderr, ev_id, account_id)
        if no_code:
            message = (
                f"the evaluator {ev_id!r} was created on Fireworks but its code was not uploaded "
                f"(eval-protocol: '{evaluators.CODE_UPLOAD_FAILED}'); a job on it would fail. Fix the cause "
                f"below and run upload-evaluator again (it replaces the evaluator without code).\n{message}"
            )
        raise LaunchRefused(message)
    return record
