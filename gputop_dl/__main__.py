"""`python -m gputop_dl` runs the command-line interface."""

import sys

from gputop_dl.cli import main

sys.exit(main())
