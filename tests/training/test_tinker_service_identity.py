"""``rftlab serve tinker`` tells its users apart: each key is an identity, and one identity cannot list,
read, load, delete or finish anything of another's (404, as for what does not exist); a wrong key is a
401; the storage folder is private (folders 0700, files 0600). Driven through the tinker SDK and, for
the routes the SDK never lets a caller aim at another's ids, through raw HTTP."""

from __future__ import annotations

import stat

import httpx
import pytest
import tinker
from tinker_helpers import quiet_server, sft_datum

from rftlab.training.local_tinker import TINY_MODEL

OWNER = "tml-identity-owner-0001"
OTHER = "tml-identity-other-0002"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server for two identities (a group sharing it on purpose), with the owner's run, checkpoints,
    sampler and a raw session holding a model."""
    storage = tmp_path_factory.mktemp("identity")
    with quiet_server(storage, api_keys=[OWNER, OTHER]) as srv:
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key=OWNER)
        tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=0).result()
        tc.forward_backward([sft_datum(tc.get_tokenizer())], "cross_entropy").result()
        state = tc.save_state("mine").result().path
        sampler_path = tc.save_weights_for_sampler("mine-s").result().path
        raw = httpx.Client(base_url=srv.base_url + "/api/v1", headers={"X-API-Key": OWNER}, timeout=60)
        session = raw.post("/create_session", json={"tags": [], "user_metadata": {}, "sdk_version": "t"})
        session_id = session.json()["session_id"]
        lora = {"rank": 2, "seed": 0}
        body = {"session_id": session_id, "model_seq_id": 0, "base_model": TINY_MODEL, "lora_config": lora}
        created = raw.post("/create_model", json=body).json()
        sampling = raw.post(
            "/create_sampling_session",
            json={"session_id": session_id, "sampling_session_seq_id": 0, "base_model": TINY_MODEL},
        ).json()
        yield {
            "srv": srv,
            "storage": storage,
            "tc": tc,
            "state": state,
            "sampler_path": sampler_path,
            "model_id": tc.model_id,
            "session_id": session_id,
            "raw_model": created["model_id"],
            "request_id": created["request_id"],
            "sampler_id": sampling["sampling_session_id"],
        }
        raw.close()
        sc.close("success").result()


def _http(shared, key: str) -> httpx.Client:
    return httpx.Client(base_url=shared["srv"].base_url + "/api/v1", headers={"X-API-Key": key}, timeout=60)


def test_another_identity_lists_and_reads_nothing_of_the_first(shared):
    rest = tinker.RestClient(base_url=shared["srv"].base_url, api_key=OTHER)
    runs = rest.list_training_runs().result().training_runs
    assert shared["model_id"] not in [r.training_run_id for r in runs]
    assert not [
        c for c in rest.list_user_checkpoints().result().checkpoints if shared["model_id"] in c.tinker_path
    ]
    assert shared["session_id"] not in rest.list_sessions().result().sessions
    for call in (
        lambda: rest.get_training_run(shared["model_id"]).result(),
        lambda: rest.list_checkpoints(shared["model_id"]).result(),
        lambda: rest.get_weights_info_by_tinker_path(shared["state"]).result(),
        lambda: rest.get_session(shared["session_id"]).result(),
    ):
        with pytest.raises(tinker.NotFoundError):
            call()
    mine = tinker.RestClient(base_url=shared["srv"].base_url, api_key=OWNER)
    assert shared["model_id"] in [r.training_run_id for r in mine.list_training_runs().result().training_runs]
    assert mine.get_session(shared["session_id"]).result().training_run_ids == [shared["raw_model"]]


def test_another_identity_cannot_load_sample_or_delete_the_firsts_checkpoints(shared):
    sc = tinker.ServiceClient(base_url=shared["srv"].base_url, api_key=OTHER)
    try:
        with pytest.raises(tinker.NotFoundError):
            sc.create_training_client_from_state(shared["state"]).result()
        with pytest.raises(tinker.NotFoundError):
            sc.create_sampling_client(model_path=shared["sampler_path"]).result()
        rest = tinker.RestClient(base_url=shared["srv"].base_url, api_key=OTHER)
        with pytest.raises(tinker.NotFoundError):
            rest.delete_checkpoint_from_tinker_path(shared["state"]).result()
        with pytest.raises(tinker.NotFoundError):
            rest.set_checkpoint_ttl_from_tinker_path(shared["state"], 7200).result()
    finally:
        sc.close("success").result()
    with _http(shared, OTHER) as other:
        body = {"session_id": "x", "model_seq_id": 0, "base_model": TINY_MODEL, "lora_config": {"rank": 2}}
        new = other.post("/create_session", json={"tags": [], "user_metadata": {}, "sdk_version": "t"})
        body["session_id"] = new.json()["session_id"]
        model_id = other.post("/create_model", json=body).json()["model_id"]
        load = {"model_id": model_id, "seq_id": 1, "path": shared["state"], "optimizer": False}
        assert other.post("/load_weights", json=load).status_code == 404
    folder = shared["storage"] / shared["model_id"] / "weights"
    assert (folder / "mine.pt").is_file()  # still there, untouched
    assert shared["tc"].load_state(shared["state"]).result().path == shared["state"]  # the owner still can


def test_another_identity_cannot_touch_the_firsts_session_model_sampler_or_future(shared):
    sid, model, sampler = shared["session_id"], shared["raw_model"], shared["sampler_id"]
    prompt = {"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]}
    with _http(shared, OTHER) as other:
        assert other.post(f"/sessions/{sid}/finish", json={"reason": {"type": "x"}}).status_code == 404
        assert other.post("/retrieve_future", json={"request_id": shared["request_id"]}).status_code == 404
        assert other.post("/get_info", json={"model_id": model}).status_code == 404
        assert other.get(f"/samplers/{sampler}").status_code == 404
        sample = {"sampling_session_id": sampler, "seq_id": 1, "prompt": prompt, "sampling_params": {}}
        assert other.post("/asample", json=sample).status_code == 404
        lora = {"session_id": sid, "model_seq_id": 5, "base_model": TINY_MODEL, "lora_config": {"rank": 2}}
        assert other.post("/create_model", json=lora).status_code == 404
        assert other.post("/session_heartbeat", json={"session_id": sid}).status_code == 410  # as unknown
        adam = {"model_id": model, "seq_id": 1, "optim_params": {"learning_rate": 0.01}}
        assert other.post("/optim_step", json=adam).status_code == 404
    with _http(shared, OWNER) as mine:  # all of it still the owner's, alive
        assert mine.post("/session_heartbeat", json={"session_id": sid}).status_code == 200
        assert mine.post("/retrieve_future", json={"request_id": shared["request_id"]}).status_code == 200
        assert mine.get(f"/samplers/{sampler}").status_code == 200


def test_a_wrong_key_is_a_401(shared):
    with _http(shared, "tml-identity-wrong-0003") as wrong:
        assert wrong.get("/get_server_capabilities").status_code == 401
    with pytest.raises(tinker.AuthenticationError):
        tinker.RestClient(
            base_url=shared["srv"].base_url, api_key="tml-identity-wrong-0003"
        ).list_sessions().result()


def test_the_storage_folder_is_private(shared):
    storage = shared["storage"]
    folders = [storage, *[p for p in storage.rglob("*") if p.is_dir()]]
    files = [p for p in storage.rglob("*") if p.is_file()]
    assert len(folders) >= 4 and len(files) >= 4
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o700}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
