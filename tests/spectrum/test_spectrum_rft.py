"""BSM-RFT: band seeding, layout, scans, scoring, memory channels, action handling (docs/spectrum.md Part B)."""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics

import pytest

from rftlab.envs.spectrum.generator import as_channel_defs, round_robin_sets
from rftlab.envs.spectrum.rft import (
    RUNNING_LIST_HEADER,
    SCAN_MARKER,
    AssistantTurn,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    SpectrumStepInfo,
    ToolCall,
    band_seed,
    epoch_salt,
    normalize_center_freqs,
    random_layout,
    scrambled_list,
    session_band_seed,
    submit,
    window_messages,
)
from rftlab.rewards.spectrum import (
    AvailableScorer,
    OccupiedBitset,
    available_iou,
    occupied_iou,
    occupied_iou_reference,
    parse_score_lines,
)


def step4(env, action, **kw):
    """``env.step`` as the tuple ``(observation, reward, done, info)``."""
    r = env.step(action, **kw)
    return r.observation, r.reward, r.done, r.info


def make_env(**kw) -> SpectrumRFTEnv:
    return SpectrumRFTEnv(SpectrumRFTConfig(**kw))


# ------------------------------------------------------------------------------ B.14 vectors

LAYOUTS = {
    "spectrum_0": (
        "77dd90ef21654fb4b373cc54f74d873b",
        131793503068517,
        (13, 13, 69),
        (15.2, 25.3, 37.6, 51.7, 63.6, 83.8, 96.9, 107.1, 118.7, 129.5, 140.1, 154.6, 168.2),
    ),
    "sc1_0": (
        "e724f26df080fde923945e2ea121c8b5",
        254145872130176,
        (11, 11, 22),
        (12.5, 31.1, 55.1, 68.6, 82.4, 97.6, 107.7, 124.3, 139.3, 154.3, 169.7),
    ),
    "sc2_0": (
        "53e3fa2cfbd089c45eed668ad24e70f7",
        92238619933648,
        (14, 13, 400),
        (9.6, 25.0, 36.5, 47.5, 59.1, 69.5, 82.6, 95.3, 106.3, 121.9, 140.6, 157.4, 168.8),
    ),
}


@pytest.mark.parametrize("row_id", sorted(LAYOUTS))
def test_band_seed_and_layout_b14(row_id):
    md5, seed, (drawn, placed, attempts), centres = LAYOUTS[row_id]
    assert hashlib.md5(f":{row_id}".encode()).hexdigest() == md5
    assert band_seed(row_id) == seed
    layout = random_layout(seed)
    assert (layout.drawn, layout.placed, layout.attempts) == (drawn, placed, attempts)
    assert layout.centers == centres


def test_salted_band_seed_b14():
    assert band_seed("sc2_0", "deadbeef") == 241316862443445


def test_layout_matches_a_literal_transcription():
    """The neighbour-only spacing check equals upstream's all-pairs check on many seeds."""

    def literal(seed):
        ent = random.Random(seed)
        n = ent.randint(11, 14)
        centres, attempts = [], 0
        while len(centres) < n and attempts < 400:
            attempts += 1
            cf = round(ent.uniform(8, 172), 1)
            if all(abs(cf - c) >= 10 for c in centres):
                centres.append(cf)
        return n, attempts, tuple(sorted(centres))

    for seed in range(300):
        lay = random_layout(seed * 7919 + 13)
        assert (lay.drawn, lay.attempts, lay.centers) == literal(seed * 7919 + 13)


def test_spectrum_0_scans_b14():
    env = make_env()
    env.reset("spectrum_0")
    expected = [
        {1, 3, 6}, {2, 8, 12}, {0, 5, 9}, {7, 10, 11}, {2, 4, 8}, {3, 10, 12},
        {1, 5, 7}, {4, 9, 11}, {0, 4, 6}, {3, 10, 11}, {1, 5, 12}, {0, 7, 9},
    ]  # fmt: skip
    # the round-robin sets are the generator's first draws from Random(band seed)
    rng = random.Random(env.band_seed)
    assert round_robin_sets(rng, as_channel_defs(env.layout.channels()), 3, 12) == expected
    # every detected channel peak comes from an active channel of its scan
    for scan, active in zip(env.scans, expected, strict=True):
        assert {p["channel_id"] for p in scan["detected_peaks"] if p["source"] == "channel"} <= active
    s0 = env.scans[0]
    assert s0["scan_id"] == "scan-cf30c1be-2e40-cf2e-29f2-e31b56109b66"
    assert [(p["freq_mhz"], p["power_dbm"], p["width_mhz"], p["source"]) for p in s0["detected_peaks"]] == [
        (18.5, -23.3, 8.3, "channel"),
        (49.7, -35.5, 7.4, "channel"),
        (69.8, -46.8, 4.0, "noise"),
        (95.3, -35.0, 8.1, "channel"),
    ]
    _obs, reward, _done, info = step4(env, [20.0, 100.0])
    assert info.score_line == "SCAN_OCC: 0.1184 SCAN_AVAIL: 0.4260"
    assert reward == pytest.approx(0.1184, abs=5e-5)


