"""``python -m swift`` = ``ppspp``."""

import sys

from swift.cli import main

sys.exit(main())
