"""RFT datasets (docs/spectrum.md §B.10), the icl / icl_notepad regimes (A.10), bench90 evaluation and the RFT bridge."""

from __future__ import annotations

import json
import re

import pytest
from option_errors import refused_option

from rftlab.cli import main as cli_main
from rftlab.envs.spectrum.bench import SpectrumBenchEnv
from rftlab.envs.spectrum.rft import MEMORY_CHANNELS, SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.envs.spectrum.systems import (
    IclContext,
    IclNotepadContext,
    ScanReportWithNotepad,
    parse_structured,
)
from rftlab.policies.spectrum.reference import (
    BENCH_POLICIES,
    RFT_POLICIES,
    ChatBenchPolicy,
    RFTPolicyOnBench,
    _BenchAsRFTObservation,
)
from rftlab.rollout.episode import episode
from rftlab.rollout.spectrum.dataset import PROMPT_VARIANTS, dataset_rows, system_prompt
from rftlab.rollout.spectrum.evaluation import bench_records, evaluate_bench90


def run_episode(policy, env):
    traj = episode(env, policy)
    return {"records": bench_records(traj), "metrics": env.evaluate()}


# ------------------------------------------------------------------------------------------ dataset


@pytest.mark.parametrize("memory", MEMORY_CHANNELS)
def test_explicit_and_weak_differ_by_the_key_fact_and_accumulate_instruction(memory):
    explicit = system_prompt("explicit", memory)
    weak = system_prompt("weak", memory)
    assert "Key fact" in explicit and "Key fact" not in weak
    assert len(explicit) > len(weak)
    if memory in ("echo", "scrambled"):
        assert "YOUR RUNNING LIST" in explicit and "YOUR RUNNING LIST" in weak
        assert "submit the complete updated list" in explicit
        assert "submit the complete updated list" not in weak
    if memory == "notepad":
        assert all(t in weak for t in ("notepad_read", "notepad_write", "submit_report"))
        assert "(1) notepad_read" in explicit and "(1) notepad_read" not in weak


def test_scrambled_arm_sees_the_echo_arm_prompt():
    for p in PROMPT_VARIANTS:
        assert system_prompt(p, "scrambled") == system_prompt(p, "echo")


def test_think_and_fewshot_flags():
    assert system_prompt("weak", "echo", think=False).endswith(" /no_think")
    assert not system_prompt("weak", "echo").endswith("/no_think")
    assert "Illustration" in system_prompt("explicit", "echo", fewshot=True)


def test_dataset_rows_format():
    rows = list(dataset_rows(48, prompt="weak", memory="echo"))
    assert len(rows) == 48
    assert [r["input_metadata"]["row_id"] for r in rows[:2]] == ["sc2_0", "sc2_1"]
    r = rows[0]
    assert r["messages"] == [{"role": "system", "content": system_prompt("weak", "echo")}]
    info = r["input_metadata"]["dataset_info"]
    assert info["user_prompt_template"] == "{observation}"
    ctx = info["environment_context"]
    assert ctx["memory"] == "echo" and ctx["prompt"] == "weak"
    # the recorded config rebuilds the env of the arm
    cfg = SpectrumRFTConfig.from_dict(json.loads(json.dumps(ctx["config"])))
    assert (
        cfg == SpectrumRFTConfig(memory="echo") and cfg.sha256() == SpectrumRFTConfig(memory="echo").sha256()
    )
    assert cfg.sha256() != SpectrumRFTConfig(memory="scrambled").sha256()
    env = SpectrumRFTEnv(cfg)
    env.reset(r["input_metadata"]["row_id"])
    assert env.config.memory == "echo"
    with pytest.raises(ValueError, match="bogus"):
        SpectrumRFTConfig.from_dict({"bogus": 1})
    with pytest.raises(ValueError, match="memory must be one of"):
        SpectrumRFTConfig(memory="telepathy")  # type: ignore[arg-type]
    assert [x["input_metadata"]["row_id"] for x in dataset_rows(2, memory="notepad")] == [
        "spectrum_0",
        "spectrum_1",
    ]
    assert (
        dataset_rows(1, prompt="explicit", memory="scrambled").__next__()["input_metadata"]["row_id"]
        == "sc1_0"
    )


@pytest.mark.parametrize("prompt", PROMPT_VARIANTS)
@pytest.mark.parametrize("memory", MEMORY_CHANNELS)
def test_cli_dataset(tmp_path, prompt, memory):
    out = tmp_path / "rows.jsonl"
    argv = ["spectrum", "dataset", "--n", "48", "--prompt", prompt, "--memory", memory, "--out", str(out)]
    assert cli_main(argv) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 48
    rows = [json.loads(x) for x in lines]
    assert len({r["input_metadata"]["row_id"] for r in rows}) == 48
    assert all(r["messages"][0]["content"] == system_prompt(prompt, memory) for r in rows)


