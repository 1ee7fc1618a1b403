"""Spectrum policies: reference and control policies, the chat adapter and the simulated policy of the local
study."""
