"""Reference and control policies for the spectrum envs (docs/spectrum.md §A.12, B.12).

Every policy satisfies ``rftlab.types.Policy``: ``reset(seed=None)`` for a new episode and
``act(observation) -> action``. Bench policies read a ``BenchObservation`` (the query to answer is its
``next_query``) and return a ``ScanReport`` dict; RFT policies read a ``SpectrumObservation`` and return a
list of centre frequencies (the ``submit_report`` argument). All of them are deterministic, so ``seed``
is accepted and unused.
Oracle / ceiling policies read the observation's ``hidden`` field (ground truth, peak sources), which is
never shown to a model.

``BENCH_POLICIES`` and ``RFT_POLICIES`` map names to zero-argument factories.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import mean
from typing import Any

from pydantic import BaseModel

from rftlab.envs.spectrum.bench import BenchObservation, ScanReport
from rftlab.envs.spectrum.official import BAND_WIDTH as BENCH_BAND
from rftlab.envs.spectrum.official import W, ground_truth_channels
from rftlab.envs.spectrum.rft import MAX_REPORT, normalize_center_freqs
from rftlab.envs.spectrum.systems import IclContext, IclNotepadContext, parse_structured

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

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> dict[str, Any]:
        return {"transmitters": []}


class BenchMemoryless:
    """Echo the current peaks: each peak → transmitter at ``freq_mhz`` with width ``width_mhz``."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> dict[str, Any]:
        return {
            "transmitters": [
                _tx(p["freq_mhz"], p["width_mhz"], True, p["power_dbm"]) for p in obs.next_query.peaks
            ]
        }


class BenchAccumulate:
    """Union of every peak seen so far in the run (raw widths, no deduplication)."""

    def reset(self, seed: int | None = None) -> None:
        self.seen: list[dict[str, Any]] = []

    def __init__(self) -> None:
        self.reset()

    def act(self, obs) -> dict[str, Any]:
        query = obs.next_query
        current = {p["peak_id"] for p in query.peaks}
        self.seen.extend(query.peaks)
        return {
            "transmitters": [
                _tx(p["freq_mhz"], p["width_mhz"], p["peak_id"] in current, p["power_dbm"]) for p in self.seen
            ]
        }


class BenchWidebandOnly:
    """Exactly the 7 wideband channels at their nominal centres, width 15."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> dict[str, Any]:
        return {"transmitters": [_tx(7.5 + 24 * s, W) for s in range(7)]}


class BenchOracle:
    """The scoring ground truth (all 13 channels at nominal centres/widths)."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> dict[str, Any]:
        gt = obs.next_query.hidden.get("ground_truth_channels") or ground_truth_channels()
        return {"transmitters": [_tx(c, bw) for c, bw in gt]}


BENCH_POLICIES: dict[str, Callable[[], Any]] = {
    "empty": BenchEmpty,
    "memoryless": BenchMemoryless,
    "accumulate": BenchAccumulate,
    "wideband_only": BenchWidebandOnly,
    "oracle": BenchOracle,
}


# ------------------------------------------------------------------------------------------ RFT


class RFTEmpty:
    """Submits an empty report every scan."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> list[float]:
        return []


class RFTMemoryless:
    """Reports the current scan's peak centres only (no cross-scan memory)."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> list[float]:
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

    def reset(self, seed: int | None = None) -> None:
        self.centres: list[float] = []

    def _candidates(self, obs) -> list[float]:
        if not (self.source_filter or self.denoise):
            return [p["freq_mhz"] for p in obs.peaks]
        sources = obs.hidden["peak_sources"]
        if self.denoise:
            return list(obs.hidden["peak_true_centers"][i] for i, s in enumerate(sources) if s == "channel")
        return [p["freq_mhz"] for p, s in zip(obs.peaks, sources, strict=True) if s == "channel"]

    def act(self, obs) -> list[float]:
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

    def reset(self, seed: int | None = None) -> None:
        self.buckets: dict[int, list[float]] = {}

    def act(self, obs) -> list[float]:
        for p in obs.peaks:
            self.buckets.setdefault(round(p["freq_mhz"] / 6), []).append(p["freq_mhz"])
        return [mean(v) for v in self.buckets.values() if len(v) >= self.min_count][:MAX_REPORT]


