"""Atomic writes: unique temporaries, cleanup on failure, umask modes, killed writers (issue 9 §3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main as cli_main
from rftlab.runs import (
    OutputPathError,
    RunStore,
    SecretLeakError,
    atomic_write_bytes,
    atomic_writer,
    check_output_path,
    clean_temporaries,
    find_temporaries,
    load_run,
)
from rftlab.runs.atomic import PID_MAX, TMP_SUFFIX, _tmp_path, new_file_mode, writer_pid

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def work(tmp_path):
    """An empty folder (tmp_path also holds the test HOME)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def umask():
    """Set a umask for one test and restore the previous one."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(saved)


def test_a_users_dot_tmp_file_is_never_touched(work):
    out = work / "corpus.jsonl"
    mine = work / "corpus.jsonl.tmp"
    mine.write_text("my own notes\n")
    atomic_write_bytes(out, b"new\n")
    assert out.read_bytes() == b"new\n"
    assert mine.read_text() == "my own notes\n"
    assert sorted(p.name for p in work.iterdir()) == ["corpus.jsonl", "corpus.jsonl.tmp"]


def test_temporaries_are_unique_and_in_the_target_folder(work):
    out = work / "a.json"
    seen = []
    with atomic_writer(out) as first, atomic_writer(out) as second:
        first.write(b"1")
        second.write(b"2")
        seen = sorted(p.name for p in work.iterdir())
    assert len(seen) == 2 and seen[0] != seen[1]
    assert all(name.startswith(".a.json.") and name.endswith(TMP_SUFFIX) for name in seen)
    assert str(os.getpid()) in seen[0]
    assert out.read_bytes() in (b"1", b"2")  # last rename wins, never a mix
    assert [p.name for p in work.iterdir()] == ["a.json"]


def test_a_failure_mid_write_leaves_the_old_file_and_no_temporary(work):
    out = work / "data.jsonl"
    out.write_bytes(b"old\n")
    with pytest.raises(RuntimeError), atomic_writer(out) as handle:
        handle.write(b"x" * 300_000)
        raise RuntimeError("disk full, say")
    assert out.read_bytes() == b"old\n"
    assert [p.name for p in work.iterdir()] == ["data.jsonl"]
    with pytest.raises(KeyboardInterrupt), atomic_writer(out) as handle:
        handle.write(b"y")
        raise KeyboardInterrupt
    assert [p.name for p in work.iterdir()] == ["data.jsonl"]


def test_a_directory_target_leaves_nothing_behind(work):
    target = work / "folder"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write_bytes(target, b"x" * 295_000)
    assert list(work.iterdir()) == [target] and list(target.iterdir()) == []


@pytest.mark.parametrize(
    ("mask", "expected"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600), (0o000, 0o666)]
)
def test_new_files_follow_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    assert new_file_mode() == expected
    out = tmp_path / "f.json"
    atomic_write_bytes(out, b"{}")
    assert out.stat().st_mode & 0o777 == expected
    # The run store creates its files the same way (a group can share a store under umask 002).
    run = RunStore(tmp_path / "runs").create_run("e", "a", {})
    run.append_metrics({"step": 0, "x": 1.0})
    for name in ("run.json", "metrics.jsonl"):
        assert (run.path / name).stat().st_mode & 0o777 == expected, name


def test_an_existing_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    out = tmp_path / "shared.json"
    out.write_text("{}")
    out.chmod(0o640)
    atomic_write_bytes(out, b"[]")
    assert out.stat().st_mode & 0o777 == 0o640 and out.read_bytes() == b"[]"


def test_a_refused_secret_writes_nothing(work, monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-1234567890")
    out = work / "out.jsonl"
    with pytest.raises(SecretLeakError, match=r"\$SOME_SERVICE_TOKEN"):
        atomic_write_bytes(out, b'{"auth": "tok-1234567890"}')
    # Streaming writes are checked too, across chunk boundaries of the scan.
    with pytest.raises(SecretLeakError), atomic_writer(out) as handle:
        handle.write(b"a" * ((1 << 20) - 5) + b"tok-1234567890")
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: "", "--out is empty"),
        (lambda d: "   ", "--out is empty"),
        (lambda d: str(d), "is a folder"),
        (lambda d: str(d / "missing" / "x.jsonl"), "does not exist; create it first"),
        (lambda d: str(d / "file.txt" / "x.jsonl"), "is a file, not a folder"),
        (lambda d: str(d / "file.txt" / "deeper" / "x.jsonl"), "is a file, not a folder"),
        (lambda d: "/proc/version", "folder /proc does not accept new files (a virtual file system"),
        (lambda d: "/dev/null", "not a regular file"),
        (lambda d: str(d / "x.jsonl") + "/", "ends with '/'"),
        (lambda d: str(d / "nul\x00byte"), "cannot use this path"),
    ],
)
def test_check_output_path_names_the_flag_and_what_to_do(work, make, message):
    (work / "file.txt").write_text("x")
    before = sorted(p.name for p in work.iterdir())
    with pytest.raises(OutputPathError) as caught:
        check_output_path(make(work), "--out")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert sorted(p.name for p in work.iterdir()) == before  # the probe leaves nothing


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write in a read-only folder")
def test_check_output_path_on_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputPathError, match="cannot write in folder"):
            check_output_path(folder / "x.jsonl", "--metadata")
    finally:
        folder.chmod(0o755)


# -- writers killed with SIGKILL ---------------------------------------------------------------------
_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from rftlab.runs import RunStore, atomic_writer
    run = RunStore(sys.argv[1]).create_run("e", "a", {"k": 1}, run_id="victim")
    run.append_metrics({"step": 0, "reward": 0.5})
    with atomic_writer(run.path / "metrics.jsonl") as handle:
        handle.write(b"x" * 1_000_000)
        handle.flush()
        print("writing", flush=True)
        time.sleep(60)
    """
)


