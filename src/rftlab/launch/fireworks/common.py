"""What the Fireworks launcher's modules share: the backend name, the environment variables it reads, poll
and grace intervals, the evaluator's entry points and requirements, the stall advice, ``LaunchRefused``."""

from __future__ import annotations

BACKEND = "fireworks"
MIN_POLL_INTERVAL_S = 5.0  # each poll is one or more firectl calls to the Fireworks API
DATASET_GRACE_S = 600.0  # after COMPLETED, how long the per-epoch datasets may take to appear
KEY_ENV = "FIREWORKS_API_KEY"
ACCOUNT_ENV = "FIREWORKS_ACCOUNT_ID"
# The @evaluation_test entry of each (experiment, rollout interface), relative to the staged evaluator folder.
ENTRY_POINTS = {
    ("spectrum_memory", "turn"): "rftlab/rollout/eval_entries/spectrum_turn.py::test_spectrum_turn",
    ("spectrum_memory", "mcp"): "rftlab/rollout/eval_entries/spectrum_mcp_eval.py::test_spectrum_mcp",
    ("poker", "mcp"): "rftlab/rollout/eval_entries/poker_mcp_eval.py::test_poker_mcp",
}
EVALUATOR_REQUIREMENTS = (
    "eval-protocol==0.3.33",
    "numpy>=2.4",
    "pydantic>=2.14",
    "jinja2>=3.1",
)
STALL_ADVICE = (
    "No progress (state, epoch, percent, accelerator seconds, epoch datasets) for {duration}. "
    "This is often Fireworks capacity, not this code: (1) check whether any deployment exists for the job "
    "('firectl deployment list') and whether acceleratorSeconds is non-empty; (2) launch an independent "
    "control job (known-good evaluator, tiny dataset, 1 epoch, same base model); if it stalls too, wait or "
    "change base model/region; only if it progresses debug the evaluator (local pytest against the policy "
    "server, then re-validate the dataset). The job was NOT cancelled. Escalate with the job id, base "
    "model, elapsed time, last progress key and status.message."
)


class LaunchRefused(RuntimeError):
    """The launch did not start anything that costs money (preflight failed, missing key, conflict)."""


# What ``launch`` does when the planned job exists and ended without completing (``--resume`` /
# ``--new-attempt`` on the command line): refuse and say so, resume that job, or start attempt n + 1.
FAILED_JOB_CHOICES = ("refuse", "resume", "new-attempt")
RESUME_GRACE_S = 600.0  # after a resume, how long the job may still read FAILED before that counts
MAX_ATTEMPTS = 99
