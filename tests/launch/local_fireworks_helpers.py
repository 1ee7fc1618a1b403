"""Helpers of the local control plane's tests: a server in a thread with its log captured, a tiny
eval-protocol evaluator project, a tarball of it, and a poll-until helper."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rftlab.launch.local_fireworks.server import FireworksServeConfig, FireworksServerThread, Log

KEY = "fw_test_local_plane_key_0123"
OTHER_KEY = "fw_test_other_account_key_4567"
ACCOUNT = "acct-under-test"
OTHER = "other-acct"

# A tiny @evaluation_test: no model calls (NoOpRolloutProcessor passes the rows through), a score from the
# last message's length, one metric.
TINY_TEST = """
from eval_protocol.models import EvaluateResult, EvaluationRow, Message, MetricResult
from eval_protocol.pytest import NoOpRolloutProcessor, evaluation_test


@evaluation_test(
    input_rows=[[EvaluationRow(messages=[Message(role="user", content="hi")])]],
    completion_params=[{"model": "openai/none"}],
    rollout_processor=NoOpRolloutProcessor(),
    mode="pointwise",
)
def test_tiny(row: EvaluationRow) -> EvaluationRow:
    n = len(str(row.messages[-1].content or ""))
    row.evaluation_result = EvaluateResult(
        score=min(1.0, n / 10), metrics={"length": MetricResult(score=float(n), reason="characters")}
    )
    return row
"""
TINY_ENTRY = "test_tiny.py::test_tiny"
TINY_ID = "test-tiny-test-tiny"  # the id eval-protocol derives from the entry (docs/platforms.md §1.9)


class Captured(io.StringIO):
    """A log stream whose text stays readable after the server stopped."""

    def close(self) -> None:  # uvicorn or a handler closing it must not lose what was logged
        pass


def server(tmp_path: Path, **config: Any) -> tuple[FireworksServerThread, Captured]:
    """A started control plane with two keys (one per account), storage under ``tmp_path``."""
    stream = Captured()
    cfg = FireworksServeConfig(
        port=0,
        storage=config.pop("storage", tmp_path / "store"),
        api_keys={KEY: ACCOUNT, OTHER_KEY: OTHER},
        log_level="debug",
        **config,
    )
    return FireworksServerThread(cfg, log=Log(stream, level="debug")).start(), stream


def client(srv: FireworksServerThread, key: str = KEY, account: str = ACCOUNT):
    from fireworks import Fireworks

    return Fireworks(api_key=key, account_id=account, base_url=srv.base_url, max_retries=0)


def tiny_project(folder: Path, requirements: str = "eval-protocol==0.3.33\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_tiny.py").write_text(TINY_TEST, encoding="utf-8")
    (folder / "requirements.txt").write_text(requirements, encoding="utf-8")
    return folder


def tarball(files: dict[str, str], top: str = "code") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def rows_text(n: int) -> str:
    """``n`` chat rows with distinct row ids and contents of lengths 1..n."""
    return "".join(
        json.dumps(
            {"messages": [{"role": "user", "content": "x" * (i + 1)}], "input_metadata": {"row_id": f"r{i}"}}
        )
        + "\n"
        for i in range(n)
    )


def wait_for(
    fetch: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 120.0, every: float = 0.2
):
    """``fetch()`` until ``done(value)``; the last value (an ``AssertionError`` on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"still not done after {timeout} s: {value}"
        time.sleep(every)


def ep_env(srv: FireworksServerThread, home: Path, key: str = KEY) -> dict[str, str]:
    """The environment eval-protocol's CLI runs in: this interpreter first on PATH, the plane's URL."""
    return {
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "FIREWORKS_API_KEY": key,
        "FIREWORKS_API_BASE": srv.base_url,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "EP_NO_UPLOAD": "1",
    }


def log_events(stream: Captured, event: str = "request") -> list[dict[str, Any]]:
    out = []
    for line in stream.getvalue().splitlines():
        record = json.loads(line)
        if record.get("event") == event:
            out.append(record)
    return out
