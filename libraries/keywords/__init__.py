"""The keywords layer: Robot Framework keyword libraries (Robot "L1"), adapters only.

One library per area (testbed, results, VPP, the lab pool, A/B runs, and one per case:
tcp_term, ssl_proxy with its capacity search, ebpf_stream, sslsniff). A keyword converts
Robot's arguments, takes the suite's context and calls the plain modules below: each case's
logic in ``libraries.cases`` (which measures through its one case runner), the rest in
``testbed``, ``tools``, ``results``, ``ab``, ``capacity`` and ``vpp``. A library finds
another only through ``context`` (the testbed, the judge, the A/B session, the VPP
placement, the profiling settings, the HTTPS server started, pabot's value sets; and the
cases' ``CaseContext`` built from them): the one module doing Robot's library lookup.
``progress`` prints per-trial lines on Robot's console. The top layer: nothing in
``libraries`` imports it. Suites import the libraries through ``resources/*.resource``, e.g.
``Library    libraries.keywords.testbed.TestbedKeywords``.
"""

from __future__ import annotations

import html

from robot.api import logger


def log_folded(title: str, text: str) -> None:
    """Attach ``text`` (a rendered config, a tool's raw output) to log.html, folded."""
    logger.info(f"<details><summary>{html.escape(title)}</summary><pre>{html.escape(text)}"
                f"</pre></details>", html=True)

