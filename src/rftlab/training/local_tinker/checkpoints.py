"""Checkpoints of the local tinker backend on disk: ``tinker://`` paths, TTLs and user metadata.

A checkpoint ``tinker://<model_id>/<kind>/<name>`` (``kind`` is ``weights`` for ``save_state`` and
``sampler_weights`` for ``save_weights_for_sampler``) is the file ``<root>/<model_id>/<kind>/<name>.pt``
beside a sidecar ``<name>.json`` (kind, creation time, ``ttl_seconds``, expiry, ``user_metadata``). Both are
written atomically (a temporary file renamed into place), so a process killed mid-save leaves either the
old checkpoint or the new one, and a new process on the same root reads every path back: ``tinker://``
paths stay valid across restarts.

TTLs follow the SDK's documented range (1 hour to 10 years, ``None`` = never expires). An expired
checkpoint is refused with the reason and removed by ``sweep()``. ``overwrite=False`` refuses to replace
an existing checkpoint of the same name (``save_state``); sampler checkpoints, which the SDK gives no
``overwrite`` flag, are replaced.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from rftlab.runs.atomic import atomic_write_text, atomic_writer

PREFIX = "tinker://"
KINDS = ("weights", "sampler_weights")
MIN_TTL_SECONDS = 3600
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
MEMORY_CACHE = 8
"""Checkpoints kept in memory after a save or load (the rest are read from disk again when needed)."""


class CheckpointError(ValueError):
    """A checkpoint path or request the service refuses (malformed, missing, expired, exists)."""


def parse_path(path: str) -> tuple[str, str, str]:
    """``(model_id, kind, name)`` of a ``tinker://<model_id>/<kind>/<name>`` path."""
    if not isinstance(path, str) or not path.startswith(PREFIX):
        raise CheckpointError(f"not a checkpoint path: {path!r} (expected tinker://<model_id>/<kind>/<name>)")
    parts = path[len(PREFIX) :].split("/")
    if len(parts) != 3 or parts[1] not in KINDS or not all(parts) or any(p in (".", "..") for p in parts):
        raise CheckpointError(f"not a checkpoint path: {path!r} (expected tinker://<model_id>/<kind>/<name>)")
    return parts[0], parts[1], parts[2]


def private_dir(path: Path) -> Path:
    """``path`` made (with its parents) and set to mode 0700: another local user cannot list it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def read_run_record(root: Path, model_id: str) -> dict[str, Any] | None:
    """The ``run.json`` record of training run ``model_id`` under ``root``, or ``None`` when there is none
    or it is damaged (not JSON, not an object, or a field of the wrong type)."""
    if not model_id or "/" in model_id or ".." in model_id or model_id.startswith("."):
        return None
    try:
        record = json.loads((root / model_id / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    checks = {
        "base_model": lambda v: isinstance(v, str),
        "is_lora": lambda v: isinstance(v, bool),
        "lora_rank": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "created_at": _iso_time,
        "user_metadata": lambda v: (
            v is None or (isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values())))
        ),
        "owner": lambda v: v is None or isinstance(v, str),
    }
    optional = {"lora_rank", "user_metadata", "owner"}
    for name, ok in checks.items():
        if (name not in record and name not in optional) or not ok(record.get(name)):
            return None
    return record


def seconds(value: object) -> float | None:
    """A sidecar's time field as a finite float, ``None`` when absent or damaged."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _iso_time(value: Any) -> bool:
    from datetime import datetime

    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return False
    return True


def check_ttl(ttl_seconds: int | None) -> int | None:
    if ttl_seconds is None:
        return None
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
        raise CheckpointError(
            f"ttl_seconds must be an integer number of seconds or None, got {ttl_seconds!r}"
        )
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise CheckpointError(
            f"ttl_seconds must be between {MIN_TTL_SECONDS} (1 hour) and {MAX_TTL_SECONDS} (10 years), "
            f"or None (never expires); got {ttl_seconds}"
        )
    return ttl_seconds


