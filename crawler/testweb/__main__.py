"""`python -m crawler.testweb ...`: the same as `crawler testweb ...`."""

from .cli import main

raise SystemExit(main())
