"""``rftlab view`` as a process: it serves before it converts, names a damaged run and shows the others,
sends the rows over the app's websocket (re-read when a file changes), and stops on SIGTERM as on Ctrl-C,
leaving no server, no open port and no temporary folder behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("eval_protocol")

from rftlab.rollout.viewer import Source, ViewerError, free_port, rows_from_path, scan_sources  # noqa: E402
from rftlab.rollout.viewer_server import RowIndex  # noqa: E402
from rftlab.runs import CorruptRunError, RunStore  # noqa: E402


def make_store(root: Path, runs: int = 2) -> list[Path]:
    store = RunStore(root)
    paths = []
    for k in range(runs):
        run = store.create_run("gs1_vs_grpo", f"arm{k}", {"arm": k}, backend="local")
        run.write_rollouts(0, [{"prompt_id": f"p{i}", "reward": 1.0, "response": f"run {k} row {i}"}
                               for i in range(3)])  # fmt: skip
        run.finish()
        paths.append(run.path)
    return paths


def cut_record(run: Path) -> Path:
    record = run / "run.json"
    text = record.read_text(encoding="utf-8")
    record.write_text(text[: len(text) // 2], encoding="utf-8")
    return record


def test_a_cut_run_record_is_named_and_the_other_runs_are_still_read(tmp_path):
    good, bad = make_store(tmp_path / "runs")
    record = cut_record(bad)
    sources, problems = scan_sources(tmp_path / "runs")
    assert [s.path for s in sources] == [good]
    assert list(problems) == [str(record)] and "not a valid run record" in problems[str(record)]
    found: dict[str, str] = {}
    rows = rows_from_path(tmp_path / "runs", problems=found)
    assert found == problems and len(rows) == 3
    with pytest.raises(CorruptRunError, match="run.json: not a valid run record"):
        rows_from_path(tmp_path / "runs")


def test_the_index_converts_a_source_once_and_again_only_when_its_files_change(tmp_path, monkeypatch):
    (run,) = make_store(tmp_path / "runs", runs=1)
    (source,) = scan_sources(run)[0]
    reads = []
    real_rows = Source.rows
    monkeypatch.setattr(Source, "rows", lambda self: reads.append(self.path) or real_rows(self))
    index = RowIndex([source])
    first = index.rows(source)
    assert [json.loads(t)["messages"][-1]["content"] for t in first] == [f"run 0 row {i}" for i in range(3)]
    assert index.rows(source) == first and reads == [run]  # cached: read once
    with open(run / "rollouts" / "epoch-0.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"prompt_id": "p3", "reward": 0.0, "response": "added later"}) + "\n")
    again = index.rows(source)
    assert len(again) == 4 and json.loads(again[-1])["messages"][-1]["content"] == "added later"
    assert reads == [run, run]
    assert [len(b) for b in index.batches(size=3)] == [3, 1]


def start_viewer(path: Path, tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """``rftlab view PATH`` on a free port, its temporary folder under ``tmp_path``; returns after the
    address line."""
    port, tmp = free_port(), tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rftlab.cli", "view", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    line = proc.stdout.readline()
    if not line.startswith(f"viewer: http://127.0.0.1:{port}"):
        proc.kill()
        raise AssertionError(f"no address line: {line!r}; stderr: {proc.communicate()[1][-2000:]}")
    return proc, port, tmp


def port_is_free(port: int) -> bool:
    """Nothing answers on the port, and a new server can listen on it (as a new viewer would: the
    closed connections' TIME_WAIT entries do not count)."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_stops_the_viewer_and_leaves_no_port_and_no_temporary_folder(tmp_path, signum):
    make_store(tmp_path / "runs", runs=1)
    proc, port, tmp = start_viewer(tmp_path / "runs", tmp_path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert port_is_free(port)
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
def test_the_viewer_names_a_cut_run_and_sends_the_other_runs_rows(tmp_path):
    from websockets.sync.client import connect

    good, bad = make_store(tmp_path / "runs")
    record = cut_record(bad)
    proc, port, _tmp = start_viewer(tmp_path / "runs", tmp_path)
    try:
        rows = []
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
            while len(rows) < 3:
                message = json.loads(ws.recv(timeout=120))
                assert message["type"] == "initialize_logs"
                rows.extend(message["logs"])
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [r["execution_metadata"]["run_id"] for r in rows] == [good.name] * 3
    assert f"rftlab: error: {record}: not a valid run record" in err
    assert "1 run file(s) could not be read; the other runs are shown" in err
    assert "Traceback" not in err and "JSONDecodeError" not in err
    assert proc.returncode == 2


def test_a_store_without_rollouts_is_one_clear_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "rftlab.cli", "view", str(tmp_path / "empty")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("rftlab: error:")
    assert "no rollouts found" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(ViewerError, match="no such file"):
        scan_sources(tmp_path / "missing")


def test_a_record_the_row_model_refuses_is_named_and_the_rows_before_it_kept(tmp_path):
    (run,) = make_store(tmp_path / "runs", runs=1)
    with open(run / "rollouts" / "epoch-0.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"prompt_id": "bad", "evaluation_result": {"score": "high"}}) + "\n")
    (source,) = scan_sources(run)[0]
    reported = []
    index = RowIndex([source], report=lambda path, why: reported.append((path, why)))
    assert len(index.rows(source)) == 3
    ((path, why),) = reported
    assert path == str(run) and why.startswith("row 4 cannot be shown (ValidationError")
    assert index.problems == {path: why}
