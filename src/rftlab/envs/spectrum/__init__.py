"""Spectrum memory environments (``specs/spectrum.md``).

- ``generator``: the CLBench ``blind_spectrum_monitoring`` scan generator (exact RNG call order).
- ``official``: BSM-official data — variants, the 3-stage ``default`` schedule, the frozen
  ``mixed_grid_lifecycle`` corpus (built in memory, byte-identical), loader contract, permuted runs.
- ``render``: prompt formats (brief, instance block, feedback) with project wording by default and an
  explicit upstream-text mode.
- ``bench``: BSM-official as an env (``SpectrumBenchEnv``), ``ScanReport``.
- ``rft``: BSM-RFT, the memory-training variant (``SpectrumRFTEnv``): per-row bands with epoch salt,
  memory channels (none / echo / scrambled / notepad), ICL-off windowing, action handling.
- ``systems``: the CLBench ``icl`` and ``icl_notepad`` context regimes for text policies.
- ``dataset``: eval-protocol rows for RFT training.

Scores and metrics live in ``rftlab.rewards.spectrum``; reference policies in ``rftlab.policies.spectrum``;
the bench90 evaluation in ``rftlab.rollout.spectrum_eval``; summaries in ``rftlab.analysis.summaries``.
"""

from rftlab.envs.spectrum.bench import (
    BenchObservation,
    BenchQuery,
    BenchStepInfo,
    ScanReport,
    SpectrumBenchEnv,
    Transmitter,
)
from rftlab.envs.spectrum.rft import (
    AssistantTurn,
    SpectrumObservation,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    SpectrumStepInfo,
    ToolCall,
    band_seed,
    epoch_salt,
    random_layout,
    window_messages,
)

__all__ = [
    "AssistantTurn",
    "BenchObservation",
    "BenchQuery",
    "BenchStepInfo",
    "ScanReport",
    "SpectrumBenchEnv",
    "SpectrumObservation",
    "SpectrumRFTConfig",
    "SpectrumRFTEnv",
    "SpectrumStepInfo",
    "ToolCall",
    "Transmitter",
    "band_seed",
    "epoch_salt",
    "random_layout",
    "window_messages",
]
