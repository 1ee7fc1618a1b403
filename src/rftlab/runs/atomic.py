"""Atomic file writes for the run store and every CLI output.

``atomic_write_bytes(path, data)`` (or the streaming ``atomic_writer(path)``) writes to a *unique*
temporary file in the target's own folder, checks it for credentials (:mod:`rftlab.runs.secrets`),
flushes it to disk and renames it over the target. A reader sees the old file or the new one, never half.

- Temporary names are ``.<name>.<pid>-<8 hex>.rftlab-tmp``: never ``<out>.tmp``, so a user's file of that
  name is never touched, and two writers never share one.
- On any failure (including ``KeyboardInterrupt``) the temporary is removed and the target is unchanged.
- Permissions: a new file gets ``0o666 & ~umask`` (like ``open()``); an existing target keeps its mode.
- A writer killed with SIGKILL cannot clean up: its temporary stays. Readers never open temporaries (they
  open fixed names), and :func:`find_temporaries` / ``rftlab runs clean`` report and remove stale ones
  (the writer's pid is in the name; a temporary whose process is gone is stale). Only names exactly in the
  format above, with a pid a process can have, on regular files (or staging folders) of the current
  user are removed; a user's file that merely resembles one is never touched.
- Temporaries are created with ``O_EXCL | O_NOFOLLOW``: a symlink planted at a temporary's name is never
  followed.
- :func:`check_output_path` validates a path before anything is written, so a command writing several
  files can check them all first and fail naming the flag.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rftlab.runs.errors import OutputPathError
from rftlab.runs.secrets import assert_file_has_no_secrets, assert_no_secrets

TMP_SUFFIX = ".rftlab-tmp"
_STEM_MAX = 100  # characters of the target's name kept in a temporary's name (the 255-byte limit)
# Exactly what _tmp_path makes: "." + the target's name (1-100 characters) + "." + the writer's pid
# (decimal, no leading zero) + "-" + 8 lowercase hex digits + TMP_SUFFIX.
_TMP_RE = re.compile(
    rf"^\.(?P<name>.{{1,{_STEM_MAX}}})\.(?P<pid>[1-9][0-9]{{0,9}})-[0-9a-f]{{8}}{re.escape(TMP_SUFFIX)}\Z",
    re.DOTALL,
)
PID_MAX = 4_194_304  # no system gives a process a larger id (Linux's PID_MAX_LIMIT, 2**22)

__all__ = [
    "TMP_SUFFIX",
    "Temporary",
    "atomic_directory",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_writer",
    "check_output_path",
    "clean_temporaries",
    "find_temporaries",
    "new_file_mode",
    "writer_pid",
]


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no read-only API elsewhere; restore at once
    os.umask(old)
    return old


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file under the current umask."""
    return 0o666 & ~_umask()


def _tmp_path(path: Path) -> Path:
    stem = path.name[:_STEM_MAX]  # keep the temporary's name under the 255-byte limit
    return path.with_name(f".{stem}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")


def writer_pid(name: str) -> int | None:
    """The writer's pid when ``name`` is a temporary's name exactly as this module makes it, else
    ``None`` (any other name, or a "pid" no process can have: never one of our temporaries)."""
    match = _TMP_RE.match(name)
    if match is None:
        return None
    pid = int(match["pid"])  # at most 10 digits: no huge numbers reach os.kill
    return pid if pid <= PID_MAX else None


