"""Evaluators of the local control plane: ``evaluatorsV2`` create, ``:getUploadEndpoint``, the signed-URL
PUT of the code tarball, ``:validateUpload``, get, list and delete, and the build.

Lifecycle: a new evaluator has no code (``STATE_UNSPECIFIED``, its status says what is missing);
``validateUpload`` after the PUT makes it ``BUILDING``; the build then makes it ``ACTIVE`` or
``BUILD_FAILED`` (its ``status.message`` says why). The build, on this machine, checks what it can
without installing anything:

1. the tarball unpacks safely (regular files and folders only, no absolute path, no ``..``, at most
   ``MAX_FILES`` files and ``MAX_UNPACKED_BYTES`` bytes);
2. ``requirements.txt`` exists at the root of the unpacked folder, and each requirement in it is
   installed, at a matching version, in the interpreter the evaluator will run with (the platform
   installs them into its rollout container; this server cannot install anything);
3. the ``entryPoint`` file exists, and ``pytest --collect-only`` of it (``EP_NO_UPLOAD=1``) collects at
   least one test.

``build_seconds`` keeps an evaluator ``BUILDING`` at least that long, so a client's polling of the
``BUILDING`` state can be exercised.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from .datasets import signed_upload_urls
from .state import ApiError, ControlPlane, check_fields, check_id, make_private, now_iso, private_dir, public

EVALUATOR_FIELDS = (
    "displayName",
    "description",
    "commitHash",
    "entryPoint",
    "requirements",
    "criteria",
    "defaultDataset",
    "source",
)
MAX_FILES = 20_000
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
COLLECT_TIMEOUT_S = 300.0
NO_CODE = "no code uploaded yet (getUploadEndpoint, PUT to the signed URL, then validateUpload)"


def create(plane: ControlPlane, account: str, body: object) -> dict[str, Any]:
    body = check_fields(body, ("evaluatorId", "evaluator"), "CreateEvaluator body")
    ev_id = check_id(body.get("evaluatorId"), "evaluatorId")
    fields = check_fields(body.get("evaluator", {}), EVALUATOR_FIELDS, "evaluator")
    record = {**fields, "state": "STATE_UNSPECIFIED", "status": {"code": "OK", "message": NO_CODE}}
    return public(plane.add("evaluators", account, ev_id, record))


def upload_endpoint(plane: ControlPlane, account: str, ev_id: str, body: object) -> dict[str, Any]:
    """``:getUploadEndpoint`` of an evaluator (its code tarball staged in ``upload/``)."""
    return signed_upload_urls(plane, "evaluators", account, ev_id, body, "upload")


def validate_upload(plane: ControlPlane, account: str, ev_id: str, body: object) -> dict[str, Any]:
    check_fields(body, (), "ValidateUpload body")
    with plane.lock:
        record = plane.get("evaluators", account, ev_id)
        pending = dict(record.get("_pending") or {})
        if not pending:
            raise ApiError(400, "FAILED_PRECONDITION", "no upload was started (call getUploadEndpoint first)")
        folder = plane.folder("evaluators", account, ev_id) / "upload"
        missing = [n for n in pending if not (folder / n).is_file()]
        if missing:
            raise ApiError(
                400, "FAILED_PRECONDITION", f"{', '.join(missing)} was not uploaded to its signed URL"
            )
        record.update(
            state="BUILDING",
            status={"code": "OK", "message": "building"},
            _tarballs=sorted(pending),
            _build_started=time.time(),
        )
        record.pop("_pending")
        plane.save("evaluators", account, ev_id)
    plane.on_evaluator_uploaded(account, ev_id)
    return {}


def get(plane: ControlPlane, account: str, ev_id: str) -> dict[str, Any]:
    with plane.lock:
        return public(plane.get("evaluators", account, ev_id))


# ----------------------------------------------------------------------------------------- build


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members, total = [], 0
    for m in tar.getmembers():
        parts = PurePosixPath(m.name).parts
        if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
            raise ValueError(
                f"the tarball holds {m.name[:120]!r}, which is not a plain file or folder inside it"
            )
        total += m.size
        members.append(m)
        if len(members) > MAX_FILES or total > MAX_UNPACKED_BYTES:
            raise ValueError(
                f"the tarball unpacks to more than {MAX_FILES} files or {MAX_UNPACKED_BYTES} bytes"
            )
    return members


def unpack(tarballs: list[Path], dest: Path) -> Path:
    """Unpack the tarballs into ``dest``; the code root is their one top folder (eval-protocol packs the
    upload folder under its own name), else ``dest`` itself."""
    shutil.rmtree(dest, ignore_errors=True)  # a rebuild starts from the tarballs again
    private_dir(dest)
    for path in tarballs:
        try:
            with tarfile.open(path, "r:*") as tar:
                tar.extractall(dest, members=_safe_members(tar), filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ValueError(f"{path.name} is not a readable tarball: {exc}") from None
    make_private(dest)
    tops = list(dest.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else dest


def requirement_problems(text: str) -> list[str]:
    """Each requirement of ``requirements.txt`` that the running interpreter does not satisfy."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import InvalidRequirement, Requirement

    problems = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            problems.append(f"{line[:80]!r} is not a requirement this server can check (no options, no URLs)")
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = version(req.name)
        except PackageNotFoundError:
            problems.append(f"{req.name} is not installed (this server installs nothing)")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            problems.append(f"{req.name} {have} is installed; {req.specifier} is required")
    return problems


