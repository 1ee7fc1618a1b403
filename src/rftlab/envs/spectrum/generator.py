"""The CLBench ``blind_spectrum_monitoring`` scan generator, reproduced to the exact RNG call order.

Spec: ``docs/spectrum.md`` A.3. One ``random.Random(seed)`` drives everything (round-robin schedule,
centre jitter, activity draws, detections, interference, false alarms, dashed ids), so equality with the
upstream corpus depends on calling it in exactly the documented order. ``round`` is Python's
round-half-even on the binary double. Nothing here reads files, clocks or the global RNG.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

SENSOR_ID = "sensor-bsm-7c1a"
DETECTOR_VERSION = "peakdet-v2.4"
INTEGRATION_TIME_MS = 250


@dataclass(frozen=True)
class GeneratorParams:
    """Parameters the generator actually uses (A.2). Defaults are the CLBench task-constructor defaults,
    which are also the values the RFT variant runs with (B.4) apart from ``band_width``/``n_active``."""

    W: float = 20.0
    G: float = 10.0
    noise_floor_dbm: float = -50.0
    channel_power_dbm: float = -30.0
    p_active: float = 0.9
    p_interference: float = 0.1
    band_width: float = 180.0
    center_jitter: float = 0.0
    freq_noise: float = 3.0
    power_noise: float = 5.0
    p_miss: float = 0.15
    p_false_alarm: float = 0.2
    n_active: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChannelDef:
    """One channel definition as in a variant's ``channels`` list.

    ``center_freq``/``bandwidth``/``p_active`` are the optional overrides (``None`` = absent)."""

    id: int
    slot: int = 0
    center_freq: float | None = None
    bandwidth: float | None = None
    p_active: float | None = None
    power_dbm: float | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ChannelDef:
        return cls(
            id=int(raw["id"]),
            slot=int(raw.get("slot", 0)),
            center_freq=None if raw.get("center_freq") is None else float(raw["center_freq"]),
            bandwidth=None if raw.get("bandwidth") is None else float(raw["bandwidth"]),
            p_active=None if raw.get("p_active") is None else float(raw["p_active"]),
            power_dbm=None if raw.get("power_dbm") is None else float(raw["power_dbm"]),
        )

    def nominal_center(self, W: float, G: float) -> float:
        """The override centre if present, else ``slot·(W+G) + W/2`` (A.1)."""
        if self.center_freq is not None:
            return self.center_freq
        return self.slot * (W + G) + W / 2

    def nominal_bandwidth(self, W: float) -> float:
        return self.bandwidth if self.bandwidth is not None else W

    def as_ground_truth_def(self, channel_power_dbm: float) -> dict[str, Any]:
        """The ``channel_def`` object stored in a corpus row (A.4), keys in serialization order."""
        return {
            "id": self.id,
            "slot": self.slot,
            "power_dbm": float(self.power_dbm if self.power_dbm is not None else channel_power_dbm),
            "center_freq_override": self.center_freq,
            "bandwidth_override": self.bandwidth,
            "p_active_override": self.p_active,
        }


def as_channel_defs(channels: Sequence[ChannelDef | Mapping[str, Any]]) -> list[ChannelDef]:
    return [c if isinstance(c, ChannelDef) else ChannelDef.from_mapping(c) for c in channels]


def dashed_id(rng: random.Random, prefix: str) -> str:
    """``prefix-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee`` from five ``getrandbits`` draws (32,16,16,16,48)."""
    a = rng.getrandbits(32)
    b = rng.getrandbits(16)
    c = rng.getrandbits(16)
    d = rng.getrandbits(16)
    e = rng.getrandbits(48)
    return f"{prefix}-{a:08x}-{b:04x}-{c:04x}-{d:04x}-{e:012x}"


def round_robin_sets(
    rng: random.Random, channels: Sequence[ChannelDef], n_active: int, n_scans: int
) -> list[set[int]]:
    """Per-scan active id sets of the round-robin schedule (A.3 step 1), built up front."""
    eligible = [c.id for c in channels if c.p_active is None]
    if not eligible:
        return [set() for _ in range(n_scans)]
    k = min(n_active, len(eligible))
    pool: list[int] = []
    sets: list[set[int]] = []
    for _ in range(n_scans):
        if len(pool) < k:
            fresh = list(eligible)
            rng.shuffle(fresh)
            pool.extend(fresh)
        taken: list[int] = []
        rest: list[int] = []
        for cid in pool:
            if cid not in taken and len(taken) < k:
                taken.append(cid)
            else:
                rest.append(cid)
        pool = rest
        sets.append(set(taken))
    return sets


def _channel_constants(
    chans: Sequence[ChannelDef], params: GeneratorParams, with_ground_truth: bool
) -> list[tuple[ChannelDef, float, float, float, float, Mapping[str, Any] | None]]:
    """Per channel: (def, nominal centre, bandwidth, power, width sigma, ground-truth channel_def)."""
    W, G = params.W, params.G
    return [
        (
            ch,
            ch.nominal_center(W, G),
            ch.nominal_bandwidth(W),
            float(ch.power_dbm if ch.power_dbm is not None else params.channel_power_dbm),
            0.15 * ch.nominal_bandwidth(W),
            ch.as_ground_truth_def(params.channel_power_dbm) if with_ground_truth else None,
        )
        for ch in chans
    ]


def _peak_maker(rng: random.Random, annotate: bool):
    """``make_peak(f, pw, width, source, channel_id)``: a peak dict; its id's five draws come after the
    peak's own draws, as upstream builds its dict."""

    def make_peak(f: float, pw: float, width: float, source: str, channel_id: int | None) -> dict[str, Any]:
        peak = {
            "freq_mhz": round(f, 1),
            "power_dbm": round(pw, 1),
            "width_mhz": width,
            "source": source,
            "peak_id": dashed_id(rng, "peak"),
        }
        if annotate:
            peak["channel_id"] = channel_id
        return peak

    return make_peak


