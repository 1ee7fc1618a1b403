"""Bad input to the spectrum/arena/runs commands: one line naming the flag, exit 2, nothing half-written
(issue 9 §1-§3)."""

from __future__ import annotations

import json
import math
import os
import time

import pytest
from option_errors import assert_refused, refused_option

from rftlab.cli import main, print_json
from rftlab.runs.strictjson import json_ready


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2, err
    assert err.startswith("rftlab: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.fixture
def work(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "afile").write_text("x")
    return folder


# -- arena sizes, seeds, permutations -----------------------------------------------------------------
@pytest.mark.parametrize("command", ["solve", "prompt"])
@pytest.mark.parametrize("size", [91, 100, 10**9, 9, 0, -5])
def test_arena_size_outside_10_to_90_is_refused(capsys, command, size):
    refused_option(
        ["arena", command, "--seed", 1, "--size", size], capsys, "--size", "from 10 to 90", f"'{size}'"
    )


@pytest.mark.parametrize("command", ["solve", "prompt"])
def test_arena_sizes_at_both_ends_work(capsys, command):
    for size in (10, 90):
        code, out, _ = run(["arena", command, "--seed", 3, "--size", size], capsys)
        assert code == 0 and out


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["arena", "solve", "--seed", -1], "--seed"),
        (["arena", "prompt", "--seed", -1], "--seed"),
        (["arena", "prompt", "--seed", 1, "--permutation", -2], "--permutation"),
        (["spectrum", "baselines", "--variant", "rft", "--episodes", 2, "--seed", -1], "--seed"),
    ],
)
def test_negative_seeds_name_the_flag(capsys, argv, flag):
    refused_option(argv, capsys, flag, "non-negative", "'-")


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["spectrum", "baselines", "--variant", "rft", "--episodes", 10**12], "--episodes"),
        (["spectrum", "baselines", "--variant", "rft", "--episodes", 0], "--episodes"),
        (["spectrum", "baselines", "--variant", "rft", "--episodes", -3], "--episodes"),
        (["spectrum", "baselines", "--variant", "bench", "--runs", -1], "--runs"),
        (["spectrum", "baselines", "--variant", "bench", "--runs", 10**12], "--runs"),
        (["spectrum", "bench90", "--policy", "oracle", "--runs", 0], "--runs"),
        (["spectrum", "bench90", "--policy", "oracle", "--runs", 10**12], "--runs"),
        (["spectrum", "dataset", "--n", 10**12, "--out", "x.jsonl"], "--n"),
        (["spectrum", "dataset", "--n", 0, "--out", "x.jsonl"], "--n"),
        (["spectrum", "dataset", "--n", -7, "--out", "x.jsonl"], "--n"),
    ],
)
def test_absurd_counts_are_refused_at_once(capsys, work, monkeypatch, argv, flag):
    monkeypatch.chdir(work)
    started = time.perf_counter()
    refused_option(argv, capsys, flag, "must be an integer from 1 to", f"got '{argv[argv.index(flag) + 1]}'")
    assert time.perf_counter() - started < 5
    assert sorted(p.name for p in work.iterdir()) == ["afile"]


def test_dataset_at_the_bound_is_streamed_and_a_full_disk_is_refused(capsys, work, monkeypatch):
    import shutil

    from rftlab.cli import spectrum as spectrum_cli

    out = work / "rows.jsonl"
    code, _, err = run(["spectrum", "dataset", "--n", 2500, "--out", out], capsys)
    assert code == 0 and "wrote 2500 rows (sc1_0 .. sc1_2499)" in err
    lines = out.read_bytes().splitlines()
    assert len(lines) == 2500 and json.loads(lines[-1])["input_metadata"]["row_id"] == "sc1_2499"
    # With 1 MB free, a 1,000,000-row dataset (about 2 GB) is refused before writing.
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10**6, 10**6))
    code, _, err = run(
        ["spectrum", "dataset", "--n", spectrum_cli.MAX_DATASET_ROWS, "--out", work / "big"], capsys
    )
    assert_one_line_error(code, err, "--n 1000000", "MB free")
    assert not (work / "big").exists()


