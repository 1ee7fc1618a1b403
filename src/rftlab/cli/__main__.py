import sys

from rftlab.cli import main

sys.exit(main())
