"""`python -m corecast ...`: same as the `corecast` command."""

from corecast.cli import main

raise SystemExit(main())
