"""``rftlab serve ...``: long-running local services.

    rftlab serve tinker [--host 127.0.0.1] [--port 8777] [--model-dir DIR ...] [--device cpu|cuda]
                        [--storage DIR] [--api-key-env TINKER_API_KEY] [--keys-file FILE]
                        [--sampler-dtype bfloat16]
                        [--sampled-logprobs model|sampling]
                        [--session-timeout S] [--stop-after S] [--log-level info]

    rftlab serve fireworks [--host 127.0.0.1] [--port 8778] [--storage DIR] [--api-key-env FIREWORKS_API_KEY]
                           [--account-id ID] [--keys-file FILE] [--policy accumulate] [--policy-url URL]
                           [--fail-epoch K] [--drop-chunk K:N] [--archive-epoch K] [--build-seconds S]
                           [--signed-url-ttl S] [--max-running-jobs N]
                           [--stop-after S] [--log-level info]

``serve tinker`` puts the local tinker-compatible backend behind the tinker SDK's HTTP protocol, so the
unmodified SDK and tinker-cookbook recipes train and sample on this machine: point them at it with
``export TINKER_BASE_URL=http://127.0.0.1:8777 TINKER_API_KEY=<the server's key>`` (docs/platforms.md §3.12):
the key in ``$TINKER_API_KEY`` when the server starts, else the one it generates into ``<storage>/api_key``
(mode 0600; the ``api_key`` log line names the file). Logs are JSON lines on stderr; Ctrl-C or SIGTERM stops
it cleanly. Exit 2 for a configuration it refuses (a busy port, a folder that is not a model, a number that
is not finite, a key file others can read).

``serve fireworks`` is a local Fireworks-compatible control plane (``rftlab.launch.local_fireworks``,
docs/platforms.md §5): the REST endpoints the unmodified ``fireworks-ai`` SDK and eval-protocol call
(``FIREWORKS_BASE_URL`` / ``FIREWORKS_API_BASE``), with jobs whose epochs run the uploaded evaluator against
the local policy server and write ``rft-evalv3-<job>-epoch-<k>`` datasets. Loopback only; JSON-line logs
on stderr; Ctrl-C or SIGTERM stops it cleanly (running jobs become FAILED and can be resumed).
"""

from __future__ import annotations

import argparse

from rftlab.cli import UsageError
from rftlab.cli.argtypes import epoch_chunk


def _cmd_tinker(args: argparse.Namespace) -> int:
    from rftlab.training.local_tinker.server import ServeConfig, ServeError, serve_tinker

    config = ServeConfig(
        host=args.host,
        port=args.port,
        model_dirs=args.model_dir,
        device=args.device,
        storage=args.storage,
        api_key_env=args.api_key_env,
        keys_file=args.keys_file,
        sampler_dtype=args.sampler_dtype,
        sampled_logprobs=args.sampled_logprobs,
        log_level=args.log_level,
        session_timeout_s=args.session_timeout,
        stop_after_s=args.stop_after,
    )
    try:
        return serve_tinker(config)
    except ServeError as exc:
        raise UsageError(str(exc)) from None


def _cmd_fireworks(args: argparse.Namespace) -> int:
    from rftlab.launch.local_fireworks.server import FireworksServeConfig, ServeError, serve_fireworks

    config = FireworksServeConfig(
        host=args.host,
        port=args.port,
        storage=args.storage,
        api_key_env=args.api_key_env,
        account_id=args.account_id,
        keys_file=args.keys_file,
        policy=args.policy,
        policy_url=args.policy_url,
        fail_epoch=args.fail_epoch,
        drop_chunk=args.drop_chunk,
        archive_epoch=args.archive_epoch,
        build_seconds=args.build_seconds,
        signed_url_ttl_s=args.signed_url_ttl,
        max_running_jobs=args.max_running_jobs,
        log_level=args.log_level,
        stop_after_s=args.stop_after,
    )
    try:
        return serve_fireworks(config)
    except ServeError as exc:
        raise UsageError(str(exc)) from None