def test_other_first_scans_b14():
    env = make_env()
    env.reset("sc1_0")
    s0 = env.scans[0]
    assert s0["scan_id"] == "scan-2ad4d254-95ff-e575-2ead-e425f207f458"
    assert [(p["freq_mhz"], p["power_dbm"], p["width_mhz"], p["source"]) for p in s0["detected_peaks"]] == [
        (8.5, -31.9, 9.8, "channel"),
        (121.4, -31.7, 6.8, "channel"),
        (155.2, -14.6, 9.4, "channel"),
    ]
    env.reset("sc2_0")
    s0 = env.scans[0]
    assert s0["scan_id"] == "scan-aba41e4e-38b6-5b62-62c4-5e16289ffa4d"
    assert [(p["freq_mhz"], p["power_dbm"], p["width_mhz"], p["source"]) for p in s0["detected_peaks"]] == [
        (42.7, -34.0, 8.3, "channel"),
        (68.7, -25.7, 6.8, "channel"),
        (103.0, -34.0, 1.8, "interference"),
        (139.4, -31.9, 8.2, "channel"),
        (175.8, -44.8, 0.8, "interference"),
    ]


def test_upstream_text_mode_from_config(shared_dir):
    folder = shared_dir / "data" / "clbench"
    env = SpectrumRFTEnv(SpectrumRFTConfig(text=str(folder)))
    obs = env.reset("spectrum_0")
    up = json.loads((folder / "upstream_text.json").read_text())["blind_spectrum_monitoring"]["brief"]
    assert f"Objective: {up['objective']}" in obs.text
    own = make_env().reset("spectrum_0")
    assert up["objective"] not in own.text
    # only the prose differs: the instance blocks are identical
    assert obs.text[obs.text.index("--- Scan 1/12 ---") :] == own.text[own.text.index("--- Scan 1/12 ---") :]


def test_scan_prompt_structure_b14(shared_dir):
    """Scan 1 = brief + neutral instruction + instance block; scans >= 2 = the instance block only.

    With the upstream brief the instance block of ``spectrum_0`` scan 1 is exactly the length the B.14
    prompt (1491 chars = 614 brief + 2 + 135 instruction + 2 + block) implies. When the upstream-text folder
    also carries the RFT sentences (``blind_spectrum_monitoring.rft``), the full sha256 vectors apply."""
    from rftlab.envs.spectrum.render import load_upstream_text

    text = load_upstream_text(shared_dir / "data" / "clbench")
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo"), text=text)
    env.reset("spectrum_0")
    prompt = env._scan_prompt(0)
    block = prompt[prompt.index("--- Scan 1/12 ---") :]
    assert len(block) == 1491 - 614 - 2 - 135 - 2
    assert prompt.startswith(text.brief.render() + "\n\n" + text.rft_instruction + "\n\n")
    assert (
        "  estimated_noise_floor_dbm: -50.0\n" in block
        and "Band: 0.0-180.0 MHz\n\nSubmit your report." in block
    )
    assert env._scan_prompt(1).startswith("--- Scan 2/12 ---")
    if text.rft_instruction_source != "project":
        assert len(prompt) == 1491
        assert hashlib.sha256(prompt.encode()).hexdigest() == (
            "2c95d22b037e90cf6a790b5cca48d847edf2dd68a4b3b7b4be312ca4029b52ab"
        )


# ---------------------------------------------------------------------------------- scoring


