"""Rollouts: the one episode loop (``episode``) and, in later modules, eval-protocol dataset rows and
rollout processors. This layer sits above ``policies`` and ``runs``: it drives envs with policies."""

from rftlab.rollout.episode import episode

__all__ = ["episode"]
