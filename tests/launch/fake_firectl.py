"""A strict fake ``firectl`` executable for tests (installed on PATH as ``firectl`` by the tests' fixtures).

It stands in for the Fireworks CLI, which needs an account and the network. It imitates the command pages
of the firectl CLI reference at docs.fireworks.ai/tools-sdks/firectl/commands as read for issue 32 (the
noun-verb generation of the pages: ``reinforcement-fine-tuning-job create`` with ``--source-job``, ``get``,
``list``, ``cancel``, ``resume``; ``dataset create``, ``get``, ``list``, ``download``; ``version``), and
the verb-noun spellings of the older pages (``firectl create reinforcement-fine-tuning-job``, ``firectl
list reinforcement-fine-tuning-jobs``, ``firectl resume reinforcement-fine-tuning-job``). What it checks:

- **flags**: each command takes the flags its page lists (``COMMAND_FLAGS``) plus the global ones
  (``-a/--account-id``, ``--api-key``, ``-p/--profile``); anything else exits 1 with a Go cobra CLI's
  ``Error: unknown flag: --x`` (or ``unknown shorthand flag``), a value flag without its value with ``Error:
  flag needs an argument``, and an integer or float flag that does not parse with ``Error: invalid
  argument``; ``--rl-loss-method`` takes ``grpo``, ``dapo`` or ``gspo-token``;
- **W&B** (the create page): once any W&B flag is set, ``--wandb-api-key``, ``--wandb-entity`` and
  ``--wandb-project`` are each required, else exit 1;
- **jobs**: ``create --job-id ID`` remembers the job and echoes it as the API would (camelCase fields
  from the flags); ``get`` of an unknown id exits 1 with "not found"; ``get`` of a known one replays
  ``job_get.<ID>.<n>.<ext>`` when the scenario has such files, else ``job_get.<n>.<ext>`` (the last one
  repeats; ``.json`` printed, ``.txt`` printed raw, ``.err`` to stderr with exit 1); ``create.err``
  makes ``create`` fail with its text;
- **resume** (its page: "Resumes a failed reinforcement fine-tuning job"; no ``-o`` flag): allowed only
  when the job's last reply was ``JOB_STATE_FAILED``, else exit 1; afterwards ``get`` replays
  ``resumed_get.<n>.<ext>``;
- **datasets**: ``create ID FILE`` remembers ``ID``; ``get`` of an unknown one exits 1; ``download ID
  --output-dir D`` copies ``datasets/ID.jsonl`` to ``D/dataset/ID/eval_results_dataset.jsonl``;
  ``list`` pages like the REST listing (``--page-size``, default 50; ``--page-token`` the page number,
  as the list pages describe it), answering ``{"datasets": [...], "nextPageToken": ..., "totalSize": n}``
  from ``datasets/*.jsonl`` and the created ids;
- **credentials** as the real CLI takes them (docs/platforms.md §1.2): ``--api-key``, else ``api_key`` from
  ``$HOME/.fireworks/auth.ini``; the account from ``-a``, else ``account_id`` from that file; no key:
  exit 1. ``$FAKE_FIRECTL_AUTH_LOG`` gets, per call, where the key came from, the key and the file modes;
- every call appends its argv (JSON) to ``$FAKE_FIRECTL_LOG``; with ``$FAKE_FIRECTL_PAUSE_DIR`` it writes
  its pid to ``<dir>/pid`` and waits (at most 60 s) for ``<dir>/go``, so a test can look at the process.

What it cannot know: how the real CLI prints ``-o json`` (camelCase is assumed), and the platform's
behaviour behind each call (states come from the scenario).
"""

import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

