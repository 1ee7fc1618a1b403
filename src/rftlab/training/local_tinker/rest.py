"""The REST reads of ``rftlab serve tinker``: what ``tinker.RestClient`` (and the cookbook through it) asks
about training runs, checkpoints, sessions and weights, answered from the service's state and its
checkpoint folder.

Served (tinker 0.38 paths under ``/api/v1``): ``GET training_runs`` (paginated), ``GET
training_runs/{id}``, ``GET training_runs/{id}/checkpoints``, ``DELETE training_runs/{id}/checkpoints/{cid}``,
``PUT training_runs/{id}/checkpoints/{cid}/ttl``, ``GET checkpoints`` (every run's, paginated, newest
first), ``POST weights_info``, ``GET sessions`` (paginated, newest first) and ``GET sessions/{id}``. A
training run is a folder of the checkpoint store with a ``run.json`` record, so runs and checkpoints of
earlier server processes on the same ``--storage`` are listed too; sessions live in memory only.

Not served, answered 404 with the reason (the SDK raises ``NotFoundError``, which is not retried):
publishing, external-weight URLs, copies between accounts, audit logs, billing and projects, which have no
meaning on one machine.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tinker import types

from .checkpoints import PREFIX, CheckpointError, parse_path, read_run_record, seconds

if TYPE_CHECKING:
    from .service import TinkerService

MAX_PAGE = 1000
"""The largest ``limit`` of one page."""


def _page(limit: Any, offset: Any) -> tuple[int, int]:
    from .service import ServiceError

    try:
        limit, offset = int(limit), int(offset)
    except (TypeError, ValueError):
        raise ServiceError(400, "limit and offset must be integers") from None
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ServiceError(400, f"limit must be in [1, {MAX_PAGE}] and offset at least 0")
    return limit, offset


def _strings(value: object) -> dict[str, str] | None:
    """A sidecar's ``user_metadata`` when it maps strings to strings (a damaged one: ``None``)."""
    if isinstance(value, dict) and all(isinstance(x, str) for x in (*value, *value.values())):
        return value or None
    return None


def _safe_id(model_id: str) -> bool:
    return bool(model_id) and "/" not in model_id and ".." not in model_id and not model_id.startswith(".")


