"""``python -m vmc``: same as the ``vmc`` command."""

import sys

from vmc.cli import main

sys.exit(main())
