"""Poker training: the RFT task as a tinker-cookbook RL environment (``cookbook_env``)."""
