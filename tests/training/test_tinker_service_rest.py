"""The REST reads of ``rftlab serve tinker`` through the SDK's own ``RestClient``: training runs, every
checkpoint, sessions, weights info, checkpoint TTLs; and the routes it does not serve answer a typed 404."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import tinker
from tinker import types
from tinker_helpers import quiet_server

from rftlab.training.local_tinker import TINY_MODEL

KEY = "tml-local-tests"  # quiet_server's key (tinker_helpers.KEY)
T = 60.0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two sessions: the first with two training runs (one with two checkpoints), the second with one."""
    with quiet_server(tmp_path_factory.mktemp("rest")) as srv:
        first = tinker.ServiceClient(base_url=srv.base_url, api_key=KEY, user_metadata={"who": "first"})
        second = tinker.ServiceClient(base_url=srv.base_url, api_key=KEY)
        a = first.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result(timeout=T)
        b = first.create_lora_training_client(
            base_model=TINY_MODEL, rank=8, seed=0, train_unembed=False
        ).result(timeout=T)
        c = second.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=0).result(timeout=T)
        paths = {
            "a1": a.save_state("one", ttl_seconds=7200).result(timeout=T).path,
            "a2": a.save_weights_for_sampler("two").result(timeout=T).path,
            "b1": b.save_state("only").result(timeout=T).path,
            "c1": c.save_state("c").result(timeout=T).path,
        }
        yield {"srv": srv, "first": first, "second": second, "a": a, "b": b, "c": c, "paths": paths}
        first.close("success").result()
        second.close("success").result()


def test_list_training_runs_pages_through_every_run(world):
    rest = world["first"].create_rest_client()
    everything = rest.list_training_runs(limit=10).result(timeout=T)
    ids = {r.training_run_id for r in everything.training_runs}
    assert ids == {world[k].model_id for k in "abc"}
    assert everything.cursor.total_count == 3
    by_id = {r.training_run_id: r for r in everything.training_runs}
    assert by_id[world["b"].model_id].lora_rank == 8
    assert by_id[world["a"].model_id].last_checkpoint.tinker_path == world["paths"]["a1"]
    assert by_id[world["a"].model_id].last_sampler_checkpoint.tinker_path == world["paths"]["a2"]
    pages = [rest.list_training_runs(limit=2, offset=o).result(timeout=T) for o in (0, 2)]
    assert [len(p.training_runs) for p in pages] == [2, 1]
    assert {r.training_run_id for p in pages for r in p.training_runs} == ids


def test_list_user_checkpoints_lists_every_runs_checkpoints_newest_first(world):
    rest = world["first"].create_rest_client()
    listed = rest.list_user_checkpoints(limit=100).result(timeout=T)
    assert {c.tinker_path for c in listed.checkpoints} == set(world["paths"].values())
    times = [c.time for c in listed.checkpoints]
    assert times == sorted(times, reverse=True)
    assert listed.cursor is not None and listed.cursor.total_count == 4
    one = rest.list_user_checkpoints(limit=1, offset=3).result(timeout=T)
    assert [c.tinker_path for c in one.checkpoints] == [listed.checkpoints[3].tinker_path]


def test_sessions_list_and_show_their_runs(world):
    rest = world["first"].create_rest_client()
    sessions = rest.list_sessions(limit=20).result(timeout=T).sessions
    first_id, second_id = world["first"].holder.get_session_id(), world["second"].holder.get_session_id()
    assert {first_id, second_id} <= set(sessions)
    shown = rest.get_session(first_id).result(timeout=T)
    assert set(shown.training_run_ids) == {world["a"].model_id, world["b"].model_id}
    assert shown.user_metadata == {"who": "first"}
    with pytest.raises(tinker.NotFoundError):
        rest.get_session("no-such-session").result(timeout=T)


def test_weights_info_names_the_base_model_and_lora_layout(world):
    rest = world["first"].create_rest_client()
    info = rest.get_weights_info_by_tinker_path(world["paths"]["b1"]).result(timeout=T)
    assert (info.base_model, info.is_lora, info.lora_rank, info.train_unembed) == (TINY_MODEL, True, 8, False)
    with pytest.raises(tinker.NotFoundError):
        rest.get_weights_info_by_tinker_path(world["paths"]["b1"] + "-gone").result(timeout=T)


def test_set_checkpoint_ttl_sets_and_removes_the_expiry(world):
    rest = world["first"].create_rest_client()
    path = world["paths"]["c1"]

    def expiry():
        listed = rest.list_checkpoints(world["c"].model_id).result(timeout=T).checkpoints
        return next(c.expires_at for c in listed if c.tinker_path == path)

    assert expiry() is None
    before = datetime.now(UTC)
    rest.set_checkpoint_ttl_from_tinker_path(path, 4 * 3600).result(timeout=T)
    expires = expiry()
    assert expires is not None and 4 * 3600 - 5 <= (expires - before).total_seconds() <= 4 * 3600 + 5
    rest.set_checkpoint_ttl_from_tinker_path(path, None).result(timeout=T)
    assert expiry() is None
    with pytest.raises(tinker.BadRequestError):
        rest.set_checkpoint_ttl_from_tinker_path(path, 5).result(timeout=T)  # below the 1-hour minimum


def test_unsupported_routes_answer_a_typed_404_at_once(world):
    rest = world["first"].create_rest_client()
    t0 = time.monotonic()
    with pytest.raises(tinker.NotFoundError) as err:
        rest.publish_checkpoint_from_tinker_path(world["paths"]["a1"]).result(timeout=T)
    assert "not supported" in str(err.value)
    assert time.monotonic() - t0 < 10
    # the training client is not held up by it
    tok = world["a"].get_tokenizer()
    ids = tok.encode("Kim has 2 cups.")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    world["a"].forward([datum], "cross_entropy").result(timeout=T)
