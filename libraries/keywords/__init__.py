"""Robot Framework keyword libraries (Robot "L1"): thin typed surfaces over the plain modules.

Suites import them by module name, e.g. ``Library    libraries.keywords.testbed.TestbedKeywords``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robot.libraries.BuiltIn import BuiltIn

if TYPE_CHECKING:
    from libraries.testbed import Testbed

TESTBED_LIBRARY = "libraries.keywords.testbed.TestbedKeywords"


def current_testbed() -> Testbed:
    """The testbed set up by this suite's ``Set Up Testbed`` (fails clearly when there is none)."""
    library = BuiltIn().get_library_instance(TESTBED_LIBRARY)
    return library.testbed