def test_a_writer_killed_with_sigkill_leaves_a_stale_temporary_that_readers_ignore(tmp_path, capsys):
    root = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(root)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    run_dir = root / "e" / "a" / "victim"
    temps = find_temporaries(root)
    assert len(temps) == 1 and temps[0].stale and temps[0].pid == proc.pid
    assert temps[0].size == 1_000_000 and temps[0].path.parent == run_dir
    # Readers see the last complete file, not the temporary.
    run = load_run(run_dir)
    assert run.metrics() == [{"epoch": 0, "step": 0, "reward": 0.5}]
    assert [r.run_id for r in RunStore(root).runs()] == ["victim"]
    # `runs list` lists the run and points at the stale file; `runs clean` removes it.
    assert cli_main(["runs", "list", "--root", str(root)]) == 0
    captured = capsys.readouterr()
    assert "victim" in captured.out
    assert "1 stale temporary file(s) (1000000 bytes)" in captured.err and "runs clean" in captured.err
    assert cli_main(["runs", "clean", "--root", str(root), "--dry-run"]) == 0
    assert "would remove" in capsys.readouterr().out and temps[0].path.exists()
    assert cli_main(["runs", "clean", "--root", str(root)]) == 0
    assert "removed 1 stale" in capsys.readouterr().err
    assert find_temporaries(root) == [] and sorted(p.name for p in run_dir.iterdir()) == [
        "metrics.jsonl",
        "run.json",
    ]
    # The run is intact and can go on.
    run.append_metrics({"step": 1, "reward": 0.6})
    assert [row["step"] for row in run.metrics()] == [0, 1]


def test_clean_never_removes_a_live_writers_temporary(tmp_path):
    out = tmp_path / "e" / "a" / "r" / "eval.jsonl"
    with atomic_writer(out) as handle:
        handle.write(b"partial")
        (live,) = find_temporaries(tmp_path)
        assert not live.stale and live.pid == os.getpid()
        assert clean_temporaries(tmp_path) == [] and live.path.exists()
    assert out.read_bytes() == b"partial" and find_temporaries(tmp_path) == []


