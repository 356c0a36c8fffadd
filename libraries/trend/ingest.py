"""Alias: ``python -m libraries.trend.ingest`` is the old spelling of
``python -m libraries.history.ingest``."""

import sys

if __name__ == "__main__":
    from libraries.history.ingest import main

    sys.exit(main())
