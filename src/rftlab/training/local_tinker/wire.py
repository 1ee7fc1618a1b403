"""The tinker SDK's protobuf wire format, server side (tinker 0.38 ``tinker.proto.tinker_public_pb2``).

The SDK sends ``forward_backward`` requests as a protobuf ``ForwardBackwardRequest`` (tokens as int32
bytes, tensors as raw bytes in their dtype, optionally zstd-compressed) and expects
``ForwardBackwardOutput`` and ``SampleResponse`` results as protobuf (it refuses JSON for those two types).
This module is the inverse of the SDK's ``proto/request_conv.py`` (decode) and ``proto/response_conv.py``
(encode); the tests round-trip both against the SDK's own functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tinker import types
from tinker.proto import tinker_public_pb2 as pb
from tinker.types import TensorDtype

from .limits import LimitError, check_finite, check_shape

PROTO_CONTENT_TYPE = "application/x-protobuf"
MAX_ZSTD_BODY = 1 << 30
"""Largest decompressed ``forward_backward`` body accepted (1 GiB)."""


class WireError(ValueError):
    """A request body the service cannot decode (the reason is returned to the client)."""


_DTYPES: dict[int, tuple[TensorDtype, np.dtype]] = {
    pb.DTYPE_FLOAT32: ("float32", np.dtype(np.float32)),
    pb.DTYPE_INT64: ("int64", np.dtype(np.int64)),
}
_STOP_REASONS = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}


@dataclass(frozen=True)
class ForwardBackwardCall:
    """A decoded ``/api/v1/forward_backward`` request."""

    model_id: str
    seq_id: int
    loss_fn: str
    loss_fn_config: dict[str, float | str] | None
    forward_only: bool
    data: list[types.Datum]


def _frombuffer(raw: bytes, dtype: np.dtype, what: str) -> np.ndarray:
    if len(raw) % dtype.itemsize:
        raise WireError(f"{what}: {len(raw)} bytes is not a whole number of {dtype.name} values")
    return np.frombuffer(raw, dtype=dtype).copy()


def _tensor(msg: Any, what: str) -> types.TensorData:
    if msg.dtype not in _DTYPES:
        raise WireError(f"{what}: tensor dtype {msg.dtype} is not float32 or int64")
    name, dtype = _DTYPES[msg.dtype]
    if msg.WhichOneof("encoding") == "sparse_csr":
        raise WireError(f"{what}: sparse tensors are not supported by the local backend")
    arr = _frombuffer(msg.dense, dtype, what)
    shape = list(msg.shape) or [arr.size]
    try:
        check_shape(what, shape, arr.size)  # a negative dimension, too many, or a wrong product
    except LimitError as exc:
        raise WireError(str(exc)) from None
    return types.TensorData(data=arr.reshape(shape), dtype=name, shape=shape)


def decode_forward_backward(body: bytes, content_encoding: str | None = None) -> ForwardBackwardCall:
    """A ``ForwardBackwardRequest`` body (``content_encoding`` ``zstd`` or none) as tinker types."""
    if content_encoding and content_encoding.lower() not in ("identity", "zstd"):
        raise WireError(f"unsupported Content-Encoding {content_encoding!r}")
    if content_encoding and content_encoding.lower() == "zstd":
        import zstandard

        try:
            body = zstandard.ZstdDecompressor().decompress(body, max_output_size=MAX_ZSTD_BODY)
        except zstandard.ZstdError as exc:
            raise WireError(f"the zstd body cannot be decompressed: {exc}") from None
    msg = pb.ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise WireError(f"the body is not a ForwardBackwardRequest protobuf ({type(exc).__name__})") from None
    config: dict[str, float | str] = {}
    for key, value in msg.loss_fn_config_v2.items():
        config[key] = value.text if value.WhichOneof("value") == "text" else float(value.number)
    for key, number in msg.loss_fn_config.items():
        config.setdefault(key, float(number))
    try:
        check_finite("loss_fn_config", config)
    except LimitError as exc:
        raise WireError(str(exc)) from None
    data = []
    for i, d in enumerate(msg.data):
        chunks = []
        for j, chunk in enumerate(d.model_input):
            kind = chunk.WhichOneof("chunk")
            if kind != "encoded_text":
                raise WireError(f"datum {i}: chunk {j} is {kind}; the local backend takes text tokens only")
            tokens = _frombuffer(chunk.encoded_text.tokens, np.dtype(np.int32), f"datum {i} chunk {j}")
            chunks.append(types.EncodedTextChunk(tokens=tokens.tolist()))
        inputs = {name: _tensor(t, f"datum {i} {name!r}") for name, t in d.loss_fn_inputs.items()}
        data.append(types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=inputs))
    return ForwardBackwardCall(
        model_id=msg.model_id,
        seq_id=int(msg.seq_id),
        loss_fn=msg.loss_fn,
        loss_fn_config=config or None,
        forward_only=bool(msg.forward_only),
        data=data,
    )


def request_slot(body: bytes, content_type: str | None, content_encoding: str | None) -> tuple[Any, Any]:
    """``(model_id, seq_id)`` named by a training request's body (JSON, or a ``ForwardBackwardRequest``
    protobuf), ``(None, None)`` when it names none: how the service finds the order slot of a request it
    refuses."""
    try:
        if "application/x-protobuf" in (content_type or ""):
            if content_encoding and content_encoding.lower() == "zstd":
                import zstandard

                body = zstandard.ZstdDecompressor().decompress(body, max_output_size=MAX_ZSTD_BODY)
            msg = pb.ForwardBackwardRequest()
            msg.ParseFromString(body)
            return msg.model_id, int(msg.seq_id)
        import json

        data = json.loads(body or b"{}")
    except Exception:  # an undecodable body names no slot
        return None, None
    if not isinstance(data, dict):
        return None, None
    return data.get("model_id"), data.get("seq_id")


def encode_sample_response(response: types.SampleResponse) -> bytes:
    """A ``SampleResponse`` as the SDK reads it (``response_conv.deserialize_sample_response``); sequence
    ids are not part of the message (the SDK stamps the ids the submission returned)."""
    msg = pb.SampleResponse()
    for seq in response.sequences:
        s = msg.sequences.add()
        s.stop_reason = _STOP_REASONS[str(seq.stop_reason)]
        s.tokens = np.asarray(seq.tokens, dtype=np.int32).tobytes()
        if seq.logprobs is not None:
            s.logprobs = np.asarray(seq.logprobs, dtype=np.float32).tobytes()
    if response.prompt_logprobs_np is not None:
        msg.prompt_logprobs = np.asarray(response.prompt_logprobs_np, dtype=np.float32).tobytes()
    return msg.SerializeToString()


def encode_forward_backward_output(output: types.ForwardBackwardOutput) -> bytes:
    """A ``ForwardBackwardOutput`` as one ``ArrayRecord`` of batched per-datum tensors, the form the SDK
    reads (``response_conv.deserialize_forward_backward_output``)."""
    msg = pb.ForwardBackwardOutput()
    msg.loss_fn_output_type = output.loss_fn_output_type or "ArrayRecord"
    for key, value in output.metrics.items():
        msg.metrics[key] = float(value)
    outputs = list(output.loss_fn_outputs)
    if outputs:
        record = msg.loss_fn_outputs.add()
        record.type_tag = "ArrayRecord"
        record.num_datums = len(outputs)
        for name in outputs[0]:
            arrays = [np.asarray(o[name].to_numpy()) for o in outputs]
            wide = "int64" if all(a.dtype.kind in "iu" for a in arrays) else "float32"
            np_dtype = np.dtype(np.int64 if wide == "int64" else np.float32)
            trailing = list(arrays[0].shape[1:])
            if any(list(a.shape[1:]) != trailing for a in arrays):
                raise ValueError(f"loss_fn_outputs[{name!r}] is ragged beyond its first dimension")
            flat = [np.ascontiguousarray(a, dtype=np_dtype).reshape(-1) for a in arrays]
            offsets = np.cumsum([0] + [a.nbytes for a in flat]).astype(np.int64)
            bt = record.fields[name]
            bt.data = b"".join(a.tobytes() for a in flat)
            bt.offsets = offsets.tobytes()
            bt.dtype = pb.DTYPE_INT64 if wide == "int64" else pb.DTYPE_FLOAT32
            bt.trailing_shape.extend(trailing)
    return msg.SerializeToString()
