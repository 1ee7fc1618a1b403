"""The REST surface of the local control plane (Starlette), routed as the Fireworks API routes it.

Every route but the signed URLs needs ``Authorization: Bearer <key>``; the key names its account, and a
path under another account is refused (403). Errors are JSON ``{"code": <gRPC code>, "message": ...,
"details": []}`` with the matching HTTP status (400 bad argument or failed precondition, 401, 403, 404,
409 already exists, 413 too large). Bodies are strict JSON (no NaN or Infinity). The log gets one line a
request (method, path with signed-URL tokens masked, status, milliseconds, account): never a header, a
query string or a body, so no key or secret value can reach it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

from rftlab.runs.strictjson import refuse_constant

from . import datasets, evaluators, jobs
from .state import MAX_UPLOAD_BYTES, ApiError, ControlPlane

MAX_JSON_BYTES = 4 * 1024 * 1024
ACCOUNT_HEADER = "x-fireworks-account-id"
A = r"/v1/accounts/(?P<account>[^/]+)"
ID = r"(?P<rid>[A-Za-z0-9._-]+)"


def _routes(plane: ControlPlane) -> list[tuple[str, re.Pattern[str], Callable[..., Any]]]:
    """``(method, path pattern, fn(account, rid, body, query))`` for every JSON route."""
    p = plane
    table: list[tuple[str, str, Callable[..., Any]]] = [
        ("POST", "/datasets", lambda a, r, b, q: datasets.create(p, a, b)),
        ("GET", "/datasets", lambda a, r, b, q: p.listing("datasets", a, q, "datasets")),
        ("GET", f"/datasets/{ID}", lambda a, r, b, q: datasets.get(p, a, r)),
        ("DELETE", f"/datasets/{ID}", lambda a, r, b, q: p.delete("datasets", a, r)),
        (
            "POST",
            f"/datasets/{ID}:getUploadEndpoint",
            lambda a, r, b, q: datasets.upload_endpoint(p, a, r, b),
        ),
        ("POST", f"/datasets/{ID}:validateUpload", lambda a, r, b, q: datasets.validate_upload(p, a, r)),
        (
            "GET",
            f"/datasets/{ID}:getDownloadEndpoint",
            lambda a, r, b, q: datasets.download_endpoint(p, a, r),
        ),
        ("POST", "/evaluatorsV2", lambda a, r, b, q: evaluators.create(p, a, b)),
        ("GET", "/evaluators", lambda a, r, b, q: p.listing("evaluators", a, q, "evaluators")),
        ("GET", f"/evaluators/{ID}", lambda a, r, b, q: evaluators.get(p, a, r)),
        ("DELETE", f"/evaluators/{ID}", lambda a, r, b, q: p.delete("evaluators", a, r)),
        (
            "POST",
            f"/evaluators/{ID}:getUploadEndpoint",
            lambda a, r, b, q: evaluators.upload_endpoint(p, a, r, b),
        ),
        (
            "POST",
            f"/evaluators/{ID}:validateUpload",
            lambda a, r, b, q: evaluators.validate_upload(p, a, r, b),
        ),
        ("POST", "/secrets", lambda a, r, b, q: p.secret_create(a, b)),
        ("GET", "/secrets", lambda a, r, b, q: p.secret_list(a, q)),
        ("GET", f"/secrets/{ID}", lambda a, r, b, q: p.secret_get(a, r)),
        ("PATCH", f"/secrets/{ID}", lambda a, r, b, q: p.secret_update(a, r, b)),
        ("DELETE", f"/secrets/{ID}", lambda a, r, b, q: p.secret_delete(a, r)),
        (
            "POST",
            "/reinforcementFineTuningJobs",
            lambda a, r, b, q: jobs.create(p, a, q.get("reinforcementFineTuningJobId"), b),
        ),
        (
            "GET",
            "/reinforcementFineTuningJobs",
            lambda a, r, b, q: p.listing("jobs", a, q, "reinforcementFineTuningJobs"),
        ),
        ("GET", f"/reinforcementFineTuningJobs/{ID}", lambda a, r, b, q: jobs.get(p, a, r)),
        ("DELETE", f"/reinforcementFineTuningJobs/{ID}", lambda a, r, b, q: jobs.delete(p, a, r)),
        ("POST", f"/reinforcementFineTuningJobs/{ID}:cancel", lambda a, r, b, q: jobs.cancel(p, a, r, b)),
        ("POST", f"/reinforcementFineTuningJobs/{ID}:resume", lambda a, r, b, q: jobs.resume(p, a, r, b)),
    ]
    return [(m, re.compile(A + path + "$"), fn) for m, path, fn in table]


def parse_json(raw: bytes) -> Any:
    if not raw.strip():
        return {}
    if len(raw) > MAX_JSON_BYTES:
        raise ApiError(413, "INVALID_ARGUMENT", f"the body is over {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(raw, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        raise ApiError(400, "INVALID_ARGUMENT", "the body is not valid JSON") from None


def _json(status: int, body: Any, headers: dict[str, str] | None = None):
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status, headers=headers)


def shown_path(path: str) -> str:
    """The path as logged: a signed URL's token (a credential of its own) masked."""
    return re.sub(r"^/signed/.+", "/signed/***", path)


