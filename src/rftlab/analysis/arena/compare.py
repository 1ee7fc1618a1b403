"""Base vs SFT paired comparison on the frozen cases, ``frozen-paired-arena-v1`` (docs/arena.md §10.6).

``load_evaluation(DIR)`` reads an evaluation directory written by ``rftlab arena eval`` (``rows.jsonl`` and
``summary.json``), validating every field the comparison uses; a malformed file gives one
``CompareError`` line naming the file (and line), never a traceback. ``compare_evaluations(base, sft)``
checks the preconditions (identical case sets keyed by (seed, size, style), no duplicate, equal
``eval_version``, ``arena_version`` and ``manifest_sha256``) and refuses with the reason otherwise, then
computes the four endpoints from the rows' per-case values at permutation 0, in case order:

- ``primary``: regret(SFT, generated) − regret(base, generated) (negative favours SFT);
- ``supporting``: reward(SFT, generated) − reward(base, generated);
- ``generated_minus_dropped`` and ``generated_minus_shuffled``: SFT generated − SFT dropped / cross-case
  shuffled reward (the mechanism endpoints).

Each endpoint has ``cases``, ``mean_difference``, ``mean_difference_95`` (§10.3 ``mean_ci``),
``positive_case_rate``, ``zero_case_rate`` and ``randomization_p_two_sided`` (the sign-flip test of
``rftlab.analysis.paired``: ``random.Random(0)``, 100,000 trials). The output echoes both runs'
``message_strict_rate`` and ``action_order_consistency_rate`` and the four ``claim_gates``. rftlab adds,
per endpoint, ``negative_case_rate`` and the exact sign test (``sign_test``), and, under
``rftlab_additions``, the within-case shuffled endpoint (SFT generated − SFT ``shuffled_within``), which is
not one of §10.6's four.
"""

from __future__ import annotations

import json
import math
import stat
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.evaluation import mean_ci
from rftlab.analysis.paired import (
    SIGN_FLIP_SEED,
    SIGN_FLIP_TOLERANCE,
    SIGN_FLIP_TRIALS,
    format_p,
    sign_flip_p_values,
    sign_test,
)
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256

COMPARE_VERSION = "frozen-paired-arena-v1"
ENDPOINTS: dict[str, str] = {
    "primary": "regret(SFT, generated) - regret(base, generated); negative favours SFT",
    "supporting": "reward(SFT, generated) - reward(base, generated)",
    "generated_minus_dropped": "SFT generated reward - SFT dropped reward",
    "generated_minus_shuffled": "SFT generated reward - SFT shuffled (cross-case) reward",
}
ADDITIONAL_ENDPOINTS: dict[str, str] = {
    "generated_minus_shuffled_within": "SFT generated reward - SFT shuffled (within case) reward",
}
_CONDITIONS = ("generated", "dropped", "shuffled", "shuffled_within")
_VERSION_KEYS = ("eval_version", "arena_version", "manifest_sha256")
REGRET_TOLERANCE = 1e-9  # docs/arena.md §7: regret is >= 0 up to the solver's tolerance


class CompareError(ValueError):
    """An input cannot be read or is malformed (the message names the file and says why)."""


class NotComparableError(CompareError):
    """The two evaluations break a §10.6 precondition (the message says which)."""


@dataclass(frozen=True)
class CaseValues:
    """One case's permutation-0 regret and reward per condition."""

    key: tuple[int, int, str]
    regret: dict[str, float]
    reward: dict[str, float]


@dataclass(frozen=True)
class Evaluation:
    """A frozen evaluation as the comparison sees it: where it came from, its summary and its cases."""

    source: str
    summary: dict[str, Any]
    cases: tuple[CaseValues, ...]
    versions: dict[str, Any]


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond the float range
        return False


def _rate(value: Any) -> bool:
    return _finite(value) and 0.0 <= value <= 1.0


