"""Spectrum scoring and per-episode metrics (``docs/spectrum.md`` A.8, A.9, B.7, B.8, B.11). Pure.

Two scores share one interval core:

- **available-IoU** (CLBench's metric): IoU of the complement of the ground-truth channels with the
  complement of the reported transmitters, on exact float intervals, rounded to 4 dp.
- **occupied-IoU** (the RFT reward signal): IoU of the occupied spectrum on a 0.5 MHz raster: one fast
  scorer, ``OccupiedBitset`` (the raster as a Python int, GT mask cached; ``occupied_iou`` for one call),
  and ``occupied_iou_reference``, the literal bin-by-bin transcription of B.7 it is tested against.

Cached: ``run_table`` (``functools.lru_cache``: 64 rasters × widths, each a cache of 16,384 centres) holds
the bit runs of recent regions. Nothing else here keeps state.

Channels and reports are given as ``(center, bandwidth)`` pairs throughout.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from operator import or_
from typing import Any

Interval = tuple[float, float]
Region = tuple[float, float]  # (center, bandwidth)

RASTER_RES = 0.5
OCC_SCALE = 3.0
INCOMPLETE_PENALTY = -0.2
CARRY_TAU = 0.05
CARRY_TAUS_SENSITIVITY = (1.0, 4.0)


# ------------------------------------------------------------------------------- available-IoU


def region_intervals(regions: Iterable[Region]) -> list[Interval]:
    """``[c − max(0,bw)/2, c + max(0,bw)/2]`` per region (negative bandwidth → zero width)."""
    out = []
    for c, bw in regions:
        half = max(0.0, bw) / 2
        out.append((c - half, c + half))
    return out


def normalize_intervals(intervals: Iterable[Interval], band: float) -> list[Interval]:
    """Clip to ``[0, band]``, drop empty (``hi <= lo``), sort by ``(lo, hi)``, merge touching/overlapping."""
    clipped = []
    for lo, hi in intervals:
        lo, hi = max(0.0, lo), min(band, hi)
        if hi > lo:
            clipped.append((lo, hi))
    clipped.sort()
    merged: list[list[float]] = []
    for lo, hi in clipped:
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    return [(a, b) for a, b in merged]


def complement(normalized: Sequence[Interval], band: float) -> list[Interval]:
    out = []
    cursor = 0.0
    for lo, hi in normalized:
        if lo > cursor:
            out.append((cursor, lo))
        cursor = max(cursor, hi)
    if cursor < band:
        out.append((cursor, band))
    return out


def intersect(gt: Sequence[Interval], rep: Sequence[Interval]) -> list[Interval]:
    """Two-pointer sweep; advance the list whose interval ends first, ties advance the GT side."""
    out = []
    i = j = 0
    while i < len(gt) and j < len(rep):
        lo = max(gt[i][0], rep[j][0])
        hi = min(gt[i][1], rep[j][1])
        if hi > lo:
            out.append((lo, hi))
        if gt[i][1] <= rep[j][1]:
            i += 1
        else:
            j += 1
    return out


def measure(intervals: Iterable[Interval]) -> float:
    total = 0.0
    for lo, hi in intervals:
        total += hi - lo
    return total


def _checks(kind: str, intervals: Sequence[Interval]) -> list[dict[str, Any]]:
    return [
        {"type": kind, "center_freq": round((lo + hi) / 2, 2), "bandwidth": round(hi - lo, 2)}
        for lo, hi in intervals
    ]


@dataclass(frozen=True)
class AvailableIoU:
    """Available-IoU of one scan with CLBench's per-scan diagnostics (A.8)."""

    score: float
    gt_available: tuple[Interval, ...]
    reported_available: tuple[Interval, ...]
    overlap: tuple[Interval, ...]
    gt_measure: float
    reported_measure: float
    overlap_measure: float

    @property
    def unsafe_bandwidth_claimed(self) -> float:
        return round(max(0.0, self.reported_measure - self.overlap_measure), 4)

    @property
    def missed_available_bandwidth(self) -> float:
        return round(max(0.0, self.gt_measure - self.overlap_measure), 4)

    @property
    def success(self) -> bool:
        return self.score >= 0.5

    def scoring(self) -> dict[str, Any]:
        """The ``scan_results[j].scoring`` object of a CLBench run."""
        return {
            "score": self.score,
            "n_gt": len(self.gt_available),
            "n_reported": len(self.reported_available),
            "n_matched": len(self.overlap),
            "checks": _checks("gt_available", self.gt_available)
            + _checks("reported_available", self.reported_available)
            + _checks("overlap", self.overlap),
            "gt_available_bandwidth": round(self.gt_measure, 4),
            "reported_available_bandwidth": round(self.reported_measure, 4),
            "overlap_bandwidth": round(self.overlap_measure, 4),
            "unsafe_bandwidth_claimed": self.unsafe_bandwidth_claimed,
            "missed_available_bandwidth": self.missed_available_bandwidth,
        }

    def outcome_metadata(self) -> dict[str, float]:
        return {
            "unsafe_bandwidth_claimed": self.unsafe_bandwidth_claimed,
            "missed_available_bandwidth": self.missed_available_bandwidth,
        }