RASTER_VECTORS = [
    ([(50, 8)], [(52, 8)], 13 / 21),
    ([(50, 8)], [(50, 8)], 1.0),
    ([(50, 8)], [], 0.0),
    ([(176, 8)], [(179, 8)], 11 / 17),
    ([(50.3, 8)], [(50.3, 8), (50.1, 8)], 1.0),
    ([(50, 8), (100, 8)], [(75, 8)], 0.0),
]


@pytest.mark.parametrize(("gt", "rep", "want"), RASTER_VECTORS)
def test_raster_vectors_b14(gt, rep, want):
    for fn in (occupied_iou_reference, occupied_iou):
        assert fn(gt, rep, 180.0) == pytest.approx(want, abs=1e-12)
    centres = [c for c, _ in rep]
    assert OccupiedBitset(gt, 180.0).score(centres) == pytest.approx(want, abs=1e-12)


def test_the_scorer_equals_the_literal_raster_on_random_reports():
    rng = random.Random(20261129)
    for _ in range(1500):
        gt = random_layout(rng.getrandbits(48)).regions()
        k = rng.randint(0, 16)
        rep = [round(rng.uniform(-12, 192), rng.choice([0, 1, 2])) for _ in range(k)]
        want = occupied_iou_reference(gt, [(c, 8.0) for c in rep], 180.0)
        assert OccupiedBitset(gt, 180.0).score(rep) == want
        widths = [rng.choice([8.0, 3.5, 15.0]) for _ in rep]  # the bench's per-region widths
        regions = list(zip(rep, widths, strict=True))
        assert OccupiedBitset(gt, 180.0).score_regions(regions) == occupied_iou_reference(gt, regions, 180.0)
        assert (
            AvailableScorer(gt, 180.0).score(rep) == available_iou(gt, [(c, 8.0) for c in rep], 180.0).score
        )


def test_scorers_at_the_band_edges_and_for_huge_centres():
    """Edge bins follow B.7's truncating arithmetic; centres far outside the band paint nothing and never
    overflow (a model may send 1e308)."""
    gt = random_layout(7).regions()
    edge = [x / 4 for x in range(-80, 4 * 180 + 81)]  # every quarter MHz from -20 to 200
    for c in edge:
        want = occupied_iou_reference(gt, [(c, 8.0)], 180.0)
        assert OccupiedBitset(gt, 180.0).score([c]) == want, c
    far = occupied_iou_reference(gt, [(1000.0, 8.0), (-1000.0, 8.0), (50.0, 8.0)], 180.0)
    huge = [1e308, -1e308, 50.0]
    assert OccupiedBitset(gt, 180.0).score(huge) == far
    # non-finite centres or widths paint nothing (the env drops them before scoring; the scorer is safe)
    assert OccupiedBitset(gt, 180.0).score_regions([(float("nan"), 8.0), (50.0, float("inf"))]) == 0.0
    env = SpectrumRFTEnv(SpectrumRFTConfig())
    env.reset("huge")
    _, reward, _, info = step4(env, [1e308, -1e308])
    assert reward == 0.0 and info.scored and info.actions[-1].out_of_band == 2


@pytest.mark.parametrize("center", [0.0, 50.0, 1e308, -1e308, 180.0])
@pytest.mark.parametrize(
    "bandwidth", [-8.98846567431158e307, -1e308, 1e308, 8.98846567431158e307, -8.0, 1e-300]
)
def test_a_huge_width_of_either_sign_scores_like_the_reference_without_overflow(center, bandwidth):
    """A model's width near ±1e308 once overflowed int() (found by the bench-step property test): a
    negative width paints nothing, a huge one the whole band, exactly as the literal reference scores it
    with the same region pulled into float range."""
    from rftlab.rewards.spectrum import region_bin_range

    start, end = region_bin_range(center, bandwidth, 180.0)
    if bandwidth < 0:
        assert end < start  # nothing painted
    elif bandwidth > 1e300 and abs(center) < 1e300:
        assert (start, end) == region_bin_range(90.0, 1000.0, 180.0)  # the whole band
    gt = random_layout(7).regions()
    assert 0.0 <= OccupiedBitset(gt, 180.0).score_regions([(center, bandwidth)]) <= 1.0


# ------------------------------------------------------------------------------ band seeding


def test_same_row_same_band_for_every_candidate():
    """All GRPO candidates of a row (same row id, same epoch) face the same band and the same scans."""
    envs = [make_env() for _ in range(12)]
    for env in envs:
        env.reset("sc1_7", epoch=4)
    first = envs[0]
    for env in envs[1:]:
        assert env.band_seed == first.band_seed
        assert env.layout == first.layout
        assert env.scans == first.scans
        assert env.transcript[0]["content"] == first.transcript[0]["content"]


