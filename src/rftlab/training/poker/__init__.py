"""Poker training: the RFT task as a tinker-cookbook RL environment (``cookbook_env``) and GRPO of a
language model on it through the Tinker API (``tinker_rl``, over the generic ``rftlab.training.tinker_rl``)."""
