"""The GS1 study's ``tinker`` backend run end to end through the real tinker SDK against ``rftlab serve
tinker`` (``TINKER_BASE_URL``), offline: the same code path a paid run takes. The served model is a small
warm-started base (a local Hugging Face directory built once for this module, ~30 s), so rewards are not
constant and the loop trains. Every result is compared with the same study on the in-process backend.

Fakes (``test_gs1_fakes``) remain only for what this server cannot produce: a service that lists no
matching model *and* records every call for the datum-layout assertions of ``test_gs1_loop``, and the
scripted sampler whose answers make group rewards non-constant at any size.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from rftlab.launch.gs1.backend import LOCAL_RENDERER, LOCAL_SIZES, GS1Backend, make_gs1_backend
from rftlab.runs.store import RunStore
from rftlab.studies.gs1 import DEFAULT_SPEC, decide, load_spec, run_study, study_pilot, study_preflight
from rftlab.training.gs1.rl_loop import ModelNotServedError, run_arm
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.server import ServeConfig, ServerThread
from rftlab.training.local_tinker.service import Log
from rftlab.training.sessions import finish_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A warm-started tiny base (reward ~0.2, not the study's 0.35 target: enough for non-constant groups)."""
    from rftlab.training.gs1.warm_start import WarmStartConfig, prepare_base_model

    config = WarmStartConfig(
        target_reward=0.15, eval_every=10, eval_problems=64, batch_size=32, learning_rate=5e-3
    )
    ws = prepare_base_model(tmp_path_factory.mktemp("base") / "ws", config)
    assert ws.reached_target
    return ws.path


@pytest.fixture(scope="module")
def server(tmp_path_factory, base_dir):
    config = ServeConfig(
        port=0,
        storage=tmp_path_factory.mktemp("service"),
        model_dirs=[base_dir],
        log_level="warning",
        api_keys=["tml-gs1-service-tests"],
    )
    with ServerThread(config) as srv:
        yield srv


_OPENED: list = []  # the SDK clients a test opened, finished after it (no session outlives its test)


@pytest.fixture
def tinker_env(server, monkeypatch):
    monkeypatch.setenv("TINKER_BASE_URL", server.base_url)
    monkeypatch.setenv("TINKER_API_KEY", "tml-gs1-service-tests")
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    yield
    while _OPENED:
        finish_session(_OPENED.pop())


def _backends(base_dir, tmp_path):
    """The study's ``tinker`` backend (real SDK, ``TINKER_BASE_URL``) at quick size on the served base, and
    the same arms, task and renderer on the in-process backend."""
    spec = load_spec(DEFAULT_SPEC)
    overrides = {"base_model": base_dir, "renderer_name": LOCAL_RENDERER, "task": "local_math", **LOCAL_SIZES}
    remote = make_gs1_backend("tinker", spec, root=tmp_path / "runs_tinker", quick=True, overrides=overrides)
    _OPENED.append(remote.service_client)
    # The study sends no sampling seed to a tinker service (group members must be independent whatever the
    # hosted service does with seeds); here both transports are seeded alike so they can be compared
    # number for number.
    remote = replace(remote, send_seeds=True)
    service = LocalServiceClient(storage_dir=tmp_path / "local_checkpoints", model_dirs=[base_dir])
    local = GS1Backend("local", service, remote.renderer, remote.task, dict(remote.arms))
    return spec, remote, local


