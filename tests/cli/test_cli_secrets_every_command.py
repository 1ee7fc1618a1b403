"""Every ``rftlab`` subcommand, run with a nasty sentinel key in several credential variables, writes it
nowhere: not in any file it creates, not on stdout or stderr, in no serialised form (issue 9 §5).

Subcommands are discovered from the argparse parser, so commands other branches add later are found
automatically; one without an entry in ``INVOCATIONS`` FAILS, asking for a minimal valid invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from rftlab.cli import build_parser, main
from rftlab.launch.firectl import job_id_for, rollout_dataset_id
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.policies.server import PolicyServer
from rftlab.runs import RunStore
from rftlab.runs.secrets import secret_forms

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "data" / "specs"
# A quote, a backslash, a slash and non-ASCII characters: each escaping path (JSON, CSV, repr, URL) differs.
SENTINEL = 'rftlab-sentinel-"q\\b/é-λ-7c1e9a'
# The sentinel as an HTTP header can carry it (printable ASCII, still with a quote, a backslash, a slash).
ASCII_SENTINEL = 'rftlab-ascii-sentinel-"q\\b/-5d2f0b'
CREDENTIAL_VARS = (
    "FIREWORKS_API_KEY",
    "TINKER_API_KEY",
    "HF_TOKEN",
    "OPENAI_API_KEY",  # eval-protocol only needs it set; the sentinel is as good as "dummy"
    "WANDB_API_KEY",
    "ANTHROPIC_API_KEY",
)


def subcommands(parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()):
    """Every leaf command path of the parser, e.g. ``("runs", "list")``."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*prefix, name))
            return
    yield prefix


# -- inputs ----------------------------------------------------------------------------------------------
def _items(work: Path, name: str, flip: int) -> Path:
    path = work / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"item_id": f"q{i}", "correct": int((i + flip) % 4 != 0)}) + "\n" for i in range(60)
        )
    )
    return path


def _store(work: Path) -> Path:
    root = work / "runs"
    run = RunStore(root).create_run("spectrum", "A", {"arm": "A"}, run_id="r1")
    run.append_metrics([{"step": s, "reward": 0.1 * s} for s in range(4)])
    run.finish()
    return root


def _two_runs(work: Path) -> Path:
    root = work / "runs"
    for arm in ("A", "B"):
        run = RunStore(root).create_run("spectrum", arm, {"arm": arm}, run_id=f"r-{arm}")
        run.append_metrics([{"step": s, "epoch": s, "reward": 0.1 * s} for s in range(3)])
        run.finish()
    return root


def _sweep_file(work: Path) -> Path:
    path = work / "sweep.json"
    path.write_text(json.dumps({"seed": [0, 1]}))
    return path


def _metrics_file(work: Path) -> Path:
    path = work / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps({"step": s, "epoch": s, "reward": 0.3 + 0.02 * s}) + "\n" for s in range(8))
    )
    return path


def _gate_files(work: Path) -> list[str]:
    spec = work / "gate.json"
    spec.write_text(json.dumps({"checks": [{"metric": "m", "min": 0.5}]}))
    metrics = work / "gate_metrics.json"
    metrics.write_text(json.dumps({"m": 0.7}))
    return [str(spec), str(metrics)]


def _rule(work: Path) -> Path:
    path = work / "rule.json"
    rule = {
        "alpha": 0.05,
        "method": "paired_hoeffding",
        "criteria": [
            {"id": "main", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": -0.2}
        ],
    }
    path.write_text(json.dumps({"decision_rule": rule}))
    return path


def _plan_repo(work: Path, register: bool = False, change: bool = False) -> Path:
    """A git repository holding a committed plan file (registered, and then changed and committed, when
    asked); returns the plan file. Its records go to ``<repo>/registrations``."""
    import subprocess

    repo = work / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "test@example.org")
    git("config", "user.name", "Test")
    plan = repo / "plan.json"
    plan.write_text('{"arms": ["A", "B"]}\n')
    git("add", "plan.json")
    git("commit", "-q", "-m", "plan")
    if register:
        _quiet(["plan", "register", str(plan), "--registry", str(repo / "registrations")])
    if change:
        plan.write_text('{"arms": ["A", "B", "C"]}\n')
        git("commit", "-q", "-am", "arm C")
    return plan


