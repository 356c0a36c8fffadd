"""``python -m libraries.testbed up|down|status TOPOLOGY``: see ``libraries.testbed.provision``."""

import sys

from libraries.testbed.provision import main

sys.exit(main())