GLOBAL_VALUE = {"-a", "--account-id", "--api-key", "-p", "--profile"}
OUTPUT = {"-o", "--output"}
BOOL_ALWAYS = {"-h", "--help"}
INT, FLOAT, STR = "int", "float", "str"
CREATE_JOB_FLAGS = {
    "--base-model": STR, "--dataset": STR, "--output-model": STR, "--job-id": STR, "--warm-start-from": STR,
    "--source-job": STR, "--evaluator": STR, "--mcp-server": STR, "--display-name": STR,
    "--evaluation-dataset": STR, "--epochs": INT, "--learning-rate": FLOAT, "--max-context-length": INT,
    "--lora-rank": INT, "--batch-size": INT, "--batch-size-samples": INT, "--gradient-accumulation-steps": INT,
    "--learning-rate-warmup-steps": INT, "--optimizer-weight-decay": FLOAT,
    "--response-candidates-count": INT, "--temperature": FLOAT, "--top-p": FLOAT, "--top-k": INT,
    "--max-output-tokens": INT, "--extra-body": STR, "--rl-loss-method": STR, "--rl-kl-beta": FLOAT,
    "--chunk-size": INT, "--max-concurrent-rollouts": INT, "--max-concurrent-evaluations": INT,
    "--max-inference-replica-count": INT, "--wandb-api-key": STR, "--wandb-project": STR,
    "--wandb-entity": STR, "-o": STR, "--output": STR,
}  # fmt: skip
LIST_FLAGS = {
    "--filter": STR,
    "--order-by": STR,
    "--page-size": INT,
    "--page-token": STR,
    "-o": STR,
    "--output": STR,
}
COMMAND_FLAGS = {
    ("job", "create"): (CREATE_JOB_FLAGS, {"--wandb", "--eval-auto-carveout", "--dry-run", "--quiet"}),
    ("job", "get"): ({"-o": STR, "--output": STR}, {"--dry-run"}),
    ("job", "list"): (LIST_FLAGS, {"--dry-run", "--no-paginate"}),
    ("job", "cancel"): ({}, set()),
    ("job", "resume"): ({}, set()),
    ("dataset", "create"): (
        {
            "--display-name": STR,
            "--end-time": STR,
            "--external-url": STR,
            "--filter": STR,
            "--source": STR,
            "--start-time": STR,
            "-o": STR,
            "--output": STR,
        },
        {"--dry-run", "--eval-protocol-output", "--quiet"},
    ),  # fmt: skip
    ("dataset", "get"): ({"-o": STR, "--output": STR}, {"--dry-run"}),
    ("dataset", "list"): (LIST_FLAGS, {"--dry-run", "--no-paginate"}),
    ("dataset", "download"): ({"--output-dir": STR}, {"--download-lineage", "--quiet"}),
    ("version", ""): ({}, {"-l", "--long"}),
}
NOUNS = {
    "rftj": "job",
    "reinforcement-fine-tuning-job": "job",
    "reinforcement-fine-tuning-jobs": "job",
    "dataset": "dataset",
    "datasets": "dataset",
}
VERBS = {"create", "get", "list", "cancel", "resume", "download"}
WANDB = ("--wandb-api-key", "--wandb-entity", "--wandb-project")
LOSS_METHODS = {"grpo", "dapo", "gspo-token"}


class Refused(Exception):
    """firectl's own refusal: printed as ``Error: ...`` with exit 1."""


def command_of(argv):
    """``(noun, verb, rest)``: the command words (both spellings) and the arguments after them."""
    if argv[:1] == ["version"]:
        return "version", "", argv[1:]
    if len(argv) < 2:
        raise Refused('unknown command; run "firectl --help"')
    a, b = argv[0], argv[1]
    if a in NOUNS and b in VERBS:
        return NOUNS[a], b, argv[2:]
    if a in VERBS and b in NOUNS:
        return NOUNS[b], a, argv[2:]
    raise Refused(f'unknown command "{a} {b}" for "firectl"')


def parse(noun, verb, args):
    """``(flags, positionals)`` with every flag checked against the command's page (module docstring)."""
    if (noun, verb) not in COMMAND_FLAGS:
        raise Refused(f'unknown command "{verb}" for "firectl {noun}"')
    valued, booleans = COMMAND_FLAGS[(noun, verb)]
    valued = {**valued, **dict.fromkeys(GLOBAL_VALUE, STR)}
    flags, positionals, i = {}, [], 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            i += 1
            continue
        name, eq, value = arg.partition("=")
        if name in booleans or name in BOOL_ALWAYS:
            flags[name] = value if eq else "true"
            i += 1
            continue
        if name not in valued:
            kind = "shorthand flag" if not name.startswith("--") else "flag"
            raise Refused(f"unknown {kind}: {name}")
        if not eq:
            if i + 1 >= len(args):
                raise Refused(f"flag needs an argument: {name}")
            value, i = args[i + 1], i + 1
        flags[name] = check_type(name, value, valued[name])
        i += 1
    return flags, positionals


