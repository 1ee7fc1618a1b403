"""``--set KEY=VALUE`` on arm specs and sweep files (``rftlab.launch.overrides``, ``rftlab arm launch/sweep``):
the parser's properties (hypothesis), the spec model as the validator, hashes (unchanged without overrides,
equal to the same spec written in a file with them), what a run records, and the sweep grid."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.launch.overrides import (
    MAX_SWEEP_SPECS,
    Override,
    apply_overrides,
    expand_sweep,
    load_sweep,
    override_spec,
    parse_override,
    sweep_specs,
)
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import RunStore

REPO = Path(__file__).resolve().parents[2]
SPEC_C = REPO / "data" / "specs" / "spectrum_C.json"
SMALL = ["rows=3", "epochs=2", "response_candidates=3"]

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
keys = st.lists(names, min_size=1, max_size=4).map(tuple)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(keys, json_values)
def test_a_json_value_round_trips(key, value):
    ov = parse_override(f"{'.'.join(key)}={json.dumps(value)}")
    assert ov.key == key and ov.value == value
    assert parse_override(ov.text) == ov  # the recorded text reads back as the same override


def _is_json(text: str) -> bool:
    try:
        json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    except (ValueError, RecursionError):
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(keys, st.text(max_size=30))
def test_a_value_that_is_not_json_stays_the_string_given(key, text):
    ov = parse_override(f"{'.'.join(key)}={text}")
    if _is_json(text):
        assert ov.value == json.loads(text)
    else:
        assert ov.value == text and isinstance(ov.value, str)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_with_one_line(text):
    try:
        ov = parse_override(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--set ")
        return
    assert "=" in text and ".".join(ov.key) == text.partition("=")[0].strip()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_numbers_here(value):
    assert parse_override(f"learning_rate={value}").value == value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(names, json_values, max_size=4), keys, json_values)
def test_an_override_sets_its_path_and_nothing_else(data, key, value):
    try:
        out = apply_overrides(data, [Override(key, value)])
    except ValueError as exc:  # the path runs through a value that is not an object
        node, blocked = data, False
        for part in key[:-1]:
            child = node.get(part)
            if child is None:
                break
            if not isinstance(child, dict):
                blocked = True
                break
            node = child
        assert blocked and "not an object" in str(exc)
        return
    node = out
    for part in key[:-1]:
        node = node[part]
    assert node[key[-1]] == value
    assert {k: v for k, v in out.items() if k != key[0]} == {k: v for k, v in data.items() if k != key[0]}
    assert data == json.loads(json.dumps(data))  # the input is left as it was


# ------------------------------------------------------------------ the spec model decides


def test_no_override_keeps_the_spec_and_its_hash():
    spec = load_arm_spec(SPEC_C)
    assert override_spec(spec, []) is spec
    assert override_spec(spec, ["rows=48"]).sha256() == spec.sha256()  # the value it already had


def test_overrides_hash_as_the_same_spec_written_in_a_file(tmp_path):
    data = json.loads(SPEC_C.read_text())
    data.update(rows=3, learning_rate=3e-4, prompt="explicit")
    data["fireworks"]["lora_rank"] = 8
    written = tmp_path / "spec.json"
    written.write_text(json.dumps(data))
    overridden = override_spec(
        load_arm_spec(SPEC_C), ["rows=3", "learning_rate=3e-4", "prompt=explicit", "fireworks.lora_rank=8"]
    )
    assert overridden.sha256() == load_arm_spec(written).sha256() != load_arm_spec(SPEC_C).sha256()


@pytest.mark.parametrize(
    "override, message",
    [
        ("rows=abc", "--set rows=abc: field rows: Input should be a valid integer"),
        ("rows=2.0", "field rows: Input should be a valid integer"),
        ("rows=0", "field rows: Input should be greater than or equal to 1"),
        ("rowz=3", "the spec has no field 'rowz' (its fields: advantage, arm,"),
        ("fireworks.lorarank=8", "no field 'fireworks.lorarank' (its fields: base_model,"),
        ("rows.x=3", "rows is 48, not an object with fields"),
        ("prompt=strong", "field prompt: Input should be 'explicit' or 'weak'"),
        ("learning_rate=NaN", "field learning_rate"),
        ("arm=../x", "field arm: String should match pattern"),
        ("rows", "give KEY=VALUE"),
        ("=3", "is not a field name"),
    ],
)
def test_a_bad_override_is_one_line_naming_it(override, message):
    with pytest.raises(ValueError) as info:
        override_spec(load_arm_spec(SPEC_C), [override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_bad_override_on_the_cli_is_one_error_line(tmp_path, capsys):
    code = main(["arm", "launch", str(SPEC_C), "--set", "rows=abc", "--root", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "rftlab: error: --set rows=abc: field rows: Input should be a valid integer (got 'abc')"
    ]
    assert not (tmp_path / "runs").exists()  # nothing was launched


def test_a_launch_with_overrides_records_them_and_the_new_hash(tmp_path, capsys):
    root = tmp_path / "runs"
    argv = ["arm", "launch", str(SPEC_C), "--backend", "local", "--root", str(root), "--json"]
    assert main([*argv, *itertools.chain.from_iterable(("--set", o) for o in [*SMALL, "seed=4"])]) == 0
    ref = json.loads(capsys.readouterr().out)
    (run,) = RunStore(root).runs()
    want = override_spec(load_arm_spec(SPEC_C), [*SMALL, "seed=4"])
    assert str(run.path) == ref["path"] and run.record.spec_sha256 == want.sha256()
    assert run.record.spec == want.to_dict() and run.record.spec["seed"] == 4
    assert run.record.provider["overrides"] == [*SMALL, "seed=4"]
    assert run.record.provider["base_spec_sha256"] == load_arm_spec(SPEC_C).sha256()
    status = ["arm", "status", str(SPEC_C), "--root", str(root), "--json"]
    assert main([*status, *itertools.chain.from_iterable(("--set", o) for o in [*SMALL, "seed=4"])]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run.run_id


# ------------------------------------------------------------------ sweeps


def test_a_grid_expands_last_key_fastest():
    grid = {("learning_rate",): [1e-4, 3e-4], ("seed",): [0, 1, 2]}
    points = expand_sweep(grid)
    assert [[o.value for o in p] for p in points] == [
        list(c) for c in itertools.product([1e-4, 3e-4], [0, 1, 2])
    ]
    with pytest.raises(ValueError, match="at most"):
        expand_sweep({("a",): list(range(MAX_SWEEP_SPECS)), ("b",): [0, 1]})


def test_sweep_files_json_and_yaml_give_the_same_specs(tmp_path):
    pytest.importorskip("yaml")
    (tmp_path / "s.json").write_text(
        json.dumps({"learning_rate": [1e-4, 3e-4], "fireworks.lora_rank": [8, 16]})
    )
    (tmp_path / "s.yaml").write_text("learning_rate: [0.0001, 0.0003]\nfireworks.lora_rank: [8, 16]\n")
    spec = load_arm_spec(SPEC_C)
    a = sweep_specs(spec, load_sweep(tmp_path / "s.json"), SMALL)
    b = sweep_specs(spec, load_sweep(tmp_path / "s.yaml"), SMALL)
    assert [s.sha256() for _, s in a] == [s.sha256() for _, s in b]
    assert len({s.sha256() for _, s in a}) == 4
    assert [(s.learning_rate, s.fireworks.lora_rank, s.rows) for _, s in a] == [
        (1e-4, 8, 3),
        (1e-4, 16, 3),
        (3e-4, 8, 3),
        (3e-4, 16, 3),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[1, 2]", "one non-empty object"),
        ("{}", "one non-empty object"),
        ('{"rows": []}', "empty list"),
        ('{"rows": [3, 3]}', "lists a value twice"),
        ('{"bad key": [1]}', "is not a field name"),
        ('{"rows": [1', "not valid JSON"),
        ('{"learning_rate": [NaN]}', "not a valid sweep file"),
    ],
)
def test_a_bad_sweep_file_is_refused_naming_it(tmp_path, text, message):
    path = tmp_path / "sweep.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        load_sweep(path)
    assert str(path) in str(info.value)


def test_arm_sweep_lists_then_launches_each_spec(tmp_path, capsys):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"seed": [0, 1], "learning_rate": [1e-4, 3e-4]}))
    root = tmp_path / "runs"
    sets = list(itertools.chain.from_iterable(("--set", o) for o in SMALL))
    base = ["arm", "sweep", str(SPEC_C), str(sweep), "--root", str(root), *sets]
    assert main([*base, "--dry-run", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    spec = load_arm_spec(SPEC_C)
    want = [
        override_spec(spec, [*SMALL, f"seed={s}", f"learning_rate={lr}"])
        for s in (0, 1)
        for lr in (1e-4, 3e-4)
    ]
    assert [r["spec_sha256"] for r in listed] == [w.sha256() for w in want]
    assert not root.exists()  # a dry run launches nothing
    assert main(base) == 0
    out = capsys.readouterr().out
    assert sum(w.sha256()[:12] in out for w in want) == 4
    runs = RunStore(root).runs()
    assert sorted(r.record.spec_sha256 for r in runs) == sorted(w.sha256() for w in want)
    assert all(r.record.status == "finished" and len(r.record.provider["overrides"]) == 5 for r in runs)
    assert main(base) == 0 and capsys.readouterr().out.count("reused a finished run") == 4
    by_hash = {w.sha256(): w for w in want}
    assert all(r.record.spec == by_hash[r.record.spec_sha256].to_dict() for r in runs)


# ------------------------------------------------------------------ the poker launch


def test_poker_launch_takes_set_overrides(capsys):
    from rftlab.launch.poker.spec import load_poker_arm_spec

    seed = REPO / "data" / "specs" / "poker_seed.json"
    base = ["poker", "launch", str(seed), "--dry-run", "--account-id", "acct"]
    assert main([*base, "--set", "learning_rate=2e-6", "--set", "epochs=3"]) == 0
    out = capsys.readouterr().out
    want = override_spec(load_poker_arm_spec(seed), ["learning_rate=2e-6", "epochs=3"])
    assert f"spec sha256 {want.sha256()[:12]}" in out and want.sha256() != load_poker_arm_spec(seed).sha256()
    assert "--learning-rate 2e-06" in out
    assert main([*base, "--set", "hands=abc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rftlab: error: --set hands=abc: field hands: Input should be a valid integer (got 'abc')"]


@pytest.mark.slow  # trains the tiny agent model one epoch in process (about 20 s on a loaded 2-core machine)
def test_a_poker_tinker_run_records_its_overrides(tmp_path):
    from rftlab.launch.poker.spec import load_poker_arm_spec
    from rftlab.studies.poker import launch_arm
    from rftlab.training.local_tinker import LocalServiceClient

    seed = load_poker_arm_spec(REPO / "data" / "specs" / "poker_seed.json")
    overrides = ["rows=1", "epochs=1", "response_candidates=2", "hands=1", "fireworks=null", "arm=tiny"]
    spec = override_spec(seed, overrides)
    done = launch_arm(
        spec,
        "tinker",
        tmp_path / "runs",
        provenance={"overrides": overrides, "base_spec_sha256": seed.sha256()},
        service=LocalServiceClient(storage_dir=tmp_path / "ckpt"),
        close_session=False,
        max_tokens=8,
        lora_rank=4,
    )
    run = RunStore(tmp_path / "runs").runs()[0]
    assert done.status.state == "completed" and run.path == done.ref.path
    assert run.record.spec_sha256 == spec.sha256() and run.record.provider["overrides"] == overrides
    assert run.record.provider["base_spec_sha256"] == seed.sha256()


def test_an_asynchronous_launch_gets_the_overrides_after_it_returns(tmp_path, monkeypatch):
    """A launcher that leaves its run running (as the Fireworks one does, the job going on remotely) and
    knows nothing of provenance: ``launch_arm`` records the overrides in the unfinished run afterwards."""
    import rftlab.studies.spectrum as study
    from rftlab.types import RunRef, RunStatus

    class Remote:
        def launch(self, spec, *, root, resume=True, force=False):
            run, _ = RunStore(root).start_or_reuse(
                spec.experiment, spec.arm, spec.to_dict(), backend="fireworks"
            )
            run.set_provider(job_id="job-1")
            run.release()
            return RunRef(spec.experiment, spec.arm, run.run_id, run.path, "fireworks")

        def poll(self, ref):
            return RunStatus("running", progress=0, total=2)

    monkeypatch.setattr(study, "launcher_for", lambda backend, **kw: Remote())
    spec = override_spec(load_arm_spec(SPEC_C), SMALL)
    done = study.launch_arm(spec, "fireworks", tmp_path / "runs", provenance={"overrides": SMALL})
    (run,) = RunStore(tmp_path / "runs").runs()
    assert done.status.state == "running" and run.record.status == "running"
    assert run.record.provider == {"job_id": "job-1", "overrides": SMALL}


@pytest.mark.parametrize("text", ["a\n.b=1", "rows.=3", ".rows=3", "ro ws=3", "1rows=3"])
def test_a_malformed_key_is_refused(text):
    with pytest.raises(ValueError, match="is not a field name"):
        parse_override(text)


def test_a_sweep_key_with_a_newline_is_refused(tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"rows\n": [1]}))
    with pytest.raises(ValueError, match="is not a field name"):
        load_sweep(path)


def test_a_launch_without_overrides_hashes_and_records_as_before(tmp_path, capsys):
    data = json.loads(SPEC_C.read_text())
    data.update(rows=3, epochs=2, response_candidates=3)
    path = tmp_path / "small.json"
    path.write_text(json.dumps(data))
    assert main(["arm", "launch", str(path), "--backend", "local", "--root", str(tmp_path / "runs")]) == 0
    (run,) = RunStore(tmp_path / "runs").runs()
    assert run.record.spec_sha256 == load_arm_spec(path).sha256()
    assert set(run.record.provider) == {"trainer", "simulator", "simulation"}  # no overrides key, as before
