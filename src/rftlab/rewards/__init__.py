"""Scoring functions and per-episode metrics: pure functions of an episode."""
