"""python -m m2c ... (same as the ``m2c`` command)."""

import sys

from m2c.cli import main

sys.exit(main())