def _case_values(record: Any, where: str) -> CaseValues:
    if not isinstance(record, dict):
        raise CompareError(f"{where}: not a JSON object")
    seed, size, style = record.get("seed"), record.get("size"), record.get("opponent_style")
    if not (
        isinstance(seed, int)
        and not isinstance(seed, bool)
        and isinstance(size, int)
        and not isinstance(size, bool)
        and isinstance(style, str)
    ):
        raise CompareError(f"{where}: seed, size and opponent_style must be integer, integer, string")
    rows = record.get("conditions")
    if not isinstance(rows, list):
        raise CompareError(f"{where}: 'conditions' must be a list of condition rows")
    regret: dict[str, float] = {}
    reward: dict[str, float] = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("permutation") != 0:
            continue
        name = row.get("condition")
        if not isinstance(name, str):
            raise CompareError(f"{where}: a condition row has no string 'condition'")
        if name in regret:
            raise CompareError(f"{where}: two permutation-0 rows for condition {name!r}")
        if not (_finite(row.get("regret")) and _finite(row.get("environment_reward"))):
            raise CompareError(f"{where}: condition {name!r} needs finite 'regret' and 'environment_reward'")
        if row["regret"] < -REGRET_TOLERANCE:
            raise CompareError(
                f"{where}: condition {name!r} has regret {row['regret']!r}, below 0 (impossible, §7)"
            )
        for key, value in row.items():
            if key.endswith("_rate") and not _rate(value):
                raise CompareError(f"{where}: condition {name!r} has {key} {value!r}, outside [0, 1]")
        regret[name], reward[name] = float(row["regret"]), float(row["environment_reward"])
    missing = [c for c in ("generated", "dropped", "shuffled") if c not in regret]
    if missing:
        raise CompareError(f"{where}: no permutation-0 row for condition(s) {', '.join(missing)}")
    return CaseValues((seed, size, style), regret, reward)


def _record_versions(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in _VERSION_KEYS}


def evaluation_from_records(
    records: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    source: str = "evaluation",
    summary_source: str | None = None,
) -> Evaluation:
    """An ``Evaluation`` from in-memory records and summary (what ``load_evaluation`` reads from disk)."""
    summary_source = summary_source or source
    if not isinstance(summary, Mapping):
        raise CompareError(f"{summary_source}: the summary is not a JSON object")
    for key in ("message_strict_rate", "action_order_consistency_rate"):
        if not _rate(summary.get(key)):
            raise CompareError(f"{summary_source}: summary field {key!r} must be a number in [0, 1]")
    for key in _VERSION_KEYS:
        if not isinstance(summary.get(key), str):
            raise CompareError(f"{summary_source}: summary field {key!r} must be a string")
    if not records:
        raise CompareError(f"{source}: no case rows")
    cases = tuple(_case_values(r, f"{source} row {i + 1}") for i, r in enumerate(records))
    versions = _record_versions(summary)
    for i, record in enumerate(records):
        if _record_versions(record) != versions:
            raise CompareError(
                f"{source} row {i + 1}: its versions {_record_versions(record)} differ from the summary's"
            )
    return Evaluation(source, dict(summary), cases, versions)


