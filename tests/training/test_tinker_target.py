"""One rule for where a Tinker-API client goes (``rftlab.training.tinker_target``), and every chooser that
used to have its own (the families' launchers, GS1's default backend, the arena SFT's service, the
arena smoke command) follows it for every combination of ``TINKER_BASE_URL`` and ``TINKER_API_KEY``.
Before, GS1 and the arena looked only at the key, so a server named by ``TINKER_BASE_URL`` alone was
ignored by them and used by the launchers."""

from __future__ import annotations

import pytest

from rftlab.launch.gs1.backend import BackendUnavailable, default_backend
from rftlab.launch.tinker import make_service
from rftlab.training.arena.sft import SftError, service_client, tinker_service
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.tinker_target import (
    TinkerTargetError,
    check_sdk_credentials,
    sdk_service_client,
    tinker_target,
    uses_sdk,
)

URL = "http://127.0.0.1:9"  # nothing listens: a client is created, never called
CASES = [  # (base url, key) → target
    (None, None, "local"),
    (None, "tml-test-key", "hosted"),
    (URL, "tml-test-key", "url"),
    (URL, None, "url"),
]


class _SdkClient:
    """Stands in for ``tinker.ServiceClient`` (hosted Tinker is unreachable offline): records that the
    SDK's client was asked for, and makes no connection."""


@pytest.fixture
def env(monkeypatch):
    import tinker

    monkeypatch.setattr(tinker, "ServiceClient", _SdkClient)

    def set_env(url, key):
        for name, value in (("TINKER_BASE_URL", url), ("TINKER_API_KEY", key)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    return set_env


@pytest.mark.parametrize(("url", "key", "target"), CASES)
def test_every_chooser_follows_the_one_rule(env, tmp_path, url, key, target):
    env(url, key)
    assert tinker_target() == target and uses_sdk() == (target != "local")
    assert default_backend() == ("tinker" if target != "local" else "local")
    if target == "local":
        assert isinstance(make_service(tmp_path), LocalServiceClient)
        assert isinstance(service_client(storage_dir=tmp_path), LocalServiceClient)
        with pytest.raises(TinkerTargetError, match="needs TINKER_API_KEY"):
            check_sdk_credentials()
    elif key is None:
        for build in (lambda: make_service(tmp_path), sdk_service_client):
            with pytest.raises(TinkerTargetError, match="TINKER_BASE_URL is set but TINKER_API_KEY is not"):
                build()
        with pytest.raises(SftError, match="TINKER_BASE_URL is set but TINKER_API_KEY is not"):
            service_client(storage_dir=tmp_path)
    else:
        clients = [make_service(tmp_path), service_client(storage_dir=tmp_path), tinker_service()]
        assert all(isinstance(c, _SdkClient) for c in clients)


def test_gs1_refuses_a_url_without_a_key_in_one_line(env, tmp_path):
    from rftlab.launch.gs1.backend import make_gs1_backend
    from rftlab.studies.gs1 import DEFAULT_SPEC, load_spec

    env(URL, None)
    with pytest.raises(BackendUnavailable, match="TINKER_BASE_URL is set but TINKER_API_KEY is not"):
        make_gs1_backend("tinker", load_spec(DEFAULT_SPEC), root=str(tmp_path), quick=True)
