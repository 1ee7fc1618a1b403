"""Every writer of the project, and a child process that kills itself with SIGKILL in the middle of one.

``WRITERS`` maps a name to a ``Writer``: ``setup(work)`` lays down the old state and returns the target
(a file or a folder); ``write(work)`` performs the project's write of it (the real code path: a CLI
command, a run-store method, a library function). ``check(path, data)`` says whether a file's bytes are a
complete file of its kind.

``python kill_harness.py NAME WORK MODE`` runs ``write`` with a hook on the one place bytes become a file
(``rftlab.runs.atomic``): in ``mid-write`` mode the first write to a temporary of the target writes half
its bytes and the process SIGKILLs itself; ``before-rename`` kills at the rename into the target;
``after-rename`` kills right after it. If the write never reaches the hook the child exits 0 — the test
then fails, because the writer bypassed ``rftlab.runs.atomic``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Writer:
    setup: Callable[[Path], Path]
    write: Callable[[Path], None]
    heavy: bool = False  # imports torch / transformers (slow start)


# ------------------------------------------------------------------------------ the writers


def _run(work: Path):
    from rftlab.runs import RunStore, load_run

    root = work / "runs"
    if not root.exists():
        run = RunStore(root).create_run("e", "a", {"x": 1}, run_id="r1")
        run.append_metrics([{"step": s, "reward": 0.5} for s in range(3)])
        run.write_rollouts(0, [{"i": i} for i in range(3)])
        run.save_provider_snapshot("job.json", {"state": "RUNNING", "n": list(range(50))})
    return load_run(root / "e" / "a" / "r1")


def _cli(*argv: str) -> None:
    from rftlab.cli import main

    code = main(list(argv))
    if code:
        raise SystemExit(f"rftlab {' '.join(argv)} exited {code}")


def _old(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)  # the old state a kill must leave intact (test setup, not a project writer)
    return path


def _sft_config():
    from rftlab.rollout.arena.sft_data import SftConfig

    return SftConfig(num_seeds=3, targeted_mechanics_per_kind=1, targeted_silence_examples=2)


def _audit_report(work: Path):
    from rftlab.analysis.arena.audit import audit_dataset
    from rftlab.rollout.arena.sft_data import write_dataset

    data = work / "sft_src"
    if not data.exists():
        write_dataset(data, _sft_config())
    return audit_dataset(data)


def _tiny_notebook():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A report\n\nwritten atomically")]
    return nb


def _warm_config():
    from rftlab.training.gs1.warm_start import WarmStartConfig

    return WarmStartConfig(max_steps=1, batch_size=8, eval_every=1, eval_problems=4)


WRITERS: dict[str, Writer] = {
    "run-store run.json": Writer(
        lambda w: _run(w).path / "run.json", lambda w: _run(w).set_provider(job="j-1")
    ),
    "run-store metrics.jsonl": Writer(
        lambda w: _run(w).path / "metrics.jsonl",
        lambda w: _run(w).append_metrics({"step": 3, "reward": 0.75}),
    ),
    "run-store rollouts": Writer(
        lambda w: _run(w).path / "rollouts" / "epoch-1.jsonl",
        lambda w: _run(w).write_rollouts(1, [{"i": i, "text": "x" * 200} for i in range(50)]),
    ),
    "run-store provider snapshot": Writer(
        lambda w: _run(w).path / "provider" / "job.json",
        lambda w: _run(w).save_provider_snapshot("job.json", {"state": "COMPLETED", "n": list(range(500))}),
    ),
    "spectrum corpus --out": Writer(
        lambda w: _old(w / "corpus.jsonl", '{"old": true}\n'),
        lambda w: _cli("spectrum", "corpus", "--out", str(w / "corpus.jsonl")),
    ),
    "spectrum dataset --out": Writer(
        lambda w: _old(w / "rows.jsonl", '{"old": true}\n'),
        lambda w: _cli("spectrum", "dataset", "--n", "30", "--out", str(w / "rows.jsonl")),
    ),
    "poker dataset --out": Writer(
        lambda w: _old(w / "poker.jsonl", '{"old": true}\n'),
        lambda w: _cli("poker", "dataset", "--n", "20", "--hands", "2", "--out", str(w / "poker.jsonl")),
    ),
    "arena build-sft": Writer(
        lambda w: _old(w / "sft" / "train.jsonl", '{"old": true}\n').parent,
        lambda w: __import__("rftlab.rollout.arena.sft_data", fromlist=["x"]).write_dataset(
            w / "sft", _sft_config()
        ),
    ),
    "arena audit": Writer(
        lambda w: (_audit_report(w), _old(w / "audit.json", '{"old": true}\n'))[1],
        lambda w: __import__("rftlab.analysis.arena.audit", fromlist=["x"]).write_audit(
            _audit_report(w), w / "audit.json"
        ),
    ),
    "arena eval (rows, summary)": Writer(
        lambda w: _old(w / "eval" / "summary.json", '{"old": true}\n').parent,
        lambda w: _cli(
            "arena",
            "eval",
            "--provider",
            "oracle",
            "--case-stride",
            "60",
            "--output-dir",
            str(w / "eval"),
            "--force",
        ),  # fmt: skip
    ),
    "arena gates/handoff output": Writer(
        lambda w: _old(w / "gates.json", '{"old": true}\n'),
        lambda w: __import__("rftlab.cli.arena", fromlist=["x"])._write_text(
            w / "gates.json", json.dumps({"new": list(range(100))})
        ),
    ),
    "gs1 preflight/study json": Writer(
        lambda w: _old(w / "preflight.json", '{"old": true}\n'),
        lambda w: __import__("rftlab.studies.gs1", fromlist=["x"]).write_json(
            w / "preflight.json", {"status": "passed", "checks": list(range(100))}
        ),
    ),
    "reports markdown": Writer(
        lambda w: _old(w / "reports" / "RESULTS_x.md", "old report\n"),
        lambda w: __import__("rftlab.reports", fromlist=["x"]).render_markdown(
            _tiny_notebook(),
            "RESULTS_x",
            w / "reports",
            Path("notebooks/x.py"),
            True,
            {"commit": "0" * 40, "dirty": False},
        ),  # fmt: skip
    ),
    "local tinker checkpoint": Writer(
        lambda w: _old(w / "ckpt" / "m1" / "weights" / "c.pt", "old checkpoint\n"),
        lambda w: (
            __import__("rftlab.training.local_tinker.checkpoints", fromlist=["x"])
            .CheckpointStore(w / "ckpt")
            .save("m1", "weights", "c", {"weights": list(range(1000))})
        ),
        heavy=True,
    ),
    "local tinker tokenizer folder": Writer(
        lambda w: (w / "tok" / "tokenizers" / "rftlab--tiny-qwen3").resolve(),
        lambda w: __import__("rftlab.training.local_tinker.model", fromlist=["x"]).tokenizer_dir(
            "rftlab/tiny-qwen3", w / "tok"
        ),
        heavy=True,
    ),
    "gs1 warm start model folder": Writer(
        lambda w: _old(w / "warm" / "config.json", '{"old": true}\n').parent,
        lambda w: __import__("rftlab.training.gs1.warm_start", fromlist=["x"]).prepare_base_model(
            w / "warm", _warm_config()
        ),
        heavy=True,
    ),
    "arena tiny model folder": Writer(
        lambda w: (w / "tiny").resolve(),
        lambda w: __import__("rftlab.training.arena.sft", fromlist=["x"]).local_arena_model(w / "tiny"),
        heavy=True,
    ),
    "firectl private auth file": Writer(
        lambda w: (w / "tmp").resolve(),
        lambda w: (
            __import__("rftlab.launch.firectl", fromlist=["x"])
            .private_home("fw-key-0123456789", "acct")
            .__enter__()
        ),
    ),
}


def complete(path: Path, data: bytes) -> bool:
    """Whether ``data`` is a whole file of ``path``'s kind (JSON, JSONL, text, torch, safetensors)."""
    try:
        if path.suffix == ".json":
            json.loads(data)
        elif path.suffix == ".jsonl":
            text = data.decode("utf-8")
            if text and not text.endswith("\n"):
                return False
            for line in text.splitlines():
                json.loads(line)
        elif path.suffix in (".md", ".txt", ".ini") or path.name.endswith(".jinja"):
            data.decode("utf-8")
        elif path.suffix == ".pt":
            import io

            import torch

            if data != b"old checkpoint\n":
                torch.load(io.BytesIO(data), weights_only=False)
        elif path.suffix == ".safetensors":
            from safetensors.torch import load

            load(data)
        return True
    except Exception:  # noqa: BLE001 - any failure to read means the file is cut
        return False