class Env:
    """What an invocation builder may set up besides files: environment variables (undone after the
    test) and context managers such as a local server (closed after the test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stack: contextlib.ExitStack):
        self.setenv, self.enter = monkeypatch.setenv, stack.enter_context
        self.delenv = lambda name: monkeypatch.delenv(name, raising=False)


def _quiet(argv: list[str]) -> None:
    """Run ``rftlab argv`` to build an input (before the credentials are set), hiding its output."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0, argv


def _setenv(env: Env, name: str, value: str) -> str:
    env.setenv(name, value)
    return name


def _tracked_store(work: Path, env: Env) -> Path:
    """A one-run store, MLflow's SQLite store and W&B's offline files under ``work/out`` (W&B offline even
    though ``WANDB_API_KEY`` will be set: its cloud is not reachable from a test)."""
    _setenv(env, "MLFLOW_TRACKING_URI", f"sqlite:///{work / 'out' / 'mlflow.db'}")
    _setenv(env, "WANDB_DIR", str(work / "out"))
    _setenv(env, "WANDB_MODE", "offline")
    return _store(work)


def _sft_data(work: Path) -> Path:
    """The smallest SFT data directory that passes the audit and has enough steps for the handoff."""
    out = work / "sft"
    if not out.is_dir():
        _quiet(["arena", "build-sft", "--out", str(out), "--num-seeds", "64",
                "--mechanics-per-kind", "1", "--silence-examples", "1"])  # fmt: skip
    return out


def _oracle_eval(work: Path) -> Path:
    """A one-case oracle evaluation directory (``summary.json``, ``rows.jsonl``)."""
    out = work / "eval_oracle"
    if not out.is_dir():
        _quiet(["arena", "eval", "--provider", "oracle", "--output-dir", str(out), "--case-stride", "60"])
    return out


def _oracle_eval_copy(work: Path) -> Path:
    """A second evaluation folder (compare refuses the same folder as base and candidate)."""
    import shutil

    out = work / "eval_oracle_copy"
    if not out.is_dir():
        shutil.copytree(_oracle_eval(work), out)
    return out


def _arena_gate_spec(work: Path) -> Path:
    # The real spec's G1-G7 need a trained candidate; always-satisfiable checks on the paired comparison every
    # evaluation pair has keep the command's whole path (load, compare, evaluate, verdicts, --output) at exit 0.
    path = work / "arena_gates.json"
    spec = json.loads((SPECS / "arena_gates.json").read_text())
    spec["checks"] = [
        {"gate": "G5", "metric": "regret_difference_mean", "data": "paired", "rule": "value", "min": -10.0, "max": 10.0, "min_n": 1},
        {"gate": "G7", "metric": "generated_minus_dropped_ci_low", "data": "paired", "rule": "value", "min": -10.0, "min_n": 1},
    ]  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def _arena_sft_spec(work: Path) -> Path:
    """The Stage-1 lineage on the simulated learner at the smallest size (it stops at selection: exit 1)."""
    path = work / "arena_sft.json"
    spec = json.loads((SPECS / "arena_sft_simulated.json").read_text())
    spec["overfit"].update(rows=4, steps=60, batch_size=2)
    spec["train"].update(max_steps=4, batch_size=2, validation_every_steps=2, min_validation_measurements=2)
    spec["evaluation"].update(frozen_case_stride=60, test_rows=4)
    path.write_text(json.dumps(spec))
    return path


def _tiny_arm_spec(work: Path) -> Path:
    """``spectrum_probe`` at one epoch, four rows, two candidates (the local launch takes < 1 s)."""
    spec = json.loads((SPECS / "spectrum_probe.json").read_text())
    spec.update(epochs=1, rows=4, response_candidates=2, num_scans=2)
    path = work / "tiny_arm.json"
    path.write_text(json.dumps(spec))
    return path


def _launched_arm(work: Path) -> Path:
    spec = _tiny_arm_spec(work)
    _quiet(["arm", "launch", str(spec), "--root", str(work / "runs")])
    return spec


