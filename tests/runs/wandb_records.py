"""Read the records of a W&B offline run file (``run-<id>.wandb``) with wandb's own protobuf classes.

wandb 0.31 has no reader for offline runs (``wandb.Api`` reads the cloud only; the Python datastore reader
is gone), so this test helper undoes the framing and hands each record to ``wandb_internal_pb2.Record``.
The framing, as found in the files wandb writes: a 7-byte header (``:W&B``, magic ``0xBEE1`` little-endian,
version 0), then 32 KiB blocks of chunks, each a 7-byte header (CRC-32 of type and data, little-endian; data
length, 2 bytes; type 1 full, 2 first, 3 middle, 4 last) and its data; a block's tail shorter than a
header is zero padding. Any defect raises ``ValueError``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _chunks(data: bytes):
    pos = len(HEADER)
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # padding at the end of a block
            pos += left
            continue
        if len(data) - pos < CHUNK_HEADER:
            raise ValueError(f"cut chunk header at byte {pos}")
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if crc == 0 and length == 0 and kind == 0:  # zeroed rest of a block
            pos += left
            continue
        body = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        if len(body) != length or CHUNK_HEADER + length > left:
            raise ValueError(f"chunk at byte {pos} runs past its block or the file")
        if zlib.crc32(bytes([kind]) + body) != crc:
            raise ValueError(f"chunk at byte {pos} fails its CRC")
        yield kind, body
        pos += CHUNK_HEADER + length


def framed_records(data: bytes) -> list[bytes]:
    """The record payloads of a ``.wandb`` file's bytes."""
    if not data.startswith(HEADER):
        raise ValueError("not a W&B run file (bad header)")
    out: list[bytes] = []
    partial: bytearray | None = None
    for kind, body in _chunks(data):
        if kind == FULL and partial is None:
            out.append(body)
        elif kind == FIRST and partial is None:
            partial = bytearray(body)
        elif kind == MIDDLE and partial is not None:
            partial += body
        elif kind == LAST and partial is not None:
            out.append(bytes(partial + body))
            partial = None
        else:
            raise ValueError(f"chunk type {kind} out of order")
    if partial is not None:
        raise ValueError("the file ends inside a record")
    return out


def _key(item) -> str:
    return item.key or ".".join(item.nested_key)


def read_run(path: Path) -> dict:
    """``{"run": the run record, "history": [{key: value}], "config": {key: value}}`` of a run file."""
    import json

    from wandb.proto import wandb_internal_pb2 as pb

    run, history, config = None, [], {}
    for payload in framed_records(Path(path).read_bytes()):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            config.update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "config":
            config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
    return {"run": run, "history": history, "config": config}
