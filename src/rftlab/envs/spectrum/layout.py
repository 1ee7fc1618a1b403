"""BSM-RFT bands (docs/spectrum.md §B.2–B.5): band seeds (row id + epoch salt, session ids), the scrambled-echo
seeds, the random channel layout of a band and the band's scans.

Cached: ``episode_band`` (``functools.lru_cache``, 256 entries) keeps the layout, scans and rendered scan
blocks of recent band seeds, so the candidates of a GRPO group (which share a band) generate it once.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rftlab.envs.spectrum.generator import GeneratorParams, generate_scans

RFT_BAND = 180.0
CH_BW = 8.0
MIN_CHANNELS, MAX_CHANNELS = 11, 14
MIN_SPACING = CH_BW + 2  # accepted centres are >= 10 MHz apart
LAYOUT_ATTEMPTS = 400
NUM_SCANS = 12

# Generator parameters of the RFT task (B.4): CLBench constructor defaults + the RFT overrides.
RFT_PARAMS = GeneratorParams(band_width=RFT_BAND, n_active=3, p_false_alarm=0.2, p_miss=0.15)


# ----------------------------------------------------------------------------------------- seeds


def band_seed(row_id: Any, salt: str = "") -> int:
    """``int(md5(f"{salt}:{row_id}")[:12], 16)`` — the turn-processor band seed (B.2). All candidates of
    a row share it; a different ``salt`` (one per epoch) gives a different band."""
    return int(hashlib.md5(f"{salt}:{row_id}".encode()).hexdigest()[:12], 16)


def session_band_seed(session_id: Any) -> int:
    """McpGym-path band seed: ``int(md5(str(session_id))[:12], 16)``, no salt (B.2)."""
    return int(hashlib.md5(str(session_id).encode()).hexdigest()[:12], 16)


def epoch_salt(namespace: str, epoch: int) -> str:
    """A reproducible per-epoch salt (8 hex digits) replacing upstream's ``secrets.token_hex(4)``:
    ``sha256(f"{namespace}:epoch:{epoch}")[:8]``. Use the run id (or arm spec hash) as ``namespace``."""
    return hashlib.sha256(f"{namespace}:epoch:{int(epoch)}".encode()).hexdigest()[:8]


def scramble_seed(seed: int, scan_num: int, salt: str = "") -> int:
    """Seed of the scrambled echo shown with scan ``scan_num``: ``sha256(f"scramble:{seed}:{scan_num}:{salt}")``
    (first 16 hex digits), never Python's salted ``hash()`` (B.5)."""
    return int(hashlib.sha256(f"scramble:{seed}:{scan_num}:{salt}".encode()).hexdigest()[:16], 16)


def scrambled_list(
    seed: int, scan_num: int, count: int, salt: str = "", band: float = RFT_BAND
) -> list[float]:
    """``sorted(round(U(8, B − 8), 1))`` × ``count`` (the control arm's echo content, B.5)."""
    rng = random.Random(scramble_seed(seed, scan_num, salt))
    return sorted(round(rng.uniform(CH_BW, band - CH_BW), 1) for _ in range(count))


# ---------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class BandLayout:
    """A random band (B.3). ``drawn`` may exceed ``len(centers)`` when 400 attempts run out."""

    seed: int
    drawn: int
    attempts: int
    centers: tuple[float, ...]
    band_width: float = RFT_BAND
    channel_bw: float = CH_BW

    @property
    def placed(self) -> int:
        return len(self.centers)

    def channels(self) -> list[dict[str, Any]]:
        return [
            {"id": i, "slot": i, "center_freq": c, "bandwidth": self.channel_bw}
            for i, c in enumerate(self.centers)
        ]

    def regions(self) -> list[tuple[float, float]]:
        return [(c, self.channel_bw) for c in self.centers]


def random_layout(seed: int, band_width: float = RFT_BAND) -> BandLayout:
    """B.3 with ``ent = random.Random(seed)``: ``n = randint(11, 14)``; up to 400 draws of
    ``round(uniform(8, B − 8), 1)``, accepted when ≥ 10 MHz from every accepted centre; sorted."""
    ent = random.Random(seed)
    rand = ent.random
    n = ent.randint(MIN_CHANNELS, MAX_CHANNELS)
    span = (band_width - CH_BW) - CH_BW
    centers: list[float] = []  # kept sorted: only the two neighbours of a candidate can be too close
    attempts = 0
    while len(centers) < n and attempts < LAYOUT_ATTEMPTS:
        attempts += 1
        cf = round(CH_BW + span * rand(), 1)  # == round(ent.uniform(8, B - 8), 1), same single draw
        k = bisect.bisect_left(centers, cf)
        if (k == 0 or cf - centers[k - 1] >= MIN_SPACING) and (
            k == len(centers) or centers[k] - cf >= MIN_SPACING
        ):
            centers.insert(k, cf)
    return BandLayout(seed, n, attempts, tuple(centers), band_width)


@lru_cache(maxsize=256)
def episode_band(seed: int, band_width: float, num_scans: int, params: GeneratorParams):
    """``(layout, scans, blocks)`` of a band seed, cached: the candidates of a GRPO group share one band,
    so only the first of them pays for generation and rendering. ``blocks`` holds each scan's instance
    block, rendered on first use. Callers must treat everything as read-only."""
    layout = random_layout(seed, band_width)
    blocks: list[str | None] = [None] * num_scans
    return layout, generate_episode_scans(seed, layout, num_scans, params), blocks


def generate_episode_scans(seed: int, layout: BandLayout, num_scans: int = NUM_SCANS, params=RFT_PARAMS):
    """The episode's scans: the CLBench generator with the layout as channel overrides and the same seed
    (an independent ``random.Random``, B.2/B.4). Peaks carry ``channel_id`` annotations."""
    return generate_scans(layout.channels(), num_scans, seed, params, annotate=True, with_ground_truth=False)
