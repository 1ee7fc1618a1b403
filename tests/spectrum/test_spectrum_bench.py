"""BSM-official scoring, rendering and exact replay of the recorded sonnet trace (docs/spectrum.md §A.6–A.11)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from rftlab.envs.spectrum import official
from rftlab.envs.spectrum.bench import ScanReport, SpectrumBenchEnv, coerce_scan_report, report_regions
from rftlab.envs.spectrum.render import PROJECT_TEXT, load_upstream_text, render_instance
from rftlab.rewards.spectrum import available_iou, task_metrics


def step4(env, action, **kw):
    """``env.step`` as the tuple ``(observation, reward, done, info)``."""
    r = env.step(action, **kw)
    return r.observation, r.reward, r.done, r.info


CLBENCH = "data/clbench"
TRACE_SHA256 = "0da76a3d5e94a4f55c1a39218f7c3c6205357eeddd090469091bd8f7388e1e88"
BRIEF_SHA256 = "7ceecaa4fc7fb5a76d22fd04261084b8bb82f4ad6921e5f8f23b9e98524f1b20"
INSTRUCTIONS_SHA256 = "8312f3a69a335cfd939c805b9256643bbd8e21f4dd65c9913c7f530f5b753f0e"
TRACE_ERA_SHA256 = "8c7ef19280c7b8d6c82cf9922ec5fd048a44cb8a9ab11a9b7940b289c2379617"
POSITION0_SHA256 = "29e56d40d057466f81960b058f8b6eae03eaff36e34693aca70da6bd992a975f"


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


# Module-scoped copies of the ``shared_dir`` fixture (the trace is parsed once per module).
SHARED = Path(__file__).resolve().parents[2].parent / "shared"


@pytest.fixture(scope="module")
def trace():
    path = SHARED / CLBENCH / "bsm_icl_sonnet.json.gz"
    if not path.is_file():
        pytest.skip(f"reference trace {path} is absent (../shared sits beside the clone in CI)")
    assert _sha(path.read_bytes()) == TRACE_SHA256
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture(scope="module")
def upstream_text():
    folder = SHARED / CLBENCH
    if not folder.is_dir():
        pytest.skip(f"reference folder {folder} is absent")
    return load_upstream_text(folder)


def _trace_era_text(trace, upstream_text):
    """The trace-era instruction text: between the brief's closing rule + blank line and ``--- Scan``."""
    prompt = trace["run_traces"][0]["trace"]["interactions"][0]["query"]["prompt"]
    brief = upstream_text.brief.render()
    assert prompt.startswith(brief + "\n\n")
    era = prompt[len(brief) + 2 : prompt.index("\n\n--- Scan")]
    assert len(era) == 1587 and _sha(era) == TRACE_ERA_SHA256
    return upstream_text.with_instructions(era)


# ------------------------------------------------------------------------------------- scoring


GT = official.ground_truth_channels()


@pytest.mark.parametrize(
    ("report", "score", "r_av", "overlap", "unsafe"),
    [
        ([(84, 100)], 0.2024, 68.0, 17.0, 51.0),
        ([(84, 168)], 0.0, 0.0, 0.0, 0.0),
        ([(7.5, 15), (19.5, 5), (24, 0), (31.5, -3), (165, 10)], 0.1689, 140.0, 25.0, 115.0),
        ([(40, 8), (44, 8), (100, 2)], 0.1835, 154.0, 29.0, 125.0),
    ],
)
def test_interval_iou_vectors_a11(report, score, r_av, overlap, unsafe):
    r = available_iou(GT, report, 168.0)
    assert r.score == score
    assert r.reported_measure == pytest.approx(r_av)
    assert r.overlap_measure == pytest.approx(overlap)
    assert r.unsafe_bandwidth_claimed == unsafe


def test_gt_available_set_a1():
    r = available_iou(GT, [], 168.0)
    assert list(r.gt_available) == [
        (15, 17), (22, 24), (39, 41), (46, 48), (63, 65), (70, 72), (87, 89), (94, 96),
        (111, 113), (118, 120), (135, 137), (142, 144), (159, 168),
    ]  # fmt: skip
    assert r.gt_measure == 33.0
    assert r.score == round(33.0 / 168.0, 4)  # empty report: everything claimed available


def test_perfect_report_scores_one():
    assert available_iou(GT, GT, 168.0).score == 1.0


def test_task_metrics_half_split():
    m = task_metrics([0.2, 0.4, 0.6])
    assert m["first_half_score"] == 0.2 and m["second_half_score"] == 0.5 and m["learning_delta"] == 0.3
    assert m["loss_curve"] == [0.8, 1.4, 1.8] and m["actual_performance"] == 1.2
    one = task_metrics([0.7])  # half = max(1, 0): second half empty -> 0
    assert one["first_half_score"] == 0.7 and one["second_half_score"] == 0.0


