"""Alias: ``python -m libraries.trend`` is the old spelling of ``python -m libraries.report``."""

import sys

from libraries.report.cli import main

sys.exit(main())
