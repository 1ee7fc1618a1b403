"""Who may work on a run: inter-process locks of the run store.

Two launches of the same arm at once must not train the same run. Each run that a process is about to
train (or poll) is *claimed*: an exclusive ``flock`` on ``<root>/.locks/<experiment>.<arm>.<run_id>.lock``,
held until the run finishes, the claim is released, or the process ends (the kernel drops a dead
process's locks, so a killed launcher never leaves a run locked). A second process that wants the same
run gets :class:`RunBusyError` naming the run folder and the holder's pid, at once — nothing waits
silently. Finding or creating the run happens under a short per-arm lock
(``<experiment>.<arm>.lock``), so two launches cannot both decide to resume the same unfinished run or to
create one each.

Lock files live in the hidden ``.locks`` folder of the store root (``rftlab runs list`` skips hidden
folders); they are empty apart from the holder's pid and are never read as data. A claim is re-entrant
within a process (a notebook re-running a cell after an error gets its own claim back).

A ``fork`` copies the lock's open file, so a child forked by another thread of this process (``subprocess``
between its fork and its exec) keeps a just-released claim locked for a moment. When the lock file names
this very process as the last holder, only such a child can hold it, so ``claim`` waits up to
``FORK_GRACE_S`` for it instead of calling the run busy.

In a store shared by a group (docs/platforms.md §1.8), another user could plant a symlink or a hard link at
a lock's name: lock files are opened with ``O_NOFOLLOW`` and must be plain files with one link, and
``.locks`` must be a real folder; anything else raises :class:`LockPathError` (one line naming the path)
before a byte is written. Lock files are created ``0o666`` before the umask (group-writable under 002).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rftlab.runs.errors import RunStoreError

LOCK_DIR = ".locks"
FORK_GRACE_S = 5.0  # how long a claim waits out a forked child of this process that still holds the lock

__all__ = [
    "FORK_GRACE_S",
    "LOCK_DIR",
    "Claim",
    "LockPathError",
    "RunBusyError",
    "arm_lock",
    "claim",
    "holder_pid",
    "open_lock_file",
    "release",
]


class RunBusyError(RunStoreError):
    """Another process holds the run (it is training or polling it)."""


@dataclass
class Claim:
    """An exclusive lock held on one run by this process."""

    run_dir: Path
    lock_path: Path
    fd: int


_CLAIMS: dict[str, Claim] = {}


class LockPathError(RunStoreError):
    """A lock path of the store is not what the store made: a symlink, a file in place of ``.locks``,
    a hard-linked or special file. Nothing was opened through it."""


def _lock_path(root: Path, *names: str) -> Path:
    folder = Path(root) / LOCK_DIR
    if folder.is_symlink():
        raise LockPathError(
            f"{folder} is a symlink; the run store keeps its lock files in a real folder there (remove the link)"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LockPathError(
            f"{folder} is a file, not a folder; the run store keeps its lock files there (move the file aside)"
        ) from None
    return folder / (".".join(names) + ".lock")


def open_lock_file(path: Path) -> int:
    """Open (or create) a lock file without following a symlink: a link planted at the lock's name
    (pointing at someone's file) is refused, never opened, truncated or written. ``0o666`` before the
    umask, so a shared store's group (umask 002) can lock too; read-only when only that is allowed
    (``flock`` works on it; the holder's pid is then not noted)."""
    flags = os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        except PermissionError:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise LockPathError(
                f"lock file {path} is a symlink; refusing to open it (someone else may have planted it: "
                "remove the link and check the store's permissions)"
            ) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise LockPathError(
            f"lock file {path} is not a plain file of its own (a hard link or a special file); refusing "
            "to use it: remove it"
        )
    return fd


def _note_pid(fd: int) -> None:
    """The holder's pid, for the other process's error message (informational only)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)


def holder_pid(lock_path: Path) -> int | None:
    """The pid written by the lock's current holder, if any."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            text = os.read(fd, 32).decode("ascii", errors="replace").strip()
        finally:
            os.close(fd)
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


@contextlib.contextmanager
def arm_lock(root: Path, experiment: str, arm: str, timeout: float = 120.0) -> Iterator[None]:
    """The short per-arm lock around finding or creating a run (waits up to ``timeout`` seconds: the
    holder only scans the arm's folder)."""
    try:
        path = _lock_path(root, experiment, arm)
        fd = open_lock_file(path)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            yield  # a store this user cannot write: nothing can be created in it to race over
            return
        raise
    try:
        deadline = time.monotonic() + timeout
        if not _flock_until(fd, lambda: time.monotonic() < deadline, 0.05):
            raise RunBusyError(
                f"arm {experiment}/{arm} under {root} stayed locked for {timeout:g} s by process "
                f"{holder_pid(path) or '?'}; is another launch of it stuck?"
            )
        _note_pid(fd)
        yield
    finally:
        os.close(fd)


def _flock_until(fd: int, keep_trying: Callable[[], bool], pause: float) -> bool:
    """Take the exclusive lock on ``fd``, retrying every ``pause`` seconds while ``keep_trying()`` says
    so; ``False`` when it is still held by another open file when ``keep_trying`` gives up."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if not keep_trying():
            return False
        time.sleep(pause)


def claim(root: Path, experiment: str, arm: str, run_dir: Path, activity: str = "trained") -> Claim:
    """Claim ``run_dir`` for this process, or raise :class:`RunBusyError` naming it and the holder."""
    key = str(Path(run_dir).resolve())
    held = _CLAIMS.get(key)
    if held is not None:
        return held
    path = _lock_path(root, experiment, arm, Path(run_dir).name)
    fd = open_lock_file(path)
    deadline = time.monotonic() + FORK_GRACE_S

    def ours() -> bool:  # only a forked child of ours can still hold a lock that names us (docstring)
        return holder_pid(path) == os.getpid() and time.monotonic() < deadline

    try:
        taken = _flock_until(fd, ours, 0.01)
    except OSError:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        raise RunBusyError(
            f"run {run_dir} is being {activity} by another process (pid {holder_pid(path) or '?'}); wait for "
            "it to end, then run the same command again (a finished run is reused, an unfinished one resumed)"
        )
    _note_pid(fd)
    held = _CLAIMS[key] = Claim(Path(run_dir), path, fd)
    return held


def release(run_dir: Path) -> None:
    """Release this process's claim on ``run_dir`` (no-op when it holds none)."""
    held = _CLAIMS.pop(str(Path(run_dir).resolve()), None)
    if held is not None:
        with contextlib.suppress(OSError):
            os.close(held.fd)
