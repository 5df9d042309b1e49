"""`python -m flinkstate` runs the CLI."""

import sys

from flinkstate.cli import main

sys.exit(main())
