"""Run store faults: glued rows, corrupt runs, missing roots, NaN, resume, duplicate steps (issue 9 §1, §4)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rftlab.cli import main as cli_main
from rftlab.runs import CorruptRunError, RunStore, collect_metrics, load_run
from rftlab.runs.store import DAMAGED_METRICS

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def run(tmp_path):
    return RunStore(tmp_path / "runs").create_run("e", "a", {"k": 1}, run_id="r1")


def test_append_after_a_row_without_its_final_newline_does_not_glue(run):
    path = run.path / "metrics.jsonl"
    path.write_bytes(b'{"step": 0, "x": 1.0}')  # complete row, no newline
    run.append_metrics({"step": 1, "x": 2.0})
    assert path.read_bytes() == b'{"step": 0, "x": 1.0}\n{"epoch": 1, "step": 1, "x": 2.0}\n'
    assert [row["step"] for row in run.metrics()] == [0, 1]


def test_append_after_a_cut_line_is_refused_then_repaired_without_loss(run):
    path = run.path / "metrics.jsonl"
    original = b'{"step": 0, "x": 1.0}\n{"step": 1, "x"'
    path.write_bytes(original)
    with pytest.raises(CorruptRunError) as caught:
        run.append_metrics({"step": 2, "x": 3.0})
    message = str(caught.value)
    assert "metrics.jsonl" in message and "line 2" in message and "repair_metrics" in message
    assert path.read_bytes() == original  # nothing written, nothing lost
    assert run.repair_metrics() == [2]
    assert (run.path / DAMAGED_METRICS).read_bytes() == b'{"step": 1, "x"\n'
    run.append_metrics({"step": 2, "x": 3.0})
    assert [row["step"] for row in run.metrics()] == [0, 2]
    assert run.repair_metrics() == []


def test_a_line_that_is_not_utf8_is_reported_with_its_number(run):
    (run.path / "metrics.jsonl").write_bytes(b'{"step": 0}\n{"step": 1, "n": "\xff"}\n')
    with pytest.raises(CorruptRunError, match=r"line 2 is not UTF-8"):
        run.metrics()


def test_nan_and_infinite_metrics_name_the_field_and_row(run):
    with pytest.raises(ValueError) as caught:
        run.append_metrics([{"step": 0, "loss": 1.0}, {"step": 1, "reward": float("nan")}])
    message = str(caught.value)
    assert "row 1" in message and "step 1" in message and "'reward'" in message and "NaN" in message
    with pytest.raises(ValueError, match=r"'stats.kl' is inf"):
        run.append_metrics({"step": 0, "stats": {"kl": float("inf")}})
    with pytest.raises(ValueError, match=r"'per_item\[1\]' is -inf"):
        run.write_eval([{"item_id": "q", "per_item": [0.0, float("-inf")]}])
    assert not (run.path / "metrics.jsonl").exists()  # all rows checked before the first write


def test_numpy_values_are_written_as_plain_numbers(run):
    np = pytest.importorskip("numpy")
    run.append_metrics({"step": np.int64(0), "x": np.float32(0.5)})
    assert run.metrics() == [{"epoch": 0, "step": 0, "x": 0.5}]
    with pytest.raises(ValueError, match=r"'x' is NaN"):
        run.append_metrics({"step": 1, "x": np.float64("nan")})


def test_duplicate_steps_are_refused(run):
    run.append_metrics([{"step": 0, "x": 1}, {"step": 1, "x": 2}])
    with pytest.raises(ValueError, match=r"step 1 \(row 0\) is already recorded \(line 2 of metrics.jsonl\)"):
        run.append_metrics({"step": 1, "x": 3})
    with pytest.raises(ValueError, match=r"step 5 \(row 1\) is already recorded \(row 0 of this call\)"):
        run.append_metrics([{"step": 5}, {"step": 5}])
    for bad in ({"step": "3"}, {"step": 1.5}, {"step": True}, {"x": 1}):
        with pytest.raises(ValueError, match="step"):
            run.append_metrics(bad)
    assert [row["x"] for row in run.metrics()] == [1, 2]


def test_resume_refuses_a_run_with_a_corrupt_metrics_file(tmp_path):
    store = RunStore(tmp_path)
    crashed, _ = store.start_or_reuse("e", "a", {"seed": 3})
    (crashed.path / "metrics.jsonl").write_bytes(b'{"step": 0}\n{"st')
    with pytest.raises(CorruptRunError) as caught:
        store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    message = str(caught.value)
    assert "refusing to resume" in message and "line 2" in message and str(crashed.path) in message
    crashed.repair_metrics()
    resumed, origin = store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    assert origin == "resumed" and resumed.path == crashed.path and resumed.metrics() == [{"step": 0}]


def test_reuse_refuses_a_finished_run_with_a_corrupt_metrics_file(tmp_path):
    store = RunStore(tmp_path)
    done, _ = store.start_or_reuse("e", "a", {"seed": 4})
    done.append_metrics({"step": 0})
    done.finish()
    (done.path / "metrics.jsonl").write_bytes(b"\x00\xff")
    with pytest.raises(CorruptRunError, match="refusing to reuse"):
        store.start_or_reuse("e", "a", {"seed": 4})


def _store_with_one_corrupt_run(root: Path) -> Path:
    store = RunStore(root)
    for arm in ("A", "B"):
        run = store.create_run("spectrum", arm, {"arm": arm}, run_id=f"good-{arm}")
        run.append_metrics({"step": 0, "reward": 0.5})
    bad = store.create_run("spectrum", "C", {"arm": "C"}, run_id="bad")
    (bad.path / "run.json").write_bytes(b'{"run_id": "bad", \xff')
    return bad.path


def test_one_corrupt_run_does_not_hide_the_others(tmp_path, capsys):
    bad = _store_with_one_corrupt_run(tmp_path)
    runs, problems = RunStore(tmp_path).scan()
    assert [r.run_id for r in runs] == ["good-A", "good-B"] and list(problems) == [str(bad / "run.json")]
    assert cli_main(["runs", "list", "--root", str(tmp_path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert [r["run_id"] for r in json.loads(out)] == ["good-A", "good-B"]
    assert f"{bad / 'run.json'}: not UTF-8" in err and "Traceback" not in err
    assert cli_main(["runs", "metrics", "--root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 3 and str(bad / "run.json") in err
    frame, problems = collect_metrics(tmp_path)
    assert len(frame) == 2 and len(problems) == 1


def test_a_non_utf8_metrics_file_is_reported_not_raised(tmp_path, capsys):
    run = RunStore(tmp_path).create_run("e", "a", {})
    (run.path / "metrics.jsonl").write_bytes(b"\xfe\xff\n")
    assert cli_main(["runs", "metrics", "--root", str(tmp_path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl: line 1 is not UTF-8" in err


@pytest.mark.parametrize("sub", ["list", "metrics", "clean"])
def test_a_missing_or_wrong_root_is_an_error(tmp_path, capsys, sub):
    assert cli_main(["runs", sub, "--root", str(tmp_path / "nope")]) == 2
    assert "--root" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert cli_main(["runs", sub, "--root", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert cli_main(["runs", sub, "--root", ""]) == 2
    # An existing empty store is fine.
    (tmp_path / "empty").mkdir()
    assert cli_main(["runs", sub, "--root", str(tmp_path / "empty")]) == 0


def test_unreadable_files_are_reported_by_path(tmp_path, capsys, monkeypatch):
    run = RunStore(tmp_path).create_run("e", "a", {})
    run.append_metrics({"step": 0})
    real = Path.read_bytes

    def deny(self):
        if self.name == "metrics.jsonl":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert cli_main(["runs", "metrics", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl: cannot be read (Permission denied)" in err


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_unreadable_files_as_an_unprivileged_user(tmp_path):
    """For real: a colleague without read permission on one run.json still sees the other runs."""
    shared = Path(tempfile.mkdtemp(prefix="rftlab-shared-"))
    try:
        shared.chmod(0o755)
        store = RunStore(shared)
        store.create_run("e", "a", {}, run_id="readable")
        hidden = store.create_run("e", "b", {}, run_id="hidden")
        (hidden.path / "run.json").chmod(0o600)
        for folder in shared.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)
        (shared / "e" / "a" / "readable" / "run.json").chmod(0o644)
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-m",
                "rftlab.cli",
            ]
            + ["runs", "list", "--root", str(shared)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC), "HOME": "/tmp"},
            timeout=60,
            check=False,
        )
        if "Permission denied" in proc.stderr and "python" in proc.stderr.lower() and proc.returncode != 2:
            pytest.skip(f"the interpreter is not usable by an unprivileged user: {proc.stderr[:200]}")
        assert proc.returncode == 2, proc.stderr
        assert "readable" in proc.stdout and "hidden" not in proc.stdout
        assert (
            "run.json: cannot be read (Permission denied)" in proc.stderr and "Traceback" not in proc.stderr
        )
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_loading_a_run_json_that_is_a_folder_or_wrong_shape(tmp_path):
    store = RunStore(tmp_path)
    run = store.create_run("e", "a", {})
    (run.path / "run.json").unlink()
    (run.path / "run.json").mkdir()
    with pytest.raises(CorruptRunError, match="cannot be read"):
        load_run(run.path)
    other = store.create_run("e", "b", {})
    for payload, fragment in (
        (b"[]", "not a valid run record"),
        (b'{"run_id": 1}', "not a valid run record (field"),
        (b'{"a": NaN}', "not a valid run record"),
        (b"[" * 100_000, "not a valid run record"),
    ):
        (other.path / "run.json").write_bytes(payload)
        with pytest.raises(CorruptRunError, match=fragment.replace("(", r"\(")):
            load_run(other.path)


def test_create_run_names_an_unreadable_input_and_leaves_no_folder(tmp_path):
    store = RunStore(tmp_path / "runs")
    with pytest.raises(ValueError, match="input file .*missing.jsonl: cannot be read"):
        store.create_run("e", "a", {}, inputs=[tmp_path / "missing.jsonl"])
    with pytest.raises(ValueError, match="'lr' is NaN"):
        store.create_run("e", "a", {"lr": float("nan")})
    assert not (tmp_path / "runs").exists()


# -- beyond the listed examples ------------------------------------------------------------------------
def test_metric_names_cannot_overwrite_a_runs_identity(run, tmp_path):
    with pytest.raises(ValueError, match=r"reserved name\(s\) \['run_id'\]"):
        run.append_metrics({"step": 0, "run_id": "someone-else"})
    # A hand-edited row cannot either: the tidy table keeps the folder's identity.
    (run.path / "metrics.jsonl").write_text('{"step": 0, "arm": "forged", "x": 1}\n')
    frame, problems = collect_metrics(tmp_path / "runs")
    assert not problems and frame["arm"].tolist() == ["a"] and list(frame.columns).count("arm") == 1


def test_circular_or_unserialisable_values_are_a_value_error(run):
    loop: dict = {"step": 0}
    loop["self"] = loop
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        run.append_metrics(loop)
    with pytest.raises(ValueError, match=r"'obj' is a object, not JSON data"):
        run.append_metrics({"step": 0, "obj": object()})
    assert not (run.path / "metrics.jsonl").exists()


def test_overflowing_numbers_in_a_file_are_refused(run):
    (run.path / "metrics.jsonl").write_text('{"step": 0, "x": 1e999}\n')
    with pytest.raises(CorruptRunError, match="line 1 is not valid JSON"):
        run.metrics()
    (run.path / "metrics.jsonl").write_text('{"step": 0, "x": NaN}\n')
    with pytest.raises(CorruptRunError, match="line 1 is not valid JSON"):
        run.metrics()


_APPENDER = """
import sys
from rftlab.runs import load_run
run = load_run(sys.argv[1])
start = int(sys.argv[2])
for step in range(start, start + 40):
    run.append_metrics({"step": step, "x": step})
