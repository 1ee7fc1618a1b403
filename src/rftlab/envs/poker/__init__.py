"""Exploitable poker (CLBench ``exploitable_poker``) on the ``texasholdem==0.11.0`` engine.

- ``engine``: seeded deals without the global RNG; card text; hand strength.
- ``opponents``: calling station (Tom), fit-or-fold (Adam), loose-aggressive (Alex).
- ``schedule``: schedules, pre-generated deals, permuted runs.
- ``render``: prompt and observation text (project wording, or upstream-text mode).
- ``task``: ``PokerTask`` (official task and the RFT single-opponent mode), ``PokerAction``.
"""

from rftlab.envs.poker.opponents import OPPONENT_NAMES, OPPONENTS
from rftlab.envs.poker.schedule import SCHEDULES
from rftlab.envs.poker.task import R_MAX, PokerAction, PokerObservation, PokerQuery, PokerTask

__all__ = [
    "OPPONENTS",
    "OPPONENT_NAMES",
    "R_MAX",
    "SCHEDULES",
    "PokerAction",
    "PokerObservation",
    "PokerQuery",
    "PokerTask",
]
