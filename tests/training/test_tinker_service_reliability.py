"""``rftlab serve tinker`` as a process, killed and restarted (SIGKILL, no shutdown of any kind): a client
killed mid-step leaves the server serving (and its session expires), a server killed mid-run and started
again on the same storage lets the run resume from its last checkpoint to the very weights an
uninterrupted run reaches, and SIGTERM is a clean exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import tinker
import torch
from tinker import types

from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient
from rftlab.training.local_tinker.checkpoints import CheckpointStore
from rftlab.training.local_tinker.server import ServerProcess

pytestmark = pytest.mark.slow
KEY = "tml-reliability-tests"
STEPS = 5
HP = types.AdamParams(learning_rate=0.02, beta1=0.9, beta2=0.95, eps=1e-8)

# A client run in its own process: one SFT step per line of TEXTS, a save_state after each, the step and
# its tinker:// path appended to a progress file; "SUBMITTED" is printed once a long sampling request is
# in flight (mode "sample"), so the test can kill the process mid-request.
CLIENT = r"""
import json, sys, tinker
from tinker import types
url, mode, progress = sys.argv[1], sys.argv[2], sys.argv[3]
sc = tinker.ServiceClient(base_url=url, api_key="tml-reliability-tests")
tc = sc.create_lora_training_client(base_model="rftlab/tiny-qwen3", rank=4, seed=0).result()
tok = tc.get_tokenizer()
if mode == "sample":
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tok.encode("A long story about cups:"))
    fut = sampler.sample(prompt, 64, types.SamplingParams(max_tokens=300, temperature=1.0, stop=[], seed=0))
    print("SUBMITTED", flush=True)
    fut.result()
    print("DONE", flush=True)
    sys.exit(0)
hp = types.AdamParams(learning_rate=0.02, beta1=0.9, beta2=0.95, eps=1e-8)
for step in range(int(mode)):
    ids = tok.encode(f"Step {step}: Kim has {step} cups. \\boxed{{{step}}}")
    datum = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)})
    tc.forward_backward([datum], "cross_entropy"); tc.optim_step(hp).result()
    path = tc.save_state(f"step-{step}", ttl_seconds=3600).result().path
    with open(progress, "a") as f:
        f.write(json.dumps({"step": step, "path": path}) + "\n")
    print("STEP", step, flush=True)
    input()  # wait for the test: it kills the server (and this process) after enough steps
"""


def _datum(tok, step: int) -> types.Datum:
    ids = tok.encode(f"Step {step}: Kim has {step} cups. \\boxed{{{step}}}")
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )


def _client(url: str, mode: str, progress) -> subprocess.Popen:
    env = {**os.environ, "TINKER_TELEMETRY": "0"}
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, url, mode, str(progress)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"the client never printed {prefix!r}")


@pytest.mark.slow
def test_a_client_killed_mid_request_leaves_the_server_serving(tmp_path):
    args = ["--storage", str(tmp_path / "store"), "--session-timeout", "15"]
    with ServerProcess(args, api_key=KEY) as srv:
        client = _client(srv.base_url, "sample", tmp_path / "unused")
        _wait_for_line(client, "SUBMITTED")
        client.kill()  # SIGKILL while its sampling request is queued or running
        client.wait(30)
        # another client is served normally meanwhile
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key=KEY)
        tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=1).result()
        out = tc.forward_backward([_datum(tc.get_tokenizer(), 0)], "cross_entropy").result()
        assert out.metrics["loss:sum"] > 0
        deadline = time.monotonic() + 60
        while not srv.events("session_expired") and time.monotonic() < deadline:
            time.sleep(0.5)  # this client's own session stays alive through the SDK's heartbeats
        expired = srv.events("session_expired")
        assert len(expired) == 1 and expired[0]["models_released"] == 1  # only the killed client's
        assert expired[0]["samplers_released"] == 1
        sampler = tc.save_weights_and_get_sampling_client().result()
        prompt = types.ModelInput.from_ints(tc.get_tokenizer().encode("Kim has"))
        assert (
            len(sampler.sample(prompt, 2, types.SamplingParams(max_tokens=4, seed=0)).result().sequences) == 2
        )
        sc.close("success").result()
        assert srv.proc.poll() is None
        assert srv.terminate() == 0  # SIGTERM: a clean shutdown
    assert srv.events("stopped") and not [line for line in srv.lines if "Traceback" in line]


@pytest.mark.slow
def test_a_server_killed_mid_run_restarts_and_the_run_resumes_to_the_same_weights(tmp_path):
    storage, progress = tmp_path / "store", tmp_path / "progress.jsonl"
    first = ServerProcess(["--storage", str(storage)], api_key=KEY).start()
    client = _client(first.base_url, str(STEPS), progress)
    for _ in range(2):  # two steps done and checkpointed, then both processes die without warning
        _wait_for_line(client, "STEP")
        client.stdin.write("\n")
        client.stdin.flush()
    first.kill()
    client.kill()
    client.wait(30)
    done = [json.loads(x) for x in progress.read_text().splitlines()]
    last = done[-1]
    assert last["step"] >= 1
    with ServerProcess(["--storage", str(storage)], api_key=KEY) as second:  # the same storage, a new port
        sc = tinker.ServiceClient(base_url=second.base_url, api_key=KEY)
        tc = sc.create_training_client_from_state_with_optimizer(last["path"]).result()
        tok = tc.get_tokenizer()
        for step in range(last["step"] + 1, STEPS):
            tc.forward_backward([_datum(tok, step)], "cross_entropy")
            tc.optim_step(HP).result()
        final = tc.save_weights_for_sampler("final").result().path
        older = sc.create_sampling_client(model_path=done[0]["path"]).result()  # a path from before the kill
        assert (
            older.compute_logprobs(types.ModelInput.from_ints(tok.encode("Kim has 1 cup"))).result()[0]
            is None
        )
        sc.close("success").result()
    resumed = CheckpointStore(storage).load(final)["lora"]
    # the same run without any interruption, in process
    local = (
        LocalServiceClient(storage_dir=tmp_path / "local")
        .create_lora_training_client(TINY_MODEL, 4, 0)
        .result()
    )
    for step in range(STEPS):
        local.forward_backward([_datum(tok, step)], "cross_entropy").result()
        local.optim_step(HP).result()
    for name, t in local.lora_state().items():
        assert torch.allclose(resumed[name], t, atol=1e-6), name
    assert [e["from_checkpoint"] for e in second.events("model_requested") if e.get("from_checkpoint")] == [
        last["path"]
    ]
