"""eval-protocol ``@evaluation_test`` entry modules for the spectrum RFT env, and their scoring.

- ``spectrum_turn``: the bench-shaped path (``SpectrumTurnProcessor``: scans as user messages).
- ``spectrum_mcp_eval``: the McpGym path (``rftlab.rollout.spectrum.mcp`` server, scans as tool results).
- ``poker_mcp_eval``: the poker RFT env on the McpGym path (``rftlab.rollout.poker.mcp``, the ``poker_act``
  tool), scored from the env-authored messages (``rftlab.rollout.poker.scoring``) with the mean-instance
  reward; ``poker_mcp_gain_eval``: the same with the gain reward (one entry per reward).
- ``scoring``: the env's own scoring of a rollout transcript (replay) as an ``EvaluateResult``.
- ``settings``: the entry modules' rows and completion parameters, read from the environment.

Run one with pytest, e.g. against the local policy server (``python -m rftlab.policies.server``)::

    RFTLAB_EP_MODEL=openai/accumulate RFTLAB_EP_BASE_URL=http://127.0.0.1:8011/v1 RFTLAB_SPECTRUM_ROWS=4 \\
        pytest -q src/rftlab/rollout/eval_entries/spectrum_turn.py
"""
