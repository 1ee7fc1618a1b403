"""The resources of the local control plane: datasets, evaluators, RFT jobs and secrets, per account.

``ControlPlane`` holds them in memory and on disk (one ``resource.json`` per resource under
``<storage>/accounts/<account>/<kind>/<id>/``, folders 0700, files 0600, written atomically), answers the
REST verbs of ``rftlab.launch.local_fireworks.http`` with the REST API's camelCase JSON, and raises
``ApiError`` (HTTP status, gRPC code name, one-line message) for what it refuses. Secret values are never
kept: a secret is a name in memory only. Fields whose name starts with ``_`` are this server's own
bookkeeping and never leave it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_bytes, atomic_write_text
from rftlab.runs.errors import SecretLeakError

RESOURCE_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
DEFAULT_PAGE_SIZE = 50  # the SDK docstrings of every list call: "If unspecified, the default is 50"
MAX_PAGE_SIZE = 200  # "values above 200 will be coerced to 200"
MAX_UPLOAD_BYTES = 512 * 1024 * 1024
SIGNED_URL_TTL_S = 3600.0
GRPC_CODES = {
    "OK": 0,
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAUTHENTICATED": 16,
}
KINDS = {"datasets": "datasets", "evaluators": "evaluators", "jobs": "reinforcementFineTuningJobs"}


class ApiError(Exception):
    """A refused request: ``status`` (HTTP), ``code`` (gRPC name) and a one-line ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def body(self) -> dict[str, Any]:
        return {"code": GRPC_CODES.get(self.code, 2), "message": self.message, "details": []}