def _register_fireworks(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser(
        "fireworks",
        help="serve a local Fireworks-compatible control plane (datasets, evaluators, RFT jobs)",
        description="Serve a local Fireworks-compatible control plane: export FIREWORKS_BASE_URL (the SDK) and "
        "FIREWORKS_API_BASE (eval-protocol) as http://127.0.0.1:8778 and FIREWORKS_API_KEY=<an accepted key>, "
        "then upload evaluators, create datasets and RFT jobs with the unmodified clients. A job's epochs run "
        "the uploaded evaluator against the local policy server and write rft-evalv3-<job>-epoch-<k> "
        "datasets. JSON-line logs on stderr; Ctrl-C stops it cleanly.",
    )
    f.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    f.add_argument("--port", type=int, default=8778, help="port (default 8778; 0 picks a free one)")
    f.add_argument(
        "--storage",
        default=None,
        metavar="DIR",
        help="where resources, uploads and epoch datasets are kept (made 0700; default .runs_local_fireworks "
        "in the project); a restart on the same folder keeps them",
    )
    f.add_argument(
        "--api-key-env",
        default="FIREWORKS_API_KEY",
        metavar="VAR",
        help="accept the key in $VAR for --account-id (default FIREWORKS_API_KEY); when unset, the key in "
        "<storage>/api_key, generated (mode 0600) at the first start",
    )
    f.add_argument(
        "--account-id",
        default=None,
        metavar="ID",
        help="the account of that key (default $FIREWORKS_ACCOUNT_ID, else 'local')",
    )
    f.add_argument(
        "--keys-file",
        default=None,
        metavar="FILE",
        help="accept the keys in FILE instead (mode 0600; '<account-id> <key>' a line, # comments): one account "
        "per key",
    )
    _fireworks_run_options(f)
    f.set_defaults(func=_cmd_fireworks)


def _fireworks_run_options(f: argparse.ArgumentParser) -> None:
    f.add_argument(
        "--policy",
        default="accumulate",
        metavar="NAME",
        help="the model rollouts sample (a policy of the local policy server, or a model of --policy-url; "
        "default accumulate)",
    )
    f.add_argument(
        "--policy-url",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible endpoint for rollouts (default: start the project's policy server)",
    )
    f.add_argument(
        "--fail-epoch",
        type=int,
        default=None,
        metavar="K",
        help="the first attempt of every job fails with RESOURCE_EXHAUSTED at epoch K (to exercise resume)",
    )
    f.add_argument(
        "--drop-chunk",
        type=epoch_chunk(),
        default=None,
        metavar="K:N",
        help="chunk N of epoch K of every chunked job is never written (an epoch download missing a chunk)",
    )
    f.add_argument(
        "--archive-epoch",
        type=int,
        default=None,
        metavar="K",
        help="every job that reaches epoch K becomes JOB_STATE_ARCHIVED (terminal, not resumable)",
    )
    f.add_argument(
        "--build-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="keep an uploaded evaluator BUILDING at least S seconds (default 0)",
    )
    f.add_argument(
        "--signed-url-ttl",
        type=float,
        default=3600.0,
        metavar="S",
        help="signed upload/download URLs expire after S seconds (default 3600; 0 refuses every upload PUT)",
    )
    f.add_argument(
        "--max-running-jobs", type=int, default=1, metavar="N", help="jobs that run at once (default 1)"
    )
    f.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="S",
        help="stop cleanly after S seconds (scripts and tests; default: run until Ctrl-C or SIGTERM)",
    )
    f.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the lowest level written to the JSON log on stderr (default info)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="local services: a Tinker backend and a Fireworks control plane")
    sub = p.add_subparsers(dest="serve_command", metavar="SERVICE")
    sub.required = True
    t = sub.add_parser(
        "tinker",
        help="serve the local backend over the tinker SDK's HTTP protocol (TINKER_BASE_URL)",
        description="Serve the local tinker-compatible backend over the tinker SDK's HTTP protocol: "
        "export TINKER_BASE_URL=http://127.0.0.1:8777 and TINKER_API_KEY=<the server's key> (the key in "
        "$TINKER_API_KEY at start, else the one written to <storage>/api_key) and run the SDK or a "
        "tinker-cookbook recipe unmodified. JSON-line logs on stderr; Ctrl-C stops it cleanly.",
    )
    t.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback)")
    t.add_argument("--port", type=int, default=8777, help="port (default 8777; 0 picks a free one)")
    t.add_argument(
        "--model-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a local Hugging Face model directory to serve (repeatable); the built-in tiny models are "
        "always served",
    )
    t.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where models run (default cpu)")
    t.add_argument(
        "--storage",
        default=None,
        metavar="DIR",
        help="checkpoint folder; tinker:// paths stay valid across restarts on the same folder "
        "(default .runs_local_tinker/service in the project)",
    )
    t.add_argument(
        "--api-key-env",
        default="TINKER_API_KEY",
        metavar="VAR",
        help="accept exactly the key in $VAR (default TINKER_API_KEY); when unset, the key in "
        "<storage>/api_key, generated (mode 0600) at the first start",
    )
    t.add_argument(
        "--keys-file",
        default=None,
        metavar="FILE",
        help="accept the keys in FILE (mode 0600; one a line, # comments), each its own identity: a group "
        "sharing one server on purpose (docs/platforms.md §3.12)",
    )
    t.add_argument(
        "--sampler-dtype",
        choices=("float32", "bfloat16", "float64"),
        default=None,
        help="run samplers in this dtype to emulate the hosted sampler/trainer mismatch (default: same)",
    )
    t.add_argument(
        "--sampled-logprobs",
        choices=("model", "sampling"),
        default="model",
        help="logprobs reported for sampled tokens: of the model's distribution (default), or of the "
        "tempered, top-k/top-p filtered one sampled from (docs/platforms.md §3.12)",
    )
    t.add_argument(
        "--session-timeout",
        type=float,
        default=None,
        metavar="S",
        help="release a session's models after S seconds without a heartbeat (default 300)",
    )
    t.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="S",
        help="stop cleanly after S seconds (scripts and tests; default: run until Ctrl-C or SIGTERM)",
    )
    t.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the lowest level written to the JSON log on stderr (default info)",
    )
    t.set_defaults(func=_cmd_tinker)
    _register_fireworks(sub)