async def _signed(plane: ControlPlane, request) -> Any:
    from starlette.responses import FileResponse

    token = request.url.path.split("/signed/", 1)[1]
    if request.method == "PUT":
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > MAX_UPLOAD_BYTES:
            raise ApiError(413, "INVALID_ARGUMENT", f"the body is over {MAX_UPLOAD_BYTES} bytes")
        data = await request.body()
        range_header = request.headers.get("x-goog-content-length-range")
        await asyncio.to_thread(plane.signed_put, token, data, range_header)
        return _json(200, {})
    if request.method == "GET":
        path = await asyncio.to_thread(plane.signed_get, token)
        return FileResponse(path, media_type="application/octet-stream")
    raise ApiError(405, "INVALID_ARGUMENT", "a signed URL takes PUT or GET")


async def _dataset_upload(plane: ControlPlane, request, account: str, rid: str) -> Any:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "INVALID_ARGUMENT", f"the upload is over {MAX_UPLOAD_BYTES} bytes")
    try:
        form = await request.form(max_files=1, max_fields=8)
    except Exception:
        raise ApiError(
            400, "INVALID_ARGUMENT", "the upload must be multipart/form-data with one 'file'"
        ) from None
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise ApiError(400, "INVALID_ARGUMENT", "the upload must be multipart/form-data with one 'file'")
    data = await upload.read()
    name = (upload.filename or "dataset.jsonl").rsplit("/", 1)[-1]
    return _json(200, await asyncio.to_thread(datasets.upload, plane, account, rid, name, data))


class Router:
    """Dispatches a request to its route (module docstring); ``keys(token) -> account or None``."""

    def __init__(
        self, plane: ControlPlane, keys: Callable[[str | None], str | None], log: Callable[..., None]
    ):
        self.plane, self.keys, self.log = plane, keys, log
        self.routes = _routes(plane)
        self.upload = re.compile(A + f"/datasets/{ID}:upload$")

    def account_of(self, request) -> str:
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        account = self.keys(token)
        request.state.account = account or ""
        if account is None:
            raise ApiError(
                401, "UNAUTHENTICATED", "missing or wrong API key (send Authorization: Bearer <key>)"
            )
        return account

    async def answer(self, request) -> tuple[Any, str]:
        path, method = request.url.path, request.method
        if path.startswith("/signed/"):
            return await _signed(self.plane, request), ""
        account = self.account_of(request)
        if path.rstrip("/") == "/verifyApiKey" and method == "GET":
            return _json(200, {}, {ACCOUNT_HEADER: account}), account
        match = self.upload.match(path)
        if match and method == "POST":
            self._own(match, account)
            return await _dataset_upload(self.plane, request, account, match["rid"]), account
        for route_method, pattern, fn in self.routes:
            match = pattern.match(path)
            if match and route_method == method:
                self._own(match, account)
                body = parse_json(await request.body()) if method in ("POST", "PATCH") else {}
                query = dict(request.query_params)
                result = await asyncio.to_thread(fn, account, match.groupdict().get("rid"), body, query)
                return _json(200, result), account
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not served by the local control plane")

    @staticmethod
    def _own(match: re.Match[str], account: str) -> None:
        if match["account"] != account:
            raise ApiError(
                403, "PERMISSION_DENIED", f"the key does not belong to account {match['account'][:64]!r}"
            )

    async def __call__(self, request) -> Any:
        t0 = time.perf_counter()
        try:
            response, _ = await self.answer(request)
        except ApiError as exc:
            response = _json(exc.status, exc.body())
        except Exception:  # a defect: the client gets a generic answer, the log the traceback
            import traceback

            self.log(
                "error",
                "request_crashed",
                path=shown_path(request.url.path),
                traceback=traceback.format_exc(),
            )
            response = _json(500, ApiError(500, "INTERNAL", "internal error (see the server log)").body())
        status = response.status_code
        self.log(
            "warning" if status >= 400 else "info",
            "request",
            method=request.method,
            path=shown_path(request.url.path),
            status=status,
            ms=round(1000 * (time.perf_counter() - t0), 2),
            account=getattr(request.state, "account", ""),
        )
        return response


def create_app(plane: ControlPlane, keys: Callable[[str | None], str | None], log: Callable[..., None]):
    from starlette.applications import Starlette
    from starlette.routing import Route

    router = Router(plane, keys, log)

    async def endpoint(request):
        return await router(request)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(routes=[Route("/{rest:path}", endpoint, methods=methods)])
