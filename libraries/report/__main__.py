"""``python -m libraries.report RESULTS_DIR... --html OUT``: see :mod:`libraries.report.cli`."""

import sys

from libraries.report.cli import main

sys.exit(main())
