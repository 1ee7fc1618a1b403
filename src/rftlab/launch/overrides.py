"""``--set key=value`` overrides on arm specs, and sweep files that expand one spec into many.

An override is ``KEY=VALUE``: ``KEY`` a field name, dotted for a nested field (``fireworks.lora_rank``);
``VALUE`` read as JSON when it parses as JSON (``3``, ``1e-4``, ``true``, ``null``, ``"C"``, ``[1, 2]``), else
taken as the string it is (``weak``). NaN and infinity are not JSON here (they stay strings, which the spec
then refuses). The overridden data is validated by the spec's own model, so a bad key or value is refused
with one line naming the override; the result is a new spec with its own hash. A spec with no override is
returned as it is (its hash never changes).

A sweep file is a JSON object (YAML too, when PyYAML is installed and the file ends in ``.yaml``/``.yml``)
whose keys are override keys and whose values are lists of values (a single value counts as a list of one);
it expands to the grid of every combination, in the file's key order, the last key varying fastest:

    {"learning_rate": [1e-4, 3e-4], "seed": [0, 1]}      # 4 specs

    spec = override_spec(load_arm_spec(path), ["rows=3", "fireworks.lora_rank=8"])
    specs = sweep_specs(spec, load_sweep("sweep.json"))  # [(overrides, spec), ...]

A run made with overrides records where its spec came from (``override_provenance``): the overrides as
``KEY=VALUE`` texts with JSON values, and the hash of the spec they were applied to. Every family's launch
keeps both in the run's ``provider`` (``provider.overrides``, ``provider.base_spec_sha256``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

__all__ = [
    "MAX_SWEEP_SPECS",
    "Override",
    "Provenance",
    "apply_overrides",
    "expand_sweep",
    "load_sweep",
    "override_provenance",
    "override_spec",
    "parse_override",
    "spec_data",
    "sweep_specs",
]

KEY_PART = r"[A-Za-z_][A-Za-z0-9_]*"
_KEY_RE = re.compile(rf"{KEY_PART}(\.{KEY_PART})*")  # used with fullmatch: no newline slips through
MAX_SWEEP_SPECS = 1000
SpecT = TypeVar("SpecT", bound=BaseModel)


@dataclass(frozen=True)
class Override:
    key: tuple[str, ...]
    value: Any
    given: str = field(default="", compare=False)  # as the user typed it (for messages)

    @property
    def text(self) -> str:
        """``KEY=VALUE`` with the value as JSON (how it is recorded in a run)."""
        return f"{'.'.join(self.key)}={json.dumps(self.value, separators=(',', ':'), ensure_ascii=False)}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_value(text: str) -> Any:
    """``text`` as JSON when it parses (no NaN/Infinity), else the string itself."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return text


def parse_override(text: str) -> Override:
    """``KEY=VALUE`` (module docstring); ``ValueError`` with one line for anything else."""
    if not isinstance(text, str) or "=" not in text:
        raise ValueError(f"--set {text!r}: give KEY=VALUE (for example rows=3 or fireworks.lora_rank=8)")
    key, _, value = text.partition("=")
    key = key.strip()
    if not _KEY_RE.fullmatch(key):
        raise ValueError(
            f"--set {text!r}: the key {key!r} is not a field name (letters, digits and '_', dotted for a "
            "nested field)"
        )
    return Override(tuple(key.split(".")), parse_value(value), given=text)


