"""Spectrum memory environments (``docs/spectrum.md``).

- ``generator``: the CLBench ``blind_spectrum_monitoring`` scan generator (exact RNG call order).
- ``official``: BSM-official data — variants, the 3-stage ``default`` schedule, the frozen
  ``mixed_grid_lifecycle`` corpus (built in memory, byte-identical), loader contract, permuted runs.
- ``render``: prompt formats (brief, instance block, feedback) with project wording by default and an
  explicit upstream-text mode.
- ``bench``: BSM-official as an env (``SpectrumBenchEnv``), ``ScanReport``.
- BSM-RFT, the memory-training variant, split by job: ``layout`` (band seeds with epoch salt, random
  layouts, the band's scans), ``actions`` (reading a model call and ``center_freqs``), ``config``
  (``SpectrumRFTConfig``), ``observation`` (tool schemas, observations, the echo, ICL-off windowing) and
  ``rft`` (``SpectrumRFTEnv``, the episode; it re-exports the names above).
- ``systems``: the CLBench ``icl`` and ``icl_notepad`` context regimes for text policies.

Scores and metrics live in ``rftlab.rewards.spectrum``; reference policies in ``rftlab.policies.spectrum.reference``;
the bench90 evaluation in ``rftlab.rollout.spectrum.evaluation``; eval-protocol dataset rows in
``rftlab.rollout.spectrum.dataset``; summaries in ``rftlab.analysis.summaries``.
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