class RestViews:
    """The reads of the module docstring over ``service`` (its sessions, models and checkpoint store)."""

    def __init__(self, service: TinkerService) -> None:
        self.service = service
        self.store = service.backend.checkpoints
        self.root = service.backend.storage_dir

    def _not_found(self, what: str):
        from .service import ServiceError

        return ServiceError(404, what)

    # ----------------------------------------------------------------------------- training runs

    def _record(self, model_id: str) -> dict[str, Any] | None:
        """The run's record when it is this identity's (a damaged or another's record: ``None``)."""
        if not _safe_id(model_id):
            return None
        record = read_run_record(self.root, model_id)
        if record is None or not self.service.mine(record.get("owner") or self.service.default_owner):
            return None
        return record

    def _run(self, model_id: str, record: dict[str, Any], with_last: bool) -> types.TrainingRun:
        with self.service._lock:
            entry = self.service.models.get(model_id)
        last = entry.last_request if entry is not None else datetime.fromisoformat(record["created_at"])
        latest: dict[str, types.Checkpoint | None] = {"training": None, "sampler": None}
        if with_last:
            for c in self._checkpoints(model_id):
                latest[c.checkpoint_type] = c  # oldest first: the last one seen is the newest
        return types.TrainingRun(
            training_run_id=model_id,
            base_model=record["base_model"],
            model_owner="local",
            is_lora=record["is_lora"],
            lora_rank=record.get("lora_rank"),
            last_request_time=last,
            last_checkpoint=latest["training"],
            last_sampler_checkpoint=latest["sampler"],
            user_metadata=record.get("user_metadata") or None,
        )

    def training_run(self, model_id: str) -> types.TrainingRun:
        """``RestClient.get_training_run`` (the cookbook reads its ``user_metadata``)."""
        record = self._record(model_id)
        if record is None:
            raise self._not_found(f"unknown training run {model_id!r}")
        return self._run(model_id, record, with_last=True)

    def training_runs(self, limit: Any = 20, offset: Any = 0) -> types.TrainingRunsResponse:
        """``RestClient.list_training_runs``: every run with a record, newest first."""
        limit, offset = _page(limit, offset)
        records = []
        if self.root.is_dir():
            for folder in self.root.iterdir():
                record = self._record(folder.name) if folder.is_dir() else None
                if record is not None:
                    records.append((record.get("created_at") or "", folder.name, record))
        records.sort(key=lambda r: (r[0], r[1]), reverse=True)
        page = [self._run(m, r, with_last=True) for _, m, r in records[offset : offset + limit]]
        cursor = types.Cursor(offset=offset, limit=limit, total_count=len(records))
        return types.TrainingRunsResponse(training_runs=page, cursor=cursor)

    # ------------------------------------------------------------------------------- checkpoints

    def _checkpoints(self, model_id: str) -> list[types.Checkpoint]:
        out = []
        for meta in self.store.list(model_id):
            path = meta["path"]
            expires = seconds(meta.get("expires_at"))
            if expires is not None and time.time() >= expires:
                continue
            _, kind, name = parse_path(path)
            file = self.store.file_for(path)
            out.append(
                types.Checkpoint(
                    checkpoint_id=f"{kind}/{name}",
                    checkpoint_type="training" if kind == "weights" else "sampler",
                    time=datetime.fromtimestamp(seconds(meta.get("created_at")) or 0.0, UTC),
                    tinker_path=path,
                    size_bytes=file.stat().st_size if file.is_file() else None,
                    user_metadata=_strings(meta.get("user_metadata")),
                    expires_at=None if expires is None else datetime.fromtimestamp(expires, UTC),
                )
            )
        return out

    def list_checkpoints(self, model_id: str) -> types.CheckpointsListResponse:
        """``RestClient.list_checkpoints``: every unexpired checkpoint of one run, oldest first."""
        if not self._visible(model_id):
            raise self._not_found(f"unknown training run {model_id!r}")
        return types.CheckpointsListResponse(checkpoints=self._checkpoints(model_id))

    def _visible(self, model_id: str) -> bool:
        """A run folder of this identity (its live model's or its record's owner)."""
        if not _safe_id(model_id) or not (self.root / model_id).is_dir():
            return False
        return self.service.mine(self.service.run_owner(model_id))

    def user_checkpoints(self, limit: Any = 100, offset: Any = 0) -> types.CheckpointsListResponse:
        """``RestClient.list_user_checkpoints``: every run's unexpired checkpoints, newest first."""
        limit, offset = _page(limit, offset)
        every: list[types.Checkpoint] = []
        if self.root.is_dir():
            for folder in sorted(self.root.iterdir()):
                if self._visible(folder.name):
                    every += self._checkpoints(folder.name)
        every.sort(key=lambda c: (c.time, c.tinker_path), reverse=True)
        cursor = types.Cursor(offset=offset, limit=limit, total_count=len(every))
        return types.CheckpointsListResponse(checkpoints=every[offset : offset + limit], cursor=cursor)

    def _path(self, model_id: str, checkpoint_id: str) -> str:
        from .service import ServiceError

        path = f"{PREFIX}{model_id}/{checkpoint_id}"
        try:
            parse_path(path)
        except CheckpointError as exc:
            raise ServiceError(400, str(exc)) from None
        return self.service.own_path(path)

    def delete_checkpoint(self, model_id: str, checkpoint_id: str) -> None:
        """``RestClient.delete_checkpoint`` (the cookbook deletes superseded rolling checkpoints)."""
        path = self._path(model_id, checkpoint_id)
        if not self.store.delete(path):
            raise self._not_found(f"checkpoint {path} not found")
        self.service.log("info", "checkpoint_deleted", path=path)

    def set_ttl(self, model_id: str, checkpoint_id: str, body: object) -> None:
        """``RestClient.set_checkpoint_ttl_from_tinker_path``: a new expiry counted from now, or none."""
        from .service import ServiceError

        path = self._path(model_id, checkpoint_id)
        if not isinstance(body, dict) or "ttl_seconds" not in body:
            raise ServiceError(400, 'the body must be {"ttl_seconds": seconds or null}')
        try:
            found = self.store.set_ttl(path, body["ttl_seconds"])
        except CheckpointError as exc:
            raise ServiceError(400, str(exc)) from None
        if not found:
            raise self._not_found(f"checkpoint {path} not found")
        self.service.log("info", "checkpoint_ttl_set", path=path, ttl_seconds=body["ttl_seconds"])

    def weights_info(self, body: object) -> types.WeightsInfoResponse:
        """``RestClient.get_weights_info_by_tinker_path``: base model and LoRA layout of a checkpoint."""
        from .service import ServiceError

        path = body.get("tinker_path") if isinstance(body, dict) else None
        if not isinstance(path, str):
            raise ServiceError(400, 'the body must be {"tinker_path": "tinker://..."}')
        self.service.own_path(path)
        try:
            key = self.store.load(path)["key"]
        except CheckpointError as exc:
            raise ServiceError(404 if "not found" in str(exc) else 400, str(exc)) from None
        rank = int(key["rank"])
        return types.WeightsInfoResponse(
            base_model=key["base_model"],
            is_lora=rank > 0,
            lora_rank=rank or None,
            train_unembed=key.get("train_unembed"),
            train_mlp=key.get("train_mlp"),
            train_attn=key.get("train_attn"),
        )

    # ---------------------------------------------------------------------------------- sessions

    def sessions(self, limit: Any = 20, offset: Any = 0) -> types.ListSessionsResponse:
        """``RestClient.list_sessions``: this server process's sessions, newest first."""
        limit, offset = _page(limit, offset)
        with self.service._lock:
            mine = [s for s in self.service.sessions.values() if self.service.mine(s.owner)]
            ordered = sorted(mine, key=lambda s: s.created, reverse=True)
            ids = [s.session_id for s in ordered]
        return types.ListSessionsResponse(sessions=ids[offset : offset + limit])

    def session(self, session_id: str) -> types.GetSessionResponse:
        """``RestClient.get_session``: the session's training runs and samplers (also once finished)."""
        with self.service._lock:
            s = self.service.sessions.get(session_id)
            if s is None or not self.service.mine(s.owner):
                raise self._not_found(f"unknown session {session_id!r}")
            runs = {m for m, e in self.service.models.items() if e.session_id == session_id}
            samplers = [x for x, e in self.service.samplers.items() if e.session_id == session_id]
            metadata = {str(k): str(v) for k, v in s.user_metadata.items()} or None
        if self.root.is_dir():  # runs released when the session finished keep their record
            runs |= {f.name for f in self.root.glob(f"{session_id}:train:*") if (f / "run.json").is_file()}
        return types.GetSessionResponse(
            training_run_ids=sorted(runs), sampler_ids=samplers, user_metadata=metadata
        )
