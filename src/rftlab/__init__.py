"""rftlab: analysis-first research notebooks for reinforcement fine-tuning experiments.

Layers (data flows down, nothing imports upward): analysis → launch → runs → training → rollout →
policies → envs / rewards. Envs and rewards are pure and seeded; everything above may do I/O.
"""

__version__ = "0.1.0"
