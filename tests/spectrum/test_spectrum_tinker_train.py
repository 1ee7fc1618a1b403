"""GRPO of a language model on the spectrum task through the Tinker API (``rftlab.training.spectrum.tinker_rl``,
``rftlab.launch.spectrum.tinker``): in process on the built-in ``rftlab/tiny-qwen3-agent``, and through the
unmodified ``tinker`` SDK against ``rftlab serve tinker``. The run schema is checked against the simulated
trainer's own output, zero-advantage groups against the records' rewards, a resume against an uninterrupted
run (weights bit for bit)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rftlab.envs.spectrum.rft import band_seed
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.launch.spectrum.tinker import TinkerLauncher, trainer_config
from rftlab.runs.store import RunStore, load_run
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.model import AGENT_MODEL, BUILTIN_MODELS
from rftlab.training.spectrum.tinker_rl import ContextTooLong, train_spectrum_tinker

TINY = {"rows": 2, "response_candidates": 3, "num_scans": 2, "epochs": 2, "learning_rate": 0.01}


def _spec(memory="echo", arm="tiny", **kw) -> SpectrumArmSpec:
    return SpectrumArmSpec(arm=arm, prompt="weak", memory=memory, **{**TINY, **kw})


def _config(spec, **kw):
    return trainer_config(spec, AGENT_MODEL, max_tokens=kw.pop("max_tokens", 12), lora_rank=4, **kw)


# ------------------------------------------------------------------ a service that answers some calls itself


CALL = '<tool_call>\n{{"name": "submit_report", "arguments": {args}}}\n</tool_call><|im_end|>'


def scripted(service_class, inner):
    """A service answering a third of the requests (by seed) with a valid ``submit_report`` call, a third
    with a malformed one (the arguments a string) and the rest from the model, so a tiny random model's
    groups have rewards that differ, and a malformed call is in the run."""
    return service_class(
        inner, CALL.format(args='{"center_freqs": [40.0, 120.5]}'), CALL.format(args='"40 MHz"')
    )


# ------------------------------------------------------------------ in process


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory, scripted_tinker_service):
    root = tmp_path_factory.mktemp("runs")
    spec = _spec()
    run = RunStore(root).create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    service = scripted(scripted_tinker_service, LocalServiceClient(storage_dir=root / "ckpt"))
    result = train_spectrum_tinker(_config(spec), run, service)
    return spec, load_run(run.path), result, root


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    from rftlab.launch.spectrum.local import trainer_config as simulated_config
    from rftlab.training.spectrum.grpo import train_spectrum_grpo

    spec = _spec(epochs=1)
    run = RunStore(tmp_path_factory.mktemp("sim")).create_run(spec.experiment, "sim", spec.to_dict())
    train_spectrum_grpo(simulated_config(spec), run, progress=False)
    return load_run(run.path)


def test_a_run_has_the_simulated_schema_and_the_transcripts(two_epochs, simulated):
    spec, run, result, _ = two_epochs
    assert run.finished and [r["epoch"] for r in run.metrics()] == [0, 1]
    sim_row, sim_rec = simulated.metrics()[0], simulated.rollouts(0)[0]
    # the simulated policy's own parameters (theta.*) are the only metrics a language model cannot have
    missing = {k for k in sim_row if not k.startswith("theta.")} - set(run.metrics()[0])
    assert not missing
    for epoch, row in enumerate(run.metrics()):
        records = run.rollouts(epoch)
        assert len(records) == spec.rows * spec.response_candidates
        assert set(sim_rec) <= set(records[0])
        # what the metrics row says, recomputed from the records
        assert row["n_rollouts"] == len(records)
        assert math.isclose(row["reward"], np.mean([r["reward"] for r in records]))
        by_row: dict[str, list[float]] = {}
        for r in records:
            by_row.setdefault(r["row_id"], []).append(r["reward"])
        equal = sum(max(v) - min(v) < 1e-9 for v in by_row.values())
        assert row["zero_advantage_groups"] == equal
        for rec in records:  # every candidate of a row on the row's band, with its transcript
            assert rec["band_seed"] == band_seed(rec["row_id"], rec["salt"])
            roles = [m["role"] for m in rec["messages"]]
            assert roles[:2] == ["system", "user"] and "assistant" in roles
            if max(by_row[rec["row_id"]]) - min(by_row[rec["row_id"]]) < 1e-9:
                assert rec["advantage"] == 0.0
        assert len({(r["row_id"], r["band_seed"]) for r in records}) == spec.rows
        # the checkpoint of the epoch is a tinker path in the run folder
        ckpt = json.loads((run.path / "checkpoints" / f"epoch-{epoch}.json").read_text())
        assert ckpt["state_path"].startswith("tinker://")
    assert any(row["zero_advantage_groups"] < spec.rows for row in run.metrics())  # some groups learn


def test_a_malformed_call_is_scored_not_raised(two_epochs):
    _, run, _, _ = two_epochs
    records = [r for e in (0, 1) for r in run.rollouts(e)]
    notes = [s["action"] for r in records for s in r["records"] if s.get("action")]
    bad = [n for n in notes if n.get("malformed")]
    assert bad and all(r["parse_errors"] >= 0 for r in records)
    valid = [r for r in records if r["valid_submits"] > 0]
    assert valid and max(r["reward"] for r in records) > min(r["reward"] for r in records)
    assert any(m["role"] == "tool" for r in records for m in r["messages"])


def test_a_resumed_run_equals_the_uninterrupted_one(two_epochs, tmp_path, scripted_tinker_service):
    spec, full_run, full, _ = two_epochs
    store = RunStore(tmp_path / "runs")
    run = store.create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    ckpt = tmp_path / "ckpt"

    def stop(epoch, row):
        raise KeyboardInterrupt("killed after epoch 0")

    with pytest.raises(KeyboardInterrupt):
        train_spectrum_tinker(
            _config(spec),
            run,
            scripted(scripted_tinker_service, LocalServiceClient(storage_dir=ckpt)),
            on_epoch_end=stop,
        )
    assert not load_run(run.path).finished
    # a fresh service on the same storage, as a new process would have
    again = train_spectrum_tinker(
        _config(spec),
        load_run(run.path),
        scripted(scripted_tinker_service, LocalServiceClient(storage_dir=ckpt)),
    )
    assert again.resumed_from == 0 and again.epochs_run == [1]
    a, b = full.training_client.lora_state(), again.training_client.lora_state()
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert not all(
        torch.equal(
            a[n],
            LocalServiceClient()
            .create_lora_training_client(base_model=AGENT_MODEL, rank=4, seed=spec.seed)
            .result()
            .lora_state()[n],
        )
        for n in a
    )

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    assert strip(load_run(run.path).metrics()) == strip(full_run.metrics())
    assert load_run(run.path).rollouts(1) == full_run.rollouts(1)


def test_a_prompt_longer_than_the_context_is_refused_before_sampling(tmp_path):
    spec = _spec()
    config = trainer_config(spec, "rftlab/tiny-qwen3", max_tokens=8, lora_rank=4)
    assert config.context_window == BUILTIN_MODELS["rftlab/tiny-qwen3"].max_position_embeddings == 1024
    run = RunStore(tmp_path).create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    with pytest.raises(ContextTooLong, match=r"prompt of \d+ tokens does not fit .*1024"):
        train_spectrum_tinker(config, run, LocalServiceClient(storage_dir=tmp_path / "ckpt"))
    assert run.metrics() == []


def test_the_arm_spec_fields_become_the_trainer_settings():
    from rftlab.launch.spectrum.spec import load_arm_spec
    from rftlab.runs.paths import spec_path

    spec = load_arm_spec(spec_path("spectrum_C.json"))
    assert "backend" not in spec.to_dict()  # an unset backend leaves the spec's hash as it was
    cfg = trainer_config(spec, AGENT_MODEL)
    assert (cfg.task.group_size, cfg.epochs, cfg.learning_rate, cfg.task.temperature) == (12, 12, 1e-4, 1.2)
    assert (cfg.max_tokens, cfg.lora_rank, cfg.context_window, cfg.task.base_model) == (
        4096,
        32,
        8192,
        AGENT_MODEL,
    )
    assert cfg.task.row_prefix == "sc2" and cfg.task.batch_rows == 8
    assert _spec(backend="tinker").to_dict()["backend"] == "tinker"


# ------------------------------------------------------------------ the unmodified SDK over HTTP


def test_echo_and_scrambled_arms_through_the_tinker_sdk(tmp_path, monkeypatch):
    import tinker

    from rftlab.studies.spectrum import launch_arm
    from rftlab.training.local_tinker.server import ServeConfig, ServerThread

    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    config = ServeConfig(port=0, storage=tmp_path / "srv", log_level="warning", api_keys=["tml-rftlab-tests"])
    with ServerThread(config) as srv:
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key="tml-rftlab-tests")
        try:
            for memory in ("echo", "scrambled"):
                spec = _spec(memory, arm=f"http_{memory}", epochs=1, backend="tinker")
                done = launch_arm(
                    spec, None, tmp_path / "runs", service=sc, close_session=False, max_tokens=8, lora_rank=4
                )
                assert done.ref.backend == "tinker" and done.status.state == "completed"
                run = load_run(done.ref.path)
                assert run.record.provider["target"] == "given"
                assert [r["epoch"] for r in run.metrics()] == [0]
                records = run.rollouts(0)
                assert len(records) == 6 and all(r["messages"] for r in records)
        finally:
            sc.close("success").result()


def test_the_launcher_resolves_its_target(monkeypatch):
    from rftlab.launch.spectrum.tinker import default_base_model, tinker_target

    for name in ("TINKER_API_KEY", "TINKER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert tinker_target() == "local" and default_base_model(_spec(), "local") == AGENT_MODEL
    monkeypatch.setenv("TINKER_API_KEY", "tml-x")
    assert tinker_target() == "hosted" and default_base_model(_spec(), "hosted") == "Qwen/Qwen3-1.7B"
    monkeypatch.setenv("TINKER_BASE_URL", "http://127.0.0.1:1")
    assert tinker_target() == "url"
    assert isinstance(TinkerLauncher(lora_rank=4).overrides, dict)


def test_the_agent_model_fits_an_episode_and_round_trips_text():
    import asyncio

    from rftlab.training.local_tinker.model import agent_corpus
    from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig, SpectrumRLDataset

    assert BUILTIN_MODELS[AGENT_MODEL].max_position_embeddings == 8192
    assert agent_corpus() == agent_corpus()  # deterministic
    lengths = {}
    for model in (AGENT_MODEL, "rftlab/tiny-qwen3"):
        cfg = SpectrumCookbookConfig(memory="echo", rows=1, group_size=1, base_model=model)
        env = asyncio.run(SpectrumRLDataset(cfg, [0]).get_batch(0)[0].make_envs())[0]
        lengths[model] = asyncio.run(env.initial_observation())[0].length
        text = env.messages()[-1]["content"] + " ünïcode ✓"
        tok = env.renderer.tokenizer
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert lengths[AGENT_MODEL] < 1100 < 2 * lengths[AGENT_MODEL] < lengths["rftlab/tiny-qwen3"]
