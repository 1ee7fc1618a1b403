"""Every test here runs with the no-network guard of ``tests/conftest.py`` (loopback only)."""

import pytest


@pytest.fixture(autouse=True)
def _offline(no_network):
    yield no_network
