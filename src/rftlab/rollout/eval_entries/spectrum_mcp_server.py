"""Launcher of the spectrum McpGym server, as ``MCPGymRolloutProcessor`` runs it:
``python spectrum_mcp_server.py --port <port>`` (binds 127.0.0.1; memory channel from
``$RFTLAB_SPECTRUM_MCP_MEMORY`` or ``--memory``)."""

import sys
from pathlib import Path

try:
    import rftlab  # noqa: F401
except ImportError:  # run from a source tree without an install: put src/ on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rftlab.rollout.spectrum.mcp import main

if __name__ == "__main__":
    raise SystemExit(main())
