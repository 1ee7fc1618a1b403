"""Datasets of the local control plane: create, upload (one request, or signed URL + ``validateUpload``),
get, list, delete and the download endpoint, with the REST API's field names.

A dataset is ``UPLOADING`` from its creation until a file arrives, then ``READY`` with ``exampleCount``
set to its number of rows. An uploaded file must be JSON Lines: one JSON object a line (a line that is
not is refused with its number, and nothing is kept). The per-epoch datasets a job writes
(``rftlab.launch.local_fireworks.runner``) are ordinary datasets with ``sourceJobName`` set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .state import MAX_UPLOAD_BYTES, ApiError, ControlPlane, bad, check_fields, check_id, public, write_file

DATASET_FIELDS = (
    "displayName",
    "exampleCount",
    "format",
    "evalProtocol",
    "userUploaded",
    "externalUrl",
    "sourceJobName",
    "evaluationResult",
    "splitted",
    "transformed",
)
FORMATS = ("FORMAT_UNSPECIFIED", "CHAT", "COMPLETION", "RL")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def create(plane: ControlPlane, account: str, body: object) -> dict[str, Any]:
    body = check_fields(body, ("datasetId", "dataset", "sourceDatasetId"), "CreateDataset body")
    ds_id = check_id(body.get("datasetId"), "datasetId")
    fields = check_fields(body.get("dataset", {}), DATASET_FIELDS, "dataset")
    fmt = fields.get("format", "FORMAT_UNSPECIFIED")
    if fmt not in FORMATS:
        raise bad(f"dataset.format must be one of {', '.join(FORMATS)}, got {str(fmt)[:40]!r}")
    if body.get("sourceDatasetId"):
        raise bad("sourceDatasetId (copying a dataset) is not supported by the local control plane")
    record = {**fields, "format": fmt, "state": "UPLOADING", "status": {"code": "OK", "message": ""}}
    record["_files"] = []
    return public(plane.add("datasets", account, ds_id, record))


def rows_of(data: bytes, what: str) -> int:
    """The number of rows of a JSON Lines file (blank lines skipped); a ``bad`` error for any other file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise bad(f"{what} is not UTF-8 text") from None
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad(f"{what} line {number} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise bad(f"{what} line {number} is not a JSON object")
        count += 1
    return count


def store_file(plane: ControlPlane, account: str, ds_id: str, filename: str, data: bytes) -> dict[str, Any]:
    """Keep ``data`` as the dataset's file ``filename`` and mark it READY (the caller holds no lock)."""
    if not FILE_NAME.match(filename):
        raise bad(f"file name {filename[:80]!r}: letters, digits, '.', '_' and '-' only")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "INVALID_ARGUMENT", f"the file is over {MAX_UPLOAD_BYTES} bytes")
    count = rows_of(data, filename)
    with plane.lock:
        record = plane.get("datasets", account, ds_id)
        write_file(plane.folder("datasets", account, ds_id) / "files" / filename, data)
        files = [f for f in record.get("_files", []) if f != filename] + [filename]
        record.setdefault("_rows", {})[filename] = count
        record.update(_files=files, state="READY")
        record["exampleCount"] = str(sum(record["_rows"].get(f, 0) for f in files))
        return public(plane.save("datasets", account, ds_id))


def upload(plane: ControlPlane, account: str, ds_id: str, filename: str, data: bytes) -> dict[str, Any]:
    """``:upload`` (multipart, one file): the file becomes the dataset's content."""
    plane.get("datasets", account, ds_id)
    store_file(plane, account, ds_id, filename, data)
    return {"id": ds_id, "bytes": len(data), "filename": filename, "object": "file"}


def signed_upload_urls(
    plane: ControlPlane, kind: str, account: str, rid: str, body: object, staging: str
) -> dict[str, Any]:
    """``:getUploadEndpoint`` of a dataset or an evaluator: one signed PUT URL per declared file
    (``filenameToSize``) into the resource's ``staging`` folder, the sizes kept as the pending upload."""
    body = check_fields(body, ("filenameToSize", "readMask"), "GetUploadEndpoint body")
    sizes = file_sizes(body.get("filenameToSize"))
    with plane.lock:
        record = plane.get(kind, account, rid)
        record["_pending"] = dict(sizes)
        plane.save(kind, account, rid)
    folder = plane.folder(kind, account, rid) / staging
    urls = {n: plane.sign("PUT", folder / n, s, account, kind, rid) for n, s in sizes.items()}
    return {"filenameToSignedUrls": urls}


def upload_endpoint(plane: ControlPlane, account: str, ds_id: str, body: object) -> dict[str, Any]:
    """``:getUploadEndpoint`` of a dataset (files staged in ``incoming/``)."""
    return signed_upload_urls(plane, "datasets", account, ds_id, body, "incoming")


def file_sizes(raw: Any) -> dict[str, int]:
    """``filenameToSize`` checked: safe file names, sizes in bytes (strings of digits, as the API sends)."""
    if not isinstance(raw, Mapping) or not 1 <= len(raw) <= 16:
        raise bad("filenameToSize must map 1 to 16 file names to their sizes in bytes")
    sizes = {}
    for name, size in raw.items():
        if not isinstance(name, str) or not FILE_NAME.match(name):
            raise bad(f"file name {str(name)[:80]!r}: letters, digits, '.', '_' and '-' only")
        text = str(size)
        if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) > MAX_UPLOAD_BYTES:
            raise bad(f"the size of {name} must be a number of bytes up to {MAX_UPLOAD_BYTES}")
        sizes[name] = int(text)
    return sizes


def validate_upload(plane: ControlPlane, account: str, ds_id: str) -> dict[str, Any]:
    """``:validateUpload``: every file announced by ``getUploadEndpoint`` must have arrived."""
    with plane.lock:
        pending = dict(plane.get("datasets", account, ds_id).get("_pending") or {})
    if not pending:
        raise ApiError(400, "FAILED_PRECONDITION", "no upload was started (call getUploadEndpoint first)")
    staging = plane.folder("datasets", account, ds_id) / "incoming"
    for name in pending:
        if not (staging / name).is_file():
            raise ApiError(400, "FAILED_PRECONDITION", f"{name} was not uploaded to its signed URL")
    for name in pending:
        store_file(plane, account, ds_id, name, (staging / name).read_bytes())
        (staging / name).unlink()
    with plane.lock:
        plane.get("datasets", account, ds_id).pop("_pending", None)
        plane.save("datasets", account, ds_id)
    return {}


def download_endpoint(plane: ControlPlane, account: str, ds_id: str) -> dict[str, Any]:
    """``:getDownloadEndpoint``: a signed GET URL for each of the dataset's files."""
    with plane.lock:
        record = plane.get("datasets", account, ds_id)
        files = list(record.get("_files", []))
    if record.get("state") != "READY":
        raise ApiError(400, "FAILED_PRECONDITION", f"dataset {ds_id} is {record.get('state')}, not READY")
    folder = plane.folder("datasets", account, ds_id) / "files"
    return {
        "filenameToSignedUrls": {
            n: plane.sign("GET", folder / n, None, account, "datasets", ds_id) for n in files
        }
    }


def get(plane: ControlPlane, account: str, ds_id: str) -> dict[str, Any]:
    with plane.lock:
        return public(plane.get("datasets", account, ds_id))
