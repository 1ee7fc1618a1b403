"""Environments: pure and seeded (no network, files or clocks). One subpackage per family."""
