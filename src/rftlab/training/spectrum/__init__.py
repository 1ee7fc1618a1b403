"""Spectrum training: local GRPO of the simulated policy, group rollouts and calibration."""
