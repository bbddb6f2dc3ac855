"""``python -m splitsched.testing.controlplane up|down|status``."""

import sys

from splitsched.testing.controlplane.cli import main

sys.exit(main())
