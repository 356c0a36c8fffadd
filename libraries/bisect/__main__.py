"""``python -m libraries.bisect``: see :mod:`libraries.bisect.bisect_command`."""

import sys

from libraries.bisect.bisect_command import main

sys.exit(main())
