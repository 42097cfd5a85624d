"""``python -m jaxlsp``: the same as the ``jaxlsp`` console script."""

from jaxlsp.cli import main

raise SystemExit(main())
