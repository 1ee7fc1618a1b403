"""Poker rollouts: play over schedules, eval-protocol dataset rows, the McpGym server and its scoring."""
