"""``python -m splitsched.demo`` (``make demo``)."""

import sys

from splitsched.demo import main

sys.exit(main())
