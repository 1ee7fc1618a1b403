"""Put the strict fake firectl (``fake_firectl.py`` beside this file) first on ``PATH`` for one test: an
executable copy in the test's temporary folder, run by this interpreter, with its scenario folder and
argv log there too. ``RFTLAB_FIRECTL`` is unset, so the launcher finds it as it finds the real one."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class FakeFirectl:
    """Where the installed fake reads its scripted replies (``dir``) and logs every argv (``log``)."""

    dir: Path
    log: Path

    def calls(self) -> list[list[str]]:
        """``[command, subcommand]`` of every firectl call so far, in order."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line)[:2] for line in lines]


def install_fake_firectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeFirectl:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "firectl"
    exe.write_text(f"#!{sys.executable}\n" + (Path(__file__).parent / "fake_firectl.py").read_text())
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    scenario = tmp_path / "scenario"
    (scenario / "datasets").mkdir(parents=True)
    log = tmp_path / "argv.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_FIRECTL_DIR", str(scenario))
    monkeypatch.setenv("FAKE_FIRECTL_LOG", str(log))
    monkeypatch.delenv("RFTLAB_FIRECTL", raising=False)
    return FakeFirectl(scenario, log)
