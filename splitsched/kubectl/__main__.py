"""``python -m splitsched.kubectl``: what the krew archive's shim runs
(deploy/krew/kubectl-splitsched)."""

import sys

from splitsched.kubectl import main

sys.exit(main())
