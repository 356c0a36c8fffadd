"""``python -m libraries.report RESULTS_DIR... --html OUT``: see
:mod:`libraries.report.trend_command`."""

import sys

from libraries.report.trend_command import main

sys.exit(main())