def _describe(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _folder_refusal(folder: Path, exc: OSError) -> str:
    """Why no new file can be created in the existing ``folder``, in words that fit the cause."""
    if exc.errno == errno.ENOENT:
        # The folder exists, yet creating a file in it says "no such file": a virtual file system
        # (/proc, /sys) whose entries are made by the kernel, not by programs.
        return f"folder {folder} does not accept new files (a virtual file system such as /proc or /sys)"
    if exc.errno == errno.EROFS:
        return f"folder {folder} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to create files in folder {folder}"
    return f"cannot create a file in folder {folder} ({_describe(exc)})"


def check_output_path(path: str | os.PathLike[str], flag: str = "--out", make_parents: bool = False) -> Path:
    """Validate that ``path`` can be written as a regular file; raise :class:`OutputPathError` naming
    ``flag`` and what to do. Creates nothing, except the parent folders when ``make_parents``."""
    try:
        return _check_output_path(path, flag, make_parents)
    except OutputPathError:
        raise
    except (OSError, ValueError) as exc:
        reason = _describe(exc) if isinstance(exc, OSError) else str(exc)
        raise OutputPathError(
            f"{flag} {os.fspath(path)}: cannot use this path ({reason}); choose another"
        ) from None


def _check_output_path(path: str | os.PathLike[str], flag: str, make_parents: bool) -> Path:
    text = os.fspath(path)
    if not text.strip():
        raise OutputPathError(f"{flag} is empty; give a file path")
    target = Path(text)
    if text.endswith(os.sep) and not target.is_dir():
        raise OutputPathError(f"{flag} {text} ends with '{os.sep}'; give a file path without it")
    if target.is_dir():
        raise OutputPathError(
            f"{flag} {text} is a folder; give a file path (for example {target / 'out.jsonl'})"
        )
    if target.exists() and not target.is_file():
        raise OutputPathError(
            f"{flag} {text} is not a regular file (a device, FIFO or socket); choose another path"
        )
    parent = target.parent
    if not parent.is_dir():
        ancestor = parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise OutputPathError(f"{flag} {text}: {ancestor} is a file, not a folder; choose another path")
        if not make_parents:
            raise OutputPathError(f"{flag} {text}: folder {parent} does not exist; create it first")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(
                f"{flag} {text}: cannot create folder {parent} ({_describe(exc)})"
            ) from None
    probe = _tmp_path(target)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise OutputPathError(
            f"{flag} {text}: {_folder_refusal(parent, exc)}; choose a writable location"
        ) from None
    os.close(fd)
    os.unlink(probe)
    if target.exists() and not os.access(target, os.W_OK):
        # The rename would succeed (the folder is writable), but the user marked the file read-only.
        raise OutputPathError(f"{flag} {text} is read-only; remove it or choose another path")
    return target


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _naming(exc: OSError, path: Path, tmp: Path) -> OSError:
    """``exc`` re-raised naming the target ``path`` (never the temporary, never "a file")."""
    if exc.filename in (None, str(tmp), os.fspath(tmp)) and exc.errno is not None:
        return OSError(exc.errno, exc.strerror, str(path))
    return exc


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str],
    *,
    make_parents: bool = True,
    check_secrets: bool = True,
    where: str | None = None,
    mode: int | None = None,
    follow_symlinks: bool = True,
) -> Iterator[IO[bytes]]:
    """``with atomic_writer(path) as handle: handle.write(b"...")`` — the file appears at ``path`` only when
    the block ends without an exception (and the bytes hold no credential). ``mode`` overrides the
    permissions (default: an existing file's, else ``0o666 & ~umask``). A failure names ``path``.
    A symlink at ``path`` is written through (the link kept), unless ``follow_symlinks=False``: then the
    new file replaces the link itself and its target is never touched (the run store's files)."""
    path = Path(path)
    if path.is_symlink() and follow_symlinks:
        path = Path(os.path.realpath(path))  # write through a symlink; keep the link itself
    if check_secrets:
        assert_no_secrets(os.fsencode(path), where="a file (its name)")
    if make_parents:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _naming(exc, path, path.parent) from None
    if mode is None:
        try:
            info = path.lstat()
            mode = info.st_mode & 0o7777 if stat.S_ISREG(info.st_mode) else new_file_mode()
        except OSError:
            mode = new_file_mode()
    tmp = _tmp_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise _naming(exc, path, tmp) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            fd = -1
            yield handle
            handle.flush()
            if check_secrets:
                assert_file_has_no_secrets(tmp, where or str(path))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            # e.g. ENOSPC or EFBIG from write(): say which file could not be written
            named = _naming(exc, path, tmp)
            if named is not exc:
                raise named from exc
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    make_parents: bool = True,
    check_secrets: bool = True,
    where: str | None = None,
    mode: int | None = None,
    follow_symlinks: bool = True,
) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring and :func:`atomic_writer`)."""
    if check_secrets:
        assert_no_secrets(os.fsencode(path), where="a file (its name)")
        assert_no_secrets(data, where or os.fspath(path))  # before a temporary exists
    with atomic_writer(
        path, make_parents=make_parents, check_secrets=False, mode=mode, follow_symlinks=follow_symlinks
    ) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, **kwargs) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), **kwargs)


@contextlib.contextmanager
def atomic_directory(
    path: str | os.PathLike[str], *, check_secrets: bool = True, last: tuple[str, ...] = ()
) -> Iterator[Path]:
    """``with atomic_directory(out) as tmp: model.save_pretrained(tmp)`` — for writers that fill a folder
    themselves (Hugging Face ``save_pretrained``, tokenizers). They write into a fresh temporary folder
    beside ``out`` (``.<name>.<pid>-<hex>.rftlab-tmp/``); when the block ends without an exception, every
    file is checked for credentials, flushed, and renamed into ``out`` one by one, so each file of ``out``
    is the old one or the new one, never a cut one. Files named in ``last`` move last (a marker such as
    ``config.json`` whose presence means the rest is there). On any failure ``out`` is unchanged."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(out)
    tmp.mkdir(mode=0o700)
    try:
        yield tmp
        files = sorted(
            (p for p in tmp.rglob("*") if p.is_file() and not p.is_symlink()),
            key=lambda p: (p.name in last, str(p)),
        )
        for file in files:
            target = out / file.relative_to(tmp)
            if check_secrets:
                assert_file_has_no_secrets(file, str(target))
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        mode = new_file_mode()
        for file in files:
            target = out / file.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(file, mode)
            os.replace(file, target)
            _fsync_dir(target.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Temporary:
    """A temporary left by one of this module's writers: ``stale`` when its writer is gone; ``ours``
    when it belongs to this user (``rftlab runs clean`` removes only stale temporaries that are ours)."""

    path: Path
    pid: int
    size: int
    age_s: float
    stale: bool
    ours: bool = True


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except (OSError, OverflowError, ValueError):
        return False
    return True


def _temporary(path: Path, pid: int, now: float) -> Temporary | None:
    """The temporary at ``path`` (a writer's regular file, or ``atomic_directory``'s staging folder),
    or ``None`` for anything else of that name (a symlink, a FIFO...)."""
    try:
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode):
            size = sum(p.lstat().st_size for p in path.rglob("*"))
        elif stat.S_ISREG(info.st_mode):
            size = info.st_size
        else:
            return None
    except OSError:
        return None
    age = max(0.0, now - info.st_mtime)
    ours = info.st_uid == os.geteuid()
    return Temporary(path=path, pid=pid, size=size, age_s=age, stale=not _pid_alive(pid), ours=ours)


