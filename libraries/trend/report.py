"""Alias: ``python -m libraries.trend.report`` is the old spelling of
``python -m libraries.report.run``."""

import sys

if __name__ == "__main__":
    from libraries.report.run import main

    sys.exit(main())
