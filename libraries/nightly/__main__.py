"""``python -m libraries.nightly --topology 3node``: see :mod:`libraries.nightly.nightly_run`."""

import sys

from libraries.nightly.nightly_run import main

sys.exit(main())