"""


def test_two_processes_appending_to_one_run_lose_no_row(run):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, str(run.path), str(start)], env=env)
        for start in (0, 1000)
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    steps = sorted(row["step"] for row in run.metrics())
    assert steps == [*range(40), *range(1000, 1040)]


def test_a_store_folder_that_cannot_be_listed_is_reported(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    store.create_run("e", "a", {}, run_id="ok")
    store.create_run("e", "b", {}, run_id="hidden")
    real = Path.iterdir

    def iterdir(self):
        if self.name == "b":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    runs, problems = store.scan()
    assert [r.run_id for r in runs] == ["ok"]
    assert problems == {
        str(tmp_path / "e" / "b"): "folder cannot be listed (Permission denied); check its permissions"
    }


def test_root_pointing_at_one_run_is_explained(run, capsys):
    assert cli_main(["runs", "list", "--root", str(run.path)]) == 2
    assert "one run's folder" in capsys.readouterr().err


def test_secret_in_a_file_or_folder_name_is_refused(tmp_path, monkeypatch):
    from rftlab.runs import SecretLeakError

    monkeypatch.setenv("FIREWORKS_API_KEY", "fw_abcdefghijklmnop")
    store = RunStore(tmp_path / "runs")
    with pytest.raises(SecretLeakError, match="run folder"):
        store.create_run("e", "a", {}, run_id="fw_abcdefghijklmnop")
    run = store.create_run("e", "a", {})
    with pytest.raises(SecretLeakError, match="provider snapshot"):
        run.save_provider_snapshot("fw_abcdefghijklmnop.json", {})
    assert not [p for p in tmp_path.rglob("*") if "fw_abc" in p.name]


def test_an_undecodable_credential_value_is_matched_on_its_raw_bytes(tmp_path, monkeypatch):
    from rftlab.runs import SecretLeakError, atomic_write_bytes

    raw = b"key-\xff\xfe-0123456789"
    monkeypatch.setenv("HF_TOKEN", os.fsdecode(raw))
    with pytest.raises(SecretLeakError):
        atomic_write_bytes(tmp_path / "x.bin", b"header " + raw)


def test_a_hand_edited_spec_is_not_reused_under_its_old_hash(tmp_path):
    store = RunStore(tmp_path)
    run, _ = store.start_or_reuse("e", "a", {"lr": 1e-5})
    run.finish()
    record = json.loads((run.path / "run.json").read_text())
    record["spec"]["lr"] = 1e-3
    (run.path / "run.json").write_text(json.dumps(record))
    with pytest.raises(CorruptRunError, match="does not match its spec_sha256"):
        load_run(run.path)
    with pytest.raises(CorruptRunError):
        store.start_or_reuse("e", "a", {"lr": 1e-5})
