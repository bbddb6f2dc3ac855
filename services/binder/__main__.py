"""``python -m services.binder``: run the binder service (see ``services.binder.main``)."""

from services.binder.main import main

raise SystemExit(main())
