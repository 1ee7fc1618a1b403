"""Arena analysis: frozen-evaluation summaries, promotion gates, paired comparisons, the SFT data audit and the
GPU handoff document."""
