"""The keywords layer: Robot Framework keyword libraries (Robot "L1"), adapters only.

One library per area (the suite's settings and state, testbed, results, VPP, the lab pool, A/B
runs, and one per case: tcp_term, ssl_proxy with its capacity search, ebpf_stream, sslsniff).
A keyword converts Robot's arguments, takes the suite's context and makes one call, without a
branch, into the plain modules below: each case's logic in ``libraries.cases`` (which measures
through its one case runner), the rest in ``testbed``, ``tools``, ``results``, ``ab``,
``capacity`` and ``vpp`` (tested: ``utest/test_layers.py``). The suite's state (its settings,
resolved once at its set-up, the testbed, the A/B session, the VPPs, each case's set-up) is one
object (``libraries.cases.suite_state.SuiteState``) reached through ``context``: the one module
that reads Robot's variables and does Robot's library lookup (the run folder, pabot's value
sets).
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

