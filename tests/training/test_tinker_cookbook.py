"""tinker-cookbook 0.5.8's own training loops, unmodified, against ``rftlab serve tinker`` (offline):
``supervised.train.main`` on a small chat dataset built from the project's GSM8K-style task (then resumed
from its last checkpoint), and ``rl.train.main`` on the cookbook's arithmetic environment. The client side
is the real SDK (``base_url`` in the cookbook's own config); the tokenizer of the built-in model comes
from the cookbook's tokenizer registry (``register_builtin_tokenizers``)."""

from __future__ import annotations

import asyncio
import io
import json
import math

import pytest

from rftlab.envs.gs1 import QUESTION_SUFFIX, train_problems
from rftlab.training.local_tinker import TINY_MODEL, register_builtin_tokenizers
from rftlab.training.local_tinker.server import ServeConfig, ServerThread
from rftlab.training.local_tinker.service import Log

RENDERER = "qwen3_5_disable_thinking"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    storage = tmp_path_factory.mktemp("cookbook-storage")
    log = Log(io.StringIO(), "info")
    config = ServeConfig(port=0, storage=storage, api_keys=["tml-cookbook-tests"])
    with ServerThread(config, log) as srv:
        srv.log_stream = log.stream
        yield srv


def _events(server, name: str) -> list[dict]:
    lines = server.log_stream.getvalue().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == name]


@pytest.fixture(autouse=True)
def _client_env(server, monkeypatch):
    monkeypatch.setenv("TINKER_API_KEY", "tml-cookbook-tests")  # the SDK refuses to start without one
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    register_builtin_tokenizers()  # the cookbook's get_tokenizer("rftlab/tiny-qwen3") resolves offline


def _rows(path, n: int):
    with open(path, "w") as f:
        for p in train_problems(n, seed=5):
            messages = [
                {"role": "user", "content": p.question + QUESTION_SUFFIX},
                {"role": "assistant", "content": p.solution},
            ]
            f.write(json.dumps({"messages": messages}) + "\n")
    return path


def _metrics(log_path) -> list[dict]:
    return [
        json.loads(line) for line in (log_path / "metrics.jsonl").read_text().splitlines() if line.strip()
    ]


@pytest.mark.slow
def test_the_cookbooks_supervised_loop_trains_checkpoints_and_resumes(server, tmp_path):
    from tinker_cookbook.supervised import train
    from tinker_cookbook.supervised.data import FromConversationFileBuilder
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    data = _rows(tmp_path / "chat.jsonl", 36)
    builder = FromConversationFileBuilder(
        file_path=str(data),
        test_size=4,
        common_config=ChatDatasetBuilderCommonConfig(
            model_name_for_tokenizer=TINY_MODEL, renderer_name=RENDERER, max_length=256, batch_size=8
        ),
    )
    log_path = tmp_path / "sft"

    config = train.Config(
        log_path=str(log_path),
        model_name=TINY_MODEL,
        recipe_name="rftlab_offline_sft",
        renderer_name=RENDERER,
        dataset_builder=builder,
        learning_rate=5e-3,
        lora_rank=8,
        base_url=server.base_url,
        save_every=2,
        eval_every=2,
    )
    asyncio.run(train.main(config))  # 32 training rows, batches of 8: steps 0-3
    rows = _metrics(log_path)
    steps = [r["step"] for r in rows if "train_mean_nll" in r]
    assert steps == [0, 1, 2, 3]
    nll = [r["train_mean_nll"] for r in rows if "train_mean_nll" in r]
    assert all(math.isfinite(x) for x in nll) and nll[-1] < nll[0]  # it learns
    assert all("grad_norm:mean" in r for r in rows if "train_mean_nll" in r)  # optimizer metrics merged
    assert any("test/nll" in r for r in rows)  # the sampler-NLL evaluator ran through a sampling client
    records = [json.loads(x) for x in (log_path / "checkpoints.jsonl").read_text().splitlines()]
    periodic = [r for r in records if r["name"] != "final"]
    final = [r for r in records if r["name"] == "final"]
    assert periodic and len(final) == 1
    store = server.service.backend.checkpoints
    assert store.metadata(periodic[-1]["state_path"])["ttl_seconds"] == 7 * 24 * 3600  # the cookbook's TTL
    assert store.metadata(final[0]["state_path"])["ttl_seconds"] is None  # the final one is kept
    # as if the process had died after its last periodic checkpoint: the cookbook resumes from it
    (log_path / "checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in periodic))
    asyncio.run(train.main(config))
    resumed = [e for e in _events(server, "model_requested") if e.get("from_checkpoint")]
    assert [e["from_checkpoint"] for e in resumed] == [periodic[-1]["state_path"]]
    again = [r["step"] for r in _metrics(log_path) if "train_mean_nll" in r][len(steps) :]
    assert again and again[-1] == 3 and again[0] > 0  # the rest of the run, not a restart from step 0
    assert json.loads((log_path / "checkpoints.jsonl").read_text().splitlines()[-1])["name"] == "final"


@pytest.mark.slow
def test_the_cookbooks_rl_loop_runs_on_its_arithmetic_env(server, tmp_path):
    from tinker_cookbook.recipes.math_rl.arithmetic_env import ArithmeticDatasetBuilder
    from tinker_cookbook.rl import train

    log_path = tmp_path / "rl"
    config = train.Config(
        learning_rate=1e-3,
        dataset_builder=ArithmeticDatasetBuilder(
            batch_size=4,
            model_name_for_tokenizer=TINY_MODEL,
            renderer_name=RENDERER,
            n_batches=3,
            group_size=4,
        ),
        model_name=TINY_MODEL,
        recipe_name="rftlab_offline_rl",
        renderer_name=RENDERER,
        max_tokens=8,
        log_path=str(log_path),
        eval_every=0,
        save_every=2,
        lora_rank=4,
        base_url=server.base_url,
        num_groups_to_log=0,
    )
    asyncio.run(train.main(config))
    rows = _metrics(log_path)
    trained = [r for r in rows if "grad_norm:mean" in r]
    assert [r["step"] for r in trained] == [0, 1, 2]
    for r in trained:
        assert math.isfinite(r["grad_norm:mean"])
        kl = [v for k, v in r.items() if k.startswith("optim/kl_sample_train")]
        assert kl and all(abs(v) < 1e-4 for v in kl)  # local sampler == trainer: ratio 1 (platforms §4.4)
    records = [json.loads(x) for x in (log_path / "checkpoints.jsonl").read_text().splitlines()]
    assert records and records[-1]["sampler_path"].startswith("tinker://")


def test_run_sync_works_with_and_without_a_running_event_loop():
    """A Jupyter kernel runs an event loop in its main thread, where ``asyncio.run`` refuses."""
    import asyncio
    import threading

    from rftlab.training.cookbook_envs import run_sync

    async def where():
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert run_sync(where()) == threading.current_thread().name  # no loop: this thread

    async def inside_a_loop():
        return run_sync(where())

    assert asyncio.run(inside_a_loop()).startswith("rftlab-sync")  # a loop: a worker thread's own loop