def find_temporaries(root: str | os.PathLike[str], max_depth: int = 5) -> list[Temporary]:
    """Every writer temporary under ``root``, at most ``max_depth`` folders down (a run store is
    ``<experiment>/<arm>/<run_id>/[rollouts|provider]/``, so 5 covers it; a wrong ``--root`` such as ``/``
    is not walked). Only names exactly as this module makes them count (:func:`writer_pid`): a file that
    merely looks like one, or names a pid no process can have, is never reported. Symlinks are not
    followed."""
    found = []
    now = time.time()
    root = Path(root)
    if not root.is_dir():
        return []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if len(here.relative_to(root).parts) >= max_depth:
            dirnames[:] = []
        for name in [d for d in dirnames if writer_pid(d) is not None]:  # atomic_directory's folders
            dirnames.remove(name)
            temp = _temporary(here / name, writer_pid(name), now)  # type: ignore[arg-type]
            if temp is not None:
                found.append(temp)
        for name in filenames:
            pid = writer_pid(name)
            temp = None if pid is None else _temporary(here / name, pid, now)
            if temp is not None:
                found.append(temp)
    return sorted(found, key=lambda t: str(t.path))


def clean_temporaries(root: str | os.PathLike[str], dry_run: bool = False) -> list[Temporary]:
    """Remove the stale temporaries under ``root`` that are this user's (never a live writer's, never
    another user's); returns what was (or would be) removed."""
    removed = []
    for temp in find_temporaries(root):
        if not temp.stale or not temp.ours:
            continue
        if not dry_run:
            try:
                if temp.path.is_dir() and not temp.path.is_symlink():
                    shutil.rmtree(temp.path)
                else:
                    temp.path.unlink()
            except FileNotFoundError:
                continue
        removed.append(temp)
    return removed
