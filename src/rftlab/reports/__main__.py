"""``python -m rftlab.reports``: see :mod:`rftlab.reports`."""

import sys

from rftlab.reports import main

if __name__ == "__main__":  # a spawned build worker imports this module under another name
    sys.exit(main())
