"""``eval-protocol upload`` with the evaluator id actually applied (docs/platforms.md §1.9).

eval-protocol 0.3.33 builds its ``upload`` options from the Fireworks SDK's ``evaluators.create`` signature:
``--id`` is registered as an alias of ``--evaluator-id`` (argparse field ``evaluator_id``) and ``--name`` of
``--evaluator-display-name``, but ``upload_command`` reads ``args.id`` and ``args.display_name``, fields the
parser never sets. So ``eval-protocol upload --id X`` ignores X and uploads under the id it derives from the
entry's file and function names (``spectrum_turn.py::test_spectrum_turn`` → ``spectrum-turn-test-spectrum-turn``),
while the RFT job points at X.

This module parses the same command line with eval-protocol's own parser (so a flag it rejects is
rejected here too), copies the parsed id into the field ``upload_command`` reads, and calls eval-protocol's
``upload_command``: everything after parsing is eval-protocol's code. ``rftlab fireworks upload-evaluator``
runs it in the staged evaluator folder with the running interpreter::

    python -m rftlab.launch.ep_upload upload --entry <path>::<test> --id <ev-id> --env-file .env.empty --force --yes

Unlike ``eval-protocol``'s ``main`` it reads no ``.env``/``.env.dev`` file (nothing but the staged folder's
empty env file is uploaded as a secret, G11).

A failed code upload is an error here. eval-protocol 0.3.33's ``Evaluator.create`` catches any failure of
the signed-URL PUT of the code tarball (and of ``validateUpload``), logs the warning ``Code upload failed
(evaluator created but code not uploaded): ...`` and returns as if it had succeeded, so its ``upload``
exits 0 for an evaluator without code. The shim watches eval-protocol's log for that warning and then
exits ``CODE_UPLOAD_EXIT`` with a one-line message on stderr.
"""

from __future__ import annotations

import logging
import os
import sys

CODE_UPLOAD_FAILED = "Code upload failed (evaluator created but code not uploaded)"
CODE_UPLOAD_EXIT = 3


class _CodeUploadWatch(logging.Handler):
    """Keeps every log message of eval-protocol that reports a failed code upload."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if CODE_UPLOAD_FAILED in message:
            self.failures.append(message)


def parse_upload_args(argv: list[str]):
    """``argv`` (starting with ``upload``) parsed by eval-protocol's parser, with the fields
    ``upload_command`` reads filled from the ones the parser sets."""
    from eval_protocol.cli import build_parser

    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command != "upload":
        parser.error("only the 'upload' command is supported here")
    # upload_command reads args.id / args.display_name / args.description (see the module docstring)
    for read_as, parsed_as in (
        ("id", "evaluator_id"),
        ("display_name", "evaluator_display_name"),
        ("description", "evaluator_description"),
    ):
        if getattr(args, read_as, None) is None and getattr(args, parsed_as, None) is not None:
            setattr(args, read_as, getattr(args, parsed_as))
    return args


def main(argv: list[str] | None = None) -> int:
    from eval_protocol.cli_commands.common import setup_logging
    from eval_protocol.cli_commands.upload import upload_command

    args = parse_upload_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.verbose, False)
    cwd = os.getcwd()  # as eval-protocol's main does: the evaluator folder is importable
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    watch = _CodeUploadWatch()
    logging.getLogger("eval_protocol").addHandler(watch)
    try:
        code = int(upload_command(args) or 0)
    finally:
        logging.getLogger("eval_protocol").removeHandler(watch)
    if watch.failures and code == 0:
        detail = " ".join(watch.failures[-1].split())[:600]
        print(
            f"rftlab: error: the evaluator was created but its code was not uploaded ({detail}); a job on it "
            "would fail. Nothing else was uploaded; fix the cause and upload again",
            file=sys.stderr,
            flush=True,
        )
        return CODE_UPLOAD_EXIT
    return code


if __name__ == "__main__":
    raise SystemExit(main())