@pytest.mark.slow
def test_the_quick_study_through_the_sdk_matches_the_in_process_backend(tinker_env, base_dir, tmp_path):
    spec, remote, local = _backends(base_dir, tmp_path)
    assert type(remote.service_client).__module__.startswith("tinker")  # the real SDK client
    assert remote.arms["grpo_gs8"].base_model == base_dir and remote.task.name == "local_math"
    out = {}
    for name, backend in (("tinker", remote), ("local", local)):
        store = RunStore(tmp_path / f"runs_{name}")
        pre, _ = study_preflight(backend, spec, store)
        pilot = study_pilot(backend, spec, store)
        runs = {arm: run_arm(cfg, backend.service_client, backend.renderer, backend.task, store, name)
                for arm, cfg in backend.arms.items()}  # fmt: skip
        decision = decide(
            spec, runs["gs1_kernel"].run.path / "eval.jsonl", runs["grpo_gs8"].run.path / "eval.jsonl"
        )
        out[name] = (pre, pilot, runs, decision)
    pre_t, pilot_t, runs_t, dec_t = out["tinker"]
    pre_l, pilot_l, runs_l, dec_l = out["local"]
    # the preflight: the same verdict and the same numbers in every check, except what needs the model's
    # internals: the service exposes no gradients (check (c) is not run through the SDK; a local preflight
    # completes it, see complete_with_reference) and no weights (the restoration check says so)
    assert [c["id"] for c in pre_t["checks"]] == [c["id"] for c in pre_l["checks"]]
    for ct, cl in zip(pre_t["checks"], pre_l["checks"], strict=True):
        if ct["id"] == "loss_and_gradient":
            assert ct["status"] == "not_run" and "does not expose gradients" in ct["detail"]
            assert cl["status"] == "passed"
            continue
        assert ct["status"] == cl["status"], ct["id"]
        if ct["id"] != "restoration":
            assert ct["detail"] == cl["detail"], ct["id"]
    restoration = {c["id"]: c["detail"] for c in pre_t["checks"]}["restoration"]
    assert "weights not exposed by the backend" in restoration and "max |diff| 0" in restoration
    # the pilot gate's metrics, the arms' training curves and their evaluations: the same numbers
    # (prompt logprobs, the GS1 features, are batched differently by the two backends: equal to float32
    # rounding, so what depends on them is compared to 1e-4; rewards, tokens and GRPO's arm exactly)
    for h, metrics in pilot_l["metrics_by_bandwidth"].items():
        assert pilot_t["metrics_by_bandwidth"][h] == pytest.approx(metrics, rel=1e-4, abs=1e-6), h
    for arm in ("grpo_gs8", "gs1_kernel"):
        mt, ml = runs_t[arm].run.metrics(), runs_l[arm].run.metrics()
        assert [m["step"] for m in mt] == list(range(remote.arms[arm].steps))
        assert any(m["n_datums"] > 0 for m in mt)  # the loop did train through forward_backward/optim_step
        for a, b in zip(mt, ml, strict=True):
            assert a["reward_mean"] == b["reward_mean"] and a["n_datums"] == b["n_datums"]
            assert a["state_path"].startswith("tinker://") and ":train:" in a["state_path"]
            if a["loss_sum"] is not None:
                assert a["loss_sum"] == pytest.approx(b["loss_sum"], rel=1e-4, abs=1e-5)
                assert a["optim_grad_norm_mean"] == pytest.approx(b["optim_grad_norm_mean"], rel=1e-4)
        et = [json.loads(x) for x in (runs_t[arm].run.path / "eval.jsonl").read_text().splitlines()]
        el = [json.loads(x) for x in (runs_l[arm].run.path / "eval.jsonl").read_text().splitlines()]
        same = sum(a["response"] == b["response"] for a, b in zip(et, el, strict=True))
        if arm == "grpo_gs8":
            assert same == len(el)
        else:
            assert same >= 0.9 * len(el), f"{same}/{len(el)} identical greedy answers"
    assert dec_t.rule == dec_l.rule and dec_t.n == dec_l.n == remote.arms["gs1_kernel"].n_eval


def test_run_study_on_the_service_stops_where_a_paid_run_would(tinker_env, base_dir, tmp_path):
    """Without a passed local preflight of the same committed code, the tinker backend starts no arm."""
    spec, remote, _ = _backends(base_dir, tmp_path)
    summary = run_study(remote, spec, tmp_path / "runs_tinker")
    assert "no full run starts" in summary.stopped and not summary.runs
    arms = {r.record.arm for r in RunStore(tmp_path / "runs_tinker").runs()}
    assert arms == {"preflight"}


