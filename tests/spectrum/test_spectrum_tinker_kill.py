"""A spectrum arm on the Tinker path survives a SIGKILL: a subprocess trains a tiny arm on the in-process
local service, is killed once its first epoch's metrics row exists, and a second process resumes it to the
end; its final LoRA weights and its metrics equal an uninterrupted run's, bit for bit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

SCRIPT = """
import sys
from pathlib import Path
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.launch.spectrum.tinker import trainer_config
from rftlab.runs.store import RunStore
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.model import AGENT_MODEL
from rftlab.training.spectrum.tinker_rl import train_spectrum_tinker

root = Path(sys.argv[1])
spec = SpectrumArmSpec(arm="kill", prompt="weak", memory="echo", rows=2, response_candidates=2, num_scans=2,
                       epochs=3, learning_rate=0.01)
run, _ = RunStore(root / "runs").start_or_reuse(spec.experiment, spec.arm, spec.to_dict(), backend="tinker",
                                       resume=True)
config = trainer_config(spec, AGENT_MODEL, max_tokens=6, lora_rank=4)
train_spectrum_tinker(config, run, LocalServiceClient(storage_dir=root / "ckpt"))
print(run.path)
"""


def _train(root: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _final_weights(root: Path, run_dir: Path) -> dict[str, torch.Tensor]:
    from rftlab.training.local_tinker import LocalServiceClient

    last = max(run_dir.glob("checkpoints/epoch-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    path = json.loads(last.read_text())["state_path"]
    client = LocalServiceClient(storage_dir=root / "ckpt").create_training_client_from_state(path).result()
    return client.lora_state()


@pytest.mark.slow
def test_a_run_killed_after_an_epoch_resumes_bit_identical(tmp_path):
    from rftlab.runs.store import load_run

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    full = _train(tmp_path / "full", env)
    killed_root = tmp_path / "killed"
    victim = _train(killed_root, env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        rows = list(killed_root.glob("runs/*/*/*/metrics.jsonl"))
        if rows and rows[0].read_text().strip():
            victim.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    assert victim.wait(timeout=60) == -signal.SIGKILL, "killed after its first epoch"
    run_dir = next(killed_root.glob("runs/*/*/*/metrics.jsonl")).parent
    killed = load_run(run_dir)
    assert not killed.finished and 1 <= len(killed.metrics()) < 3
    again = _train(killed_root, env)
    assert again.wait(timeout=300) == 0 and Path(again.stdout.read().strip()) == run_dir
    assert full.wait(timeout=300) == 0
    full_dir = Path(full.stdout.read().strip())

    resumed, uninterrupted = load_run(run_dir), load_run(full_dir)
    assert resumed.finished and [r["epoch"] for r in resumed.metrics()] == [0, 1, 2]

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    assert strip(resumed.metrics()) == strip(uninterrupted.metrics())
    assert [resumed.rollouts(e) for e in range(3)] == [uninterrupted.rollouts(e) for e in range(3)]
    a, b = _final_weights(tmp_path / "full", full_dir), _final_weights(killed_root, run_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