def available_iou(gt_channels: Iterable[Region], reported: Iterable[Region], band: float) -> AvailableIoU:
    """CLBench available-IoU (A.8): IoU of the GT-available and report-implied-available spectrum."""
    gt_av = complement(normalize_intervals(region_intervals(gt_channels), band), band)
    rep_av = complement(normalize_intervals(region_intervals(reported), band), band)
    inter = intersect(gt_av, rep_av)
    g, r, x = measure(gt_av), measure(rep_av), measure(inter)
    union = g + r - x
    iou = 1.0 if union == 0.0 else x / union
    return AvailableIoU(round(iou, 4), tuple(gt_av), tuple(rep_av), tuple(inter), g, r, x)


class AvailableScorer:
    """Available-IoU against a fixed ground truth with the GT side precomputed; ``score`` equals
    ``available_iou(gt, regions, band).score`` bit for bit (same intervals, same summation order)."""

    def __init__(self, gt_channels: Iterable[Region], band: float):
        self.band = float(band)
        self.gt_available = complement(
            normalize_intervals(region_intervals(gt_channels), self.band), self.band
        )
        self.gt_measure = measure(self.gt_available)
        self._glo = [lo for lo, _ in self.gt_available]
        self._ghi = [hi for _, hi in self.gt_available]

    def score(self, centers: Iterable[float], bandwidth: float = 8.0) -> float:
        band = self.band
        half = max(0.0, bandwidth) / 2
        glo, ghi, ng = self._glo, self._ghi, len(self._glo)
        # One pass over the sorted centres (with a fixed width, sorting centres sorts the clipped
        # intervals): each gap of the report's complement is emitted exactly where normalize+complement
        # emit one and is intersected with the GT gaps on the spot, advancing the GT pointer exactly as
        # the two-pointer sweep of ``intersect`` does. Same pieces, same order, same sums as
        # ``available_iou`` — hence bit-identical — without building the report's interval list.
        r = x = cursor = 0.0
        i = 0
        for c in sorted(centers):
            lo = c - half
            hi = c + half
            if lo < 0.0:
                lo = 0.0
            if hi > band:
                hi = band
            if hi > lo:
                if lo > cursor:  # report gap (cursor, lo)
                    r += lo - cursor
                    while i < ng:
                        g_hi = ghi[i]
                        a = glo[i]
                        if cursor > a:
                            a = cursor
                        b = g_hi if g_hi < lo else lo
                        if b > a:
                            x += b - a
                        if g_hi <= lo:
                            i += 1
                        else:
                            break
                if hi > cursor:
                    cursor = hi
        if cursor < band:  # last report gap (cursor, band): every remaining GT gap ends inside it
            r += band - cursor
            while i < ng:
                a = glo[i]
                if cursor > a:
                    a = cursor
                b = ghi[i]
                if b > a:
                    x += b - a
                i += 1
        union = self.gt_measure + r - x
        return round(1.0 if union == 0.0 else x / union, 4)


# -------------------------------------------------------------------------------- occupied-IoU


def region_bin_range(
    center: float, bandwidth: float, band: float, res: float = RASTER_RES
) -> tuple[int, int]:
    """Inclusive bin range ``(start, end)`` painted by a region (B.7); ``end < start`` means nothing.

    ``lo = max(0, c − bw/2)``, ``hi = min(B, c + bw/2)``, bins ``int(lo/res) … min(int(hi/res), nb−1)``
    with ``nb = int(B/res) + 1`` (``int`` truncates toward zero, as upstream). This is the one place the
    B.7 bin arithmetic is written (``occupied_iou_reference`` transcribes it literally, as the oracle).

    A centre far outside the band is first pulled back to just outside it, so bin indices stay finite
    integers: a region whose low edge is at least ``band + res`` above, or whose high edge is at least
    ``res`` below zero, paints no bin, so every centre beyond these limits scores exactly like the limit
    itself, and a model's ``1e308`` cannot overflow ``int()``. A non-finite centre or bandwidth paints
    nothing."""
    half = bandwidth / 2.0
    if center - center != 0.0 or half - half != 0.0:  # NaN or ±inf
        return 0, -1
    margin = half + res + 1.0
    if center < -margin:
        center = -margin
    elif center > band + margin:
        center = band + margin
    lo = center - half
    hi = center + half
    # an edge beyond the band by two bins or more paints what the limit paints (nothing on that side), so a
    # huge width of either sign (hi or lo near ±1e308) cannot overflow int(); every other edge is unchanged
    start = int(min(lo if lo > 0.0 else 0.0, band + 2.0 * res) / res)
    end = int(max(hi if hi < band else band, -2.0 * res) / res)
    last = int(band / res)
    return start, (end if end < last else last)


