"""``python -m tickwork``: the same as the ``tickwork`` console script."""

from tickwork.cli import main

raise SystemExit(main())