def _batch(work: Path) -> Path:
    path = work / "batch.json"
    rows = [{"prompt_id": f"p{i % 2}", "reward": float(i % 3 == 0), "phi": [0.1 * i, 0.2], "step": 0}
            for i in range(8)]  # fmt: skip
    path.write_text(json.dumps(rows))
    return path


def _fake_bin(work: Path, env: Env) -> Path:
    """``work/bin`` with the tests' fake ``firectl`` (tests/launch/fake_firectl.py) and a fake
    ``eval-protocol`` that succeeds, first on PATH. The fake firectl logs its argv (which no longer carries
    the key: it reads the private auth file rftlab writes for each call); that log is not rftlab's output,
    so it goes to /dev/null."""
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    scenario = work / "firectl_scenario"
    (scenario / "datasets").mkdir(parents=True, exist_ok=True)
    scripts = {
        "firectl": (REPO / "tests" / "launch" / "fake_firectl.py").read_text(),
        "eval-protocol": "import sys\nprint('evaluator uploaded:', ' '.join(sys.argv[1:3]))\n",
    }
    for name, source in scripts.items():
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\n{source}")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.setenv("FAKE_FIRECTL_DIR", str(scenario))
    env.setenv("FAKE_FIRECTL_LOG", os.devnull)
    env.delenv("RFTLAB_FIRECTL")
    return scenario


def _with_fake_bin(work: Path, env: Env, path: Path) -> Path:
    _fake_bin(work, env)
    return path


def _empty_store(work: Path) -> Path:
    (work / "empty-store").mkdir(exist_ok=True)
    return work / "empty-store"


_RECORDER: list = []  # the FireworksApiRecorder class of tests/conftest.py, set by the fixture below


@pytest.fixture(autouse=True)
def _fireworks_api_recorder_class(fireworks_api_class):
    _RECORDER[:] = [fireworks_api_class]


def _with_fireworks_api(env: Env, path: Path) -> Path:
    env.setenv("FIREWORKS_API_BASE", env.enter(_RECORDER[0](account="acct")).base_url)
    return path


def _fireworks_run(work: Path, env: Env) -> Path:
    """A Fireworks run folder launched (preflight, dataset, job) against the fake firectl under a placeholder
    key; the fake then reports the job COMPLETED after its one epoch, with that epoch's rollouts ready."""
    scenario = _fake_bin(work, env)
    spec_path = work / "probe_one_epoch.json"  # the probe's rows and candidates pass the preflight
    probe = json.loads((SPECS / "spectrum_probe.json").read_text())
    probe["fireworks"]["max_context_length"] = 32768  # holds a 12-scan episode (the context check)
    spec_path.write_text(json.dumps({**probe, "epochs": 1}))
    job_id = job_id_for(load_arm_spec(spec_path))
    # the evaluator check reads the evaluator through the fireworks-ai SDK: a loopback stub has it ACTIVE
    import importlib.util

    from rftlab.launch.fireworks import evaluator_id

    where = REPO / "tests" / "launch" / "fireworks_api_stub.py"
    module_spec = importlib.util.spec_from_file_location("fireworks_api_stub", where)
    stub_module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(stub_module)
    api = env.enter(stub_module.FireworksApiStub(account="acct"))
    api.states[evaluator_id(load_arm_spec(spec_path), "acct")] = "ACTIVE"
    env.setenv("FIREWORKS_BASE_URL", api.base_url)
    job = {"state": "JOB_STATE_COMPLETED", "jobProgress": {"epoch": 0, "percent": 100}}
    (scenario / "job_get.0.json").write_text(json.dumps(job))
    rows = [{"messages": [{"role": "system", "content": "x"}], "input_metadata": {"row_id": f"r{g}"},
             "evaluation_result": {"score": 0.1 * c}} for g in range(2) for c in range(2)]  # fmt: skip
    dataset = scenario / "datasets" / f"{rollout_dataset_id(job_id, 0)}.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env.setenv("FIREWORKS_API_KEY", "placeholder-key-for-the-launch")
    root = work / "runs"
    _quiet(["fireworks", "launch", str(spec_path), "--root", str(root), "--account-id", "acct"])
    (run_dir,) = [p.parent for p in root.rglob("run.json")]
    return run_dir