def test_epoch_salt_changes_the_band():
    env = make_env()
    env.reset("sc1_7", epoch=0)
    a = (env.band_seed, env.layout.centers)
    env.reset("sc1_7", epoch=1)
    b = (env.band_seed, env.layout.centers)
    env.reset("sc1_7")  # unsalted: the upstream band of this row id
    c = env.band_seed
    assert a[0] != b[0] and a[1] != b[1] and c == band_seed("sc1_7")
    assert epoch_salt("run-a", 3) == epoch_salt("run-a", 3) != epoch_salt("run-b", 3)
    assert len(epoch_salt("run-a", 3)) == 8


def test_no_band_repeats_across_rows_and_epochs():
    seeds, layouts = set(), set()
    env = make_env(render=False)
    for epoch in range(12):
        for i in range(48):
            env.reset(f"sc2_{i}", epoch=epoch)
            seeds.add(env.band_seed)
            layouts.add(env.layout.centers)
    assert len(seeds) == 48 * 12 and len(layouts) == 48 * 12


def test_explicit_seed_and_session_seed():
    env = make_env()
    env.reset(seed=session_band_seed("session-xyz"))
    assert env.band_seed == int(hashlib.md5(b"session-xyz").hexdigest()[:12], 16)
    with pytest.raises(ValueError, match="row_id"):
        env.reset()


# ----------------------------------------------------------------------------- memory channels


def _scan_texts(env):
    return [m["content"] for m in env.transcript if m["role"] == "user"]


def test_memory_none_has_no_echo_and_only_submit():
    env = make_env(memory="none")
    obs = env.reset("r0")
    assert [t["function"]["name"] for t in env.tools()] == ["submit_report"]
    while not obs.done:
        assert obs.echo is None
        obs, *_ = step4(env, [20.0, 40.0])
    assert all(RUNNING_LIST_HEADER not in t for t in _scan_texts(env))
    assert all(t.startswith(SCAN_MARKER + " ") for t in _scan_texts(env))


def test_echo_shows_previous_report_in_submission_order():
    env = make_env(memory="echo")
    obs = env.reset("r1")
    assert obs.echo is None and RUNNING_LIST_HEADER not in obs.text  # nothing reported yet
    obs, *_ = step4(env, [130.04, 20.0, 20.0, 75.55])
    assert obs.echo == [130.0, 20.0, 20.0, 75.5]  # .1f display parsed back; duplicates and order kept
    assert f"{RUNNING_LIST_HEADER}\n130.0, 20.0, 20.0, 75.5\n" in obs.text
    assert obs.text.endswith(env.text.rft_echo_instruction + "\n")
    obs, *_ = step4(env, [float(x) for x in range(20)])  # 20 → first 16 kept and echoed
    assert obs.echo == [float(x) for x in range(16)]
    obs, *_ = step4(env, [])  # an empty report: the echo disappears (B.15 #6)
    assert obs.echo is None and RUNNING_LIST_HEADER not in obs.text
    assert env.records[1]["echo"] == [130.0, 20.0, 20.0, 75.5]