# -- output paths --------------------------------------------------------------------------------------
OUT_CASES = [
    (lambda d: d, "is a folder"),
    (lambda d: d / "afile" / "x.jsonl", "is a file, not a folder"),
    (lambda d: "", "is empty"),
    (lambda d: "/proc/version", "folder /proc does not accept new files"),
    (lambda d: d / "missing" / "x.jsonl", "does not exist"),
    (lambda d: "/dev/null", "not a regular file"),
]


@pytest.mark.parametrize(("make", "message"), OUT_CASES)
@pytest.mark.parametrize("command", [["spectrum", "corpus"], ["spectrum", "dataset", "--n", "3"]])
def test_bad_out_paths(capsys, work, command, make, message):
    code, out, err = run([*command, "--out", make(work)], capsys)
    assert_one_line_error(code, err, "--out", message)
    assert sorted(p.name for p in work.iterdir()) == ["afile"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write in a read-only folder")
def test_out_in_a_read_only_folder(capsys, work):
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = run(["spectrum", "corpus", "--out", ro / "c.jsonl"], capsys)
        assert_one_line_error(code, err, "--out", "cannot write in folder")
    finally:
        ro.chmod(0o755)


def test_out_on_a_read_only_file_system(capsys, tmp_path):
    if os.access("/sys", os.W_OK) and not _read_only_fs("/sys"):
        pytest.skip("/sys is writable here")
    code, _, err = run(["spectrum", "corpus", "--out", "/sys/rftlab-corpus.jsonl"], capsys)
    assert_one_line_error(code, err, "--out /sys/rftlab-corpus.jsonl", "cannot write in folder /sys")


def _read_only_fs(path):
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def test_metadata_is_validated_before_the_corpus_is_written(capsys, work):
    out = work / "c.jsonl"
    code, _, err = run(["spectrum", "corpus", "--out", out, "--metadata", work / "nodir" / "m.json"], capsys)
    assert_one_line_error(code, err, "--metadata", "nodir")
    assert "--out" not in err and not out.exists()
    code, _, err = run(["spectrum", "corpus", "--out", out, "--metadata", out], capsys)
    assert_one_line_error(code, err, "same file")
    code, _, err = run(["spectrum", "corpus", "--out", out, "--metadata", work / "m.json"], capsys)
    assert code == 0 and out.stat().st_size > 100_000 and json.loads((work / "m.json").read_text())


def test_a_users_tmp_file_next_to_the_output_is_untouched(capsys, work):
    mine = work / "c.jsonl.tmp"
    mine.write_text("precious\n")
    for argv in (["spectrum", "corpus"], ["spectrum", "dataset", "--n", "2"]):
        code, _, _ = run([*argv, "--out", work / "c.jsonl"], capsys)
        assert code == 0
    assert mine.read_text() == "precious\n"
    assert sorted(p.name for p in work.iterdir()) == ["afile", "c.jsonl", "c.jsonl.tmp"]


def test_an_existing_output_is_replaced_whole(capsys, work):
    out = work / "rows.jsonl"
    out.write_text("old content that is longer than nothing\n" * 1000)
    code, _, _ = run(["spectrum", "dataset", "--n", 2, "--out", out], capsys)
    assert code == 0 and len(out.read_bytes().splitlines()) == 2


# -- the safety net in main() -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "fragments"),
    [
        (PermissionError(13, "Permission denied", "/data/in.jsonl"), ["/data/in.jsonl", "Permission denied"]),
        (IsADirectoryError(21, "Is a directory", "/data"), ["/data", "Is a directory"]),
        (UnicodeDecodeError("utf-8", b"ab\xff", 2, 3, "invalid start byte"), ["not UTF-8", "byte 3"]),
        (RecursionError("deep"), ["nested too deeply"]),
    ],
)
def test_main_turns_file_errors_into_one_line(capsys, monkeypatch, exc, fragments):
    from rftlab.cli import runs as runs_cli

    def boom(args):
        raise exc

    monkeypatch.setattr(runs_cli, "_list", boom)
    code, _, err = run(["runs", "list"], capsys)
    assert_one_line_error(code, err, *fragments)