def _tinker_service(work: Path, env: Env) -> list[str]:
    """``serve tinker`` for a few seconds on a free loopback port, requiring a key that carries the
    sentinel; a client thread talks to it with that key and with a wrong one while it runs."""
    import socket
    import threading
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = f"tml-{ASCII_SENTINEL}"

    def client() -> None:
        url = f"http://127.0.0.1:{port}/api/v1"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=5) as http:
                    http.post("/create_session", json={"tags": [], "user_metadata": {}, "sdk_version": "t"})
                    http.get("/get_server_capabilities", headers={"X-API-Key": "tml-wrong"})
                return
            except httpx.TransportError:
                time.sleep(0.1)

    threading.Thread(target=client, daemon=True).start()
    return ["--port", str(port), "--storage", str(work / "out" / "storage"),
            "--api-key-env", _setenv(env, "RFTLAB_SERVE_KEY", key), "--stop-after", "4"]  # fmt: skip


def _fireworks_plane(work: Path, env: Env) -> list[str]:
    """``serve fireworks`` for a few seconds on a free loopback port, its key carrying the sentinel; a
    client thread verifies the key, registers a secret whose value is the sentinel, and sends a wrong key."""
    import socket
    import threading
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = f"fw_{ASCII_SENTINEL}"

    def client() -> None:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with httpx.Client(
                    base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=5
                ) as http:
                    account = http.get("/verifyApiKey").headers["x-fireworks-account-id"]
                    body = {"name": "held", "keyName": "HELD", "value": SENTINEL}
                    http.post(f"/v1/accounts/{account}/secrets", json=body)
                    http.get("/verifyApiKey", headers={"Authorization": "Bearer fw_wrong_key"})
                return
            except httpx.TransportError:
                time.sleep(0.1)

    threading.Thread(target=client, daemon=True).start()
    return ["--port", str(port), "--storage", str(work / "out" / "fw-storage"),
            "--api-key-env", _setenv(env, "RFTLAB_SERVE_FW_KEY", key), "--stop-after", "4"]  # fmt: skip


