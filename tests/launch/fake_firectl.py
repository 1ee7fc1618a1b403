"""A fake ``firectl`` executable for tests (installed on PATH as ``firectl`` by ``install_fake_firectl``).

It stands in for the Fireworks CLI, which needs an account and the network. Behaviour:

- every call appends its full argv (as JSON) to ``$FAKE_FIRECTL_LOG``;
- ``dataset create ID FILE`` / ``rftj create --job-id ID`` remember the id in the scenario folder and
  print a JSON resource; ``get`` of an id never created exits 1 with "not found" (like the real CLI);
- ``rftj get ID`` of a created job replays ``job_get.<n>.<ext>`` from ``$FAKE_FIRECTL_DIR`` in order (the
  last one repeats): ``.json`` is printed with exit 0, ``.txt`` printed raw (malformed JSON), ``.err``
  printed to stderr with exit 1;
- ``dataset download ID --output-dir D`` copies ``datasets/ID.jsonl`` to ``D/dataset/ID/eval_results_dataset.jsonl``
  (missing: exit 1); ``dataset list`` lists ``datasets/*.jsonl``;
- ``create.err`` in the scenario folder makes ``rftj create`` fail with that stderr;
- both spellings (noun-verb, verb-noun) and the ``rftj`` alias are accepted;
- credentials as the real CLI takes them (docs/platforms.md §1.2): ``--api-key`` on the command line, else
  ``api_key`` from ``$HOME/.fireworks/auth.ini`` (plain ``key = value`` lines, as ``firectl set-api-key``
  writes them); the account from ``-a``, else ``account_id`` from the same file. Without a key it exits 1
  ("no API key"). When ``$FAKE_FIRECTL_AUTH_LOG`` is set, each call appends where the key came from, the
  key, and the modes of the auth file and its folder (so tests can check what firectl received);
- when ``$FAKE_FIRECTL_PAUSE_DIR`` is set, it writes its pid to ``<dir>/pid`` and waits (at most 60 s) for
  ``<dir>/go`` before doing anything else, so a test can look at the live process (``/proc/<pid>``).
"""

import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

VERBS = {"create", "get", "list", "cancel", "resume", "delete", "download"}
ALIASES = {
    "rftj": "job",
    "reinforcement-fine-tuning-job": "job",
    "reinforcement-fine-tuning-jobs": "job",
    "datasets": "dataset",
}


def credentials(argv):
    """``(source, key, account, details)`` the way firectl resolves them (module docstring)."""
    auth = Path(os.environ.get("HOME", "/nonexistent")) / ".fireworks" / "auth.ini"
    values = {}
    details = {}
    if auth.is_file():
        details = {
            "file_mode": oct(stat.S_IMODE(auth.stat().st_mode)),
            "dir_mode": oct(stat.S_IMODE(auth.parent.stat().st_mode)),
            "home_mode": oct(stat.S_IMODE(auth.parent.parent.stat().st_mode)),
        }
        for line in auth.read_text(encoding="utf-8").splitlines():
            name, eq, value = line.partition("=")
            if eq:
                values[name.strip()] = value.strip()
    account = argv[argv.index("-a") + 1] if "-a" in argv else values.get("account_id")
    if "--api-key" in argv:
        return "argv", argv[argv.index("--api-key") + 1], account, details
    if values.get("api_key"):
        return "auth.ini", values["api_key"], account, details
    return None, None, account, details


def main(argv):
    pause = os.environ.get("FAKE_FIRECTL_PAUSE_DIR")
    if pause:
        Path(pause, "pid").write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not Path(pause, "go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    with open(os.environ["FAKE_FIRECTL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    source, key, account, details = credentials(argv)
    if os.environ.get("FAKE_FIRECTL_AUTH_LOG"):
        with open(os.environ["FAKE_FIRECTL_AUTH_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"source": source, "key": key, "account": account, **details}) + "\n")
    if key is None:
        sys.stderr.write("Error: no API key: run 'firectl signin' or 'firectl set-api-key <key>'\n")
        return 1
    scenario = Path(os.environ["FAKE_FIRECTL_DIR"])
    words = []
    skip = False
    for a in argv:  # positional words, skipping flag values
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = "=" not in a and a not in ("--quiet", "--wandb")
            continue
        words.append(a)
    first, second = words[0], words[1]
    if first in VERBS:
        verb, noun = first, ALIASES.get(second, second)
    else:
        noun, verb = ALIASES.get(first, first), second
    rest = words[2:]
    state = scenario / "state.json"
    known = json.loads(state.read_text()) if state.exists() else {"job": [], "dataset": []}

    def flag(name):
        return argv[argv.index(name) + 1] if name in argv else None

    if verb == "create":
        if noun == "job" and (scenario / "create.err").exists():
            sys.stderr.write((scenario / "create.err").read_text())
            return 1
        ident = flag("--job-id") if noun == "job" else rest[0]
        known[noun].append(ident)
        state.write_text(json.dumps(known))
        body = {"name": f"accounts/{flag('-a')}/{noun}s/{ident}", "state": "JOB_STATE_CREATING"}
        if noun == "job":
            body.update(
                dataset=flag("--dataset"),
                evaluator=flag("--evaluator"),
                trainingConfig={
                    "epochs": int(flag("--epochs")),
                    "learningRate": float(flag("--learning-rate")),
                },
                inferenceParameters={
                    "temperature": float(flag("--temperature")),
                    "responseCandidatesCount": int(flag("--response-candidates-count")),
                },
            )
        print(json.dumps(body))
        return 0
    if verb == "get":
        ident = rest[0]
        if ident not in known.get(noun, []):
            sys.stderr.write(f"Error: {noun} {ident} not found\n")
            return 1
        if noun == "dataset":
            print(json.dumps({"name": ident, "state": "READY"}))
            return 0
        counter = scenario / ".job_get.count"
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        replies = sorted(scenario.glob("job_get.*.*"), key=lambda p: int(p.name.split(".")[1]))
        if not replies:
            sys.stderr.write("fake firectl: no canned job_get reply\n")
            return 1
        reply = replies[min(n, len(replies) - 1)]
        if reply.suffix == ".err":
            sys.stderr.write(reply.read_text())
            return 1
        sys.stdout.write(reply.read_text())
        return 0
    if verb == "list" and noun == "dataset":
        names = [p.stem for p in sorted((scenario / "datasets").glob("*.jsonl"))]
        print(json.dumps({"datasets": [{"name": f"accounts/x/datasets/{n}"} for n in names]}))
        return 0
    if verb == "download" and noun == "dataset":
        ident = rest[0]
        src = scenario / "datasets" / f"{ident}.jsonl"
        if not src.exists():
            sys.stderr.write(f"Error: dataset {ident} not found\n")
            return 1
        out = Path(flag("--output-dir")) / "dataset" / ident
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "eval_results_dataset.jsonl")
        return 0
    if verb == "cancel":
        print("cancelled")
        return 0
    sys.stderr.write(f"fake firectl: unsupported command {noun} {verb}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
