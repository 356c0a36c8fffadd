"""``python -m libraries.nightly --topology 3node``: see :mod:`libraries.nightly.runner`."""

import sys

from libraries.nightly.runner import main

sys.exit(main())