class RFTCarpet:
    """16 fixed tiles at ``4 + i·11`` MHz (blankets the band; a high-mean, zero-gain trap)."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> list[float]:
        return [4 + i * 11.0 for i in range(MAX_REPORT)]


class RFTOracle:
    """The true channel centres of the band (reads ``hidden``)."""

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> list[float]:
        return list(obs.hidden["channel_centers"])[:MAX_REPORT]


class RFTEchoFollower:
    """Scaffold-aware: submits the displayed running list plus any new current peak (what the explicit
    prompt asks the model to do). Without an echo it behaves like ``memoryless``."""

    def __init__(self, merge_tol: float = 4.0):
        self.merge_tol = merge_tol

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs) -> list[float]:
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


# ------------------------------------------------------------------------ RFT policies on the bench


class _BenchAsRFTObservation:
    """A bench query seen through the RFT observation interface (``peaks``, ``echo``, ``hidden``)."""

    def __init__(self, query, echo: list[float] | None):
        self.text = query.prompt
        self.scan_num = query.scan_num
        self.num_scans = query.stated_horizon
        self.tool_results: list[dict[str, Any]] = []
        self.done = False
        self.echo = echo
        self.peaks = [dict(p) for p in query.peaks]
        centres = [c for c, _ in query.hidden["ground_truth_channels"]]
        sources = list(query.hidden["peak_sources"])
        # The official corpus does not record which channel emitted a peak; the channels' spans never
        # touch (A.1), so a channel peak's true centre is the nearest ground-truth centre.
        self.hidden = {
            "channel_centers": centres,
            "peak_sources": sources,
            "peak_true_centers": [
                min(centres, key=lambda c, f=p["freq_mhz"]: abs(c - f)) if s == "channel" else None
                for p, s in zip(self.peaks, sources, strict=True)
            ],
        }


class RFTPolicyOnBench:
    """The bridge from the training variant to the official benchmark: an RFT-style policy
    (``obs -> centre list``) answers bench queries; its centres become transmitters of fixed width
    ``bandwidth`` (8 MHz, as in training; the 16-region cap and input rules of ``submit_report`` apply).
    With ``running_list`` the previous report is offered as ``obs.echo`` (the scaffold arms' memory)."""

    def __init__(self, policy: Any, *, bandwidth: float = 8.0, running_list: bool = True):
        self.policy = policy
        self.bandwidth = bandwidth
        self.running_list = running_list
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset(seed)
        self.last: list[float] = []

    def act(self, obs) -> dict[str, Any]:
        echo = [round(x, 1) for x in self.last] if (self.running_list and self.last) else None
        rft_obs = _BenchAsRFTObservation(obs.next_query, echo)
        centres, _note = normalize_center_freqs(self.policy.act(rft_obs), band=BENCH_BAND)
        self.last = centres
        return {
            "transmitters": [
                {
                    "center_freq": c,
                    "bandwidth": self.bandwidth,
                    "currently_active": True,
                    "estimated_power": -30.0,
                }
                for c in centres
            ]
        }


# ------------------------------------------------------------------------------ chat models on the bench


class ChatBenchPolicy:
    """A chat model as a bench policy (CLBench ``icl`` / ``icl_notepad`` context, docs/spectrum.md §A.10), so a deployed
    model — or a local fake — runs on bench90 with ``evaluate_bench90(lambda: ChatBenchPolicy(chat))``.
    ``chat(messages, response_schema)`` returns the reply (text or a parsed dict). Up to ``retries`` extra
    attempts on JSON/validation errors, then an empty report. The feedback on each scan reaches the
    context with the next observation. ``seed`` is unused (sampling is the chat callable's business)."""

    def __init__(
        self,
        chat: Callable[[list[dict[str, str]], type[BaseModel]], Any],
        regime: str = "icl",
        *,
        system_prompt: str = "",
        retries: int = 5,
        **context_kwargs: Any,
    ):
        if regime not in ("icl", "icl_notepad"):
            raise ValueError(f"regime must be 'icl' or 'icl_notepad', got {regime!r}")
        self.chat = chat
        self.regime = regime
        self.system_prompt = system_prompt
        self.retries = retries
        self.context_kwargs = context_kwargs
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        ctx_cls = IclContext if self.regime == "icl" else IclNotepadContext
        self.context = ctx_cls(self.system_prompt, **self.context_kwargs)
        self.errors: list[str] = []

    def act(self, obs: BenchObservation) -> dict[str, Any]:
        if obs.content is not None:  # feedback on the previous scan (none right after reset)
            self.context.record_observation(obs)
        if obs.next_query is None:
            raise RuntimeError("the run is over: there is no scan to answer")
        messages = self.context.query_messages(obs.next_query)
        schema = self.context.response_schema
        action: ScanReport | None = None
        for _ in range(self.retries + 1):
            action, err = parse_structured(self.chat(messages, schema), schema)
            if action is not None:
                break
            self.errors.append(err or "unparsable reply")
        if action is None:
            action = schema.model_validate({"transmitters": []})
        self.context.record_action(action)
        return {"transmitters": [t.model_dump() for t in action.transmitters]}
