"""Spectrum-memory analysis: episode summaries, the study's per-epoch series and comparisons, design power."""
