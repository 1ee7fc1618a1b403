"""The SFT data audit (docs/arena.md §9.7): passes on fresh data, fails on every kind of corruption, one line per failure."""

from __future__ import annotations

import json
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from option_errors import refused_option

from rftlab.analysis.arena.audit import audit_dataset
from rftlab.cli import main
from rftlab.envs.arena.cases import frozen_cases
from rftlab.rollout.arena.sft_data import SftConfig, make_row, write_dataset

SMALL = SftConfig(num_seeds=40, targeted_mechanics_per_kind=3, targeted_silence_examples=8)
FILES = (
    "manifest.json",
    "train.jsonl",
    "validation.jsonl",
    "test.jsonl",
    "train_broadcast.jsonl",
    "train_action_common.jsonl",
    "train_action_rare.jsonl",
    "train_mixture.jsonl",
    "overfit_256.jsonl",
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft") / "data"
    write_dataset(root, SMALL)
    return root


@pytest.fixture
def data(pristine, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(pristine, copy)
    return copy


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _edit_row(data, file, predicate, edit, rehash=True):
    """Apply ``edit`` to the first row of ``file`` matching ``predicate``; returns that row's new id."""
    rows = _rows(data / file)
    index = next(i for i, r in enumerate(rows) if predicate(r))
    edit(rows[index])
    if rehash:
        rows[index] = make_row(rows[index]["messages"], rows[index]["metadata"])
    _write(data / file, rows)
    return rows[index]["id"], index + 1


def _codes(report):
    return [failure.rsplit(": ", 1)[-1] for failure in report.failures]


def _is_act(row):
    return row["metadata"]["phase"] == "ACT" and "generator_mode" not in row["metadata"]


def test_fresh_data_passes(pristine):
    report = audit_dataset(pristine)
    assert report.valid, report.failures
    assert report.num_examples == sum(
        len(_rows(pristine / f"{s}.jsonl")) for s in ("train", "validation", "test")
    )
    assert report.broadcast_fact_counts["0"] == SMALL.targeted_silence_examples
    assert set(report.action_kinds) == {"CAPTURE", "FORTIFY", "PROBE", "RECOVER", "SCAN", "TRANSFER", "WAIT"}


def test_split_coverage_flag_reports_each_split(pristine):
    report = audit_dataset(pristine, require_split_action_coverage=True)
    assert any(f.startswith("dataset: missing_validation_action_coverage:") for f in report.failures)


@pytest.mark.parametrize("name", FILES)
def test_one_tampered_byte_in_any_file_fails(data, name):
    path = data / name
    raw = bytearray(path.read_bytes())
    rng = random.Random(name)
    for position in sorted(rng.sample(range(len(raw)), 2)):
        tampered = bytearray(raw)
        tampered[position] = (tampered[position] + 1) % 256 if tampered[position] != 0x20 else 0x09
        path.write_bytes(bytes(tampered))
        report = audit_dataset(data)
        assert not report.valid, (name, position)
    path.write_bytes(bytes(raw))
    assert audit_dataset(data).valid


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    file_index=st.integers(0, len(FILES) - 1),
    fraction=st.floats(0, 1, exclude_max=True),
    delta=st.integers(1, 255),
)
def test_any_single_byte_change_fails_the_audit(pristine, tmp_path, file_index, fraction, delta):
    root = tmp_path / "h"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(pristine, root)
    path = root / FILES[file_index]
    raw = bytearray(path.read_bytes())
    position = int(fraction * len(raw))
    raw[position] = (raw[position] + delta) % 256
    path.write_bytes(bytes(raw))
    assert not audit_dataset(root).valid


def test_frozen_seed_leakage(data):
    frozen = frozen_cases()[0].seed
    row_id, line = _edit_row(data, "train.jsonl", _is_act, lambda r: r["metadata"].update(seed=frozen))
    report = audit_dataset(data)
    assert f"row train.jsonl:{line} ({row_id}): frozen_eval_leakage" in report.failures


def test_wrong_split_row_in_the_wrong_file(data):
    rows = _rows(data / "train.jsonl")
    moved = rows.pop(0)
    _write(data / "train.jsonl", rows)
    test_rows = _rows(data / "test.jsonl")
    _write(data / "test.jsonl", [*test_rows, moved])
    report = audit_dataset(data)
    assert f"row test.jsonl:{len(test_rows) + 1} ({moved['id']}): wrong_split" in report.failures


def test_wrong_split_metadata(data):
    _edit_row(data, "train.jsonl", _is_act, lambda r: r["metadata"].update(split="validation"))
    assert "wrong_split" in _codes(audit_dataset(data))


def test_bad_act_label_is_not_solver_optimal(data):
    def relabel(row):
        user = json.loads(row["messages"][1]["content"])
        current = json.loads(row["messages"][2]["content"])["action_id"]
        other = next(e["id"] for e in user["legal_actions"] if e["id"] != current)
        row["messages"][2]["content"] = json.dumps({"action_id": other}, separators=(",", ":"))

    row_id, line = _edit_row(data, "train.jsonl", _is_act, relabel)
    report = audit_dataset(data)
    assert f"row train.jsonl:{line} ({row_id}): not_solver_optimal" in report.failures
    assert f"row train.jsonl:{line} ({row_id}): label_mismatch" in report.failures


def test_unparseable_act_label(data):
    _edit_row(data, "train.jsonl", _is_act, lambda r: r["messages"][2].update(content='{"action_id":"A99"}'))
    assert "invalid_action:action_id_range" in _codes(audit_dataset(data))


def test_broadcast_label_with_an_invented_fact(data):
    def invent(row):
        target = json.loads(row["messages"][2]["content"])
        target["facts"] = [dict(target["facts"][0], value=(target["facts"][0]["value"] % 3) + 1)]
        row["messages"][2]["content"] = json.dumps(target, sort_keys=True, separators=(",", ":"))

    _edit_row(
        data,
        "train.jsonl",
        lambda r: r["metadata"]["phase"] == "BROADCAST" and '"facts":[{' in r["messages"][2]["content"],
        invent,
    )
    assert "invalid_broadcast:unsupported_fact" in _codes(audit_dataset(data))


def test_answer_leakage_in_the_prompt(data):
    def leak(row):
        user = json.loads(row["messages"][1]["content"])
        user["answer_key"] = row["messages"][2]["content"]
        row["messages"][1]["content"] = json.dumps(user, sort_keys=True, separators=(",", ":"))

    _edit_row(data, "train.jsonl", _is_act, leak)
    codes = _codes(audit_dataset(data))
    assert "answer_leakage" in codes and "prompt_mismatch" in codes


def test_conflicting_declared_intent(data):
    def conflict(row):
        user = json.loads(row["messages"][1]["content"])
        action_id = json.loads(row["messages"][2]["content"])["action_id"]
        chosen = next(e for e in user["legal_actions"] if e["id"] == action_id)
        user["inbox"][0]["broadcast"]["intent"] = {k: v for k, v in chosen.items() if k != "id"}
        row["messages"][1]["content"] = json.dumps(user, sort_keys=True, separators=(",", ":"))

    _edit_row(
        data, "train.jsonl", lambda r: _is_act(r) and '"WAIT"}' not in r["messages"][2]["content"], conflict
    )
    assert "conflicting_declared_intent" in _codes(audit_dataset(data))


def test_chat_schema_version_duplicate_and_row_id(data):
    rows = _rows(data / "train.jsonl")
    rows[0]["messages"] = rows[0]["messages"][:2]  # no assistant turn
    rows[1]["metadata"]["prompt_version"] = "arena-v2-structured-priority"
    rows[1] = make_row(rows[1]["messages"], rows[1]["metadata"])
    rows[2]["metadata"]["agent_id"] = "blue-3" if rows[2]["metadata"]["agent_id"] != "blue-3" else "blue-2"
    rows.append(rows[3])  # duplicate
    _write(data / "train.jsonl", rows)
    failures = audit_dataset(data).failures
    assert any(f.endswith(": chat_schema") and "train.jsonl:1 " in f for f in failures)
    assert any(f.endswith(": prompt_version") and "train.jsonl:2 " in f for f in failures)
    assert any(f.endswith(": row_id") and "train.jsonl:3 " in f for f in failures)
    assert any(f.endswith(": duplicate_id") for f in failures)


def test_missing_row_and_manifest_counts(data):
    rows = _rows(data / "validation.jsonl")
    dropped = rows.pop()
    _write(data / "validation.jsonl", rows)
    failures = audit_dataset(data).failures
    assert any(f.startswith(f"row {dropped['id']}: missing_row") for f in failures)
    assert "manifest.json: manifest_content_hash" in failures
    assert "manifest.json: manifest_example_count" in failures
    assert "manifest.json: manifest_split_counts" in failures


def test_consistently_forged_manifest_still_fails(data):
    """Editing a row and re-hashing the manifest's file entry does not hide the edit."""
    import hashlib

    _edit_row(data, "test.jsonl", lambda r: True, lambda r: r["metadata"].update(label_source="made_up"))
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["files"]["test.jsonl"] = hashlib.sha256((data / "test.jsonl").read_bytes()).hexdigest()
    (data / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    codes = _codes(audit_dataset(data))
    assert "metadata_mismatch" in codes


def test_missing_and_garbage_files(data):
    (data / "train_action_rare.jsonl").unlink()
    (data / "validation.jsonl").write_text("not json\n")
    failures = audit_dataset(data).failures
    assert "train_action_rare.jsonl: missing" in failures
    assert "row validation.jsonl:1 (?): invalid_row_json" in failures
    (data / "manifest.json").write_text("[1, 2]")
    assert "manifest.json: not_object" in audit_dataset(data).failures


def test_audit_cli_exit_codes_and_lines(pristine, data, capsys, tmp_path):
    out = tmp_path / "report.json"
    assert main(["arena", "audit", str(pristine), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["valid"] is True
    assert "audit passed" in capsys.readouterr().out
    _edit_row(data, "train.jsonl", _is_act, lambda r: r["metadata"].update(split="test"))
    assert main(["arena", "audit", str(data)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("row train.jsonl:") and line.endswith(": wrong_split") for line in err)
    assert json.loads((data / "audit.json").read_text())["valid"] is False
    missing = tmp_path / "nope"
    refused_option(["arena", "audit", missing], capsys, "directory", "an existing folder", f"got '{missing}'")


@pytest.mark.slow
def test_stage1_audit_reproduces_the_spec_report(tmp_path):
    write_dataset(tmp_path / "d")
    report = audit_dataset(tmp_path / "d", require_split_action_coverage=True)
    assert report.valid, report.failures[:5]
    assert report.action_kinds == {
        "CAPTURE": 125, "FORTIFY": 216, "PROBE": 272, "RECOVER": 189, "SCAN": 32, "TRANSFER": 34, "WAIT": 32,
    }  # fmt: skip
    assert list(report.action_positions.values()) == [187, 179, 151, 142, 114, 75, 44, 6, 2]
    assert report.broadcast_fact_counts == {"0": 512, "1": 770, "2": 2176, "3": 1150}
    assert report.verified_solver_seeds == 673
    assert report.num_unique_seeds == 1632