def _channel_peaks(rng: random.Random, consts, params: GeneratorParams, make_peak):
    """``scan(active_ids, peaks, ground_truth)``: one scan's channels in channel order (centre jitter,
    activity, the ground-truth entry and, for an active channel that is not missed, its noisy peak).
    A closure, so the per-scan loop pays no lookups."""
    rand, gauss, uniform = rng.random, rng.gauss, rng.uniform
    jitter, p_miss, p_active = params.center_jitter, params.p_miss, params.p_active
    freq_noise, power_noise, nf = params.freq_noise, params.power_noise, params.noise_floor_dbm

    def scan(active_ids, peaks: list, ground_truth: list) -> None:
        for ch, nominal, bw, power, w_sigma, gt_def in consts:
            center = nominal + uniform(-jitter, jitter) if jitter > 0 else nominal
            if ch.p_active is not None:
                active = rand() < ch.p_active
            elif active_ids is not None:
                active = ch.id in active_ids
            else:
                active = rand() < p_active
            if gt_def is not None:
                ground_truth.append(
                    {
                        "channel_def": dict(gt_def),
                        "center_freq": round(center, 2),
                        "active_this_scan": active,
                        "power_dbm": power if active else float(nf),
                    }
                )
            if active and rand() >= p_miss:
                f = center + gauss(0, freq_noise)
                pw = power + gauss(0, power_noise)
                w = bw + gauss(0, w_sigma)
                peaks.append(make_peak(f, pw, round(max(1.0, w), 1), "channel", ch.id))

    return scan


def _interference_and_noise(rng: random.Random, params: GeneratorParams, make_peak):
    """``scan(peaks) -> interference_freqs``: one scan's interference bursts (1–3 with probability
    ``p_interference``) and its false alarm (with probability ``p_false_alarm``), appended to ``peaks``."""
    rand, uniform, gauss = rng.random, rng.uniform, rng.gauss
    nf, band, p_interference, p_false_alarm = (
        params.noise_floor_dbm,
        params.band_width,
        params.p_interference,
        params.p_false_alarm,
    )

    def scan(peaks: list) -> list[float]:
        interference_freqs: list[float] = []
        if rand() < p_interference:
            for _ in range(rng.randint(1, 3)):
                f = uniform(0, band)
                pw = uniform(nf + 5, nf + 20)
                interference_freqs.append(round(f, 2))
                w = round(uniform(0.5, 3.0), 1)
                peaks.append(make_peak(f, pw, w, "interference", None))
        if rand() < p_false_alarm:
            f = uniform(0, band)
            pw = nf + gauss(5, 2)
            w = round(uniform(1.0, 5.0), 1)
            peaks.append(make_peak(f, pw, w, "noise", None))
        return interference_freqs

    return scan


def generate_scans(
    channels: Sequence[ChannelDef | Mapping[str, Any]],
    n_scans: int,
    seed: int,
    params: GeneratorParams,
    *,
    annotate: bool = False,
    with_ground_truth: bool = True,
) -> list[dict[str, Any]]:
    """Generate ``n_scans`` scan records (A.3). Each record has the corpus row keys from ``scan_id`` on:
    ``scan_id, sensor_id, detector_version, integration_time_ms, estimated_noise_floor_dbm,
    detected_peaks, ground_truth, interference_freqs`` (plus the caller adds ``scan_idx`` etc.).

    ``annotate=True`` adds ``channel_id`` (``None`` for interference/noise) to every peak, for ceiling
    policies and diagnostics; ``with_ground_truth=False`` leaves ``ground_truth`` empty (the RFT env keeps
    its layout instead). Neither changes any draw. One ``random.Random(seed)`` drives everything, in this
    order per scan: the scan id, the channels (``_channel_peaks``), then interference and the false alarm."""
    chans = as_channel_defs(channels)
    rng = random.Random(seed)
    schedule: list[set[int]] | None = None
    if params.n_active is not None and chans:
        schedule = round_robin_sets(rng, chans, params.n_active, n_scans)
    make_peak = _peak_maker(rng, annotate)
    channel_peaks = _channel_peaks(
        rng, _channel_constants(chans, params, with_ground_truth), params, make_peak
    )
    extra_peaks = _interference_and_noise(rng, params, make_peak)
    nf = float(params.noise_floor_dbm)
    scans: list[dict[str, Any]] = []
    for i in range(n_scans):
        scan_id = dashed_id(rng, "scan")
        peaks: list[dict[str, Any]] = []
        ground_truth: list[dict[str, Any]] = []
        channel_peaks(schedule[i] if schedule is not None else None, peaks, ground_truth)
        interference_freqs = extra_peaks(peaks)
        peaks.sort(key=_freq_key)
        scans.append(
            {
                "scan_id": scan_id,
                "sensor_id": SENSOR_ID,
                "detector_version": DETECTOR_VERSION,
                "integration_time_ms": INTEGRATION_TIME_MS,
                "estimated_noise_floor_dbm": nf,
                "detected_peaks": peaks,
                "ground_truth": ground_truth,
                "interference_freqs": interference_freqs,
            }
        )
    return scans


def _freq_key(peak: Mapping[str, Any]) -> float:
    return peak["freq_mhz"]
