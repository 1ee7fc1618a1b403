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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rftlab.runs.errors import RunStoreError

LOCK_DIR = ".locks"

__all__ = ["LOCK_DIR", "Claim", "RunBusyError", "arm_lock", "claim", "holder_pid", "release"]


class RunBusyError(RunStoreError):
    """Another process holds the run (it is training or polling it)."""


@dataclass
class Claim:
    """An exclusive lock held on one run by this process."""

    run_dir: Path
    lock_path: Path
    fd: int


_CLAIMS: dict[str, Claim] = {}


def _lock_path(root: Path, *names: str) -> Path:
    folder = Path(root) / LOCK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / (".".join(names) + ".lock")


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _note_pid(fd: int) -> None:
    """The holder's pid, for the other process's error message (informational only)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)


def holder_pid(lock_path: Path) -> int | None:
    """The pid written by the lock's current holder, if any."""
    try:
        text = Path(lock_path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


@contextlib.contextmanager
def arm_lock(root: Path, experiment: str, arm: str, timeout: float = 120.0) -> Iterator[None]:
    """The short per-arm lock around finding or creating a run (waits up to ``timeout`` seconds: the
    holder only scans the arm's folder)."""
    try:
        path = _lock_path(root, experiment, arm)
        fd = _open(path)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            yield  # a store this user cannot write: nothing can be created in it to race over
            return
        raise
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise RunBusyError(
                        f"arm {experiment}/{arm} under {root} stayed locked for {timeout:g} s by process "
                        f"{holder_pid(path) or '?'}; is another launch of it stuck?"
                    ) from None
                time.sleep(0.05)
        _note_pid(fd)
        yield
    finally:
        os.close(fd)


def claim(root: Path, experiment: str, arm: str, run_dir: Path, activity: str = "trained") -> Claim:
    """Claim ``run_dir`` for this process, or raise :class:`RunBusyError` naming it and the holder."""
    key = str(Path(run_dir).resolve())
    held = _CLAIMS.get(key)
    if held is not None:
        return held
    path = _lock_path(root, experiment, arm, Path(run_dir).name)
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        pid = holder_pid(path)
        raise RunBusyError(
            f"run {run_dir} is being {activity} by another process (pid {pid or '?'}); wait for it to end, "
            "then run the same command again (a finished run is reused, an unfinished one resumed)"
        ) from None
    _note_pid(fd)
    held = _CLAIMS[key] = Claim(Path(run_dir), path, fd)
    return held


def release(run_dir: Path) -> None:
    """Release this process's claim on ``run_dir`` (no-op when it holds none)."""
    held = _CLAIMS.pop(str(Path(run_dir).resolve()), None)
    if held is not None:
        with contextlib.suppress(OSError):
            os.close(held.fd)