# ---------------------------------------------------------------------------------- action schema


def test_non_scan_report_actions_score_as_empty():
    env = SpectrumBenchEnv(0)
    empty_reward = round(33.0 / 168.0, 4)
    for bad in [None, "transmitters: 1", {"transmitters": [{"center_freq": 1.0}]}, {"foo": []}, 42]:
        env.reset()
        _obs, reward, _done, info = step4(env, bad)
        assert reward == empty_reward
        assert info.warning
    env.reset()
    _obs, _reward, _done, info = step4(env, ScanReport(transmitters=[]))
    assert info.warning is None


def test_coerce_accepts_mapping():
    report, warning = coerce_scan_report(
        {
            "transmitters": [
                {"center_freq": 10, "bandwidth": 5, "currently_active": True, "estimated_power": -40}
            ]
        }
    )
    assert warning is None and report_regions(report) == [(10.0, 5.0)]


# ------------------------------------------------------------------------------------- rendering


def test_project_text_has_brief_format_and_no_upstream_prose(upstream_text):
    brief = PROJECT_TEXT.brief.render()
    lines = brief.split("\n")
    assert lines[0] == "=== Brief ===" and lines[-1] == "=" * 23
    assert [x.split(":")[0] for x in lines[1:6]] == [
        "Objective",
        "Task Unit",
        "Reward",
        "Completion",
        "Constraints",
    ]
    up = upstream_text
    for sentence in (up.brief.objective, up.brief.reward_definition, *up.brief.constraints):
        assert sentence not in brief
    for para in up.instructions.split("\n\n")[:-1]:
        assert para not in PROJECT_TEXT.instructions
    assert PROJECT_TEXT.instructions.endswith(up.instructions[up.instructions.index("```json") :])


def test_upstream_text_mode_hashes_a6(upstream_text):
    brief = upstream_text.brief.render()
    assert len(brief) == 614 and _sha(brief) == BRIEF_SHA256
    assert len(upstream_text.instructions) == 1891 and _sha(upstream_text.instructions) == INSTRUCTIONS_SHA256
    env = SpectrumBenchEnv(0, text=upstream_text)
    prompt = env.current_query.prompt
    assert len(prompt) == 3033 and _sha(prompt) == POSITION0_SHA256


def test_instance_block_matches_upstream_template(shared_dir):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(shared_dir / CLBENCH / "templates" / "blind_spectrum_monitoring")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=False,
        keep_trailing_newline=False,
    )
    tpl = env.get_template("instance.j2")
    rows = official.build_corpus()
    no_peaks = dict(rows[0], detected_peaks=[])
    for k, scan in enumerate([*rows[:5], no_peaks]):
        kwargs = dict(
            scan_num=k + 1,
            stated_horizon=90,
            scan_id=scan["scan_id"],
            timestamp_utc="2026-01-01T00:00:00Z",
            sensor_id=scan["sensor_id"],
            detector_version=scan["detector_version"],
            integration_time_ms=scan["integration_time_ms"],
            estimated_noise_floor_dbm=scan["estimated_noise_floor_dbm"],
            peaks=scan["detected_peaks"],
            band_start=0.0,
            band_end=168.0,
        )
        ours = render_instance(scan, scan_num=k + 1, stated_horizon=90, timestamp="2026-01-01T00:00:00Z")
        assert ours == tpl.render(**kwargs)


def test_repeat_instructions_flag():
    env = SpectrumBenchEnv(0, repeat_instructions=False)
    assert env.current_query.prompt.startswith("=== Brief ===")
    env.step({"transmitters": []})
    assert env.current_query.prompt.startswith("--- Scan 2/90 ---")
    env = SpectrumBenchEnv(0, repeat_instructions=True)
    env.step({"transmitters": []})
    assert env.current_query.prompt.startswith("=== Brief ===")


def test_baseline_query_a9():
    env = SpectrumBenchEnv(baseline_index=37)
    q = env.current_query
    assert q.metadata["timestamp_utc"] == "2026-01-01T03:05:00Z"
    assert (
        q.instance_id == "blind_spectrum_monitoring:five_plus_four_mixed:corpus:mixed_grid_lifecycle:scan:38"
    )
    assert "--- Scan 1/90 ---" in q.prompt
    obs, _r, done, _info = step4(env, {"transmitters": []})
    assert done and obs.content == "Scan 1 recorded.\n\nAll scans completed!"


def test_probe_and_timeout_feedback():
    env = SpectrumBenchEnv(0, probe_mode=True)
    obs, *_ = step4(env, {"transmitters": []})
    assert obs.content == "Scan 1: report recorded."
    env = SpectrumBenchEnv(0)
    obs, reward, _d, info = step4(env, _oracle_action(), timed_out=True)
    assert reward == 0.0 and obs.content == "Response timed out. Scored 0 for this scan. Moving on."


