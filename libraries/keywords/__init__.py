"""Robot Framework keyword libraries (Robot "L1"): thin typed surfaces over the plain modules.

Suites import them by module name, e.g. ``Library    libraries.keywords.testbed.TestbedKeywords``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from robot.api import logger
from robot.libraries.BuiltIn import BuiltIn

if TYPE_CHECKING:
    from libraries.testbed import Testbed

TESTBED_LIBRARY = "libraries.keywords.testbed.TestbedKeywords"


def log_folded(title: str, text: str) -> None:
    """Attach ``text`` (a rendered config, a tool's raw output) to log.html, folded."""
    logger.info(f"<details><summary>{html.escape(title)}</summary><pre>{html.escape(text)}"
                f"</pre></details>", html=True)


def current_testbed() -> Testbed:
    """The testbed set up by this suite's ``Set Up Testbed`` (fails clearly when there is none)."""
    library = BuiltIn().get_library_instance(TESTBED_LIBRARY)
    return library.testbed