def _as_override(item: str | Override) -> Override:
    return item if isinstance(item, Override) else parse_override(item)


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str | Override]) -> dict[str, Any]:
    """A copy of ``data`` with every override set (later ones win); a nested key creates the objects it
    needs and refuses to go through a value that is not an object."""
    out = json.loads(json.dumps(data))
    for item in overrides:
        ov = _as_override(item)
        node = out
        for depth, part in enumerate(ov.key[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                where = ".".join(ov.key[: depth + 1])
                raise ValueError(
                    f"--set {ov.given or ov.text}: {where} is {json.dumps(child)}, not an object with fields"
                )
            node = child
        node[ov.key[-1]] = ov.value
    return out


@runtime_checkable
class _DictSpec(Protocol):
    """A spec whose hashed data is its own ``to_dict()``."""

    def to_dict(self) -> dict[str, Any]: ...


def spec_data(spec: BaseModel) -> dict[str, Any]:
    """The spec as the JSON data its hash is taken over (``to_dict()`` where the model has one)."""
    return spec.to_dict() if isinstance(spec, _DictSpec) else spec.model_dump(mode="json")


def _field_names(model: type[BaseModel], key: Sequence[str]) -> list[str]:
    for part in key:
        info = model.model_fields.get(part)
        inner = getattr(info, "annotation", None) if info else None
        candidates = [a for a in getattr(inner, "__args__", (inner,)) if isinstance(a, type)]
        nested = [a for a in candidates if issubclass(a, BaseModel)]
        if not nested:
            return []
        model = nested[0]
    return sorted(model.model_fields)


def _refusal(model: type[BaseModel], overrides: Sequence[Override], exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = tuple(str(x) for x in first["loc"])
    ov = next(
        (o for o in reversed(overrides) if o.key == loc[: len(o.key)] or loc == o.key[: len(loc)]), None
    )
    label = f"--set {ov.given or ov.text}" if ov else "--set"
    field = ".".join(loc) or "(top level)"
    if first["type"] == "extra_forbidden":
        known = ", ".join(_field_names(model, loc[:-1]))
        return f"{label}: the spec has no field {field!r} (its fields: {known})"
    shown = repr(first.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    got = f" (got {shown})" if "input" in first and not isinstance(first.get("input"), dict) else ""
    return f"{label}: field {field}: {first['msg']}{got}"


def override_spec(spec: SpecT, overrides: Sequence[str | Override]) -> SpecT:
    """``spec`` with ``overrides`` applied and validated by its own model (a new spec, a new hash);
    ``spec`` itself when there are none. ``ValueError`` (one line) for a bad key or value."""
    parsed = [_as_override(o) for o in overrides]
    if not parsed:
        return spec
    model = type(spec)
    data = apply_overrides(spec_data(spec), parsed)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_refusal(model, parsed, exc)) from None


class HashedSpec(Protocol):
    """An arm spec as provenance reads it: anything with a content hash."""

    def sha256(self) -> str: ...


@dataclass(frozen=True)
class Provenance:
    """Where an overridden spec came from: the override texts and the base spec's hash.

    Both are empty for a spec used as its file says.
    """

    overrides: tuple[str, ...] = ()
    """each override as ``KEY=VALUE`` with the value as JSON (``Override.text``)"""
    base_spec_sha256: str = ""
    """the hash of the spec before the overrides"""

    def provider_fields(self) -> dict[str, str | list[str]]:
        """The fields a run's ``provider`` records: none without overrides."""
        if not self.overrides:
            return {}
        return {"overrides": list(self.overrides), "base_spec_sha256": self.base_spec_sha256}


def override_provenance(base_spec: HashedSpec, overrides: Sequence[str | Override]) -> Provenance:
    """The provenance of ``base_spec`` with ``overrides`` applied (empty without overrides).

    ``ValueError`` (one line) for an override that does not parse.
    """
    parsed = [_as_override(o) for o in overrides]
    if not parsed:
        return Provenance()
    return Provenance(tuple(o.text for o in parsed), base_spec.sha256())


def _read_sweep_text(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such sweep file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the sweep file ({exc})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ValueError(
                f"{path}: a YAML sweep file needs PyYAML (pip install pyyaml); or write JSON"
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{path}: not a valid sweep file ({str(exc)[:200] or type(exc).__name__})") from None


def load_sweep(path: str | Path) -> dict[tuple[str, ...], list[Any]]:
    """A sweep file's grid: ``{key: [values]}`` in file order (module docstring); ``ValueError`` naming the
    file and the problem."""
    p = Path(path)
    data = _read_sweep_text(p)
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{p}: a sweep file holds one non-empty object of KEY: [values]")
    grid: dict[tuple[str, ...], list[Any]] = {}
    for key, values in data.items():
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ValueError(f"{p}: key {key!r} is not a field name (dotted for a nested field)")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ValueError(f"{p}: {key} has an empty list of values")
        texts = [json.dumps(v, sort_keys=True) for v in values]
        if len(set(texts)) != len(texts):
            raise ValueError(f"{p}: {key} lists a value twice")
        grid[tuple(key.split("."))] = values
    return grid


def expand_sweep(grid: Mapping[tuple[str, ...], Sequence[Any]]) -> list[list[Override]]:
    """Every combination of the grid's values, the last key varying fastest."""
    keys = list(grid)
    size = 1
    for values in grid.values():
        size *= len(values)
    if size > MAX_SWEEP_SPECS:
        raise ValueError(f"the sweep expands to {size} specs; at most {MAX_SWEEP_SPECS}")
    return [
        [Override(k, v) for k, v in zip(keys, combo, strict=True)]
        for combo in itertools.product(*(grid[k] for k in keys))
    ]


def sweep_specs(
    spec: SpecT, grid: Mapping[tuple[str, ...], Sequence[Any]], base: Sequence[str | Override] = ()
) -> list[tuple[list[Override], SpecT]]:
    """``[(overrides, spec)]`` for every grid point (``base`` overrides applied first), each validated."""
    base_parsed = [_as_override(o) for o in base]
    return [(base_parsed + point, override_spec(spec, base_parsed + point)) for point in expand_sweep(grid)]