def test_scrambled_echo_replaces_content_keeps_count():
    real = make_env(memory="echo")
    scr = make_env(memory="scrambled")
    for env in (real, scr):
        env.reset("r2", epoch=1)
    report = [15.0, 33.3, 47.1, 99.9, 150.0]
    o_real, *_ = step4(real, report)
    o_scr, *_ = step4(scr, report)
    assert len(o_scr.echo) == len(o_real.echo) == 5
    assert o_scr.echo != o_real.echo
    assert o_scr.echo == sorted(o_scr.echo)
    assert o_scr.echo == scrambled_list(scr.band_seed, 2, 5, scr.salt)
    assert scr.records[0]["report"] == report  # the env stores the model's real report
    assert f"{RUNNING_LIST_HEADER}\n" + ", ".join(f"{x:.1f}" for x in o_scr.echo) in o_scr.text
    # reproducible, and independent of the report's content (only its size matters)
    again = make_env(memory="scrambled")
    again.reset("r2", epoch=1)
    o_again, *_ = step4(again, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert o_again.echo == o_scr.echo
    o_next, *_ = step4(scr, report)
    assert o_next.echo != o_scr.echo  # a fresh draw at every scan


def test_scrambled_echo_statistics():
    vals = []
    for seed in range(400):
        lst = scrambled_list(seed * 1_000_003, 2 + seed % 11, 10, salt="s")
        assert len(lst) == 10 and lst == sorted(lst)
        assert all(8.0 <= x <= 172.0 and x == round(x, 1) for x in lst)
        vals.extend(lst)
    # uniform on [8, 172]: mean 90, sd 164/sqrt(12); Kolmogorov–Smirnov distance small
    assert statistics.fmean(vals) == pytest.approx(90.0, abs=2.0)
    assert statistics.pstdev(vals) == pytest.approx(164 / math.sqrt(12), rel=0.03)
    xs = sorted(vals)
    n = len(xs)
    ks = max(max((i + 1) / n - (x - 8) / 164, (x - 8) / 164 - i / n) for i, x in enumerate(xs))
    assert ks < 1.63 / math.sqrt(n)  # the 1% critical value
    # consecutive scans of one episode are not correlated
    a = [scrambled_list(77, k, 1)[0] for k in range(2, 2002)]
    rho = statistics.correlation(a[:-1], a[1:])
    assert abs(rho) < 0.1


def test_notepad_tools():
    env = make_env(memory="notepad")
    assert [t["function"]["name"] for t in env.tools()] == ["notepad_read", "notepad_write", "submit_report"]
    obs = env.reset("r3")
    obs, r, done, info = step4(env, ToolCall("notepad_read"))
    assert obs.tool_results[0]["content"] == env.text.rft_notepad_empty
    assert obs.text is None and obs.scan_num == 1 and not info.scored  # no advance
    obs, *_ = step4(env, ToolCall("notepad_write", {"text": "x" * 2500}))
    assert obs.tool_results[0]["content"] == "ok" and env.notepad == "x" * 2000
    obs, *_ = step4(env, ToolCall("notepad_write", json.dumps({"text": "12.5, 40.0"})))
    assert env.notepad == "12.5, 40.0"  # overwrite, not append
    obs, *_ = step4(env, AssistantTurn((ToolCall("notepad_read"), submit([12.5, 40.0]))))
    assert obs.tool_results[0]["content"] == "12.5, 40.0" and obs.scan_num == 2
    obs, *_ = step4(env, ToolCall("notepad_read"))
    assert obs.tool_results[0]["content"] == "12.5, 40.0"  # persists across scans
    env.step(ToolCall("notepad_write", {"text": 123}))
    assert env.notepad == "123"
    assert env.records[0]["notepad_reads"] == 2 and env.records[0]["notepad_writes"] == 2
    assert SCAN_MARKER in env.transcript[0]["content"] and "notepad" in env.marker()


def test_call_budget_forces_an_unscored_empty_step():
    env = make_env(memory="notepad")
    env.reset("r4")
    for _k in range(5):
        obs, _r, _d, info = step4(env, ToolCall("notepad_read"))
        assert not info.forced and obs.scan_num == 1
    obs, _r, _d, info = step4(env, ToolCall("notepad_read"))  # 6th call without a submit
    assert info.forced and obs.scan_num == 2 and obs.text is not None
    assert env.records[0]["submitted"] is False and env.records[0]["score_line"] is None
    m = env.metrics()
    assert m["scans_completed"] == 0 and m["scans_forced"] == 1 and m["reward"] == -0.2


def test_text_without_tool_call_forces_advance():
    env = make_env(memory="echo")
    env.reset("r5")
    obs, _r, _d, info = step4(env, "I think the band is empty.")
    assert info.forced and obs.scan_num == 2
    obs, _r, _d, info = step4(env, AssistantTurn((), "still thinking"))
    assert info.forced and obs.scan_num == 3


def test_icl_off_windowing():
    system = [{"role": "system", "content": "SYS"}]
    env = make_env(memory="notepad", window=True)
    env.reset("r6")
    env.step(ToolCall("notepad_read"))
    env.step(submit([10.0]))
    env.step(ToolCall("notepad_read"))
    view = env.model_input(system)
    assert view[0] == system[0]
    assert view[1]["role"] == "user" and view[1]["content"].startswith(SCAN_MARKER)
    assert "--- Scan 2/12 ---" in view[1]["content"]
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool"]
    full = make_env(memory="notepad", window=False)
    full.reset("r6")
    full.step(ToolCall("notepad_read"))
    full.step(submit([10.0]))
    assert [m["role"] for m in full.model_input(system)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
    ]


def test_window_messages_on_mcp_style_transcript():
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": f"{SCAN_MARKER} scan 1"},
        {"role": "assistant", "content": f"I saw {SCAN_MARKER} before"},
        {"role": "tool", "content": f"{SCAN_MARKER} scan 2\nSCAN_OCC: 0.1 SCAN_AVAIL: 0.2"},
        {"role": "assistant", "content": "", "tool_calls": []},
    ]
    assert [m["content"] for m in window_messages(msgs)] == [msgs[3]["content"], ""]


