"""Poker RFT launch: arm specs (with the Prime/verifiers → Fireworks mapping) and the preflight."""