def evaluator_env(code_root: Path, home: Path) -> dict[str, str]:
    """The environment the evaluator's pytest runs in: no credential of this server or its user."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONPATH": str(code_root),
        "PYTHONDONTWRITEBYTECODE": "1",
        "EP_NO_UPLOAD": "1",
        "EP_DISABLE_AUTO_BROWSER": "1",
        "DISABLE_EP_SQLITE_LOG": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "EMPTY",
    }


def entry_path(code_root: Path, entry_point: Any) -> Path:
    if not isinstance(entry_point, str) or "::" not in entry_point:
        raise ValueError(f"entryPoint {str(entry_point)[:120]!r} is not '<file>.py::<test function>'")
    file_part = entry_point.split("::", 1)[0]
    parts = PurePosixPath(file_part).parts
    if file_part.startswith("/") or ".." in parts:
        raise ValueError(f"entryPoint {entry_point[:120]!r} points outside the uploaded code")
    path = code_root / file_part
    if not path.is_file():
        raise ValueError(f"entryPoint file {file_part} is not in the uploaded code")
    return path


def collect(code_root: Path, entry_point: str, timeout: float = COLLECT_TIMEOUT_S) -> None:
    """``pytest --collect-only`` of the entry point; a ``ValueError`` with pytest's last lines if it fails."""
    with tempfile.TemporaryDirectory(prefix="rftlab-fw-build-") as home:
        argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", entry_point]
        try:
            proc = subprocess.run(
                argv,
                cwd=code_root,
                env=evaluator_env(code_root, Path(home)),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ValueError(f"pytest --collect-only {entry_point} took over {timeout:g} s") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])[-1500:]
        raise ValueError(f"pytest --collect-only {entry_point} failed (exit {proc.returncode}): {tail}")


def run_build(plane: ControlPlane, account: str, ev_id: str, build_seconds: float = 0.0) -> None:
    """Build an uploaded evaluator (module docstring) and record ``ACTIVE`` or ``BUILD_FAILED``."""
    with plane.lock:
        record = plane.get("evaluators", account, ev_id)
        uid, tarballs = record["_uid"], list(record.get("_tarballs", []))
        entry, started = record.get("entryPoint"), float(record.get("_build_started", time.time()))
    folder = plane.folder("evaluators", account, ev_id)
    code = folder / "code"
    try:
        root = unpack([folder / "upload" / n for n in tarballs], code)
        req_file = root / "requirements.txt"
        if not req_file.is_file():
            raise ValueError("requirements.txt is missing at the root of the uploaded code")
        problems = requirement_problems(req_file.read_text(encoding="utf-8", errors="replace"))
        if problems:
            raise ValueError("requirements.txt: " + "; ".join(problems))
        entry_path(root, entry)
        collect(root, str(entry))
        outcome = ("ACTIVE", {"code": "OK", "message": ""}, str(root.relative_to(folder)))
    except ValueError as exc:
        outcome = ("BUILD_FAILED", {"code": "FAILED_PRECONDITION", "message": str(exc)[:2000]}, None)
    time.sleep(max(0.0, started + build_seconds - time.time()))
    with plane.lock:
        current = plane.records.get(("evaluators", account, ev_id))
        if current is None or current.get("_uid") != uid:
            return  # deleted (or recreated) while it built
        current.update(state=outcome[0], status=outcome[1], _code=outcome[2], _built=now_iso())
        plane.save("evaluators", account, ev_id)


def left_building(plane: ControlPlane) -> list[tuple[str, str]]:
    """The evaluators left ``BUILDING`` by a previous server run (to build again at start)."""
    with plane.lock:
        return [
            (a, i)
            for (k, a, i), r in plane.records.items()
            if k == "evaluators" and r.get("state") == "BUILDING"
        ]