def test_a_model_the_service_does_not_serve_stops_the_study_before_anything_runs(
    tinker_env, base_dir, tmp_path
):
    spec, remote, _ = _backends(base_dir, tmp_path)
    remote.arms = {k: replace(v, base_model="Qwen/Qwen3.5-2B") for k, v in remote.arms.items()}
    with pytest.raises(ModelNotServedError, match="Qwen/Qwen3.5-2B is not served by this backend"):
        run_study(remote, spec, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


# A GS1 arm run in its own process through the SDK (the config as JSON in argv), so the test can kill it.
ARM_CLIENT = r"""
import json, sys, tinker
from tinker_cookbook import renderers
from tinker_cookbook.tokenizer_utils import get_tokenizer
from rftlab.envs.gs1.task import local_task
from rftlab.runs.store import RunStore
from rftlab.training.gs1.rl_loop import GS1ArmConfig, run_arm
url, root, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cfg = GS1ArmConfig(**{**config, "heldout_steps": tuple(config["heldout_steps"])})
renderer = renderers.get_renderer(cfg.renderer_name, get_tokenizer(cfg.base_model))
sc = tinker.ServiceClient(base_url=url, api_key="tml-gs1-service-tests")
run_arm(cfg, sc, renderer, local_task(cfg.n_train), RunStore(root), "tinker", evaluate_after=False)
"""


@pytest.mark.slow
def test_a_gs1_arm_resumes_through_a_restarted_server_to_the_uninterrupted_weights(
    tinker_env, base_dir, tmp_path
):
    import subprocess
    import sys
    import time

    import torch

    from rftlab.training.local_tinker.checkpoints import CheckpointStore
    from rftlab.training.local_tinker.server import ServerProcess

    _, remote, _ = _backends(base_dir, tmp_path)  # the arm, task and renderer (the arm runs on the processes)
    cfg = replace(remote.arms["gs1_kernel"], steps=4)
    storage, root = tmp_path / "storage", tmp_path / "runs"
    server = ServerProcess(
        ["--storage", str(storage), "--model-dir", base_dir], api_key="tml-gs1-service-tests"
    ).start()
    client = subprocess.Popen(
        [sys.executable, "-c", ARM_CLIENT, server.base_url, str(root), json.dumps(cfg.to_dict())]
    )
    metrics = lambda: list(root.glob("gs1_vs_grpo/gs1_kernel/*/metrics.jsonl"))  # noqa: E731
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (metrics() and len(metrics()[0].read_text().splitlines()) >= 2):
        time.sleep(0.2)
    server.kill()  # mid-run, no shutdown; the client goes down with it
    client.kill()
    client.wait(30)
    logged = [json.loads(x) for x in metrics()[0].read_text().splitlines()]
    assert 2 <= len(logged) < cfg.steps
    log = Log(io.StringIO(), "info")  # a fresh server on the same storage (in this process: cheaper to start)
    config = ServeConfig(port=0, storage=storage, model_dirs=[base_dir], api_keys=["tml-gs1-service-tests"])
    with ServerThread(config, log) as again:
        import tinker

        sc = tinker.ServiceClient(base_url=again.base_url, api_key="tml-gs1-service-tests")
        resumed = run_arm(cfg, sc, remote.renderer, remote.task, RunStore(root), "tinker")
        sc.close("success").result()
    assert resumed.origin == "resumed" and [m["step"] for m in resumed.run.metrics()] == list(
        range(cfg.steps)
    )
    events = [json.loads(x) for x in log.stream.getvalue().splitlines()]
    restored = [
        e["from_checkpoint"] for e in events if e["event"] == "model_requested" and e.get("from_checkpoint")
    ]
    assert restored == [logged[-1]["state_path"]]
    # the same arm without an interruption, in process: the resumed run must reach its weights
    service = LocalServiceClient(storage_dir=tmp_path / "ref", model_dirs=[base_dir])
    ref = run_arm(cfg, service, remote.renderer, remote.task, RunStore(tmp_path / "ref_runs"), "local")
    got = CheckpointStore(storage).load(resumed.final_path)["lora"]
    want = service.checkpoints.load(ref.final_path)["lora"]
    assert all(torch.allclose(got[n], want[n], atol=1e-5) for n in want)