def bad(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def private_dir(path: Path) -> Path:
    """``path`` and every missing parent created with mode 0700."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    return path


def make_private(tree: Path) -> None:
    """Every folder under ``tree`` 0700, every file 0600 (0700 when executable); links are left alone."""
    for folder, dirs, files in os.walk(tree):
        for name in dirs:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o700)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o700 if path.stat().st_mode & 0o100 else 0o600)


def write_json(path: Path, obj: object) -> None:
    private_dir(path.parent)
    text = json.dumps(obj, sort_keys=True, indent=1) + "\n"
    try:
        atomic_write_text(path, text, mode=0o600, follow_symlinks=False, where=f"the record {path.name}")
    except SecretLeakError as exc:
        raise bad(f"refused: {exc}") from None


def write_file(path: Path, data: bytes) -> None:
    """A client's file, kept as sent (0600)."""
    private_dir(path.parent)
    atomic_write_bytes(path, data, mode=0o600, check_secrets=False, follow_symlinks=False)


def check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not RESOURCE_ID.match(value):
        raise bad(
            f"{what} {str(value)[:80]!r} is not a valid id: lower-case letters, digits and '-', at most 63 "
            "characters, not starting or ending with '-'"
        )
    return value


def check_fields(body: object, allowed: Iterable[str], where: str) -> dict[str, Any]:
    """``body`` as an object with only ``allowed`` keys (an unknown field is refused, as protobuf JSON
    parsing refuses it)."""
    if not isinstance(body, Mapping):
        raise bad(f"{where} must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise bad(f"{where}: unknown field(s) {', '.join(unknown)}")
    return dict(body)


def public(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the API shows of a record: everything but this server's own ``_`` fields."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


@dataclass
class Signed:
    """One signed URL: ``method`` (PUT or GET) of ``path``; a PUT must carry exactly ``size`` bytes."""

    method: str
    path: Path
    expires: float
    size: int | None = None
    account: str = ""
    kind: str = ""
    resource: str = ""


def page(items: list[dict[str, Any]], query: Mapping[str, str], key: str) -> dict[str, Any]:
    """One page of ``items`` (sorted by name) as the REST list calls answer: ``pageSize`` (default 50,
    above 200 coerced to 200), ``pageToken`` from the previous page, ``nextPageToken`` when more remain."""
    if query.get("filter"):
        raise bad("filter is not supported by the local control plane (list everything and filter locally)")
    if query.get("orderBy", "name") not in ("", "name"):
        raise bad("orderBy: the local control plane orders by name only")
    raw = query.get("pageSize", "")
    if raw and not re.fullmatch(r"-?[0-9]{1,9}", raw):
        raise bad(f"pageSize must be an integer, got {raw[:20]!r}")
    size = int(raw) if raw else 0
    if size < 0:
        raise bad(f"pageSize must not be negative, got {size}")
    size = min(size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    after = ""
    token = query.get("pageToken", "")
    if token:
        try:
            after = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))["after"]
            assert isinstance(after, str)
        except Exception:
            raise bad("pageToken is not a token this server gave out") from None
    rest = sorted((i for i in items if i["name"] > after), key=lambda i: i["name"])
    out: dict[str, Any] = {key: rest[:size], "totalSize": len(items)}
    if len(rest) > size:
        last = rest[size - 1]["name"]
        out["nextPageToken"] = base64.urlsafe_b64encode(json.dumps({"after": last}).encode()).decode()
    return out


class ControlPlane:
    """Every account's resources (module docstring). Thread-safe: one lock guards every change."""

    def __init__(self, storage: Path, *, signed_url_ttl_s: float = SIGNED_URL_TTL_S) -> None:
        self.storage = storage
        self.base_url = ""  # set once the server is bound: signed URLs point at it
        self.signed_url_ttl_s = signed_url_ttl_s
        self.lock = threading.RLock()
        self.records: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, account, id) -> record
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}  # (account, id) -> {name, keyName}
        self.signed: dict[str, Signed] = {}
        self.on_evaluator_uploaded: Callable[[str, str], None] = lambda account, ev_id: None
        self.on_job_changed: Callable[[str, str], None] = lambda account, job_id: None
        self._load()

    # ------------------------------------------------------------------------------- storage
    def folder(self, kind: str, account: str, rid: str) -> Path:
        return self.storage / "accounts" / account / kind / rid

    def _load(self) -> None:
        for path in sorted(self.storage.glob("accounts/*/*/*/resource.json")):
            rid, kind, account = path.parent.name, path.parent.parent.name, path.parent.parent.parent.name
            if kind not in KINDS:
                continue
            with contextlib.suppress(OSError, ValueError):
                self.records[(kind, account, rid)] = json.loads(path.read_text(encoding="utf-8"))

    def save(self, kind: str, account: str, rid: str) -> dict[str, Any]:
        record = self.records[(kind, account, rid)]
        record["updateTime"] = now_iso()
        write_json(self.folder(kind, account, rid) / "resource.json", record)
        return record

    def get(self, kind: str, account: str, rid: str) -> dict[str, Any]:
        record = self.records.get((kind, account, rid))
        if record is None:
            singular = {"datasets": "dataset", "evaluators": "evaluator", "jobs": "job"}[kind]
            raise ApiError(404, "NOT_FOUND", f"{singular} accounts/{account}/{KINDS[kind]}/{rid} not found")
        return record

    def add(self, kind: str, account: str, rid: str, record: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if (kind, account, rid) in self.records:
                raise ApiError(
                    409, "ALREADY_EXISTS", f"accounts/{account}/{KINDS[kind]}/{rid} already exists"
                )
            record.setdefault("name", f"accounts/{account}/{KINDS[kind]}/{rid}")
            record.setdefault("createTime", now_iso())
            record.setdefault("_uid", uuid.uuid4().hex)
            self.records[(kind, account, rid)] = record
            return self.save(kind, account, rid)

    def delete(self, kind: str, account: str, rid: str) -> dict[str, Any]:
        with self.lock:
            self.get(kind, account, rid)
            del self.records[(kind, account, rid)]
            shutil.rmtree(self.folder(kind, account, rid), ignore_errors=True)
        return {}

    def listing(self, kind: str, account: str, query: Mapping[str, str], key: str) -> dict[str, Any]:
        with self.lock:
            items = [public(r) for (k, a, _), r in self.records.items() if k == kind and a == account]
        return page(items, query, key)

    # --------------------------------------------------------------------------- signed URLs
    def sign(self, method: str, path: Path, size: int | None, account: str, kind: str, rid: str) -> str:
        token = secrets.token_urlsafe(24)
        expires = time.time() + self.signed_url_ttl_s
        with self.lock:
            self.signed = {t: s for t, s in self.signed.items() if s.expires > time.time() - 60}
            self.signed[token] = Signed(method, path, expires, size, account, kind, rid)
        return f"{self.base_url}/signed/{token}"

    def signed_put(self, token: str, data: bytes, length_range: str | None) -> None:
        """A PUT to a signed URL: refused (400, as a storage service refuses it) when unknown, expired,
        not a PUT URL, or carrying another size than the one declared."""
        with self.lock:
            target = self.signed.get(token)
        if target is None or target.method != "PUT":
            raise ApiError(403, "PERMISSION_DENIED", "the signed URL is not valid")
        if time.time() > target.expires:
            raise ApiError(400, "INVALID_ARGUMENT", "ExpiredToken: the signed URL has expired")
        if length_range is not None and length_range != f"{target.size},{target.size}":
            raise bad(f"the content length range {length_range[:40]!r} differs from the declared size")
        if len(data) != target.size:
            raise bad(f"the body holds {len(data)} bytes; {target.size} were declared")
        write_file(target.path, data)

    def signed_get(self, token: str) -> Path:
        with self.lock:
            target = self.signed.get(token)
        if target is None or target.method != "GET" or time.time() > target.expires:
            raise ApiError(403, "PERMISSION_DENIED", "the signed URL is not valid or has expired")
        if not target.path.is_file():
            raise ApiError(404, "NOT_FOUND", "the file is gone")
        return target.path

    # ------------------------------------------------------------------------------- secrets
    def secret_create(self, account: str, body: object) -> dict[str, Any]:
        """Accept a secret and keep its name only: the value is dropped here and never stored,
        logged or echoed."""
        body = check_fields(body, ("name", "keyName", "value"), "secret")
        key_name = body.get("keyName")
        if not isinstance(key_name, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]{0,127}", key_name):
            raise bad("keyName must be upper-case letters, digits and '_', starting with a letter")
        rid = str(body.get("name") or key_name.lower().replace("_", "-")).rsplit("/", 1)[-1]
        check_id(rid, "secret id")
        with self.lock:
            if (account, rid) in self.secrets:
                raise ApiError(
                    409, "ALREADY_EXISTS", f"secret accounts/{account}/secrets/{rid} already exists"
                )
            self.secrets[(account, rid)] = {"name": f"accounts/{account}/secrets/{rid}", "keyName": key_name}
            return dict(self.secrets[(account, rid)])

    def secret_get(self, account: str, rid: str) -> dict[str, Any]:
        with self.lock:
            found = self.secrets.get((account, rid))
        if found is None:
            raise ApiError(404, "NOT_FOUND", f"secret accounts/{account}/secrets/{rid} not found")
        return dict(found)

    def secret_update(self, account: str, rid: str, body: object) -> dict[str, Any]:
        check_fields(body, ("name", "keyName", "value"), "secret")
        return self.secret_get(account, rid)

    def secret_delete(self, account: str, rid: str) -> dict[str, Any]:
        with self.lock:
            if self.secrets.pop((account, rid), None) is None:
                raise ApiError(404, "NOT_FOUND", f"secret accounts/{account}/secrets/{rid} not found")
        return {}

    def secret_list(self, account: str, query: Mapping[str, str]) -> dict[str, Any]:
        with self.lock:
            items = [dict(s) for (a, _), s in self.secrets.items() if a == account]
        return page(items, query, "secrets")
