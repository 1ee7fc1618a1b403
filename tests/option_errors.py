"""argparse's refusal of one option's value (``rftlab.cli.argtypes``), as tests of every family check it.

A refused value prints the usage, then ``rftlab <command>: error: argument <flag>: must be ...``, and exits 2
(``SystemExit`` from ``main``)."""

from __future__ import annotations

import re

import pytest

from rftlab.cli import main


def refused_option(argv, capsys, flag: str, *fragments: str) -> str:
    """Run ``rftlab argv``; assert argparse refused ``flag`` (exit 2, the flag and every fragment on its
    error line, nothing on stdout) and return that line."""
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return assert_refused(stopped.value.code, out, err, flag, *fragments)


def assert_refused(code, out: str, err: str, flag: str, *fragments: str) -> str:
    """``err`` is argparse's refusal of ``flag``: a usage line and one error line, exit 2, no stdout."""
    assert code == 2, err
    assert out == "" and "Traceback" not in err, err
    lines = err.splitlines()
    assert lines[0].startswith("usage: rftlab"), err
    line = lines[-1]
    assert re.match(rf"rftlab [a-z0-9 -]+: error: argument {re.escape(flag)}: must be ", line), err
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line
