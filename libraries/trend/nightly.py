"""Alias: ``python -m libraries.trend.nightly`` is the old spelling of
``python -m libraries.nightly``."""

import sys

if __name__ == "__main__":
    from libraries.nightly.runner import main

    sys.exit(main())