def test_files_that_only_look_like_temporaries_are_never_touched(tmp_path, capsys):
    run_dir = RunStore(tmp_path).create_run("e", "a", {"x": 1}).path
    dead = _dead_pid()
    kept = {
        # the earlier writer's ".<name>.<8 chars>.tmp": no longer written, as likely a user's own file
        ".metrics.jsonl.k2j3h4g5.tmp": b"x" * 10,
        "notes.tmp": b"mine",
        # the pattern, but not as atomic_writer makes it: pid with a leading zero, upper-case hex,
        # pids beyond any process (the 20- and 200-digit pids of the review), an empty name
        f".notes.0{dead}-0123abcd{TMP_SUFFIX}": b"a",
        f".notes.{dead}-0123ABCD{TMP_SUFFIX}": b"b",
        f".notes.{10**19}-0123abcd{TMP_SUFFIX}": b"c",
        f".notes.{10**199}-0123abcd{TMP_SUFFIX}": b"d",
        f".notes.{2**22 + 1}-0123abcd{TMP_SUFFIX}": b"e",
        f"..{dead}-0123abcd{TMP_SUFFIX}": b"f",
    }
    for name, data in kept.items():
        (run_dir / name).write_bytes(data)
    os.symlink(run_dir / "notes.tmp", run_dir / f".link.{dead}-0123abcd{TMP_SUFFIX}")  # not a file of ours
    deep = run_dir / "b" / "c" / "d" / f".x.{dead}-0123abcd{TMP_SUFFIX}"
    deep.parent.mkdir(parents=True)
    deep.write_bytes(b"z")  # deeper than any run-store file: not walked
    stale = run_dir / f".eval.jsonl.{dead}-0123abcd{TMP_SUFFIX}"  # exactly a killed writer's
    stale.write_bytes(b"cut")
    assert [(t.path, t.pid, t.stale) for t in find_temporaries(tmp_path)] == [(stale, dead, True)]
    assert cli_main(["runs", "list", "--root", str(tmp_path)]) == 0
    assert "1 stale temporary file(s) (3 bytes)" in capsys.readouterr().err
    assert cli_main(["runs", "clean", "--root", str(tmp_path)]) == 0
    assert f"removed {stale}" in capsys.readouterr().out
    assert not stale.exists() and deep.exists()
    assert all((run_dir / name).read_bytes() == data for name, data in kept.items())


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(min_size=1, max_size=300).filter(
        lambda n: "/" not in n and "\x00" not in n and n not in (".", "..")
    )
)
def test_writer_pid_reads_back_every_name_the_writers_make(name):
    temporary = _tmp_path(Path("/x") / name).name
    assert writer_pid(temporary) == os.getpid()
    pid = writer_pid(name)  # any other name: no pid, or one a process can have
    assert pid is None or 1 <= pid <= PID_MAX


@settings(max_examples=200, deadline=None)
@given(
    stem=st.text(min_size=1, max_size=100).filter(lambda n: "/" not in n),
    pid=st.one_of(st.integers(min_value=PID_MAX + 1, max_value=10**200), st.integers(max_value=0)),
    tail=st.from_regex(r"[0-9a-fA-F]{8}", fullmatch=True),
)
def test_writer_pid_never_takes_a_pid_no_process_can_have(stem, pid, tail):
    assert writer_pid(f".{stem}.{pid}-{tail}{TMP_SUFFIX}") is None


def test_json_writes_in_the_store_are_plain_files_readable_by_json(tmp_path):
    run = RunStore(tmp_path).create_run("e", "a", {"x": [1, 2]})
    assert json.loads((run.path / "run.json").read_text())["spec"] == {"x": [1, 2]}


def test_writes_go_through_a_symlink_and_keep_it(work):
    target = work / "real.json"
    target.write_text("old")
    link = work / "link.json"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_a_full_disk_names_the_file_and_cleans_up(work, capsys, monkeypatch):
    out = work / "big.jsonl"
    with pytest.raises(OSError) as caught, atomic_writer(out) as handle:
        handle.write(b"x")
        raise OSError(28, "No space left on device")
    assert caught.value.filename == str(out) and list(work.iterdir()) == []


def test_runs_clean_help_says_what_it_removes(capsys):
    with pytest.raises(SystemExit):
        cli_main(["runs", "clean", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "'.<file name>.<pid>-<8 lowercase hex digits>.rftlab-tmp'" in text
    assert "whose writer process is gone and which belong to you" in text