def bit_run(center: float, bandwidth: float, band: float, res: float = RASTER_RES) -> int:
    """The bins a region paints as a Python-int bit run (bit ``k`` = bin ``k``)."""
    start, end = region_bin_range(center, bandwidth, band, res)
    return ((1 << (end - start + 1)) - 1) << start if end >= start else 0


@lru_cache(maxsize=64)
def run_table(bandwidth: float, band: float, res: float = RASTER_RES):
    """``center -> bit_run(center, bandwidth, band, res)`` for one raster and width, itself cached
    (``lru_cache``, 16,384 centres): reports resubmit the same centres scan after scan and GRPO candidates
    share bands, and a run depends only on (centre, width, band, resolution), never on the ground truth."""

    @lru_cache(maxsize=16384)
    def run(center: float) -> int:
        return bit_run(center, bandwidth, band, res)

    return run


class OccupiedBitset:
    """Occupied-IoU against a fixed ground truth (B.7), the raster held as one Python integer (bit ``k`` =
    bin ``k``): a report's mask is the OR of the regions' bit runs and the IoU is two ``int.bit_count``
    calls. Equal to ``occupied_iou_reference`` (tested)."""

    def __init__(self, gt_channels: Iterable[Region], band: float, res: float = RASTER_RES):
        self.band = float(band)
        self.res = float(res)
        self._run8 = run_table(8.0, self.band, self.res)  # the RFT width, looked up once
        self.gt_mask = self.mask(gt_channels)
        self.gt_count = self.gt_mask.bit_count()

    def mask(self, regions: Iterable[Region]) -> int:
        """The raster of ``(center, bandwidth)`` regions."""
        band, res = self.band, self.res
        m = 0
        for c, bw in regions:
            m |= bit_run(c, bw, band, res)
        return m

    def _iou(self, rep: int) -> float:
        inter = (rep & self.gt_mask).bit_count()
        union = self.gt_count + rep.bit_count() - inter
        return inter / union if union else 0.0

    def score(self, centers: Iterable[float], bandwidth: float = 8.0) -> float:
        """Occupied-IoU of a report of ``centers``, every region ``bandwidth`` wide (the RFT report)."""
        run = self._run8 if bandwidth == 8.0 else run_table(bandwidth, self.band, self.res)
        return self._iou(reduce(or_, map(run, centers), 0))

    def score_regions(self, regions: Iterable[Region]) -> float:
        """Occupied-IoU of a report of ``(center, bandwidth)`` regions (the bench's transmitters)."""
        return self._iou(self.mask(regions))


def occupied_iou(
    gt_channels: Iterable[Region], reported: Iterable[Region], band: float, res: float = RASTER_RES
) -> float:
    """Occupied-IoU of ``reported`` against ``gt_channels`` (one call; ``OccupiedBitset`` caches the GT)."""
    return OccupiedBitset(gt_channels, band, res).score_regions(reported)


def occupied_iou_reference(
    gt_channels: Iterable[Region], reported: Iterable[Region], band: float, res: float = RASTER_RES
) -> float:
    """Literal bin-by-bin transcription of B.7 (slow; the oracle the two fast scorers are tested against)."""
    nb = int(band / res) + 1
    g = [False] * nb
    r = [False] * nb
    for arr, regions in ((g, gt_channels), (r, reported)):
        for c, bw in regions:
            lo = max(0.0, c - bw / 2.0)
            hi = min(band, c + bw / 2.0)
            for k in range(int(lo / res), min(int(hi / res) + 1, nb)):
                arr[k] = True
    inter = sum(1 for x, y in zip(g, r, strict=True) if x and y)
    union = sum(1 for x, y in zip(g, r, strict=True) if x or y)
    return inter / union if union else 0.0