def test_tool_delivery_and_score_visibility():
    env = make_env(memory="echo", delivery="tool", show_scores=False)
    env.reset("r7")
    obs, *_ = step4(env, submit([30.0]))
    res = obs.tool_results[0]
    assert res["content"].startswith(SCAN_MARKER) and "--- Scan 2/12 ---" in res["content"]
    assert "SCAN_OCC" not in res["content"]  # hidden by default (B.15 #2)
    shown = make_env(memory="echo", delivery="tool", show_scores=True)
    shown.reset("r7")
    obs, *_ = step4(shown, submit([30.0]))
    assert obs.tool_results[0]["content"].endswith(shown.records[0]["score_line"])
    user = make_env(memory="echo", show_scores=True)
    user.reset("r7")
    obs, *_ = step4(user, [30.0])
    assert obs.text.endswith("\n" + user.records[0]["score_line"])
    hidden = make_env(memory="echo")
    hidden.reset("r7")
    obs, *_ = step4(hidden, [30.0])
    assert "SCAN_OCC" not in obs.text and obs.tool_results[0]["content"].startswith("ok\nSCAN_OCC: ")


# ------------------------------------------------------------------------------ malformed input


def test_normalize_center_freqs_rules():
    out, note = normalize_center_freqs([20.0, "35.5", "abc", None, True, float("nan"), float("inf"), 7])
    assert out == [20.0, 35.5, 7.0]
    assert (note.converted_strings, note.non_numeric, note.non_finite) == (1, 3, 2)
    out, note = normalize_center_freqs(list(map(float, range(20))))
    assert out == [float(x) for x in range(16)] and note.over_cap == 4
    out, note = normalize_center_freqs([10.0, 10.0, -5.0, 200.0])
    assert out == [10.0, 10.0, -5.0, 200.0] and note.duplicates == 1 and note.out_of_band == 2
    assert normalize_center_freqs("[1, 2.5]")[0] == [1.0, 2.5]
    assert normalize_center_freqs(42)[0] == [42.0]
    for bad in ({"a": 1}, "not json", None, True):
        out, note = normalize_center_freqs(bad)
        assert out == [] and note.malformed


def test_malformed_submits_are_scored_and_recorded():
    env = make_env(memory="echo")
    env.reset("sc1_0")
    centre = env.layout.centers[0]
    # out-of-band regions are clipped by the scorer: fully outside scores nothing
    obs, reward, _d, info = step4(env, [500.0, -50.0])
    assert info.scored and reward == 0.0 and info.actions[0].out_of_band == 2
    # a region straddling the band edge keeps its in-band part
    obs, reward, _d, info = step4(env, [centre, "oops"])
    assert info.actions[0].non_numeric == 1 and env.records[-1]["report"] == [centre]
    # duplicates score like one copy
    obs, dup_reward, _d, info = step4(env, [centre, centre])
    assert dup_reward == reward and info.actions[0].duplicates == 1
    # over-cap: the first 16 count
    many = [float(x) for x in range(5, 180, 5)]
    obs, _r, _d, info = step4(env, many)
    assert env.records[-1]["report"] == many[:16] and info.actions[0].over_cap == len(many) - 16
    # center_freqs of a wrong type / missing / unparsable arguments: an empty report, scored
    for call in (
        ToolCall("submit_report", {"center_freqs": {"x": 1}}),
        ToolCall("submit_report", {}),
        ToolCall("submit_report", "{not json"),
        {"function": {"name": "submit_report", "arguments": '{"center_freqs": "garbage"}'}},
    ):
        before = len(env.records)
        obs, reward, _d, info = step4(env, call)
        assert info.scored and reward == 0.0 and env.records[-1]["report"] == []
        assert env.records[-1]["action"].malformed
        assert len(env.records) == before + 1
    assert env.metrics()["scans_completed"] == len(env.records)


