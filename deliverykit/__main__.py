import sys

from deliverykit.cli import main

sys.exit(main())
