"""Spectrum-memory launch: arm specs, the preflight and the local launcher (GRPO of the simulated policy)."""
