"""wrk and wrk2: the closed-loop (wrk) and constant-rate (wrk2) HTTP load generators.

Owns the command line (``WrkOptions``), the capability probe that tells wrk2 from wrk (both
binaries say 4.x; wrk2's usage lists ``-R``), the runner with its hard timeout and CPU
accounting (``run``), and the strict parser of both tools' summaries, latency percentiles
included (``output``): garbage raises ``ParseError`` quoting it.

Other tool families use only the names below (``from libraries.tools.wrk import ...``).
"""

from libraries.tools.wrk.output import WrkResult, parse_wrk_output
from libraries.tools.wrk.run import WrkOptions, run_wrk

__all__ = ["WrkOptions", "WrkResult", "parse_wrk_output", "run_wrk"]