def evaluation_files(path: str | Path) -> tuple[Path, Path]:
    """``(rows.jsonl, summary.json)`` of an evaluation directory, or of the directory of a given file."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    return folder / "rows.jsonl", folder / "summary.json"


def _refuse_special_files(*files: Path) -> None:
    """A FIFO, socket or device would block or never end when read: refuse it without opening it."""
    for file in files:
        try:
            mode = file.stat().st_mode
        except OSError:
            continue  # a missing or unreadable file is reported when it is read
        if stat.S_ISDIR(mode):
            raise CompareError(f"{file} is a folder, not a file (an evaluation of `rftlab arena eval`)")
        if not stat.S_ISREG(mode):
            raise CompareError(
                f"{file} is not a regular file (a FIFO, socket or device); give the file itself"
            )


def load_evaluation(path: str | Path) -> Evaluation:
    """Read ``rows.jsonl`` and ``summary.json`` of an evaluation directory (or the directory of a given
    ``summary.json``); ``CompareError`` with one line for anything missing or malformed."""
    rows_file, summary_file = evaluation_files(path)
    folder = rows_file.parent
    _refuse_special_files(rows_file, summary_file)
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        text = rows_file.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CompareError(
            f"{exc.filename} does not exist (an evaluation directory of `rftlab arena eval`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CompareError(f"cannot read {folder}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CompareError(f"{summary_file} is not JSON: {exc}") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError) as exc:
            raise CompareError(f"{rows_file}:{number} is not JSON: {exc}") from None
    return evaluation_from_records(records, summary, str(rows_file), str(summary_file))


def _mean_ci(name: str, diffs: Sequence[float]) -> dict[str, Any]:
    try:
        return mean_ci(diffs)
    except OverflowError:
        raise CompareError(
            f"endpoint {name}: the per-case differences (up to {max(map(abs, diffs)):.3g}) are too large "
            "to average; check the rows' regret and environment_reward values"
        ) from None


def _endpoint(diffs: Sequence[float], ci: Mapping[str, Any], p_value: float) -> dict[str, Any]:
    n = len(diffs)
    signs = sign_test(diffs)
    return {
        "cases": n,
        "mean_difference": ci["mean"],
        "mean_difference_95": ci["ci95"],
        "positive_case_rate": signs.positive / n,
        "zero_case_rate": signs.ties / n,
        "randomization_p_two_sided": p_value,
        "negative_case_rate": signs.negative / n,
        "sign_test": signs.to_dict(),
    }


def _endpoints(
    series: Mapping[str, Sequence[float]], keys: Sequence[tuple[int, int, str]], trials: int
) -> dict[str, dict[str, Any]]:
    """Every endpoint of ``series`` (one sign-flip draw serves them all); a difference or a mean that
    overflows the float range is a ``CompareError`` naming the endpoint (and the case)."""
    cis = {}
    for name, diffs in series.items():
        bad = next((i for i, d in enumerate(diffs) if not math.isfinite(d)), None)
        if bad is not None:
            raise CompareError(
                f"endpoint {name}: case {keys[bad]} gives a difference beyond the float range; check the "
                "rows' regret and environment_reward values"
            )
        cis[name] = _mean_ci(name, diffs)
    p_values = sign_flip_p_values(list(series.values()), trials=trials)
    return {
        name: _endpoint(diffs, cis[name], p)
        for (name, diffs), p in zip(series.items(), p_values, strict=True)
    }


def check_comparable(base: Evaluation, sft: Evaluation) -> None:
    """The §10.6 preconditions; ``NotComparableError`` naming the first one that fails."""
    for evaluation, role in ((base, "base"), (sft, "SFT")):
        counts = Counter(c.key for c in evaluation.cases)
        dupes = sorted(k for k, count in counts.items() if count > 1)
        if dupes:
            raise NotComparableError(f"{role} evaluation lists case(s) {dupes[:3]} more than once")
    for key in _VERSION_KEYS:
        if base.versions[key] != sft.versions[key]:
            raise NotComparableError(f"{key} differs: base {base.versions[key]!r}, SFT {sft.versions[key]!r}")
    base_keys, sft_keys = {c.key for c in base.cases}, {c.key for c in sft.cases}
    if base_keys != sft_keys:
        only_base, only_sft = sorted(base_keys - sft_keys), sorted(sft_keys - base_keys)
        raise NotComparableError(
            f"the case sets differ: {len(only_base)} case(s) only in the base run {only_base[:2]}, "
            f"{len(only_sft)} only in the SFT run {only_sft[:2]}"
        )


def compare_evaluations(base: Evaluation, sft: Evaluation, trials: int = SIGN_FLIP_TRIALS) -> dict[str, Any]:
    """The ``frozen-paired-arena-v1`` record of ``sft`` against ``base`` (see the module docstring)."""
    check_comparable(base, sft)
    by_key = {c.key: c for c in sft.cases}
    pairs = [(b, by_key[b.key]) for b in base.cases]  # case order = the base run's row order
    series = {
        "primary": [s.regret["generated"] - b.regret["generated"] for b, s in pairs],
        "supporting": [s.reward["generated"] - b.reward["generated"] for b, s in pairs],
        "generated_minus_dropped": [s.reward["generated"] - s.reward["dropped"] for _, s in pairs],
        "generated_minus_shuffled": [s.reward["generated"] - s.reward["shuffled"] for _, s in pairs],
    }
    if all("shuffled_within" in s.reward for _, s in pairs):
        series["generated_minus_shuffled_within"] = [
            s.reward["generated"] - s.reward["shuffled_within"] for _, s in pairs
        ]
    computed = _endpoints(series, [b.key for b, _ in pairs], trials)
    endpoints = {name: {"definition": ENDPOINTS[name], **computed[name]} for name in ENDPOINTS}
    additions: dict[str, Any] = {
        name: {"definition": ADDITIONAL_ENDPOINTS[name], **computed[name]}
        for name in ADDITIONAL_ENDPOINTS
        if name in computed
    }
    primary_high = endpoints["primary"]["mean_difference_95"][1]
    dropped_low = endpoints["generated_minus_dropped"]["mean_difference_95"][0]
    shuffled_low = endpoints["generated_minus_shuffled"]["mean_difference_95"][0]
    claims = {
        "lower_oracle_regret_95_excludes_zero": primary_high < 0,
        "generated_beats_dropped_95_excludes_zero": dropped_low > 0,
        "generated_beats_shuffled_95_excludes_zero": shuffled_low > 0,
    }
    claims["coordination_improvement_supported"] = all(claims.values())
    n = len(pairs)

    def echo(evaluation: Evaluation) -> dict[str, Any]:
        s = evaluation.summary
        return {
            "source": evaluation.source,
            "model": s.get("model"),
            "message_strict_rate": s["message_strict_rate"],
            "action_order_consistency_rate": s["action_order_consistency_rate"],
        }

    return {
        "compare_version": COMPARE_VERSION,
        **base.versions,
        "cases": n,
        "complete_manifest": n == FROZEN_CASE_COUNT
        and base.versions["manifest_sha256"] == FROZEN_MANIFEST_SHA256,
        "randomization": {"seed": SIGN_FLIP_SEED, "trials": trials, "tolerance": SIGN_FLIP_TOLERANCE},
        "base": echo(base),
        "sft": echo(sft),
        "endpoints": endpoints,
        "claim_gates": claims,
        "rftlab_additions": {"endpoints": additions},
    }


def named_endpoints(comparison: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(name, endpoint)`` in report order: the four of §10.6, then rftlab's additions present."""
    extra = comparison["rftlab_additions"]["endpoints"]
    return [(n, comparison["endpoints"][n]) for n in ENDPOINTS] + [
        (n, extra[n]) for n in ADDITIONAL_ENDPOINTS if n in extra
    ]


