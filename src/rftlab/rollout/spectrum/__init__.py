"""Spectrum rollouts: dataset rows, eval-protocol processors and McpGym server, scoring, bench90 evaluation,
ceilings, the offline eval runner, the endpoint check (``rftlab endpoint check``)."""
