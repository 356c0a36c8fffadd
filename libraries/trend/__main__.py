"""``python -m libraries.trend RESULTS... --html OUT``: see ``libraries.trend.cli``."""

import sys

from libraries.trend.cli import main

sys.exit(main())
