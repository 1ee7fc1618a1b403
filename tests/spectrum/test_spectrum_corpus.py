"""BSM-official generator and frozen corpus (docs/spectrum.md §A.3, A.4, A.5, A.11)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil

import pytest

from rftlab.cli import main as cli_main
from rftlab.envs.spectrum import official
from rftlab.envs.spectrum.generator import ChannelDef, GeneratorParams, dashed_id, generate_scans

CLBENCH = "data/clbench"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_reference_fixture_hashes(shared_dir):
    folder = shared_dir / CLBENCH
    assert _sha((folder / "mixed_grid_lifecycle.jsonl").read_bytes()) == official.CORPUS_SHA256
    assert _sha((folder / "mixed_grid_lifecycle_metadata.json").read_bytes()) == official.METADATA_SHA256


def test_generated_corpus_is_byte_identical(shared_dir):
    ref = (shared_dir / CLBENCH / "mixed_grid_lifecycle.jsonl").read_bytes()
    ours = official.corpus_bytes()
    if ours != ref:  # point at the first divergent scan (scan ids expose RNG-order errors first)
        for k, (a, b) in enumerate(zip(ours.splitlines(), ref.splitlines(), strict=False)):
            ja, jb = json.loads(a), json.loads(b)
            assert ja["scan_id"] == jb["scan_id"], f"scan {k}: scan_id differs"
            assert ja == jb, f"scan {k} differs"
    assert ours == ref
    assert _sha(ours) == official.CORPUS_SHA256


def test_generated_metadata_is_byte_identical(shared_dir):
    ref = (shared_dir / CLBENCH / "mixed_grid_lifecycle_metadata.json").read_bytes()
    assert official.metadata_bytes() == ref


def test_cli_corpus_writes_reference_bytes(tmp_path, shared_dir):
    out = tmp_path / "corpus.jsonl"
    meta = tmp_path / "corpus_metadata.json"
    assert cli_main(["spectrum", "corpus", "--out", str(out), "--metadata", str(meta)]) == 0
    assert out.read_bytes() == (shared_dir / CLBENCH / "mixed_grid_lifecycle.jsonl").read_bytes()
    assert _sha(meta.read_bytes()) == official.METADATA_SHA256


def test_official_vectors_a11():
    rows = official.build_corpus()
    assert len(rows) == 90
    s0 = rows[0]
    assert s0["scan_id"] == "scan-8d5288f1-4b0d-d453-a0ee-e2ac9e574f7a"
    assert [(p["freq_mhz"], p["power_dbm"], p["width_mhz"], p["peak_id"]) for p in s0["detected_peaks"]] == [
        (32.3, -39.0, 14.8, "peak-3b982ef8-ddd1-19db-614f-741247294739"),
        (79.8, -39.0, 16.7, "peak-efc89849-aefc-a5e5-1247-a28d9bf00273"),
    ]
    assert {g["channel_def"]["id"] for g in s0["ground_truth"] if g["active_this_scan"]} == {2, 4}
    assert s0["ground_truth"][0]["center_freq"] == 7.86
    active = [{g["channel_def"]["id"] for g in r["ground_truth"] if g["active_this_scan"]} for r in rows[:5]]
    assert active == [{2, 4}, {3, 5, 7}, {1, 4}, {1, 3, 8, 11, 13}, {2, 5}]
    s2 = rows[2]
    assert [(p["freq_mhz"], p["power_dbm"], p["width_mhz"], p["source"]) for p in s2["detected_peaks"]] == [
        (8.4, -33.2, 12.1, "channel"),
        (10.8, -54.7, 1.9, "interference"),
        (11.3, -53.2, 3.1, "noise"),
    ]
    assert s2["interference_freqs"] == [10.76]
    assert rows[30]["scan_id"] == "scan-a51c6d2a-1613-df9e-aa30-2773bb2a90cd"
    assert rows[60]["scan_id"] == "scan-4d596e85-8c0f-e1f4-f15e-12a17325045b"
    assert rows[89]["scan_id"] == "scan-8a4d4d00-1b6b-59fc-f9e2-dcd839dbc91d"
    assert all(r["detected_peaks"] for r in rows)  # every corpus scan has >= 1 peak


def test_run_orders_a11():
    r1 = official.run_order(1)
    assert r1[:3] == [29, 23, 25] and r1[30:32] == [40, 37] and r1[60:62] == [79, 67]
    assert official.run_order(2)[:3] == [1, 19, 28]
    assert official.run_order(3)[:3] == [14, 16, 26]
    assert official.run_order(4)[:3] == [6, 19, 13]
    rows = official.build_corpus()
    ids = [rows[official.run_order(r)[0]]["scan_id"] for r in range(5)]
    assert ids == [
        "scan-8d5288f1-4b0d-d453-a0ee-e2ac9e574f7a",
        "scan-62dbc850-fe99-14e4-5ffa-0737397b5f51",
        "scan-654821d0-e27a-ea1f-a491-2493757750a9",
        "scan-96a9954f-fd72-6dc7-4e2d-9efb9191b363",
        "scan-0a368ce7-e61f-5b99-35c7-3fe1ae9bec36",
    ]
    for r in range(5):  # stage boundaries stay put
        order = official.run_order(r)
        assert sorted(order[:30]) == list(range(30)) and sorted(order[30:60]) == list(range(30, 60))


def test_ground_truth_is_13_nominal_channels():
    gt = official.ground_truth_channels()
    assert len(gt) == 13
    assert gt[:7] == [(7.5 + 24 * s, 15.0) for s in range(7)]
    assert gt[7:] == [(19.5 + 24 * k, 5.0) for k in range(6)]


def test_dashed_id_layout_and_draw_order():
    rng = random.Random(7)
    ref = random.Random(7)
    a, b, c, d, e = (ref.getrandbits(n) for n in (32, 16, 16, 16, 48))
    assert dashed_id(rng, "x") == f"x-{a:08x}-{b:04x}-{c:04x}-{d:04x}-{e:012x}"


def test_round_robin_uses_no_rng_without_eligible_channels():
    chans = [ChannelDef(id=1, slot=0, p_active=0.5)]
    params = GeneratorParams(n_active=2, p_interference=0.0, p_false_alarm=0.0, center_jitter=0.0)
    # with no eligible channel the only draws are the scan id and the override activity draw
    scans = generate_scans(chans, 1, seed=3, params=params)
    rng = random.Random(3)
    assert scans[0]["scan_id"] == dashed_id(rng, "scan")


def test_loader_contract(tmp_path, shared_dir):
    src = shared_dir / CLBENCH
    corpus = tmp_path / "mixed_grid_lifecycle.jsonl"
    meta = tmp_path / "mixed_grid_lifecycle_metadata.json"
    shutil.copy(src / "mixed_grid_lifecycle.jsonl", corpus)
    shutil.copy(src / "mixed_grid_lifecycle_metadata.json", meta)
    rows = official.load_corpus(corpus)
    assert rows == official.build_corpus()

    with pytest.raises(official.CorpusContractError, match="missing"):
        official.load_corpus(tmp_path / "absent.jsonl")

    corpus.write_bytes(corpus.read_bytes().replace(b'"scan_idx":5,', b'"scan_idx":6,', 1))
    with pytest.raises(official.CorpusContractError, match="sha256"):
        official.load_corpus(corpus)

    # row-count mismatch with a consistent sha
    lines = official.corpus_bytes().splitlines(keepends=True)[:89]
    corpus.write_bytes(b"".join(lines))
    m = json.loads(meta.read_text())
    m["jsonl_sha256"] = _sha(corpus.read_bytes())
    meta.write_text(json.dumps(m))
    with pytest.raises(official.CorpusContractError, match="rows"):
        official.load_corpus(corpus)

    # stage mismatch
    corpus.write_bytes(official.corpus_bytes())
    m["jsonl_sha256"] = official.CORPUS_SHA256
    m["stages"][1]["variant_id"] = "something_else"
    meta.write_text(json.dumps(m))
    with pytest.raises(official.CorpusContractError, match="stage 1"):
        official.load_corpus(corpus)


FIXTURE_SHA256 = {
    "templates/blind_spectrum_monitoring/task.j2": "995239691dbce3472823237e233117de084f1bbdbedbc74514bad00c6c3a51be",
    "templates/blind_spectrum_monitoring/instance.j2": "6f866783a6baf225f2b971843cc044212075ff45ffab65837be6c4b1af675f58",
    "templates/blind_spectrum_monitoring/feedback.j2": "82976791d58407026bdbdf532d710ff7336c20a4a23302db312bae80d6d251c1",
}


def test_template_fixture_hashes(shared_dir):
    for rel, digest in FIXTURE_SHA256.items():
        assert _sha((shared_dir / CLBENCH / rel).read_bytes()) == digest, rel
