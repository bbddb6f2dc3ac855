"""`python -m services.watcher`: runs the watcher (see `services.watcher.main`)."""

import sys

from services.watcher.main import main

sys.exit(main())
