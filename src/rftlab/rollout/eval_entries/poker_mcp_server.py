"""Launcher of the poker McpGym server, as ``MCPGymRolloutProcessor`` runs it:
``python poker_mcp_server.py --port <port>`` (binds 127.0.0.1; hands from
``$RFTLAB_POKER_HANDS`` or ``--hands``)."""

import sys
from pathlib import Path

try:
    import rftlab  # noqa: F401
except ImportError:  # run from a source tree without an install: put src/ on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rftlab.rollout.poker.mcp import main

if __name__ == "__main__":
    raise SystemExit(main())
