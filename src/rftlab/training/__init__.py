"""Training loops and their plug-ins.

- ``rftlab.training.gs1.advantages``, ``rftlab.training.gs1.rl_loop``: advantage estimators and the GS1/GRPO
  client-side loop on the tinker API (``rftlab.training.local_tinker`` is the in-process backend).
- ``rftlab.training.spectrum.grpo``: the local GRPO trainer of the spectrum-memory study (with the simulated
  policy of ``rftlab.policies.spectrum.simulated``); ``rftlab.training.grpo`` holds the task-independent pieces
  (group advantages, Adam).
"""