def state(target: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the target file, or of every file under the target folder, leaving
    out writer temporaries (``.rftlab-tmp``)."""
    import hashlib

    target = Path(target)
    if target.is_file():
        files = [target]
        base = target.parent
    elif target.is_dir():
        files = [
            p for p in target.rglob("*") if p.is_file() and ".rftlab-tmp" not in str(p.relative_to(target))
        ]
        base = target
    else:
        return {}
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


# ----------------------------------------------------------------------------------- the hook


def install_kill_hook(target: Path, mode: str) -> None:
    """Make the process SIGKILL itself at ``mode`` while writing ``target`` (a file, or a folder: any
    file in it)."""
    target = Path(target).resolve()

    def ours(path) -> bool:
        p = Path(os.fsdecode(path)).resolve()
        if target.is_dir() or target.suffix == "":
            return p == target or target in p.parents or p.parent == target.parent
        return p == target or (p.parent == target.parent and p.name.startswith(f".{target.name[:100]}."))

    def die() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    real_replace, real_fdopen, real_open = os.replace, os.fdopen, os.open
    temporaries: set[int] = set()

    def open_(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if os.fsdecode(path).endswith(".rftlab-tmp") and ours(path):
            temporaries.add(fd)
        return fd

    class HalfWriter:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            self.handle.write(data[: max(1, len(data) // 2)])
            self.handle.flush()
            os.fsync(self.handle.fileno())
            die()

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            self.handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

    def fdopen_(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        return HalfWriter(handle) if mode == "mid-write" and fd in temporaries else handle

    def replace_(src, dst, *args, **kwargs):
        if not ours(dst):
            return real_replace(src, dst, *args, **kwargs)
        if mode in ("before-rename", "mid-write"):
            die()  # (mid-write: a folder writer's files were written by a library, not by atomic_writer)
        real_replace(src, dst, *args, **kwargs)
        die()

    os.open, os.fdopen, os.replace = open_, fdopen_, replace_


def main(argv: list[str]) -> int:
    name, work, mode = argv[0], Path(argv[1]), argv[2]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import tempfile

    tempfile.tempdir = str(work / "tmp")
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    writer = WRITERS[name]
    target = writer.setup(work)
    # the state before the write, for the parent to compare with (test bookkeeping, not a project writer)
    (work / "before.json").write_text(json.dumps({"target": str(target), "files": state(target)}))
    install_kill_hook(target, mode)
    writer.write(work)
    print("the write finished without passing the hook", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    raise SystemExit(main(sys.argv[1:]))