INVOCATIONS: dict[tuple[str, ...], Callable[[Path, Env], list[str]]] = {
    ("runs", "list"): lambda w, env: ["--root", str(_store(w)), "--json"],
    ("runs", "metrics"): lambda w, env: ["--root", str(_store(w)), "--json"],
    ("runs", "clean"): lambda w, env: ["--root", str(_store(w))],
    ("runs", "track"): lambda w, env: ["--root", str(_tracked_store(w, env)), "--to", "mlflow,wandb"],
    ("runs", "compare"): lambda w, env: [
        "A",
        "B",
        "--root",
        str(_two_runs(w)),
        "--json",
        "--figure",
        str(w / "out" / "compare.svg"),
    ],
    ("spectrum", "corpus"): lambda w, env: [
        "--out",
        str(w / "out" / "corpus.jsonl"),
        "--metadata",
        str(w / "out" / "m.json"),
    ],
    ("spectrum", "baselines"): lambda w, env: ["--variant", "rft", "--episodes", "2", "--json"],
    ("spectrum", "dataset"): lambda w, env: ["--n", "3", "--out", str(w / "out" / "rows.jsonl")],
    ("spectrum", "bench90"): lambda w, env: ["--policy", "oracle", "--no-baseline", "--json"],
    ("stats", "noninferiority"): lambda w, env: [
        "--treatment",
        str(_items(w, "t", 1)),
        "--baseline",
        str(_items(w, "b", 0)),
        "--margin",
        "0.1",
        "--json",
    ],
    ("stats", "trend"): lambda w, env: ["--metrics", str(_metrics_file(w)), "--metric", "reward", "--json"],
    ("stats", "decision-rule"): lambda w, env: [
        "--spec",
        str(_rule(w)),
        "--treatment",
        str(_items(w, "t", 1)),
        "--baseline",
        str(_items(w, "b", 0)),
        "--json",
    ],
    ("gates", "check"): lambda w, env: [*_gate_files(w), "--json"],
    ("arena", "baselines"): lambda w, env: ["--json", "--policy", "wait"],
    ("arena", "solve"): lambda w, env: ["--seed", "2", "--json"],
    ("arena", "prompt"): lambda w, env: ["--seed", "2"],
    ("arena", "build-sft"): lambda w, env: [
        "--out",
        str(w / "out" / "sft"),
        "--num-seeds",
        "2",
        "--mechanics-per-kind",
        "1",
        "--silence-examples",
        "1",
        "--json",
    ],
    ("arena", "audit"): lambda w, env: [str(_sft_data(w)), "--json"],
    ("arena", "manifest"): lambda w, env: ["--json"],
    ("arena", "eval"): lambda w, env: [
        "--provider",
        "oracle",
        "--output-dir",
        str(w / "out" / "eval"),
        "--case-stride",
        "60",
        "--validation-data",
        str(_sft_data(w)),
    ],
    ("arena", "gates"): lambda w, env: [
        "--base",
        str(_oracle_eval(w)),
        "--candidate",
        str(_oracle_eval_copy(w)),
        "--spec",
        str(_arena_gate_spec(w)),
        "--output",
        str(w / "out" / "gates.json"),
        "--json",
    ],
    ("arena", "compare"): lambda w, env: [
        "--base",
        str(_oracle_eval(w)),
        "--candidate",
        str(_oracle_eval_copy(w)),
        "--output",
        str(w / "out" / "compare.json"),
        "--json",
    ],
    ("arena", "sft-run"): lambda w, env: [
        str(_arena_sft_spec(w)),
        "--backend",
        "simulated",
        "--data",
        str(_sft_data(w)),
        "--root",
        str(w / "out" / "runs"),
        "--json",
    ],
    ("arena", "handoff"): lambda w, env: [
        "--data",
        str(_sft_data(w)),
        "--out",
        str(w / "out" / "GPU_HANDOFF.md"),
        "--oracle-eval",
        str(_oracle_eval(w)),
    ],
    # Trains the tiny local Qwen3 for one step on one row (~4 s); see EXPECTED_EXIT and OFFLINE_WITHOUT.
    ("arena", "sft-smoke"): lambda w, env: [
        "--data",
        str(_sft_data(w)),
        "--rows",
        "1",
        "--steps",
        "1",
        "--batch-size",
        "1",
        "--max-tokens",
        "1",
        "--work-dir",
        str(w / "out" / "smoke"),
        "--output",
        str(w / "out" / "smoke.json"),
    ],
    ("spectrum", "preflight"): lambda w, env: [str(SPECS / "spectrum_probe.json"), "--json"],
    # The project's own policy server on 127.0.0.1 (started before the credentials are set), requiring
    # the key. An HTTP header carries only ASCII, so the key sent is ASCII_SENTINEL, from its own variable.
    ("endpoint", "check"): lambda w, env: [
        "--base-url",
        env.enter(PolicyServer(api_key=ASCII_SENTINEL)).base_url,
        "--model",
        "accumulate",
        "--api-key-env",
        _setenv(env, "RFTLAB_ENDPOINT_KEY", ASCII_SENTINEL),
        "--timeout",
        "10",
        "--json",
    ],
    ("arm", "launch"): lambda w, env: [str(_tiny_arm_spec(w)), "--root", str(w / "runs"), "--json"],
    ("arm", "status"): lambda w, env: [str(_launched_arm(w)), "--root", str(w / "runs"), "--json"],
    ("arm", "sweep"): lambda w, env: [
        str(_tiny_arm_spec(w)),
        str(_sweep_file(w)),
        "--root",
        str(w / "runs"),
        "--json",
    ],
    ("gs1", "advantages"): lambda w, env: [
        "--input",
        str(_batch(w)),
        "--estimator",
        "kernel_baseline",
        "--json",
    ],
    ("gs1", "design"): lambda w, env: [str(SPECS / "gs1_vs_grpo.json"), "--discordance", "0.2", "--json"],
    # --backend local: with TINKER_API_KEY set (the sentinel) the default would be the paid Tinker service.
    ("gs1", "preflight"): lambda w, env: [
        "--backend",
        "local",
        "--quick",
        "--root",
        str(w / "runs"),
        "--out",
        str(w / "out" / "preflight.json"),
        "--json",
    ],
    ("gs1", "run"): lambda w, env: [
        "--backend",
        "local",
        "--quick",
        "--root",
        str(w / "runs"),
        "--arm",
        "grpo_gs8",
        "--json",
    ],
    ("gs1", "decide"): lambda w, env: [
        "--treatment",
        str(_items(w, "t", 1)),
        "--baseline",
        str(_items(w, "b", 0)),
        "--json",
    ],
    ("fireworks", "launch"): lambda w, env: [
        str(SPECS / "spectrum_probe.json"),
        "--dry-run",
        "--account-id",
        "acct",
        "--root",
        str(w / "runs"),
    ],
    # The real eval-protocol upload, against the loopback Fireworks API recorder (tests/conftest.py): it
    # refuses the evaluator with 403, so the command fails (exit 2) after printing eval-protocol's output.
    ("fireworks", "upload-evaluator"): lambda w, env: [
        str(_with_fireworks_api(env, SPECS / "spectrum_probe.json")),
        "--account-id",
        "acct",
    ],
    ("fireworks", "poll"): lambda w, env: [str(_fireworks_run(w, env)), "--every", "5", "--json"],
    ("poker", "play"): lambda w, env: ["--policy", "call", "--schedule", "quick_test", "--json"],
    ("poker", "dataset"): lambda w, env: [
        "--n",
        "2",
        "--hands",
        "1",
        "--out",
        str(w / "out" / "poker.jsonl"),
    ],
    # Nothing to show in an empty store: refused before any viewer starts (the viewer itself is tested in
    # test_view_browser.py).
    ("view",): lambda w, env: [str(_empty_store(w))],
    ("plan", "register"): lambda w, env: [
        str(_plan_repo(w)),
        "--registry",
        str(w / "repo" / "registrations"),
    ],
    ("plan", "amend"): lambda w, env: [
        str(_plan_repo(w, register=True, change=True)),
        "--from",
        "1",
        "--registry",
        str(w / "repo" / "registrations"),
    ],
    ("plan", "check"): lambda w, env: [
        str(_plan_repo(w, register=True)),
        "--registry",
        str(w / "repo" / "registrations"),
        "--json",
    ],
    ("poker", "launch"): lambda w, env: [
        str(SPECS / "poker_seed.json"),
        "--dry-run",
        "--account-id",
        "acct",
        "--root",
        str(w / "runs"),
        "--json",
    ],
    # A live Tinker-compatible server on 127.0.0.1 for a few seconds (--stop-after), its key set.
    ("serve", "tinker"): _tinker_service,
    # A live Fireworks-compatible control plane on 127.0.0.1 for a few seconds, its key set.
    ("serve", "fireworks"): _fireworks_plane,
}

