"""Run the spectrum ``@evaluation_test`` entry modules offline and compare them with the env's own scoring.

``run_entry_module`` runs one entry module with pytest in a subprocess (eval-protocol's plugin sets
process-wide environment variables, so a separate process keeps the caller clean) and returns the rows
eval-protocol wrote (``--ep-output-dir``). ``run_bench_shaped_eval`` serves a reference policy on the local
policy server, runs the bench-shaped entry on ``n_rows`` rows through real eval-protocol + litellm, plays
the same policy directly through the env (``rftlab.rollout.episode``) and returns both scores side by side.

The subprocess never sees Fireworks/Tinker/W&B keys (no upload can happen, docs/platforms.md G7) and talks to the
local server with the placeholder key ``EMPTY``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import rftlab

ENTRIES = Path(__file__).resolve().parents[1] / "eval_entries"
SRC_ROOT = Path(rftlab.__file__).resolve().parents[1]
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "EP_NO_UPLOAD": "1",
    "EP_DISABLE_AUTO_BROWSER": "1",
    "DISABLE_EP_SQLITE_LOG": "1",
    "EP_MAX_RETRY": "1",
}
SECRET_PREFIXES = ("FIREWORKS", "TINKER", "WANDB", "EP_")
COMPARED = (
    "reward",
    "mean_occ",
    "early_occ",
    "late_occ",
    "memory_gain",
    "mean_avail",
    "carry_rate",
    "report_size",
)


class EntryRunError(RuntimeError):
    """The entry module's pytest run failed or timed out (the message holds the tail of its output)."""


def run_entry_module(
    module: str,
    completion_params: Sequence[Mapping[str, Any]],
    *,
    rows: int,
    workdir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    python_path: Sequence[str] = (),
    timeout: float = 300.0,
) -> tuple[list[dict[str, Any]], str, str]:
    """Run ``eval_entries/<module>`` with one pytest case per ``completion_params`` entry on ``rows``
    rows; returns ``(result rows, stdout, stderr)``. ``env`` adds variables; ``python_path`` goes before
    the package's source root on ``PYTHONPATH``. Raises ``EntryRunError`` on a failed or hung run (the
    run and any server it started are killed together)."""
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="rftlab-ep-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    home.mkdir(exist_ok=True)
    child = {k: v for k, v in os.environ.items() if not k.startswith(SECRET_PREFIXES)}
    child.update(OFFLINE_ENV)
    child.update(
        HOME=str(home),
        OPENAI_API_KEY="EMPTY",
        PATH=str(Path(sys.executable).parent) + os.pathsep + child.get("PATH", ""),  # McpGym spawns `python`
        PYTHONPATH=os.pathsep.join([*python_path, str(SRC_ROOT)]),
        RFTLAB_SPECTRUM_ROWS=str(int(rows)),
    )
    child.update(env or {})
    out_dir = work / "out"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ENTRIES / module),
        "--ep-output-dir",
        str(out_dir),
    ]
    for cp in completion_params:
        cmd += ["--ep-completion-params", json.dumps(dict(cp))]
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=child,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise EntryRunError(
            f"{module} timed out after {timeout:g} s:\n{stdout[-2000:]}{stderr[-2000:]}"
        ) from None
    if proc.returncode != 0:
        raise EntryRunError(f"{module} failed (exit {proc.returncode}):\n{stdout[-3000:]}{stderr[-2000:]}")
    results = [
        json.loads(line)
        for f in sorted((out_dir / "experiment_results").glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    return results, stdout, stderr


def run_bench_shaped_eval(
    n_rows: int = 4,
    policy_name: str = "accumulate",
    *,
    memory: str = "echo",
    prompt: str = "explicit",
    timeout: float = 300.0,
):
    """Bench-shaped ``@evaluation_test`` on ``n_rows`` rows with ``policy_name`` served locally, beside the
    env's own scoring of the same policy. One row per dataset row: ``ep_<metric>`` (eval-protocol's
    ``evaluation_result``) and ``env_<metric>`` (direct episode), and ``match`` (every pair equal)."""
    import pandas as pd

    from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
    from rftlab.policies.server import PolicyServer
    from rftlab.policies.spectrum.reference import RFT_POLICIES
    from rftlab.rollout.episode import episode

    if policy_name not in RFT_POLICIES:
        raise ValueError(f"unknown policy {policy_name!r} (known: {', '.join(RFT_POLICIES)})")
    with PolicyServer({policy_name: RFT_POLICIES[policy_name]}) as srv:
        params = {
            "model": f"openai/{policy_name}",
            "base_url": srv.base_url,
            "temperature": 0.0,
            "max_tokens": 256,
        }
        rows, _out, _err = run_entry_module(
            "spectrum_turn.py",
            [params],
            rows=n_rows,
            env={"RFTLAB_SPECTRUM_MEMORY": memory, "RFTLAB_SPECTRUM_PROMPT": prompt},
            timeout=timeout,
        )
    cfg = SpectrumRFTConfig(memory=memory)  # type: ignore[arg-type]
    records = []
    for r in sorted(rows, key=lambda r: int(str(r["input_metadata"]["row_id"]).rsplit("_", 1)[-1])):
        row_id = r["input_metadata"]["row_id"]
        salt = ((r.get("execution_metadata") or {}).get("extra") or {}).get("spectrum", {}).get("salt", "")
        direct = episode(SpectrumRFTEnv(cfg), RFT_POLICIES[policy_name](), row_id, salt=salt).metrics
        res = r.get("evaluation_result") or {}
        ep = {"reward": res.get("score")}
        for k, m in (res.get("metrics") or {}).items():
            ep[k] = m.get("score") if m.get("is_score_valid") else None
        rec: dict[str, Any] = {
            "row_id": row_id,
            "policy": policy_name,
            "ep_valid": bool(res.get("is_score_valid")),
        }
        for k in COMPARED:
            rec[f"ep_{k}"] = ep.get(k)
            rec[f"env_{k}"] = direct.get(k)
        rec["match"] = rec["ep_valid"] and all(rec[f"ep_{k}"] == rec[f"env_{k}"] for k in COMPARED)
        records.append(rec)
    return pd.DataFrame.from_records(records)
