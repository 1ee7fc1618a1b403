"""Spectrum memory environments (``specs/spectrum.md``).

- ``generator``: the CLBench ``blind_spectrum_monitoring`` scan generator (exact RNG call order).
- ``official``: BSM-official — variants, the 3-stage ``default`` schedule, the frozen
  ``mixed_grid_lifecycle`` corpus (built in memory, byte-identical), loader contract, permuted runs.
"""
