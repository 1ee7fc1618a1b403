"""The git commit and dirty flag of the code that produced a run."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_state(repo: str | Path = ".") -> dict[str, str | bool | None]:
    """``{"commit": sha, "dirty": bool}``; both ``None`` outside a git checkout or without git."""

    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}