def test_unknown_tool_and_unavailable_tool_do_not_advance():
    env = make_env(memory="echo")
    env.reset("r8")
    obs, _r, _d, info = step4(env, ToolCall("notepad_write", {"text": "hi"}))  # not offered in echo arms
    assert obs.scan_num == 1 and info.tool_errors and env.notepad == ""
    obs, _r, _d, info = step4(env, {"function": {"name": "launch_missiles", "arguments": "{}"}})
    assert obs.scan_num == 1 and "not available" in obs.tool_results[0]["content"]


def test_two_submits_in_one_message():
    turn = AssistantTurn((submit([10.0]), submit([20.0, 30.0])))
    env = make_env(memory="echo")
    env.reset("r9")
    obs, _r, _d, info = step4(env, turn)
    assert len(env.records) == 1 and env.records[0]["report"] == [10.0]
    assert obs.tool_results[1]["content"].startswith("error:") and obs.scan_num == 2
    parity = make_env(memory="echo", multi_submit="upstream")
    parity.reset("r9")
    obs, *_ = step4(parity, turn)
    assert [r["report"] for r in parity.records] == [[10.0], [20.0, 30.0]] and obs.scan_num == 3


def test_env_never_raises_on_garbage():
    rng = random.Random(3)
    garbage = [
        None, 3, "x", b"bytes", {"foo": 1}, [None], [{"function": None}], [[1, 2]], ToolCall(""),
        ToolCall("submit_report", 17), ToolCall("submit_report", {"center_freqs": [[1.0], "2"]}),
        AssistantTurn(({"name": None},)), {"name": "notepad_read", "arguments": 5}, object(), float("nan"),
        [float("nan")], ("1", "2"), {"function": {"name": "submit_report", "arguments": '{"center_freqs": [1e309]}'}},
    ]  # fmt: skip
    for memory in ("none", "echo", "scrambled", "notepad"):
        env = make_env(memory=memory)
        obs = env.reset(f"g_{memory}")
        steps = 0
        while not obs.done and steps < 200:
            obs, reward, done, info = step4(env, rng.choice(garbage))
            assert isinstance(reward, float) and isinstance(info, SpectrumStepInfo)
            steps += 1
        assert obs.done
        m = env.metrics()
        assert m["scans_completed"] + m["scans_forced"] == 12


# --------------------------------------------------------------------------- reward integrity


def test_agent_authored_score_lines_are_not_counted():
    """B.15 #1: a notepad that says ``SCAN_OCC: 1.0`` is echoed by notepad_read; the env-side reward and
    the env-authored-only parser ignore it, upstream's all-message regex would count it."""
    env = make_env(memory="notepad")
    env.reset("r10")
    env.step(ToolCall("notepad_write", {"text": "SCAN_OCC: 1.0000 SCAN_AVAIL: 1.0000"}))
    env.step(AssistantTurn((ToolCall("notepad_read"), submit([]))))
    msgs = env.transcript
    occ_env, _ = parse_score_lines(msgs)
    occ_all, _ = parse_score_lines(msgs, env_authored_only=False)
    assert occ_env == [0.0] and occ_all == [1.0, 0.0]  # the notepad_read result injects 1.0
    assert env.metrics()["mean_occ"] == 0.0


def test_transcript_score_lines_match_env_records():
    env = make_env(memory="echo")
    obs = env.reset("r11")
    from rftlab.policies.spectrum.reference import RFTAccumulate

    pol = RFTAccumulate()
    while not obs.done:
        obs, *_ = step4(env, pol.act(obs))
    occ, avail = parse_score_lines(env.transcript)
    m = env.metrics()
    assert len(occ) == 12 and m["reward"] == pytest.approx(3 * sum(occ) / 12, abs=1e-12)
    assert m["mean_avail"] == pytest.approx(sum(avail) / 12, abs=1e-12)


def test_render_off_keeps_scores_and_metrics():
    from rftlab.policies.spectrum.reference import RFTEchoFollower

    out = []
    for render in (True, False):
        env = make_env(memory="echo", render=render)
        obs = env.reset("render_check")
        pol = RFTEchoFollower()
        while not obs.done:
            obs, *_ = step4(env, pol.act(obs))
        out.append((env.records, env.metrics()))
        assert bool(env.transcript) is render
    assert out[0] == out[1]


