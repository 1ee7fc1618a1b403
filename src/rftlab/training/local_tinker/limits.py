"""What ``rftlab serve tinker`` refuses before any work is done: bodies, JSON, metadata, sample counts,
tensors and float parameters outside their limits (docs/platforms.md §3.12). Each check raises
``LimitError`` with one line naming the field and the limit; the server answers it with its status (400,
or 413 for a body too large), which the tinker SDK raises as its typed error (``BadRequestError``...).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

MAX_JSON_BODY_BYTES = 16 * 1024 * 1024
"""The largest JSON body (a prompt of 100,000 tokens is about 0.7 MB of JSON)."""
MAX_PROTO_BODY_BYTES = 256 * 1024 * 1024
"""The largest protobuf body (``forward_backward``: tokens, targets, weights, advantages of a batch)."""
MAX_JSON_DEPTH = 32
"""The deepest nesting of JSON objects and arrays (the SDK's requests nest 5 levels)."""
MAX_NUMBER_CHARS = 40
"""The longest number literal in JSON (an int64 is 20 characters; a float's repr at most 24)."""
MAX_METADATA_BYTES = 64 * 1024
"""The largest ``user_metadata`` (as JSON) of a session, a model or a checkpoint."""
MAX_NUM_SAMPLES = 100_000
"""The most samples one ``asample`` asks for (the ids of all of them are built at once)."""
MAX_TENSOR_DIMS = 8


class LimitError(ValueError):
    """A request outside a limit of this module; ``status`` is the HTTP answer (400 or 413)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_body_size(declared: str | None, limit: int) -> None:
    """Refuse a ``Content-Length`` that is not a count or is over ``limit`` (413)."""
    if declared is None:
        return
    if not declared.isdigit() or len(declared) > 20:
        raise LimitError(f"Content-Length {declared[:40]!r} is not a byte count")
    if int(declared) > limit:
        raise LimitError(f"the body is {int(declared)} bytes; the limit is {limit}", 413)


def _number(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise LimitError(f"a JSON number of {len(text)} characters (the limit is {MAX_NUMBER_CHARS})")
        value = kind(text)
        if kind is float and not math.isfinite(value):
            raise LimitError(f"the JSON number {text} is out of range (it overflows to infinity)")
        return value

    return parse


def _constant(name: str) -> Any:
    raise LimitError(f"{name} is not a JSON value (numbers must be finite)")


def parse_json(raw: bytes) -> Any:
    """``raw`` as strict JSON (an empty body is ``{}``): no NaN or infinities, numbers of at most
    ``MAX_NUMBER_CHARS`` characters, nesting at most ``MAX_JSON_DEPTH``; ``LimitError`` otherwise."""
    if not raw:
        return {}
    try:
        data = json.loads(raw, parse_int=_number(int), parse_float=_number(float), parse_constant=_constant)
    except RecursionError:
        raise LimitError(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LimitError("the body is not valid JSON") from None
    check_depth(data)
    return data


def check_depth(data: Any, limit: int = MAX_JSON_DEPTH) -> None:
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                raise LimitError(f"the JSON nests deeper than {limit} levels")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((x, depth + 1) for x in items)


def check_metadata(where: str, metadata: Mapping[str, Any] | None) -> None:
    """Refuse a ``user_metadata`` over ``MAX_METADATA_BYTES`` as JSON."""
    if not metadata:
        return
    size = len(json.dumps(metadata, default=str))
    if size > MAX_METADATA_BYTES:
        raise LimitError(f"{where}.user_metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")


def check_num_samples(num_samples: Any) -> None:
    if isinstance(num_samples, bool) or not isinstance(num_samples, int):
        raise LimitError(f"num_samples must be an integer, got {num_samples!r}")
    if not 1 <= num_samples <= MAX_NUM_SAMPLES:
        raise LimitError(f"num_samples must be between 1 and {MAX_NUM_SAMPLES}, got {num_samples}")


def check_shape(where: str, shape: Sequence[Any] | None, size: int) -> None:
    """Refuse a tensor shape with a negative or non-integer dimension, too many dimensions, or a product
    other than the ``size`` values it holds."""
    if shape is None:
        return
    dims = list(shape)
    if len(dims) > MAX_TENSOR_DIMS:
        raise LimitError(f"{where}: a tensor of {len(dims)} dimensions (the limit is {MAX_TENSOR_DIMS})")
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise LimitError(f"{where}: tensor shape {dims[:MAX_TENSOR_DIMS]} has a negative dimension")
    if math.prod(dims) != size:
        raise LimitError(f"{where}: tensor shape {dims} does not match its {size} values")


def check_finite(where: str, values: Mapping[str, Any] | None) -> None:
    """Refuse a number in ``values`` (a ``loss_fn_config``) that is not finite."""
    for key, value in (values or {}).items():
        if isinstance(value, float) and not math.isfinite(value):
            raise LimitError(f"{where}[{key!r}] must be a finite number, got {value!r}")
