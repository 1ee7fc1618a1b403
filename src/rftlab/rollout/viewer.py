"""Look at rollouts instead of reading JSON: the project's rollouts in eval-protocol's log viewer.

eval-protocol ships a local log viewer (``ep logs``: a built web app inside the wheel) over
``EvaluationRow`` objects. This module is the adapter: it turns what the project writes into
``EvaluationRow`` objects; ``rftlab.rollout.viewer_server`` serves the app and sends it those rows on
127.0.0.1, offline (nothing is fetched: the app's files are in the wheel, and no Fireworks/Elasticsearch
log backend is configured).

Sources (``scan_sources``, ``rows_from_path``; a folder is searched recursively; a damaged ``run.json``
or ``summary.json`` is reported by path and never hides the other sources):

- a run folder of the run store (``run.json``): ``rollouts/epoch-<k>.jsonl`` (local GRPO epochs of the
  spectrum and GS1 studies; the poker reference strategies' episodes, ``poker_reference``, and the bench90
  episodes, ``spectrum_bench90``, which notebooks 06 and 01 keep through ``RunStore.record_rollouts``),
  ``eval.jsonl`` (greedy evaluations), and the raw ``EvaluationRow`` files a Fireworks poll downloaded
  (``provider/epoch-<k>-*``), which already are eval-protocol rows;
- an arena frozen evaluation folder (``rows.jsonl`` + ``summary.json``, ``rftlab arena eval``);
- a JSONL file of rollout records (any file of objects with ``messages`` or ``prompt``/``response``).

Every row is tagged with experiment, arm, run id and epoch: ``eval_metadata.name`` is
``<experiment>/<arm>``, ``execution_metadata`` carries ``experiment_id`` (the experiment), ``run_id`` (the
run id) and a unique ``rollout_id``, and ``input_metadata.session_data`` holds all four plus the source file.
A record without a transcript (the local spectrum policy is a simulation that acts without text) is shown
as one assistant message listing its fields, so it is still listed with its reward.

    rftlab view runs/spectrum_memory/A/<run_id>          # http://127.0.0.1:8765, Ctrl-C to stop
"""

from __future__ import annotations

import json
import math
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.runs.errors import CorruptRunError

DEFAULT_PORT = 8765
TRANSCRIPT_KEYS = ("messages",)
ID_KEYS = ("row_id", "prompt_id", "item_id", "case_id")
REWARD_KEYS = ("reward", "score", "correct", "environment_reward")
_EPOCH_FILE = re.compile(r"^epoch-(\d+)\.jsonl$")
_PROVIDER_EPOCH = re.compile(r"^epoch-(\d+)-\d+-.+")


class ViewerError(RuntimeError):
    """Nothing to show, or the viewer cannot start (the message says why)."""


