"""Reference and control policies for the spectrum envs (spec A.12, B.12).

Every policy is a callable ``policy(observation) -> action`` with ``reset()`` for a new episode. Bench
policies read a ``BenchQuery`` and return a ``ScanReport`` dict; RFT policies read a
``SpectrumObservation`` and return a list of centre frequencies (the ``submit_report`` argument).
Oracle / ceiling policies read the observation's ``hidden`` field (ground truth, peak sources), which is
never shown to a model.

``BENCH_POLICIES`` and ``RFT_POLICIES`` map names to zero-argument factories.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import mean
from typing import Any

from rftlab.envs.spectrum.official import W, ground_truth_channels

# ---------------------------------------------------------------------------------------- bench


def _tx(center: float, bandwidth: float, active: bool = True, power: float = -40.0) -> dict[str, Any]:
    return {
        "center_freq": float(center),
        "bandwidth": float(bandwidth),
        "currently_active": bool(active),
        "estimated_power": float(power),
    }


class BenchEmpty:
    """Always reports no transmitters."""

    def reset(self) -> None:
        pass

    def __call__(self, query) -> dict[str, Any]:
        return {"transmitters": []}


class BenchMemoryless:
    """Echo the current peaks: each peak → transmitter at ``freq_mhz`` with width ``width_mhz``."""

    def reset(self) -> None:
        pass

    def __call__(self, query) -> dict[str, Any]:
        return {
            "transmitters": [_tx(p["freq_mhz"], p["width_mhz"], True, p["power_dbm"]) for p in query.peaks]
        }


class BenchAccumulate:
    """Union of every peak seen so far in the run (raw widths, no deduplication)."""

    def reset(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __init__(self) -> None:
        self.reset()

    def __call__(self, query) -> dict[str, Any]:
        current = {p["peak_id"] for p in query.peaks}
        self.seen.extend(query.peaks)
        return {
            "transmitters": [
                _tx(p["freq_mhz"], p["width_mhz"], p["peak_id"] in current, p["power_dbm"]) for p in self.seen
            ]
        }


class BenchWidebandOnly:
    """Exactly the 7 wideband channels at their nominal centres, width 15."""

    def reset(self) -> None:
        pass

    def __call__(self, query) -> dict[str, Any]:
        return {"transmitters": [_tx(7.5 + 24 * s, W) for s in range(7)]}


class BenchOracle:
    """The scoring ground truth (all 13 channels at nominal centres/widths)."""

    def reset(self) -> None:
        pass

    def __call__(self, query) -> dict[str, Any]:
        gt = query.hidden.get("ground_truth_channels") or ground_truth_channels()
        return {"transmitters": [_tx(c, bw) for c, bw in gt]}


BENCH_POLICIES: dict[str, Callable[[], Any]] = {
    "empty": BenchEmpty,
    "memoryless": BenchMemoryless,
    "accumulate": BenchAccumulate,
    "wideband_only": BenchWidebandOnly,
    "oracle": BenchOracle,
}


# ------------------------------------------------------------------------------------------ RFT

MAX_REPORT = 16


class RFTEmpty:
    """Submits an empty report every scan."""

    def reset(self) -> None:
        pass

    def __call__(self, obs) -> list[float]:
        return []


class RFTMemoryless:
    """Reports the current scan's peak centres only (no cross-scan memory)."""

    def reset(self) -> None:
        pass

    def __call__(self, obs) -> list[float]:
        return [p["freq_mhz"] for p in obs.peaks][:MAX_REPORT]


class RFTAccumulate:
    """Naive accumulate-all-detections: every peak centre ever seen, in first-seen order; a peak within
    ``merge_tol`` MHz of an already listed centre is treated as the same transmitter (the first value is
    kept). Capped at 16. ``source_filter`` keeps only ``channel`` peaks (perfect false-alarm filtering,
    a ceiling that reads hidden sources); ``denoise`` replaces each detected channel by its true centre
    (a further ceiling)."""

    def __init__(self, merge_tol: float = 4.0, *, source_filter: bool = False, denoise: bool = False):
        self.merge_tol = merge_tol
        self.source_filter = source_filter or denoise
        self.denoise = denoise
        self.reset()

    def reset(self) -> None:
        self.centres: list[float] = []

    def _candidates(self, obs) -> list[float]:
        if not (self.source_filter or self.denoise):
            return [p["freq_mhz"] for p in obs.peaks]
        sources = obs.hidden["peak_sources"]
        if self.denoise:
            return list(obs.hidden["peak_true_centers"][i] for i, s in enumerate(sources) if s == "channel")
        return [p["freq_mhz"] for p, s in zip(obs.peaks, sources, strict=True) if s == "channel"]

    def __call__(self, obs) -> list[float]:
        for f in self._candidates(obs):
            if all(abs(f - c) > self.merge_tol for c in self.centres):
                self.centres.append(f)
        return self.centres[:MAX_REPORT]


class RFTBucketMemory:
    """``control_spectrum`` memory policies: bucket every seen peak by ``round(f / 6)`` and report each
    bucket's mean frequency; ``min_count = 1`` is ``memory_all``, ``2`` is ``memory``."""

    def __init__(self, min_count: int = 1):
        self.min_count = min_count
        self.reset()

    def reset(self) -> None:
        self.buckets: dict[int, list[float]] = {}

    def __call__(self, obs) -> list[float]:
        for p in obs.peaks:
            self.buckets.setdefault(round(p["freq_mhz"] / 6), []).append(p["freq_mhz"])
        return [mean(v) for v in self.buckets.values() if len(v) >= self.min_count][:MAX_REPORT]


class RFTCarpet:
    """16 fixed tiles at ``4 + i·11`` MHz (blankets the band; a high-mean, zero-gain trap)."""

    def reset(self) -> None:
        pass

    def __call__(self, obs) -> list[float]:
        return [4 + i * 11.0 for i in range(MAX_REPORT)]


class RFTOracle:
    """The true channel centres of the band (reads ``hidden``)."""

    def reset(self) -> None:
        pass

    def __call__(self, obs) -> list[float]:
        return list(obs.hidden["channel_centers"])[:MAX_REPORT]


class RFTEchoFollower:
    """Scaffold-aware: submits the displayed running list plus any new current peak (what the explicit
    prompt asks the model to do). Without an echo it behaves like ``memoryless``."""

    def __init__(self, merge_tol: float = 4.0):
        self.merge_tol = merge_tol

    def reset(self) -> None:
        pass

    def __call__(self, obs) -> list[float]:
        out = list(obs.echo or [])
        for p in obs.peaks:
            if all(abs(p["freq_mhz"] - c) > self.merge_tol for c in out):
                out.append(p["freq_mhz"])
        return out[:MAX_REPORT]


RFT_POLICIES: dict[str, Callable[[], Any]] = {
    "empty": RFTEmpty,
    "memoryless": RFTMemoryless,
    "accumulate": RFTAccumulate,
    "accumulate_filtered": lambda: RFTAccumulate(source_filter=True),
    "accumulate_denoised": lambda: RFTAccumulate(denoise=True),
    "memory_all": lambda: RFTBucketMemory(1),
    "memory": lambda: RFTBucketMemory(2),
    "carpet": RFTCarpet,
    "echo_follower": RFTEchoFollower,
    "oracle": RFTOracle,
}
