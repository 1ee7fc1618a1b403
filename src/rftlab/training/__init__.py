"""Training loops. ``rftlab.training.spectrum_grpo`` is the local GRPO trainer of the spectrum-memory study
(with the simulated policy of ``rftlab.policies.simulated``); ``rftlab.training.grpo`` holds the
task-independent pieces (group advantages, Adam)."""
