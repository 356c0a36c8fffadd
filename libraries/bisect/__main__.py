"""``python -m libraries.bisect``: see :mod:`libraries.bisect.cli`."""

import sys

from libraries.bisect.cli import main

sys.exit(main())
