"""Poker policies: reference strategies (random, always-call, exploit) and the chat adapter for the McpGym
path."""
