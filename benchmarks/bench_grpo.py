"""Local GRPO throughput: one full-size arm of the spectrum-memory study with the simulated policy, and
the whole memory study.

    .venv/bin/python benchmarks/bench_grpo.py [--quick] [--all-arms] [--study]

A full-size arm is 48 rows × 12 candidates × 12 scans × 12 epochs = 82,944 scan-steps plus 72 Adam
updates (8 rows per update). Prints, in one run:

1. the baseline: the same 82,944 scan-steps played by the scripted ``echo_follower`` reference policy
   through ``rftlab.rollout.episode`` (env step + scoring only, no sampling, no gradients) — the floor
   any trainer pays for the env;
2. the full-size arm C (weak prompt, real echo): wall time (CPU time beside it, since the machine may be
   shared), scan-steps per second, and the ratio to the baseline;
3. with ``--all-arms``: the base arms of the study plan (probe, A, B, B′, C, C′, D, D_cost) back to back;
4. with ``--study``: the whole memory study as ``make reports`` runs it: ``notebooks/02_memory.py`` rendered
   by ``rftlab.reports`` with an empty run store (every arm and every replicate trained, then the
   analysis, ceilings and design power), wall time and the CPU time of the process tree, and the ratio to
   the one-arm time measured above.

Targets: one arm ≤ 30 s, and the whole study ≤ 3 min, on this machine. The machine may be shared: the
CPU time beside each wall time says how much of it was waiting. Nothing is written to the project's run
store or reports (everything goes to a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, epoch_salt  # noqa: E402
from rftlab.launch.spectrum.local import trainer_config  # noqa: E402
from rftlab.launch.spectrum.spec import load_arm_spec  # noqa: E402
from rftlab.policies.spectrum.reference import RFTEchoFollower  # noqa: E402
from rftlab.rollout.episode import episode  # noqa: E402
from rftlab.runs import RunStore  # noqa: E402
from rftlab.training.spectrum.grpo import train_spectrum_grpo  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "data" / "specs"
ARMS = ["probe", "A", "B", "B_prime", "C", "C_prime", "D", "D_cost"]
TARGET_ARM_S = 30.0
TARGET_ALL_S = 180.0
TARGET_STUDY_S = 180.0


def baseline(rows: int, candidates: int, epochs: int) -> tuple[float, int]:
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo", render=False))
    policy = RFTEchoFollower()
    steps = 0
    t0 = time.perf_counter()
    for epoch in range(epochs):
        salt = epoch_salt("bench", epoch)
        for r in range(rows):
            for _ in range(candidates):
                steps += len(episode(env, policy, f"sc2_{r}", salt=salt))
    return time.perf_counter() - t0, steps


def train_arm(arm: str, root: Path, **sizes) -> tuple[float, float, int, dict]:
    spec = load_arm_spec(SPECS / f"spectrum_{arm}.json")
    if sizes:
        spec = spec.model_copy(update=sizes)
    config = trainer_config(spec)
    run = RunStore(root).create_run("bench", arm, spec.to_dict())
    w0, c0 = time.perf_counter(), time.process_time()
    result = train_spectrum_grpo(config, run, progress=False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    steps = config.rows * config.candidates * config.num_scans * config.epochs
    return wall, cpu, steps, result.metrics[-1]


def whole_study(tmp: Path, quick: bool) -> tuple[float, float]:
    """Render notebook 02 with an empty run store in ``tmp``; returns (wall s, CPU s of the process tree)."""
    env = {**os.environ, "RFTLAB_RUNS_ROOT": str(tmp / "runs"), "RFTLAB_QUICK": "1" if quick else "0"}
    cmd = [
        sys.executable,
        "-m",
        "rftlab.reports",
        str(ROOT / "notebooks" / "02_memory.py"),
        "--out",
        str(tmp / "out"),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=tmp)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke size (12 rows, 4 epochs)")
    ap.add_argument("--all-arms", action="store_true", help="also time the study's base arms")
    ap.add_argument("--study", action="store_true", help="also time the whole memory study (notebook 02)")
    args = ap.parse_args()
    sizes = {"rows": 12, "epochs": 4} if args.quick else {}
    rows, epochs = sizes.get("rows", 48), sizes.get("epochs", 12)
    print(f"python {platform.python_version()} on {platform.machine()}; quick={args.quick}")
    b_wall, b_steps = baseline(rows, 12, epochs)
    print(
        f"baseline echo_follower (env only): {b_steps:,} scan-steps in {b_wall:.2f} s ({b_steps / b_wall:,.0f}/s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, steps, last = train_arm("C", Path(tmp), **sizes)
        verdict = "meets" if wall <= TARGET_ARM_S or args.quick else "MISSES"
        print(
            f"arm C (simulated GRPO): {steps:,} scan-steps + updates in {wall:.2f} s wall / {cpu:.2f} s CPU "
            f"({steps / wall:,.0f} scan-steps/s; {wall / b_wall:.2f}x the env-only baseline); "
            f"{verdict} the {TARGET_ARM_S:.0f} s target; last epoch carry {last['carry_rate']:.3f}"
        )
        if args.all_arms:
            total_wall = total_cpu = 0.0
            for arm in ARMS:
                w, c, _, _ = train_arm(arm, Path(tmp), **sizes)
                total_wall += w
                total_cpu += c
                print(f"  arm {arm:<8} {w:6.2f} s wall  {c:6.2f} s CPU")
            verdict = "meets" if total_wall <= TARGET_ALL_S or args.quick else "MISSES"
            print(
                f"all {len(ARMS)} base arms: {total_wall:.1f} s wall / {total_cpu:.1f} s CPU; {verdict} the "
                f"{TARGET_ALL_S:.0f} s target"
            )
        if args.study:
            s_wall, s_cpu = whole_study(Path(tmp), args.quick)
            verdict = "meets" if s_wall <= TARGET_STUDY_S or args.quick else "MISSES"
            print(
                f"whole memory study (notebook 02, empty run store): {s_wall:.1f} s wall / {s_cpu:.1f} s CPU "
                f"({s_wall / wall:.1f}x one arm's wall time, {s_cpu / cpu:.1f}x its CPU time); {verdict} the "
                f"{TARGET_STUDY_S:.0f} s target in wall time"
                + ("" if s_cpu <= TARGET_STUDY_S else f"; its CPU time alone exceeds {TARGET_STUDY_S:.0f} s")
            )


if __name__ == "__main__":
    main()