class CheckpointStore:
    """Checkpoints under ``root`` (see the module docstring). ``clock`` gives wall time in seconds."""

    def __init__(self, root: str | os.PathLike[str], clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.clock = clock
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def file_for(self, path: str) -> Path:
        model_id, kind, name = parse_path(path)
        return self.root / model_id / kind / f"{name}.pt"

    def _meta_file(self, path: str) -> Path:
        return self.file_for(path).with_suffix(".json")

    def exists(self, path: str) -> bool:
        return self.file_for(path).is_file()

    def save(
        self,
        model_id: str,
        kind: str,
        name: str,
        ckpt: dict[str, Any],
        *,
        ttl_seconds: int | None = None,
        overwrite: bool = True,
        user_metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Write ``ckpt`` and its metadata; returns the ``tinker://`` path."""
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise CheckpointError(f"checkpoint name must be non-empty without '/', got {name!r}")
        ttl = check_ttl(ttl_seconds)
        metadata = dict(user_metadata or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise CheckpointError("user_metadata must map strings to strings")
        path = f"{PREFIX}{model_id}/{kind}/{name}"
        file = self.file_for(path)
        if not overwrite and file.is_file() and not self._expired(path):
            raise CheckpointError(f"checkpoint {path} already exists (pass overwrite=True to replace it)")
        now = self.clock()
        meta = {
            "path": path,
            "model_id": model_id,
            "kind": kind,
            "name": name,
            "created_at": now,
            "ttl_seconds": ttl,
            "expires_at": None if ttl is None else now + ttl,
            "user_metadata": metadata,
        }
        private_dir(file.parent.parent)
        private_dir(file.parent)
        with atomic_writer(file, mode=0o600) as handle:  # the old checkpoint or the new one, never cut
            torch.save(ckpt, handle)
        atomic_write_text(self._meta_file(path), json.dumps(meta, indent=2) + "\n", mode=0o600)
        self._remember(path, ckpt)
        return path

    def metadata(self, path: str) -> dict[str, Any]:
        """The sidecar metadata of an existing checkpoint (``{}`` for one written without a sidecar)."""
        file = self._meta_file(path)
        if not file.is_file():
            return {}
        try:
            meta = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def _expired(self, path: str) -> bool:
        expires = seconds(self.metadata(path).get("expires_at"))
        return expires is not None and self.clock() >= expires

    def load(self, path: str) -> dict[str, Any]:
        """The checkpoint at ``path``; ``CheckpointError`` when malformed, missing or expired."""
        file = self.file_for(path)
        if not file.is_file():
            self._memory.pop(path, None)
            raise CheckpointError(f"checkpoint {path} not found")
        if self._expired(path):
            self._memory.pop(path, None)
            raise CheckpointError(f"checkpoint {path} has expired (its ttl_seconds has passed)")
        if path in self._memory:
            self._memory.move_to_end(path)
            return self._memory[path]
        try:
            ckpt = torch.load(file, map_location="cpu", weights_only=False)
        except Exception as exc:  # a damaged file: say which, never a bare unpickling traceback
            raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__})") from exc
        self._remember(path, ckpt)
        return ckpt

    def _remember(self, path: str, ckpt: dict[str, Any]) -> None:
        self._memory[path] = ckpt
        self._memory.move_to_end(path)
        while len(self._memory) > MEMORY_CACHE:
            self._memory.popitem(last=False)

    def set_ttl(self, path: str, ttl_seconds: int | None) -> bool:
        """A new expiry ``ttl_seconds`` from now (``None``: never expires); False when there is no such
        checkpoint (an expired one is gone)."""
        ttl = check_ttl(ttl_seconds)
        if not self.file_for(path).is_file() or self._expired(path):
            return False
        meta = self.metadata(path) or {"path": path, "created_at": self.clock()}
        now = self.clock()
        meta.update(ttl_seconds=ttl, expires_at=None if ttl is None else now + ttl)
        atomic_write_text(self._meta_file(path), json.dumps(meta, indent=2) + "\n", mode=0o600)
        return True

    def delete(self, path: str) -> bool:
        file = self.file_for(path)
        self._memory.pop(path, None)
        found = file.is_file()
        for f in (file, self._meta_file(path)):
            if f.exists():
                f.unlink()
        return found

    def sweep(self) -> list[str]:
        """Delete every expired checkpoint under the root; returns their paths."""
        removed = []
        if not self.root.is_dir():
            return removed
        for meta_file in self.root.glob("*/*/*.json"):
            try:
                meta = json.loads(meta_file.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                continue
            if not isinstance(meta, dict):
                continue
            expires, path = seconds(meta.get("expires_at")), meta.get("path")
            if expires is not None and isinstance(path, str) and self.clock() >= expires:
                try:
                    self.delete(path)
                except CheckpointError:
                    continue
                removed.append(path)
        return removed

    def list(self, model_id: str) -> list[dict[str, Any]]:
        """Metadata of every checkpoint of ``model_id`` (oldest first)."""
        out = []
        for kind in KINDS:
            for pt in sorted((self.root / model_id / kind).glob("*.pt")):
                path = f"{PREFIX}{model_id}/{kind}/{pt.stem}"
                meta = self.metadata(path) or {"created_at": pt.stat().st_mtime}
                out.append({**meta, "path": path, "kind": kind})  # a damaged sidecar names no other file
        return sorted(out, key=lambda m: seconds(m.get("created_at")) or 0.0)
