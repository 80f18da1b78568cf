"""``python -m bayesmkl``: the ``bayesmkl`` command line."""

from bayesmkl.cli import main

raise SystemExit(main())