def _oracle_action():
    return {
        "transmitters": [
            {"center_freq": c, "bandwidth": bw, "currently_active": True, "estimated_power": -40.0}
            for c, bw in GT
        ]
    }


# ---------------------------------------------------------------------------------- trace replay


def test_rescore_every_recorded_report(trace):
    """540 recorded reports (baseline + 5 runs): rescoring reproduces every recorded reward exactly."""
    n = 0
    for tr in [trace["baseline_trace"], *(r["trace"] for r in trace["run_traces"])]:
        for it, outcome in zip(tr["interactions"], tr["instance_outcomes"], strict=True):
            report, warning = coerce_scan_report(it["response"]["action"])
            assert warning is None
            r = available_iou(GT, report_regions(report), 168.0)
            assert round(r.score, 4) == outcome["reward"]
            assert r.outcome_metadata() == outcome["metadata"]
            n += 1
    assert n == 540


@pytest.mark.parametrize("run_index", range(5))
def test_replay_run(trace, upstream_text, run_index):
    """Replaying run r's recorded reports reproduces prompts, metadata, observations, outcomes and the
    task's metrics exactly (prompts with the trace-era instruction text)."""
    text = _trace_era_text(trace, upstream_text)
    run = next(r for r in trace["run_traces"] if r["run_index"] == run_index)["trace"]
    env = SpectrumBenchEnv(run_index, text=text, repeat_instructions=True)
    rows = official.build_corpus()
    assert (
        run["interactions"][0]["query"]["metadata"]["scan_id"]
        == rows[official.run_order(run_index)[0]]["scan_id"]
    )
    for it, outcome in zip(run["interactions"], run["instance_outcomes"], strict=True):
        q = env.current_query
        assert q.prompt == it["query"]["prompt"]
        assert q.instance_block == it["query"]["prompt"][it["query"]["prompt"].index("--- Scan") :]
        assert (q.instance_id, q.instance_index, q.metadata) == (
            it["query"]["instance_id"],
            it["query"]["instance_index"],
            it["query"]["metadata"],
        )
        obs, reward, _done, info = step4(env, it["response"]["action"])
        assert obs.content == it["observation"]["content"]
        got = info.outcome
        assert (
            got["instance_id"],
            got["instance_index"],
            got["reward"],
            got["success"],
            got["metadata"],
        ) == (
            outcome["instance_id"],
            outcome["instance_index"],
            outcome["reward"],
            outcome["success"],
            outcome["metadata"],
        )
    assert env.done
    ours = env.evaluate()
    metrics = run["result"]["metrics"]
    assert ours["scan_results"] == metrics["scan_results"]
    for key in ("mean_score", "score_curve", "first_half_score", "second_half_score", "learning_delta"):
        assert ours[key] == metrics[key], key
    for key in ("loss_curve", "optimal_performance", "actual_performance"):
        assert ours[key] == run["result"]["eval_metrics"][key], key


def test_replay_baseline(trace, upstream_text):
    text = _trace_era_text(trace, upstream_text)
    base = trace["baseline_trace"]
    for it, outcome in zip(base["interactions"], base["instance_outcomes"], strict=True):
        env = SpectrumBenchEnv(text=text, baseline_index=it["query"]["instance_index"])
        q = env.current_query
        assert q.prompt == it["query"]["prompt"]
        assert q.metadata == it["query"]["metadata"]
        obs, reward, done, info = step4(env, it["response"]["action"])
        assert done and obs.content == it["observation"]["content"]
        assert (info.outcome["instance_id"], info.outcome["instance_index"], reward) == (
            outcome["instance_id"],
            outcome["instance_index"],
            outcome["reward"],
        )
    assert trace["summary"]["aggregate"]["baseline_reward_by_index"] == [
        o["reward"] for o in base["instance_outcomes"]
    ]


def test_leaderboard_normalization_a9():
    from rftlab.rewards.spectrum import leaderboard_normalized_reward, normalized_gain

    g = normalized_gain([0.5, 0.7], [0.4, 0.4])
    assert g["gain"] == pytest.approx(0.4) and g["normalized_gain"] == pytest.approx(0.4 / 1.2)
    assert leaderboard_normalized_reward([0.5, 0.7], [0.2, 0.2]) == pytest.approx(0.8 / 1.6)
    assert normalized_gain([1.0], [1.0])["normalized_gain"] is None


def test_feedback_matches_upstream_template(shared_dir):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from rftlab.envs.spectrum.render import render_feedback

    env = Environment(
        loader=FileSystemLoader(str(shared_dir / CLBENCH / "templates" / "blind_spectrum_monitoring")),
        undefined=StrictUndefined,
        trim_blocks=True,
        keep_trailing_newline=False,
    )
    for k in (1, 7, 90):
        assert render_feedback(k, last=False) == env.get_template("feedback.j2").render(scan_num=k)