# -- no NaN or Infinity in --json -------------------------------------------------------------------------
def _strict(text):
    def refuse(name):
        raise AssertionError(f"--json output holds {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "argv",
    [
        ["spectrum", "baselines", "--variant", "rft", "--episodes", "3", "--json"],
        ["spectrum", "baselines", "--variant", "bench", "--runs", "1", "--json"],
        ["spectrum", "bench90", "--policy", "oracle", "--json"],
        ["spectrum", "bench90", "--policy", "rft:oracle", "--no-baseline", "--json"],
        ["arena", "baselines", "--json"],
        ["arena", "solve", "--seed", "5", "--json"],
    ],
)
def test_json_outputs_are_strict_json(capsys, argv):
    code, out, _ = run(argv, capsys)
    assert code == 0
    _strict(out)


def test_print_json_turns_non_finite_numbers_into_null(capsys):
    print_json({"a": float("nan"), "b": [float("inf"), -math.inf, 1.5], "c": (1, None)})
    assert _strict(capsys.readouterr().out) == {"a": None, "b": [None, None, 1.5], "c": [1, None]}
    assert json_ready(float("nan")) is None


def test_a_real_process_prints_one_line_and_no_traceback(work):
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"

    def rftlab(*argv):
        return subprocess.run(
            [sys.executable, "-m", "rftlab.cli", *argv],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(src)},
            timeout=60,
            check=False,
        )

    for argv in (
        ["spectrum", "dataset", "--n", "3", "--out", str(work)],
        ["runs", "list", "--root", str(work / "nope")],
    ):
        proc = rftlab(*argv)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith("rftlab: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    # a value outside its option's range: argparse's usage line and one error line naming the option
    proc = rftlab("arena", "solve", "--seed", "1", "--size", "91")
    assert_refused(proc.returncode, proc.stdout, proc.stderr, "--size", "from 10 to 90", "got '91'")


# -- issue 24 class 9: GS1 advantages, arena build-sft, eval-entry settings -----------------------------
def _batch(tmp_path, rows) -> str:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(rows))
    return str(path)


ROW = {"prompt_id": "p0", "reward": 1.0, "phi": [0.0, 0.1], "step": 0}


@pytest.mark.parametrize(
    ("rows", "fragment"),
    [
        ([{**ROW, "reward": 10**400}], "row 0: reward must be a finite number"),
        ([{**ROW, "phi": [10**400, 0]}], "row 0: phi must be a list of two finite numbers"),
        ([{**ROW, "step": 10**400}], "row 0: step must be an integer from 0"),
        ([{**ROW, "reward": 1e300}], "magnitude"),
    ],
)
def test_gs1_advantages_refuse_numbers_that_overflow(tmp_path, capsys, rows, fragment):
    code, out, err = run(
        ["gs1", "advantages", "--input", _batch(tmp_path, rows), "--estimator", "kernel_baseline"], capsys
    )
    assert_one_line_error(code, err, fragment)


@pytest.mark.parametrize("flag", [["--bandwidth", "inf"], ["--bandwidth", "nan"], ["--bandwidth", "-1"],
                                  ["--bandwidth", "0"], ["--bandwidth", "1e7"], ["--window", "0"],
                                  ["--window", "10000000"]])  # fmt: skip
def test_gs1_advantages_refuse_bad_bandwidth_and_window(tmp_path, capsys, flag):
    argv = ["gs1", "advantages", "--input", _batch(tmp_path, [ROW]), "--estimator", "kernel_baseline", *flag]
    bound = "in (0, 1e+06]" if flag[0] == "--bandwidth" else "from 1 to 1000000"
    refused_option(argv, capsys, flag[0], bound, f"got '{flag[1]}'")


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NUMBER = st.one_of(
    st.integers(-(10**450), 10**450),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=3),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "prompt_id": st.sampled_from(["a", "b", 3]),
                "reward": NUMBER,
                "phi": st.lists(NUMBER, min_size=2, max_size=2),
                "step": st.integers(0, 3),
            }  # fmt: skip
        ),
        min_size=1,
        max_size=6,
    ),
    estimator=st.sampled_from(["group_mean", "kernel_baseline"]),
    bandwidth=st.floats(1e-6, 1e6),
)
def test_gs1_advantages_json_is_strict_json_or_one_line(tmp_path, capsys, rows, estimator, bandwidth):
    argv = ["gs1", "advantages", "--input", _batch(tmp_path, rows), "--estimator", estimator,
            "--bandwidth", repr(bandwidth), "--json"]  # fmt: skip
    code, out, err = run(argv, capsys)
    if code == 0:

        def refuse(name):
            raise AssertionError(f"non-JSON constant {name} in --json output")

        payload = json.loads(out, parse_constant=refuse)
        assert len(payload["rows"]) == len(rows)
    else:
        assert_one_line_error(code, err)