# Commands whose exit code is a verdict of what they ran, which their smallest offline run cannot pass:
# they still run to the end and write every file, which is what this test greps.
EXPECTED_EXIT: dict[tuple[str, ...], int] = {
    # One step on one row cannot make the tiny model reproduce it ("passed": false, exit 1); even 40
    # steps at a high learning rate do not (32 s), so the smallest run stands.
    ("arena", "sft-smoke"): 1,
    # The simulated lineage at this size cannot reach the selection's minimum n: it stops at step 4 (exit 1)
    # after writing every stage's files.
    ("arena", "sft-run"): 1,
    # The recorder refuses the evaluator (403): eval-protocol's failure is reported, exit 2.
    ("fireworks", "upload-evaluator"): 2,
    # Without the track extra (mlflow, wandb) the command says so in one line, exit 2.
    ("runs", "track"): 0 if importlib.util.find_spec("mlflow") and importlib.util.find_spec("wandb") else 2,
    ("view",): 2,
}

# Credential variables left unset for one command, with the reason: their mere presence selects a paid
# service that the command has no flag to refuse. Every other variable still carries the sentinel.
OFFLINE_WITHOUT: dict[tuple[str, ...], tuple[str, ...]] = {
    # sft-smoke trains on Tinker whenever TINKER_API_KEY is set (no --backend flag); unset, it trains the
    # tiny local model in-process.
    ("arena", "sft-smoke"): ("TINKER_API_KEY",),
}

ALL_FORMS = sorted(secret_forms(SENTINEL) | secret_forms(ASCII_SENTINEL), key=len)


