"""Class 1 of issue 24: the Fireworks key never travels on firectl's command line. What other local users
can see of a running firectl (its ``/proc/<pid>/cmdline``, the process list) holds no form of the key; the
key reaches firectl through a private auth file (``0600`` in a ``0700`` home), removed when the call ends.
The fake firectl reads credentials the way the real CLI does (``tests/launch/fake_firectl.py``)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.launch.firectl import (
    _WARNED,
    KEY_ON_ARGV_WARNING,
    WANDB_ON_ARGV_WARNING,
    Firectl,
    FirectlError,
    clean_stale_homes,
    private_home,
)
from rftlab.runs.secrets import secret_forms

sys.path.insert(0, str(Path(__file__).parent))
from fake_firectl_env import install_fake_firectl  # noqa: E402

KEY = 'fw-"q"\\b/é-0123456789abcdef'


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    install_fake_firectl(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_FIRECTL_AUTH_LOG", str(tmp_path / "auth.log"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    return tmp_path


def _auth_log(base: Path) -> list[dict]:
    path = base / "auth.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _visible(pid: int) -> bytes:
    """What any local user can read about a process: its command line (and ``ps``'s view of it)."""
    seen = Path(f"/proc/{pid}/cmdline").read_bytes()
    if shutil.which("ps"):
        seen += subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True).stdout
    return seen


def test_a_running_firectl_shows_no_form_of_the_key(fake_bin, monkeypatch):
    pause = fake_bin / "pause"
    pause.mkdir()
    monkeypatch.setenv("FAKE_FIRECTL_PAUSE_DIR", str(pause))
    fc = Firectl(account_id="acct", api_key=KEY)
    errors: list[BaseException] = []

    def call():
        try:
            fc.dataset_list()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 60
    while not (pause / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int((pause / "pid").read_text())
    try:
        seen = _visible(pid)
        environ_home = [
            e.split(b"=", 1)[1]
            for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if e.startswith(b"HOME=")
        ]
        home = Path(os.fsdecode(environ_home[0]))
        auth = home / ".fireworks" / "auth.ini"
        modes = (
            stat.S_IMODE(home.stat().st_mode),
            stat.S_IMODE(auth.parent.stat().st_mode),
            stat.S_IMODE(auth.stat().st_mode),
        )
    finally:
        (pause / "go").write_text("")
        worker.join(60)
    assert not errors, errors
    assert not [f for f in secret_forms(KEY) if f in seen], "the key is visible in the process listing"
    assert b"--api-key" not in seen and b"dataset" in seen  # (we did read the right process)
    assert modes == (0o700, 0o700, 0o600)
    assert not home.exists(), "the private home was not removed after the call"
    (record,) = _auth_log(fake_bin)
    assert record["source"] == "auth.ini" and record["key"] == KEY and record["account"] == "acct"


def test_the_argv_fallback_warns_once_and_says_why(fake_bin, capsys):
    _WARNED.discard(KEY_ON_ARGV_WARNING)
    fc = Firectl(account_id="acct", api_key=KEY, key_via="argv")
    fc.dataset_list()
    fc.dataset_list()
    err = capsys.readouterr().err
    assert err.count("WARNING: the Fireworks key is passed to firectl as --api-key") == 1
    assert "process list" in err and KEY not in err
    assert {r["source"] for r in _auth_log(fake_bin)} == {"argv"}


def test_the_wandb_key_has_no_other_route_and_is_announced_before_the_call(fake_bin, capsys):
    _WARNED.discard(WANDB_ON_ARGV_WARNING)
    order: list[str] = []
    fc = Firectl(account_id="acct", api_key=KEY, warn=lambda m: order.append("warning"))
    real_run = fc.run
    fc.run = lambda argv: (order.append("call"), real_run(argv))[1]  # type: ignore[method-assign]
    flags = [
        "--dataset",
        "d",
        "--evaluator",
        "accounts/acct/evaluators/e",
        "--epochs",
        "1",
        "--learning-rate",
        "0.0001",
        "--temperature",
        "1.0",
        "--response-candidates-count",
        "4",
        "--wandb",
        "--wandb-project",
        "p",
        "--wandb-entity",
        "e",
        "--wandb-api-key",
        "wandb-key-0123456789",
    ]  # fmt: skip  (the strict fake wants all three)
    fc.job_create("rftlab-a-1234abcd", flags)
    assert order == ["warning", "call"]
    assert "WANDB_API_KEY" in WANDB_ON_ARGV_WARNING and "process list" in WANDB_ON_ARGV_WARNING


def test_a_firectl_without_key_says_so_and_the_message_has_no_key(fake_bin):
    fc = Firectl(account_id="acct", api_key=None)
    with pytest.raises(FirectlError, match="no API key"):
        fc.dataset_list()


def test_ids_that_firectl_would_read_as_flags_are_refused(fake_bin):
    fc = Firectl(account_id="acct", api_key=KEY)
    for bad in ("-x", "--api-key", "a b", "", "x;rm"):
        with pytest.raises(FirectlError, match="refusing to pass"):
            fc.dataset_get(bad)
    with pytest.raises(ValueError, match="account id"):
        Firectl(account_id="-a", api_key=KEY)
    assert not (fake_bin / "argv.log").exists()  # nothing was run


def test_homes_of_killed_processes_are_removed_by_the_next_call(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f"rftlab-firectl-{int(dead.stdout)}-abcd"
    (stale / ".fireworks").mkdir(parents=True)
    (stale / ".fireworks" / "auth.ini").write_text("api_key = old\n")
    mine = tmp_path / f"rftlab-firectl-{os.getpid()}-live"
    mine.mkdir()
    other = tmp_path / "rftlab-firectl-notapid"
    other.mkdir()
    assert clean_stale_homes(tmp_path) == [stale]
    assert not stale.exists() and mine.exists() and other.exists()


# Keys as a provider or a user might hold them: any printable text without line breaks or surrounding
# spaces (the auth file is one "key = value" line per setting).
PRINTABLE_KEYS = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=8, max_size=40
).filter(lambda k: k == k.strip() and not (k[0] == k[-1] and k[0] in "'\""))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=PRINTABLE_KEYS)
def test_any_key_reaches_firectl_intact_and_never_on_argv(fake_bin, key):
    (fake_bin / "auth.log").unlink(missing_ok=True)
    (fake_bin / "argv.log").unlink(missing_ok=True)
    Firectl(account_id="acct-1", api_key=key).dataset_list()
    (record,) = _auth_log(fake_bin)
    assert record["source"] == "auth.ini" and record["key"] == key
    argv = (fake_bin / "argv.log").read_text()
    assert not [f for f in secret_forms(key) if f.decode("utf-8", "replace") in argv]
    assert not list((fake_bin / "tmp").iterdir())  # every private home removed


@settings(max_examples=20, deadline=None)
@given(key=st.text(min_size=8, max_size=20).filter(lambda k: "\n" in k or "\r" in k or k != k.strip()))
def test_a_key_the_auth_file_cannot_hold_is_refused_clearly(key):
    with pytest.raises(FirectlError, match="cannot be written to firectl's auth file"):
        with private_home(key, "acct"):
            pass