def test_arena_build_sft_has_upper_bounds(tmp_path, capsys):
    for flag in ("--num-seeds", "--mechanics-per-kind", "--silence-examples"):
        argv = ["arena", "build-sft", "--out", tmp_path / "x", flag, 10**9]
        refused_option(argv, capsys, flag, "from 0 to 100000", "got '1000000000'")
    assert not (tmp_path / "x").exists()


@settings(max_examples=80, deadline=None)
@given(
    # any text an environment variable can hold (no NUL byte, no lone surrogate: os.environ refuses both
    # before rftlab sees them)
    raw=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
    | st.integers(-(10**12), 10**12).map(str)
)
def test_spectrum_rows_setting_is_bounded(raw):
    from rftlab.rollout.eval_entries import settings as ep_settings

    old = os.environ.get("RFTLAB_SPECTRUM_ROWS")
    os.environ["RFTLAB_SPECTRUM_ROWS"] = raw
    try:
        try:
            n = ep_settings.arm("echo")["n"]
        except ValueError as exc:
            assert "RFTLAB_SPECTRUM_ROWS must be an integer from 1 to 100000" in str(exc)
            return
        assert (raw == "" and n == 48) or 1 <= n <= 100_000
    finally:
        if old is None:
            os.environ.pop("RFTLAB_SPECTRUM_ROWS", None)
        else:
            os.environ["RFTLAB_SPECTRUM_ROWS"] = old


# -- issue 24 class 3: writers fail naming the file and keep the old one -------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["poker", "dataset", "--n", "400", "--hands", "4", "--out", "{out}"],
        ["spectrum", "corpus", "--out", "{out}"],
    ],
)
def test_a_write_that_hits_the_file_size_limit_names_the_file_and_keeps_the_old_one(tmp_path, argv):
    import resource
    import signal
    import subprocess
    import sys

    out = tmp_path / "out.jsonl"
    out.write_text('{"old": true}\n')

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal, as under a quota
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = subprocess.run(
        [sys.executable, "-m", "rftlab.cli", *[a.format(out=out) for a in argv]],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"rftlab: error: {out}: File too large") and done.stderr.count("\n") == 1
    assert out.read_text() == '{"old": true}\n'
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".rftlab-tmp")]


def test_poker_dataset_out_paths_are_checked_first(work, capsys):
    for target, fragment in ((work, "is a folder"), (work / "missing" / "x.jsonl", "does not exist"),
                             ("/proc/version", "does not accept new files")):  # fmt: skip
        code, out, err = run(["poker", "dataset", "--n", 2, "--out", target], capsys)
        assert_one_line_error(code, err, "--out", fragment)


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("http://user:sk-0123456789@127.0.0.1:9/v1", "password in its user-info"),
        ("http://127.0.0.1:9/v1?api_key=abc", "query parameter 'api_key'"),
        ("http://127.0.0.1:9/v1/{key}", "$ARENA_TEST_KEY"),
    ],
)
def test_arena_eval_refuses_a_base_url_carrying_a_credential(work, capsys, monkeypatch, url, fragment):
    key = "arena-key-0123456789"
    monkeypatch.setenv("ARENA_TEST_KEY", key)
    argv = ["arena", "eval", "--provider", "endpoint", "--model", "m", "--base-url", url.format(key=key),
            "--output-dir", work / "eval"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert_one_line_error(code, err, "--base-url", fragment)
    assert key not in err and "sk-0123456789" not in err and not (work / "eval").exists()


def test_endpoint_check_refuses_a_base_url_carrying_a_credential(capsys):
    code, out, err = run(
        ["endpoint", "check", "--base-url", "http://me:pw-0123456789@127.0.0.1:9/v1", "--model", "m"], capsys
    )
    assert_one_line_error(code, err, "--base-url", "password in its user-info")
    assert "pw-0123456789" not in err