def leaks(data: bytes) -> list[bytes]:
    """The serialised forms of the sentinel found in ``data`` (raw, JSON-escaped, CSV, repr, URL...)."""
    return [form for form in ALL_FORMS if form in data]


def test_the_leak_detector_can_fail(tmp_path):
    """The grep below would catch the sentinel written raw, JSON-escaped or by pandas."""
    import pandas as pd

    assert leaks(SENTINEL.encode())
    assert leaks(json.dumps({"k": SENTINEL}).encode())
    assert leaks(json.dumps({"k": SENTINEL}, ensure_ascii=False).encode())
    assert leaks(pd.DataFrame([{"k": SENTINEL}]).to_json().encode())
    assert leaks(pd.DataFrame([{"k": SENTINEL}]).to_csv().encode())
    assert leaks(json.dumps({"k": ASCII_SENTINEL}).encode())
    assert not leaks(b"rftlab-sentinel")


def test_the_table_covers_every_command_of_this_tree():
    """Every subcommand of the parser has an invocation, and every invocation names a subcommand."""
    commands = set(subcommands())
    missing = sorted(" ".join(c) for c in commands - set(INVOCATIONS))
    assert not missing, f"add an entry to INVOCATIONS of {Path(__file__).name} for: {', '.join(missing)}"
    assert set(INVOCATIONS) <= commands, sorted(set(INVOCATIONS) - commands)
    assert set(EXPECTED_EXIT) | set(OFFLINE_WITHOUT) <= set(INVOCATIONS)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(subcommands()), ids=lambda c: "-".join(c))
def test_no_credential_reaches_any_output(command, tmp_path, monkeypatch, capsys):
    if command not in INVOCATIONS:
        pytest.fail(
            f"`rftlab {' '.join(command)}` has no entry in INVOCATIONS of {Path(__file__).name}: add a "
            "minimal valid invocation (cheap, offline) so its outputs are checked for credentials"
        )
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "tmp").mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(work / "tmp"))
    with contextlib.ExitStack() as stack:
        # inputs (and any local server) are set up before the credentials appear
        args = INVOCATIONS[command](work, Env(monkeypatch, stack))
        for name in CREDENTIAL_VARS:
            if name in OFFLINE_WITHOUT.get(command, ()):
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, f"{SENTINEL}-{name}")
        before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
        capsys.readouterr()

        code = main([*command, *args])
        out, err = capsys.readouterr()
    assert code == EXPECTED_EXIT.get(command, 0), err

    written = [p for p in tmp_path.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns]
    found = {str(p): leaks(p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()}
    found["<stdout>"] = leaks(out.encode("utf-8", "surrogateescape"))
    found["<stderr>"] = leaks(err.encode("utf-8", "surrogateescape"))
    assert {where: forms for where, forms in found.items() if forms} == {}
    if command in {("spectrum", "corpus"), ("spectrum", "dataset")}:
        assert written, "the command was expected to write its --out file"
    if command == ("serve", "tinker"):  # it did serve requests carrying the key (and refused a wrong one)
        assert '"event":"session_created"' in err and '"status":401' in err, err
    if command == (
        "serve",
        "fireworks",
    ):  # it took the secret (and dropped its value) and refused a wrong key
        assert '"path":"/v1/accounts/local/secrets","status":200' in err and '"status":401' in err, err
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".rftlab-tmp")]


def test_a_run_store_write_of_the_sentinel_is_refused_by_every_variable(tmp_path, monkeypatch, capsys):
    """The positive case: the same key, put in a spec, is refused naming the variable and not the value."""
    for name in CREDENTIAL_VARS:
        monkeypatch.setenv(name, f"{SENTINEL}-{name}")
    from rftlab.runs import SecretLeakError

    for name in CREDENTIAL_VARS:
        with pytest.raises(SecretLeakError) as caught:
            RunStore(tmp_path / "runs").create_run("e", "a", {"note": f"{SENTINEL}-{name}"})
        assert f"${name}" in str(caught.value) and not leaks(str(caught.value).encode())
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and leaks(p.read_bytes())]
    assert os.environ["OPENAI_API_KEY"].startswith(SENTINEL)
