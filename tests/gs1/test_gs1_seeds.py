"""GS1 with the run as the unit (``rftlab.analysis.gs1.seeds``): every number against an independent
computation (brute-force enumeration, closed forms, scipy-free binomial sums)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from rftlab.analysis.gs1.seeds import (
    detectable_difference,
    discordant_sign_test,
    parse_run_plan,
    run_level_power,
    run_level_verdict,
    sign_flip_one_sided_p,
    sign_flip_power,
)
from rftlab.analysis.io import AnalysisInputError
from rftlab.runs.hashing import file_sha256
from rftlab.studies.gs1 import DEFAULT_SPEC, RUN_PLAN, load_run_plan

PLAN = load_run_plan(RUN_PLAN)


def test_the_packaged_plan_names_the_registered_spec_and_five_seeds_from_zero():
    assert PLAN.revision_of["sha256"] == file_sha256(DEFAULT_SPEC)
    assert PLAN.seeds[0] == 0 and len(PLAN.seeds) >= 5
    assert PLAN.status == "exploratory"


def _binomial_two_sided(k: int, n: int) -> float:
    tail = sum(math.comb(n, j) for j in range(min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("gained, lost", [(31, 5), (33, 36), (24, 27), (0, 0), (7, 0), (10, 10)])
def test_discordant_sign_test_is_the_exact_binomial(gained, lost):
    expected = 1.0 if gained + lost == 0 else _binomial_two_sided(gained, gained + lost)
    assert discordant_sign_test(gained, lost) == pytest.approx(expected, rel=1e-12)


def test_discordant_sign_test_by_hand():
    # 5 vs 0: both all-one-sided patterns of 5 fair coins: 2/32
    assert discordant_sign_test(5, 0) == pytest.approx(2 / 32)
    with pytest.raises(ValueError):
        discordant_sign_test(-1, 3)


def _brute_one_sided(d, shift):
    x = [v + shift for v in d]
    obs = sum(x)
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(x))
        if sum(s * v for s, v in zip(signs, x, strict=True)) >= obs - 1e-12
    )
    return hits / 2 ** len(x)


@given(st.lists(st.floats(-0.1, 0.1, allow_nan=False), min_size=1, max_size=8), st.floats(0, 0.05))
@settings(max_examples=60, deadline=None)
def test_one_sided_sign_flip_matches_enumeration(d, shift):
    assert sign_flip_one_sided_p(d, shift) == pytest.approx(_brute_one_sided(d, shift))


def test_one_sided_floor_is_one_over_two_to_the_n():
    assert sign_flip_one_sided_p([0.01] * 5) == pytest.approx(1 / 32)
    assert sign_flip_one_sided_p([0.01, 0.02, -0.005, 0.01, 0.0], 0.0) > 1 / 32


def test_run_level_verdict_by_hand():
    control = {s: 0.40 for s in range(5)}
    treat = {0: 0.41, 1: 0.39, 2: 0.40, 3: 0.42, 4: 0.38}
    v = run_level_verdict(treat, control, PLAN)
    d = np.array([0.01, -0.01, 0.0, 0.02, -0.02])
    assert v.differences == pytest.approx(tuple(d))
    assert v.mean == pytest.approx(0.0) and v.sd == pytest.approx(np.std(d, ddof=1))
    assert (v.better, v.worse, v.ties) == (2, 2, 1)
    assert v.p_floor_two_sided == pytest.approx(2 / 32) and v.p_floor_one_sided == pytest.approx(1 / 32)
    assert v.p_noninferiority == pytest.approx(_brute_one_sided(d, PLAN.margin))
    assert v.decision == "noninferior"  # every seed's difference is above -0.03: only the all-plus pattern
    treat[4] = 0.40 - 0.031  # one seed beyond the margin: the test cannot reject with 5 seeds
    assert run_level_verdict(treat, control, PLAN).decision == "inconclusive"
    assert "exploratory" in v.status


def test_power_of_the_five_seed_rule_is_the_closed_form():
    # with 5 pairs at alpha 0.05 the one-sided test rejects only on the all-positive pattern (p = 1/32):
    # power = P(every d + shift > 0) = Phi((mu + shift) / sd) ** 5
    for mu, sd, shift in [(0.0, 0.01, 0.03), (0.0, 0.03, 0.03), (0.01, 0.01, 0.0)]:
        p = sign_flip_power(5, mu, sd, 0.05, shift=shift)
        exact = norm.cdf((mu + shift) / sd) ** 5
        assert abs(p - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-9


def test_detectable_difference_closed_form_and_floor():
    sd = 0.01
    expected = sd * norm.ppf(0.8**0.2)  # Phi(mu/sd)^5 = 0.8
    assert detectable_difference(5, sd, 0.05) == pytest.approx(expected, rel=0.02)
    assert detectable_difference(4, sd, 0.05) is None  # floor 1/16 > 0.05: nothing is detectable


def test_run_level_power_names_the_runs_the_two_sided_test_needs():
    out = run_level_power(PLAN, 0.01)
    assert out.runs_needed_two_sided == 6  # 2/2**5 = 0.0625 > 0.05 >= 2/2**6
    assert out.power_noninferior_at_equality == pytest.approx(norm.cdf(3.0) ** 5, abs=0.005)
    with pytest.raises(ValueError):
        run_level_power(PLAN, 0.0)


@given(st.binary(max_size=200))
@settings(max_examples=80, deadline=None)
def test_plan_parsing_never_raises_anything_but_a_one_line_error(raw):
    try:
        parse_run_plan(raw, "plan.json")
    except AnalysisInputError as exc:
        assert "\n" not in str(exc) and "plan.json" in str(exc)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"seeds": [0, 0, 1]}, "distinct"),
        ({"seeds": [0]}, "seeds"),
        ({"margin": -1}, "margin"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_plan_field_is_named(tmp_path, change, message):
    data = {**json.loads(RUN_PLAN.read_text()), **change}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_run_plan(path)
    with pytest.raises(ValueError, match="not found"):
        load_run_plan(tmp_path / "missing.json")