# ------------------------------------------------------------------------------------- records → rows
def _finite(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every JSON-object line; other lines are skipped (counted by callers
    through the line numbers, never raised: a viewer shows what it can)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield number, obj


def _fmt(value: object) -> str:
    """A value as a reader wants it: floats to 4 significant digits (``1.391975`` → ``1.392``, float noise
    such as ``4.1000000000000005`` → ``4.1``), whole floats below 1e15 as integers (a seed or a count read
    back as a float), everything else as written."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:  # a count or a seed read back as a float
            return str(int(value))
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def _summary_message(record: Mapping[str, Any]) -> str:
    """A record without a transcript, one ``field: value`` line per scalar (rounded by ``_fmt``); a list or
    an object is named with its size, never dumped."""
    lines = [
        "No transcript recorded for this rollout (the policy acted without text: a simulation); its record:"
    ]
    for key, value in record.items():
        if isinstance(value, list | dict):
            lines.append(f"{key}: {len(value)} {'items' if isinstance(value, list) else 'fields'}")
        else:
            lines.append(f"{key}: {_fmt(value)}")
    return "\n".join(lines)


def _arena_action(act: Mapping[str, Any]) -> str:
    """One agent's ACT reply: the action it selected (type and target) and the raw reply it came from."""
    chosen = act.get("selected_action")
    if isinstance(chosen, Mapping):
        what = f"{chosen.get('type')} {chosen.get('target')}"
    else:
        what = "no valid action"
    errors = act.get("errors") or []
    tail = f"; errors: {', '.join(map(str, errors))}" if errors else ""
    return f"{act.get('agent_id')}: {what} (reply {act.get('raw_response')}){tail}"


def _arena_messages(record: Mapping[str, Any], conditions: list[Any]) -> list[dict[str, Any]]:
    """An arena frozen-evaluation case: its BROADCAST replies, then per message condition the team's
    reward, the oracle's and the regret (rounded) and each agent's action."""
    messages: list[dict[str, Any]] = []
    broadcasts = [m for m in record.get("messages") or [] if isinstance(m, Mapping) and "agent_id" in m]
    if broadcasts:
        lines = [f"{m.get('agent_id')} broadcast: {m.get('raw_response')}" for m in broadcasts]
        messages.append({"role": "assistant", "content": "\n".join(lines)})
    for cond in conditions:
        if not isinstance(cond, Mapping):
            continue
        lines = [f"condition {cond.get('condition')}: reward {_fmt(cond.get('environment_reward'))}, "
                 f"oracle {_fmt(cond.get('oracle_reward'))}, regret {_fmt(cond.get('regret'))}"]  # fmt: skip
        lines += [_arena_action(a) for a in cond.get("actions") or [] if isinstance(a, Mapping)]
        messages.append({"role": "assistant", "content": "\n".join(lines)})
    return messages


def _messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's transcript as chat messages (see the module docstring for records without one)."""
    raw = record.get("messages")
    if isinstance(raw, list) and raw and all(isinstance(m, Mapping) and "role" in m for m in raw):
        return [dict(m) for m in raw]
    messages: list[dict[str, Any]] = []
    if isinstance(record.get("prompt"), str):
        messages.append({"role": "user", "content": record["prompt"]})
    if isinstance(record.get("response"), str):
        messages.append({"role": "assistant", "content": record["response"]})
        return messages
    conditions = record.get("conditions")
    if isinstance(conditions, list) and conditions:  # an arena frozen-evaluation case
        return messages + _arena_messages(record, conditions)
    messages.append({"role": "assistant", "content": _summary_message(record)})
    return messages


def _reward(record: Mapping[str, Any]) -> float | None:
    result = record.get("evaluation_result")
    if isinstance(result, Mapping) and _finite(result.get("score")) is not None:
        return _finite(result.get("score"))
    for key in REWARD_KEYS:
        if _finite(record.get(key)) is not None:
            return _finite(record.get(key))
    conditions = record.get("conditions")
    if isinstance(conditions, list) and conditions and isinstance(conditions[0], Mapping):
        return _finite(conditions[0].get("environment_reward"))
    return None


def _viewer_metrics(evaluation):
    """The viewer's schema accepts metric scores in [0, 1] only (a row with another value is not shown at
    all): such metrics (rewards in BB, ``memory_gain`` < 0, counts) leave ``metrics`` and are written,
    unchanged, into the reason; ``(evaluation, {name: value})``."""
    values: dict[str, float] = {}
    kept = {}
    for name, metric in (evaluation.metrics or {}).items():
        score = _finite(metric.score)
        values[name] = metric.score
        if score is not None and 0.0 <= score <= 1.0:
            kept[name] = metric
    moved = {k: v for k, v in values.items() if k not in kept}
    reason = evaluation.reason or ""
    if moved:
        reason += "\n" + "; ".join(f"{k} = {_fmt(v)}" for k, v in moved.items())
    return evaluation.model_copy(update={"metrics": kept, "reason": reason}), values


def record_to_row(record: Mapping[str, Any], tags: Mapping[str, Any], index: int):
    """One rollout record as an eval-protocol ``EvaluationRow`` tagged with ``tags`` (experiment, arm,
    run_id, epoch, source). An ``EvaluationRow`` record (a downloaded Fireworks epoch) keeps its
    transcript and evaluation; anything else gets one from ``_messages`` and its numeric fields as
    metrics."""
    from eval_protocol.models import EvaluateResult, EvaluationRow, MetricResult

    experiment, arm = str(tags.get("experiment") or "?"), str(tags.get("arm") or "?")
    run_id, epoch = str(tags.get("run_id") or "-"), tags.get("epoch")
    row_id = next((str(record[k]) for k in ID_KEYS if record.get(k) is not None), None)
    found = record.get("input_metadata")
    meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    row_id = str(meta.get("row_id") or row_id or (f"case-{record['case_index']}" if "case_index" in record
                                                   else f"row-{index}"))  # fmt: skip
    rollout_id = f"{experiment}/{arm}/{run_id}/e{epoch if epoch is not None else '-'}/{index}"
    session = {**{k: v for k, v in tags.items() if v is not None}, "row_id": row_id}
    reward = _reward(record)
    metrics = {}
    for key, value in record.items():
        v = _finite(value)
        if v is not None and key not in ("epoch", "step", "index", "candidate", "sample", "case_index"):
            metrics[key] = MetricResult(score=v, is_score_valid=True, reason=f"{key} = {_fmt(value)}")
    result = record.get("evaluation_result")
    if isinstance(result, Mapping):
        evaluation = EvaluateResult.model_validate(result)
    else:
        evaluation = EvaluateResult(
            score=reward if reward is not None else 0.0,
            is_score_valid=reward is not None,
            reason=f"{experiment}/{arm} run {run_id} epoch {epoch}: reward {_fmt(reward)}"
            if reward is not None
            else f"{experiment}/{arm} run {run_id} epoch {epoch}: no reward recorded",
            metrics=metrics,
        )
    evaluation, values = _viewer_metrics(evaluation)
    session["values"] = values
    # JSON-shaped fields, validated into eval-protocol's models as the constructor would
    return EvaluationRow.model_validate(
        {
            "messages": _messages(record),
            "input_metadata": {
                "row_id": row_id,
                "session_data": session,
                "dataset_info": {"experiment": experiment, "arm": arm, "run_id": run_id, "epoch": epoch},
            },
            "evaluation_result": evaluation,
            "execution_metadata": {"rollout_id": rollout_id, "experiment_id": experiment, "run_id": run_id},
            "eval_metadata": {
                "name": f"{experiment}/{arm}",
                "description": f"rftlab {experiment} arm {arm}, run {run_id}",
                "version": str(run_id),
                "status": {"code": 100, "message": "finished"},
                "num_runs": 1,
                "aggregation_method": "mean",
            },
            "rollout_status": {"code": 100, "message": "finished"},
        }
    )


def _run_rows(run_dir: Path, base: Mapping[str, Any]) -> Iterator[Any]:
    index = 0
    provider_epochs: set[int] = set()
    provider = run_dir / "provider"
    if provider.is_dir():  # a Fireworks poll keeps each epoch's raw EvaluationRow file here
        for path in sorted(provider.iterdir()):
            m = _PROVIDER_EPOCH.match(path.name)
            if not m or not path.is_file():
                continue
            epoch = int(m.group(1))
            for _line, obj in _read_jsonl(path):
                provider_epochs.add(epoch)
                yield record_to_row(obj, {**base, "epoch": epoch, "source": f"provider/{path.name}"}, index)
                index += 1
    rollouts = run_dir / "rollouts"
    if rollouts.is_dir():
        for path in sorted(rollouts.iterdir(), key=lambda p: (len(p.name), p.name)):
            m = _EPOCH_FILE.match(path.name)
            if not m or int(m.group(1)) in provider_epochs:
                continue
            epoch = int(m.group(1))
            for _line, obj in _read_jsonl(path):
                yield record_to_row(obj, {**base, "epoch": epoch, "source": f"rollouts/{path.name}"}, index)
                index += 1
    if (run_dir / "eval.jsonl").is_file():
        for _line, obj in _read_jsonl(run_dir / "eval.jsonl"):
            yield record_to_row(obj, {**base, "epoch": "eval", "source": "eval.jsonl"}, index)
            index += 1


def _arena_rows(folder: Path, tags: Mapping[str, Any]) -> Iterator[Any]:
    for index, (_line, obj) in enumerate(_read_jsonl(folder / "rows.jsonl")):
        yield record_to_row(obj, {**tags, "epoch": "frozen", "source": "rows.jsonl"}, index)


# ------------------------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class Source:
    """One place rows come from: a run folder (``run``), an arena evaluation folder (``arena``) or a
    JSONL file (``file``), with the tags its rows carry."""

    kind: str
    path: Path
    tags: tuple[tuple[str, Any], ...]

    def files(self) -> list[Path]:
        """The files its rows are read from (their sizes and mtimes are the cache key)."""
        if self.kind == "file":
            return [self.path]
        if self.kind == "arena":
            return [self.path / "rows.jsonl", self.path / "summary.json"]
        found = [self.path / "run.json", self.path / "eval.jsonl"]
        for sub in ("provider", "rollouts"):
            if (self.path / sub).is_dir():
                found.extend(sorted((self.path / sub).iterdir()))
        return found

    def key(self) -> tuple:
        """Changes when any of its files changes (``(name, size, mtime_ns)`` of each)."""
        out = []
        for path in self.files():
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((path.name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def rows(self) -> Iterator[Any]:
        """Its rows as tagged ``EvaluationRow`` objects (read now, in file order)."""
        tags = dict(self.tags)
        if self.kind == "file":
            for i, (_n, obj) in enumerate(_read_jsonl(self.path)):
                yield record_to_row(obj, tags, i)
        elif self.kind == "arena":
            yield from _arena_rows(self.path, tags)
        else:
            yield from _run_rows(self.path, tags)


def _run_source(folder: Path) -> Source:
    """A run folder as a source; ``CorruptRunError`` (naming ``run.json``) when its record is unreadable."""
    from rftlab.runs import load_run

    record = load_run(folder).record
    tags = (("experiment", record.experiment), ("arm", record.arm), ("run_id", record.run_id))
    return Source("run", folder, tags)


def _arena_source(folder: Path) -> Source:
    summary_path = folder / "summary.json"
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise CorruptRunError({str(summary_path): f"not a readable evaluation summary ({first})"}) from None
    provider = summary.get("provider") if isinstance(summary, Mapping) else None
    arm = provider if isinstance(provider, str) else folder.name
    return Source("arena", folder, (("experiment", "arena_eval"), ("arm", arm), ("run_id", folder.name)))


def scan_sources(path: str | Path) -> tuple[list[Source], dict[str, str]]:
    """``(sources, {file: problem})`` under ``path``: only the small record files are read here, never
    the rollouts; one damaged ``run.json`` or ``summary.json`` is reported and never hides the others."""
    path = Path(path)
    if not path.exists():
        raise ViewerError(f"{path}: no such file or folder")
    if path.is_file():
        tags = (("experiment", "file"), ("arm", path.stem), ("run_id", path.name), ("source", path.name))
        return [Source("file", path, tags)], {}
    sources: list[Source] = []
    problems: dict[str, str] = {}
    runs = [path] if (path / "run.json").is_file() else sorted(p.parent for p in path.rglob("run.json"))
    arena = [path] if (path / "rows.jsonl").is_file() else sorted(p.parent for p in path.rglob("rows.jsonl"))
    arena = [folder for folder in arena if (folder / "summary.json").is_file()]
    for make, folders in ((_run_source, runs), (_arena_source, arena)):
        for folder in folders:
            try:
                sources.append(make(folder))
            except CorruptRunError as exc:
                problems.update(exc.problems)
    return sources, problems


def no_rollouts(path: str | Path) -> ViewerError:
    return ViewerError(f"{path}: no rollouts found (no rollouts/epoch-*.jsonl, eval.jsonl or rows.jsonl)")


def rows_from_path(path: str | Path, problems: dict[str, str] | None = None) -> list[Any]:
    """Every rollout under ``path`` (a run folder, a store or part of one, an arena evaluation folder,
    or a JSONL file) as tagged ``EvaluationRow`` objects; ``ViewerError`` when there is none. Damaged
    records go into ``problems`` when it is given, else they raise ``CorruptRunError`` (all named)."""
    sources, found = scan_sources(path)
    if problems is not None:
        problems.update(found)
    elif found:
        raise CorruptRunError(found)
    rows = [row for source in sources for row in source.rows()]
    if not rows:
        raise no_rollouts(path)
    return rows


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
