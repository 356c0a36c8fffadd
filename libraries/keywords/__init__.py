"""The keywords layer: Robot Framework keyword libraries (Robot "L1"), adapters only.

One library per area (testbed, results, VPP, the lab pool, A/B runs, and one per case:
tcp_term, ssl_proxy with its capacity search, ebpf_stream, sslsniff; the SSL proxy's path
checks: ``https_paths``). A keyword translates Robot arguments and calls the plain modules of
``testbed``, ``tools``, ``results``, ``ab``, ``capacity`` and ``vpp``; the logic lives there.
Every case measures through the one case runner (``case``: plain or A/B, progress, telemetry).
A library finds another only through ``context`` (the testbed, the judge, the A/B session,
the VPP placement, the profiling settings, the running HTTPS server, pabot's value sets): the
one module doing Robot's library lookup.
The top layer: nothing in ``libraries`` imports it. Suites import the libraries through
``resources/*.resource``, e.g. ``Library    libraries.keywords.testbed.TestbedKeywords``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from robot.api import logger

if TYPE_CHECKING:
    from libraries.testbed.provision import Testbed


def log_folded(title: str, text: str) -> None:
    """Attach ``text`` (a rendered config, a tool's raw output) to log.html, folded."""
    logger.info(f"<details><summary>{html.escape(title)}</summary><pre>{html.escape(text)}"
                f"</pre></details>", html=True)


def tool_env(testbed: Testbed, node: str, tool: str,
             base: dict[str, str] | None = None) -> dict[str, str] | None:
    """The environment ``tool`` runs with on ``node``: the topology's ``tool_env`` for it (an
    A/B side's ``env`` too), with ``base`` (e.g. VPP's LD_PRELOAD and VCL_CONFIG) over it;
    None when there is neither."""
    merged = {**testbed.topology.nodes[node].tool_env.get(tool, {}), **(base or {})}
    return merged or None