def check_type(name, value, kind):
    try:
        if kind == INT:
            return int(value)
        if kind == FLOAT:
            return float(value)
    except ValueError:
        raise Refused(
            f'invalid argument "{value}" for "{name}" flag: parsing "{value}": invalid syntax'
        ) from None
    return value


def credentials(argv):
    """``(source, key, account, details)`` the way firectl resolves them (module docstring)."""
    auth = Path(os.environ.get("HOME", "/nonexistent")) / ".fireworks" / "auth.ini"
    values, details = {}, {}
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


class Scenario:
    """The scenario folder: canned replies and what earlier calls created (``state.json``)."""

    def __init__(self, folder):
        self.dir = Path(folder)
        self.path = self.dir / "state.json"
        state = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.state = {"job": [], "dataset": [], "resumed": {}, "last_state": {}, **state}

    def save(self):
        self.path.write_text(json.dumps(self.state))

    def replies(self, job_id):
        resumed = self.state["resumed"].get(job_id, 0)
        prefixes = (
            [f"resumed_get.{job_id}.", "resumed_get."] if resumed else [f"job_get.{job_id}.", "job_get."]
        )
        for prefix in prefixes:
            found = [p for p in self.dir.glob(prefix + "*") if p.name[len(prefix) :].split(".")[0].isdigit()]
            if found:
                key = prefix + ("r" if resumed else "")
                return key, sorted(found, key=lambda p: int(p.name[len(prefix) :].split(".")[0]))
        return None, []


def job_body(flags, account):
    def pick(*names):
        return {k: flags[f] for f, k in names if f in flags}

    training = pick(("--base-model", "baseModel"), ("--output-model", "outputModel"), ("--epochs", "epochs"),
                    ("--learning-rate", "learningRate"), ("--lora-rank", "loraRank"),
                    ("--max-context-length", "maxContextLength"), ("--batch-size", "batchSize"))  # fmt: skip
    inference = pick(("--temperature", "temperature"), ("--top-p", "topP"), ("--top-k", "topK"),
                     ("--max-output-tokens", "maxOutputTokens"),
                     ("--response-candidates-count", "responseCandidatesCount"))  # fmt: skip
    body = {
        "name": f"accounts/{account}/reinforcementFineTuningJobs/{flags['--job-id']}",
        "state": "JOB_STATE_CREATING",
        "dataset": flags.get("--dataset"),
        "evaluator": flags.get("--evaluator"),
        "trainingConfig": training,
        "inferenceParameters": inference,
        "lossConfig": {
            "method": str(flags.get("--rl-loss-method", "")).upper().replace("-", "_"),
            "klBeta": flags.get("--rl-kl-beta"),
        },  # fmt: skip
    }
    if "--chunk-size" in flags:
        body["chunkSize"] = flags["--chunk-size"]
    if "--wandb" in flags:  # the key is never echoed
        body["wandbConfig"] = {
            "enabled": True,
            "project": flags["--wandb-project"],
            "entity": flags["--wandb-entity"],
        }
    return body


def create_job(sc, flags, account):
    if any(f in flags for f in (*WANDB, "--wandb")):
        missing = [f for f in WANDB if not flags.get(f)]
        if missing:
            raise Refused(f"{', '.join(missing)} required when W&B is enabled")
    method = flags.get("--rl-loss-method")
    if method is not None and method not in LOSS_METHODS:
        raise Refused(
            f'invalid argument "{method}" for "--rl-loss-method" flag: must be one of grpo, dapo, gspo-token'
        )
    for required in ("--dataset", "--evaluator", "--job-id"):
        if required not in flags:
            raise Refused(f"{required} is required")
    if (sc.dir / "create.err").exists():
        sys.stderr.write((sc.dir / "create.err").read_text())
        return 1
    if flags["--job-id"] in sc.state["job"]:
        raise Refused(f"reinforcement fine-tuning job {flags['--job-id']} already exists")
    sc.state["job"].append(flags["--job-id"])
    sc.save()
    print(json.dumps(job_body(flags, account)))
    return 0