def test_cli_dataset_bad_input(tmp_path, capsys):
    refused_option(
        ["spectrum", "dataset", "--n", "0", "--out", tmp_path / "x.jsonl"], capsys, "--n", "got '0'"
    )
    assert cli_main(["spectrum", "dataset", "--n", "2", "--out", str(tmp_path / "missing" / "x.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ regimes


def test_icl_context_message_sequence():
    env = SpectrumBenchEnv(0, repeat_instructions=False)
    ctx = IclContext()
    q = env.reset().next_query
    msgs = ctx.query_messages(q)
    assert msgs == [{"role": "user", "content": q.prompt}]
    report = ScanReportWithNotepad.model_validate({"transmitters": []})
    ctx.record_action(report)
    obs = env.step({"transmitters": []}).observation
    ctx.record_observation(obs)
    msgs = ctx.query_messages(obs.next_query)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "user"]
    assert json.loads(msgs[1]["content"])["transmitters"] == []
    assert msgs[2]["content"] == "FEEDBACK: Scan 1 recorded."
    assert msgs[3]["content"].startswith("--- Scan 2/90 ---")  # instructions only at position 0


def test_icl_context_fifo_truncation():
    env = SpectrumBenchEnv(0)
    ctx = IclContext(system_prompt="S", max_tokens=1500, reserve_tokens=500, count_tokens=len)
    q = env.reset().next_query
    for _ in range(3):
        msgs = ctx.query_messages(q)
        # over budget, only the newest message survives (each prompt here is > 1000 chars)
        assert [m["role"] for m in msgs] == ["system", "user"] and msgs[-1]["content"] == q.prompt
        obs = env.step({"transmitters": []}).observation
        ctx.record_observation(obs)
        q = obs.next_query
    assert ctx.truncations > 0 and msgs[0] == {"role": "system", "content": "S"}
    roomy = IclContext(max_tokens=100_000, count_tokens=len)
    env.reset()
    roomy.query_messages(env.current_query)
    obs = env.step({"transmitters": []}).observation
    roomy.record_observation(obs)
    assert len(roomy.query_messages(obs.next_query)) == 3 and roomy.truncations == 0


def test_icl_notepad_context():
    env = SpectrumBenchEnv(0)
    ctx = IclNotepadContext()
    q = env.reset().next_query
    assert ctx.query_messages(q)[-1]["content"] == q.prompt
    ctx.record_action(
        ScanReportWithNotepad.model_validate({"transmitters": [], "notepad_update": "ch at 31.5"})
    )
    obs = env.step({"transmitters": []}).observation
    ctx.record_observation(obs)
    assert ctx.messages == []  # context cleared between instances
    msgs = ctx.query_messages(obs.next_query)
    assert len(msgs) == 1
    assert msgs[0]["content"] == (
        "FEEDBACK FROM PREVIOUS INSTANCE:\nScan 1 recorded.\n\n"
        "=== YOUR NOTEPAD ===\nch at 31.5\n===================\n\n" + obs.next_query.prompt
    )
    ctx.record_action(ScanReportWithNotepad.model_validate({"transmitters": [], "notepad_update": None}))
    assert ctx.notepad == "ch at 31.5"  # null keeps the notepad
    stateless = IclNotepadContext(stateless=True)
    stateless.notepad = "x"
    stateless.record_observation(obs)
    assert stateless.notepad == "" and stateless.query_messages(q)[0]["content"] == q.prompt


def test_parse_structured():
    tx = {"center_freq": 1.0, "bandwidth": 2.0, "currently_active": True, "estimated_power": -40.0}
    for raw in (
        {"transmitters": [tx]},
        {"ScanReport": {"transmitters": [tx]}},  # provider envelope
        "```json\n" + json.dumps({"transmitters": [tx]}) + "\n```",
        "Here you go: " + json.dumps({"transmitters": [tx]}),
    ):
        action, err = parse_structured(raw, ScanReportWithNotepad)
        assert err is None and action.transmitters[0].center_freq == 1.0
    assert parse_structured("no json here", ScanReportWithNotepad)[0] is None
    assert parse_structured({"transmitters": [{"center_freq": 1}]}, ScanReportWithNotepad)[0] is None


_PEAK = re.compile(r"freq: ([\d.]+) MHz \| power: (-?[\d.]+) dBm \| width: ([\d.]+) MHz")


def _fake_chat(messages, schema):
    """A local stand-in for a model: reports the peaks of the latest scan in the last user message."""
    peaks = _PEAK.findall(messages[-1]["content"])
    return json.dumps(
        {
            "transmitters": [
                {
                    "center_freq": float(f),
                    "bandwidth": float(w),
                    "currently_active": True,
                    "estimated_power": float(p),
                }
                for f, p, w in peaks
            ]
        }
    )


@pytest.mark.parametrize("regime", ["icl", "icl_notepad"])
def test_chat_policy_equals_scripted_memoryless(regime):
    chat = run_episode(ChatBenchPolicy(_fake_chat, regime), SpectrumBenchEnv(0))
    scripted = run_episode(BENCH_POLICIES["memoryless"](), SpectrumBenchEnv(0))
    assert [r["avail"] for r in chat["records"]] == [r["avail"] for r in scripted["records"]]


def test_chat_policy_retries_then_empty_report():
    calls = []

    def broken(messages, schema):
        calls.append(1)
        return "sorry"

    pol = ChatBenchPolicy(broken, retries=2)
    env = SpectrumBenchEnv(0)
    action = pol.act(env.reset())
    assert action == {"transmitters": []} and len(calls) == 3 and len(pol.errors) == 3


# ------------------------------------------------------------------------------------- bench90


def test_evaluate_bench90_structure_and_memory_policy():
    res = evaluate_bench90(BENCH_POLICIES["accumulate"], runs=(0, 1))
    assert [r["run_index"] for r in res["runs"]] == [0, 1]
    for run in res["runs"]:
        assert len(run["rewards"]) == len(run["occupied"]) == 90
        assert run["gain"] == pytest.approx(sum(run["rewards"]) - sum(res["baseline"]["rewards"]))
    assert len(res["baseline"]["rewards"]) == 90
    # accumulating raises occupied-IoU over the stateless protocol (where it sees one scan)
    assert res["mean_occupied_iou"] > res["baseline"]["mean_occupied_iou"] + 0.3


def test_memoryless_gain_is_zero():
    res = evaluate_bench90(BENCH_POLICIES["memoryless"], runs=range(5))
    for run in res["runs"]:
        assert run["gain"] == pytest.approx(0.0, abs=1e-9) and run["normalized_gain"] == pytest.approx(
            0.0, abs=1e-9
        )


def test_rft_bridge_on_bench():
    oracle = run_episode(RFTPolicyOnBench(RFT_POLICIES["oracle"]()), SpectrumBenchEnv(0))
    # the true centres with the training width (8 MHz) are not the bench's true widths
    assert all(0 < r["avail"] < 1 for r in oracle["records"])
    follower = RFTPolicyOnBench(RFT_POLICIES["echo_follower"]())
    env = SpectrumBenchEnv(0)
    run_episode(follower, env)
    sizes = [len(r["report"]["transmitters"]) for r in env.scan_results]
    assert sizes[-1] >= sizes[0] and max(sizes) <= 16
    assert all(t["bandwidth"] == 8.0 for r in env.scan_results for t in r["report"]["transmitters"])


def test_cli_bench90(capsys):
    assert cli_main(["spectrum", "bench90", "--policy", "rft:memoryless", "--no-baseline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 1 and "baseline" not in out
    argv = ["spectrum", "bench90", "--policy", "nope"]
    refused_option(argv, capsys, "--policy", "one of 'empty'", "'rft:memoryless'", "got 'nope'")


@pytest.mark.parametrize("name", sorted(RFT_POLICIES))
def test_every_rft_policy_runs_on_the_bench(name):
    """Every training-variant policy, including the ceilings that read hidden state, answers bench queries."""
    env = SpectrumBenchEnv(0)
    run_episode(RFTPolicyOnBench(RFT_POLICIES[name]()), env)
    assert len(env.scan_results) == 90


def test_bench_bridge_maps_channel_peaks_to_their_true_centres():
    env = SpectrumBenchEnv(0)
    query = env.reset().next_query
    obs = _BenchAsRFTObservation(query, None)
    centres = obs.hidden["channel_centers"]
    for peak, source, true_centre in zip(
        obs.peaks, obs.hidden["peak_sources"], obs.hidden["peak_true_centers"], strict=True
    ):
        if source == "channel":
            # the spans of different channels never touch, so the emitting channel's span holds the peak
            (owner,) = [
                c for c, bw in query.hidden["ground_truth_channels"] if abs(peak["freq_mhz"] - c) <= bw
            ]
            assert true_centre == owner and true_centre in centres
        else:
            assert true_centre is None