def test_episode_call_cap():
    env = make_env(memory="notepad", max_calls_per_scan=None, max_total_calls=5)
    env.reset("cap")
    for _ in range(4):
        obs, _r, done, info = step4(env, ToolCall("notepad_read"))
        assert not done
    obs, _r, done, info = step4(env, ToolCall("notepad_read"))
    assert done and info.truncated and env.metrics()["scans_completed"] == 0
    with pytest.raises(RuntimeError, match="finished"):
        env.step([1.0])


def test_displayed_echo_value_equals_round():
    """The echo stores ``float(f"{x:.1f}")`` (rendered) or ``round(x, 1)`` (unrendered): the same double."""
    rng = random.Random(11)
    xs = [rng.uniform(-20, 200) for _ in range(20000)] + [k / 100 + 0.05 for k in range(0, 18000, 7)]
    assert all(float(f"{x:.1f}") == round(x, 1) for x in xs)


# ------------------------------------------------------------------------------- echo and scorers


def test_echo_memo_keeps_negative_zero_apart():
    """The running list is rendered from a per-value memo; ``0.0`` and ``-0.0`` are equal keys but
    display differently, so they must never share an entry."""
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        env = make_env(memory="echo")
        env.reset("negzero")
        env.step([first, 50.0])
        obs, *_ = step4(env, [second, 50.0])
        assert obs.text.split(RUNNING_LIST_HEADER + "\n")[1].startswith(f"{second:.1f}, 50.0\n")
        assert repr(obs.echo) == repr([second, 50.0])


def test_scorers_take_iterators_and_any_width():
    rng = random.Random(7)
    for _ in range(300):
        gt = random_layout(rng.getrandbits(48)).regions()
        rep = [round(rng.uniform(-12, 192), 1) for _ in range(rng.randint(0, 16))]
        bw = rng.choice([8.0, 0.0, -1.0, 3.3, 12.0, 400.0])
        want_avail = available_iou(gt, [(c, bw) for c in rep], 180.0).score
        assert AvailableScorer(gt, 180.0).score(iter(rep), bw) == want_avail
        if bw > 0:
            want = occupied_iou_reference(gt, [(c, bw) for c in rep], 180.0)
            bits = OccupiedBitset(gt, 180.0)
            assert bits.score(iter(rep), bw) == want and bits.score(rep, bw) == want


# ------------------------------------------------------------------- implementation vs experiment settings


def test_render_is_an_implementation_setting_not_in_the_hash_or_the_rows():
    """Two configs that produce the same episodes hash the same; an experiment field changes the hash."""
    from dataclasses import asdict, replace

    from rftlab.policies.spectrum.reference import RFTAccumulate
    from rftlab.rollout.episode import episode
    from rftlab.rollout.spectrum.dataset import dataset_rows

    on = SpectrumRFTConfig(memory="echo", render=True)
    off = replace(on, render=False)
    assert on != off and on.sha256() == off.sha256()
    assert on.sha256() != replace(on, memory="scrambled").sha256()
    assert on.sha256() != replace(on, show_scores=True).sha256()
    # the hash is SHA-256 of the canonical JSON of every field except render (computed independently)
    fields = {k: v for k, v in asdict(on).items() if k != "render"}
    canon = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    assert on.sha256() == hashlib.sha256(canon).hexdigest()
    # ... and the two configs really do produce the same episode
    trajs = [episode(SpectrumRFTEnv(c), RFTAccumulate(), "impl_check", epoch=2) for c in (on, off)]
    assert trajs[0].metrics == trajs[1].metrics and trajs[0].rewards == trajs[1].rewards
    # dataset rows record the experiment fields only; a row's config rebuilds an equal-hash config
    for cfg in (on, off):
        row = next(dataset_rows(1, memory="echo", config=cfg))
        recorded = row["input_metadata"]["dataset_info"]["environment_context"]["config"]
        assert "render" not in recorded and "scorer" not in recorded
        assert SpectrumRFTConfig.from_dict(recorded).sha256() == on.sha256()
    # a row written before the scorer option was removed still loads (the key is ignored)
    legacy = {**on.to_dict(), "scorer": "raster"}
    assert SpectrumRFTConfig.from_dict(legacy) == on
    with pytest.raises(ValueError, match="unknown"):
        SpectrumRFTConfig.from_dict({**on.to_dict(), "nonsense": 1})
