"""GS1 study launch: the spec model, the backend composition (local or Tinker) and the correctness
preflight. The spec files and the arm names are here, light to import (the CLI's options name them)."""

from rftlab.runs.paths import SPECS_DIR

DEFAULT_SPEC = SPECS_DIR / "gs1_vs_grpo.json"
REVISED_SPEC = SPECS_DIR / "gs1_vs_grpo_betting.json"  # the rule with power (docs/gs1.md §11)
RUN_PLAN = SPECS_DIR / "gs1_runlevel.json"  # the seeds and the run-level rule (docs/gs1.md §12)
ARMS = ("grpo_gs8", "gs1_kernel")
