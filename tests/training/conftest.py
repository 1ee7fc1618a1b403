"""Fixtures of the local tinker backend's tests."""

from __future__ import annotations

import pytest
import tinker
import torch
from tinker_helpers import KEY, quiet_server

from rftlab.training.local_tinker import LocalServiceClient


@pytest.fixture(scope="module")
def service64(tmp_path_factory):
    """An in-process service in float64 (the reference computations compare to 1e-9)."""
    return LocalServiceClient(storage_dir=tmp_path_factory.mktemp("ckpt"), dtype=torch.float64)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``rftlab serve tinker`` for one test module (a thread of this process, a free loopback port)."""
    with quiet_server(tmp_path_factory.mktemp("srv")) as srv:
        yield srv


@pytest.fixture(scope="module")
def sc(server):
    """The tinker SDK's ``ServiceClient`` on the module's server; its session is finished at the end."""
    client = tinker.ServiceClient(base_url=server.base_url, api_key=KEY)
    yield client
    client.close("success").result()