def compare_markdown(comparison: Mapping[str, Any]) -> str:
    """``compare_table_rows`` as a Markdown table: differences at 4 decimals, the sign-flip p-value with
    its Monte Carlo resolution (``format_p``), the sign test's exact p."""
    import pandas as pd

    frame = pd.DataFrame(compare_table_rows(comparison))
    frame["mean difference"] = frame["mean difference"].map("{:+.4f}".format)
    trials = comparison["randomization"]["trials"]
    frame["sign-flip p"] = frame["sign-flip p"].map(lambda p: format_p(p, trials))
    frame["sign test p"] = frame["sign test p"].map(format_p)
    return frame.to_markdown(index=False)


def compare_table_rows(comparison: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per endpoint (the four of §10.6, then rftlab's additions) for a report table."""
    rows = []
    for name, e in named_endpoints(comparison):
        low, high = e["mean_difference_95"]
        signs = e["sign_test"]
        rows.append(
            {
                "endpoint": name,
                "definition": e["definition"],
                "cases": e["cases"],
                "mean difference": e["mean_difference"],
                "95% CI": f"[{low:+.3f}, {high:+.3f}]",
                "positive / negative / tied": f"{signs['positive']} / {signs['negative']} / {signs['ties']}",
                "sign-flip p": e["randomization_p_two_sided"],
                "sign test p": signs["p_value"],
            }
        )
    return rows
