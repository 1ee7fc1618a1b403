"""``rftlab.training.sessions``: a study's Tinker session is finished with its outcome. Driven through the
real tinker SDK against ``rftlab serve tinker`` on loopback; the server records each session's reason."""

from __future__ import annotations

import pytest

from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.server import ServeConfig, ServerThread
from rftlab.training.sessions import closing_session, finish_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = ServeConfig(
        port=0,
        storage=tmp_path_factory.mktemp("service"),
        log_level="warning",
        api_keys=["tml-session-tests"],
    )
    with ServerThread(config) as srv:
        yield srv


def _client(server):
    """An SDK client with its session open, and the session's id."""
    import tinker

    client = tinker.ServiceClient(base_url=server.base_url, api_key="tml-session-tests")
    return client, client.holder.get_session_id()


def _reason(server, session_id) -> str | None:
    return server.service.sessions[session_id].finished


def test_a_block_that_ends_normally_finishes_the_session_as_success(server, monkeypatch):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    client, session = _client(server)
    with closing_session(client):
        assert _reason(server, session) is None
    assert _reason(server, session) == "success"


@pytest.mark.parametrize(("error", "reason"), [(RuntimeError, "errored"), (KeyboardInterrupt, "interrupted")])
def test_an_error_or_ctrl_c_finishes_it_with_that_reason_and_still_propagates(
    server, monkeypatch, error, reason
):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    client, session = _client(server)
    with pytest.raises(error), closing_session(client):
        raise error("stopped")
    assert _reason(server, session) == reason


def test_a_finished_session_refuses_further_work(server, monkeypatch):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    client, session = _client(server)
    assert finish_session(client) is None
    assert _reason(server, session) == "success"
    with pytest.raises(RuntimeError, match="closed"):
        client.create_lora_training_client(base_model="rftlab/tiny-qwen3", rank=2)


def test_clients_without_a_session_are_left_alone(tmp_path):
    local = LocalServiceClient(storage_dir=tmp_path)
    with closing_session(local):
        pass
    assert local.create_lora_training_client("rftlab/tiny-qwen3", rank=2).result() is not None


def test_a_service_that_cannot_finish_is_reported_not_raised(capsys):
    class Unreachable:
        def close(self, status, detail=None):
            raise ConnectionError("service unreachable")

    with closing_session(Unreachable()):
        pass
    assert "could not be finished (ConnectionError: service unreachable)" in capsys.readouterr().err