def get_job(sc, job_id):
    if job_id not in sc.state["job"]:
        raise Refused(f"job {job_id} not found")
    key, replies = sc.replies(job_id)
    if not replies:
        sys.stderr.write("fake firectl: no canned job_get reply\n")
        return 1
    counter = sc.dir / f".count.{key}{job_id}"
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    reply = replies[min(n, len(replies) - 1)]
    if reply.suffix == ".err":
        sys.stderr.write(reply.read_text())
        return 1
    text = reply.read_text()
    try:
        sc.state["last_state"][job_id] = json.loads(text[text.index("{") :]).get("state")
    except ValueError:
        pass
    sc.save()
    sys.stdout.write(text)
    return 0


def resume_job(sc, job_id):
    if job_id not in sc.state["job"]:
        raise Refused(f"job {job_id} not found")
    if sc.state["last_state"].get(job_id) != "JOB_STATE_FAILED":
        raise Refused(
            f"job {job_id} is not in a failed state ({sc.state['last_state'].get(job_id)}); only failed jobs can be resumed"
        )
    sc.state["resumed"][job_id] = sc.state["resumed"].get(job_id, 0) + 1
    sc.save()
    print(f"Resumed reinforcement fine-tuning job {job_id}")
    return 0


def list_datasets(sc, flags):
    names = sorted({p.stem for p in (sc.dir / "datasets").glob("*.jsonl")} | set(sc.state["dataset"]))
    size = int(flags.get("--page-size", 50)) or 50
    page = int(flags.get("--page-token") or 0)
    items = names[page * size : (page + 1) * size]
    more = (page + 1) * size < len(names)
    print(json.dumps({"datasets": [{"name": f"accounts/x/datasets/{n}", "state": "READY"} for n in items],
                      "nextPageToken": str(page + 1) if more else "", "totalSize": len(names)}))  # fmt: skip
    return 0


def run(noun, verb, flags, pos, account, sc):
    if noun == "version":
        print("firectl version 0.0.0-fake (tests/launch/fake_firectl.py)")
        return 0
    if noun == "job" and verb == "create":
        return create_job(sc, flags, account)
    if noun == "job" and verb == "get":
        return get_job(sc, pos[0])
    if noun == "job" and verb == "resume":
        return resume_job(sc, pos[0])
    if noun == "job" and verb == "cancel":
        print(f"Cancelled reinforcement fine-tuning job {pos[0]}")
        return 0
    if noun == "dataset" and verb == "create":
        sc.state["dataset"].append(pos[0])
        sc.save()
        print(json.dumps({"name": f"accounts/{account}/datasets/{pos[0]}", "state": "UPLOADING"}))
        return 0
    if noun == "dataset" and verb == "get":
        if pos[0] not in sc.state["dataset"]:
            raise Refused(f"dataset {pos[0]} not found")
        print(json.dumps({"name": pos[0], "state": "READY"}))
        return 0
    if noun == "dataset" and verb == "list":
        return list_datasets(sc, flags)
    if noun == "dataset" and verb == "download":
        src = sc.dir / "datasets" / f"{pos[0]}.jsonl"
        if not src.exists():
            raise Refused(f"dataset {pos[0]} not found")
        out = Path(flags.get("--output-dir", ".")) / "dataset" / pos[0]
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "eval_results_dataset.jsonl")
        return 0
    sys.stderr.write(f"fake firectl: {noun} {verb} is not imitated\n")
    return 2


NEEDS_ID = {("job", "get"), ("job", "resume"), ("job", "cancel"), ("dataset", "get"), ("dataset", "download")}


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
    try:
        noun, verb, rest = command_of(argv)
        flags, pos = parse(noun, verb, rest)
        if noun != "version" and key is None:
            sys.stderr.write("Error: no API key: run 'firectl signin' or 'firectl set-api-key <key>'\n")
            return 1
        if (
            (noun, verb) in NEEDS_ID
            and len(pos) != 1
            or (noun, verb) == ("dataset", "create")
            and len(pos) != 2
        ):
            raise Refused(f"wrong number of arguments for {noun} {verb}: {pos}")
        return run(noun, verb, flags, pos, account, Scenario(os.environ["FAKE_FIRECTL_DIR"]))
    except Refused as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