# ------------------------------------------------------------------------------ task metrics


def mean_score(xs: Sequence[float]) -> float:
    """The mean of per-scan scores; 0.0 for none (CLBench scores an empty list as 0)."""
    return sum(xs) / len(xs) if xs else 0.0


def task_metrics(scores: Sequence[float]) -> dict[str, Any]:
    """CLBench BSM ``evaluate`` metrics over per-scan scores in presentation order (A.8)."""
    n = len(scores)
    half = max(1, n // 2)
    first = mean_score(scores[:half])
    second = mean_score(scores[half:])
    loss_curve = []
    cum = 0.0
    for s in scores:
        cum += 1.0 - s
        loss_curve.append(round(cum, 4))
    return {
        "mean_score": round(mean_score(scores), 4),
        "score_curve": list(scores),
        "first_half_score": round(first, 4),
        "second_half_score": round(second, 4),
        "learning_delta": round(second - first, 4),
        "n_scans_completed": n,
        "total_interactions": n,
        "loss_curve": loss_curve,
        "optimal_performance": float(n),
        "actual_performance": round(sum(scores), 4),
    }


def normalized_gain(
    run_rewards: Sequence[float], baseline_rewards: Sequence[float], r_max: float = 1.0
) -> dict:
    """Gain over the stateless baseline (A.9): ``gain = R − B``, ``normalized_gain = gain / (r_max·n − B)``."""
    R = sum(run_rewards)
    B = sum(baseline_rewards)
    n = len(run_rewards)
    denom = r_max * n - B
    return {
        "run_reward_sum": R,
        "baseline_reward_sum": B,
        "gain": R - B,
        "normalized_gain": (R - B) / denom if denom else None,
    }


def leaderboard_normalized_reward(
    run_rewards: Sequence[float], reference_baseline_rewards: Sequence[float], r_max: float = 1.0
) -> float | None:
    """``(R − B_ref) / (r_max·n − B_ref)`` with ``B_ref`` the stateless baseline of one fixed reference
    system (A.9)."""
    R = sum(run_rewards)
    B = sum(reference_baseline_rewards)
    denom = r_max * len(run_rewards) - B
    return (R - B) / denom if denom else None


# ------------------------------------------------------------------------- RFT reward and metrics


def score_line(occ: float, avail: float) -> str:
    """The per-scan score line the upstream reward parses (B.7)."""
    return f"SCAN_OCC: {occ:.4f} SCAN_AVAIL: {avail:.4f}"


def as_reported(x: float) -> float:
    """A score as it appears (4 dp) in the score line."""
    return float(f"{x:.4f}")


def early_late(values: Sequence[float]) -> tuple[float, float]:
    """Early/late half means with ``half = max(1, n // 2)`` (B.8; with n = 1 the late mean is 0)."""
    half = max(1, len(values) // 2)
    return mean_score(values[:half]), mean_score(values[half:])


def spectrum_reward(occ: Sequence[float]) -> float:
    """``3 × mean(occ)`` over scored scans, ``−0.2`` when none was scored (B.8)."""
    if not occ:
        return INCOMPLETE_PENALTY
    return OCC_SCALE * mean_score(occ)


def spectrum_avail_reward(avail: Sequence[float]) -> float:
    """Bench-pure variant: ``3 × mean(avail)``, ``−0.2`` when none was scored."""
    if not avail:
        return INCOMPLETE_PENALTY
    return OCC_SCALE * mean_score(avail)


def carried_count(echo: Sequence[float], report: Sequence[float], tau: float) -> int:
    """``#{e ∈ echo : ∃ r ∈ report, |r − e| ≤ tau}`` (B.11).

    Only each echo value's neighbours in the sorted report are compared: float subtraction is monotone
    and rounds symmetrically, so the report value nearest ``e`` as computed is the largest one ≤ ``e`` or
    the smallest one ≥ ``e``, and the count equals the definition's pairwise check exactly (a test
    compares them on random lists). The pairwise check was 40% of a simulated GRPO run."""
    tol = tau + 1e-9  # echo values are parsed back from .1f strings; absorb binary representation error
    ordered = sorted(report)
    last = len(ordered) - 1
    carried = 0
    for e in echo:
        i = bisect_left(ordered, e)
        if (i <= last and ordered[i] - e <= tol) or (i > 0 and e - ordered[i - 1] <= tol):
            carried += 1
    return carried


def carry_rate(
    pairs: Iterable[tuple[Sequence[float] | None, Sequence[float] | None]], tau: float = CARRY_TAU
):
    """Rollout carry-rate ``Σ carried_t / Σ |E_t|`` over ``(echo_t, report_t)`` pairs (B.11).

    Scans with no echo (``None`` or empty) or no submit (``report_t is None``) are skipped. Returns
    ``None`` when no scan had both."""
    carried = total = 0
    for echo, report in pairs:
        if not echo or report is None:
            continue
        carried += carried_count(echo, report, tau)
        total += len(echo)
    return carried / total if total else None


def episode_metrics(scans: Sequence[Mapping[str, Any]], tau: float = CARRY_TAU) -> dict[str, Any]:
    """Reward and behaviour metrics of one RFT episode from its env-side per-scan records (B.8, B.11).

    Each record needs ``submitted`` (bool), ``occ``/``avail`` (exact floats; ``None`` when unscored),
    ``report`` (centres after the cap, or ``None``) and ``echo`` (displayed list or ``None``). Scores are
    taken at the 4-dp precision of the score line, as the upstream reward parses them.
    """
    scored = [s for s in scans if s.get("submitted")]
    occ = [as_reported(float(s["occ"])) for s in scored]
    avail = [as_reported(float(s["avail"])) for s in scored]
    n = len(occ)
    pairs = [(s.get("echo"), s.get("report") if s.get("submitted") else None) for s in scans]
    sizes = [len(s.get("report") or []) for s in scored]
    out: dict[str, Any] = {
        "reward": spectrum_reward(occ),
        "scans_completed": n,
        "scans_forced": sum(1 for s in scans if s.get("forced")),
    }
    if n == 0:
        out.update(mean_occ=0.0, early_occ=0.0, late_occ=0.0, memory_gain=0.0, mean_avail=0.0)
        out.update(early_avail=0.0, late_avail=0.0, avail_gain=0.0, report_size=0.0)
    else:
        early, late = early_late(occ)
        a_early, a_late = early_late(avail)
        out.update(
            mean_occ=mean_score(occ),
            early_occ=early,
            late_occ=late,
            memory_gain=late - early,
            mean_avail=mean_score(avail),
            early_avail=a_early,
            late_avail=a_late,
            avail_gain=a_late - a_early,
            report_size=mean_score(sizes),
        )
    out["carry_rate"] = carry_rate(pairs, tau)
    for t in CARRY_TAUS_SENSITIVITY:
        out[f"carry_rate_tau{t:g}"] = carry_rate(pairs, t)
    out["carry_tau"] = tau
    return out


# ------------------------------------------------------------------- transcript parsing (parity)

_OCC_RE = re.compile(r"SCAN_OCC:\s*([0-9.]+)")
_AVAIL_RE = re.compile(r"SCAN_AVAIL:\s*([0-9.]+)")


def parse_score_lines(
    messages: Iterable[Mapping[str, Any]], *, env_authored_only: bool = True
) -> tuple[list[float], list[float]]:
    """Per-scan scores parsed from a transcript, for parity with upstream's regex reward (B.8).

    Upstream matches ``SCAN_OCC``/``SCAN_AVAIL`` in *every* message, so agent-authored text (an assistant
    message, or a notepad echoed back by ``notepad_read``) can inject scores (B.15 #1). With
    ``env_authored_only`` (default) only messages the env marked as a score carrier count: a message
    counts when it has ``"score_line": True`` (set on the env's ``submit_report`` results)."""
    occ: list[float] = []
    avail: list[float] = []
    for m in messages:
        if env_authored_only and not m.get("score_line"):
            continue
        content = m.get("content") or ""
        if not isinstance(content, str):
            continue
        for v in _OCC_RE.findall(content):
            try:
                occ.append(float(v))
            except ValueError:
                pass
        for v in _AVAIL_RE.findall(content):
            try:
                avail.append(float(v))
            except ValueError:
                pass
    return occ, avail


# ------------------------------------------------------------------------------ behaviour


def classify_report_items(
    report: Sequence[float],
    current_peaks: Sequence[float],
    earlier_peaks: Sequence[float],
    tol: float = 4.0,
) -> dict[str, int]:
    """Item classes of reported centres (B.11, optional): *current* (within ``tol`` of a peak of this scan),
    *recalled* (within ``tol`` of an earlier scan's peak only), *hallucinated* (neither)."""
    out = {"current": 0, "recalled": 0, "hallucinated": 0}
    for r in report:
        if any(abs(r - p) <= tol for p in current_peaks):
            out["current"] += 1
        elif any(abs(r - p) <= tol for p in earlier_peaks):
            out["recalled"] += 1
        else:
            out["hallucinated"] += 1
    return out
