"""``python -m splitsched.testing.realnode``."""

import sys

from splitsched.testing.realnode.cli import main

sys.exit(main())
