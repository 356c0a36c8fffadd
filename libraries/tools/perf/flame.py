"""Folded stacks and flame graphs from ``perf script`` text, with inferno (the Rust port of
Brendan Gregg's FlameGraph tools; setup.sh installs a pinned version from crates.io into the
project's tool folder). Runs on this machine, not on a node: the text comes back from the node.

- :func:`fold`: ``inferno-collapse-perf --kernel`` (kernel frames marked ``_[k]``);
- :func:`flame_graph`: ``inferno-flamegraph``, widths in ms of CPU (the weights are ns);
- :func:`diff_graph`: ``inferno-diff-folded -n a b | inferno-flamegraph``: b's widths, red
  where b spends a larger share than a, blue where smaller (normalised: the two profiles'
  totals need not match).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from libraries.testbed.errors import HostStackError, ToolMissing

TOOLS_DIR = Path("/opt/hoststack-perf/bin")
TIMEOUT = 120.0


def inferno(name: str, tools_dir: Path = TOOLS_DIR) -> str:
    """The path of inferno's ``name`` tool: the project's tool folder, else PATH."""
    own = tools_dir / name
    if own.is_file():
        return str(own)
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} is neither in {tools_dir} nor on PATH: setup.sh installs "
                          "inferno (crates.io) there; without it there is no profile")
    return found


def _run(command: list[str], text: str, what: str) -> str:
    try:
        result = subprocess.run(command, input=text, capture_output=True, text=True,
                                timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise HostStackError(f"{what}: `{' '.join(command)}` did not end within "
                             f"{TIMEOUT:g} s") from None
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise HostStackError(f"{what}: `{' '.join(command)}` exited {result.returncode}: "
                             f"{lines[-1] if lines else '(no output)'}")
    return result.stdout


def fold(perf_script: str, where: str, tools_dir: Path = TOOLS_DIR) -> str:
    """The folded stacks (text: ``stack weight`` lines) of ``perf script`` text (from
    ``where``, named in errors)."""
    command = [inferno("inferno-collapse-perf", tools_dir), "--kernel", "-q"]
    return _run(command, perf_script, f"folding {where}")


def flame_graph(folded: str, title: str, subtitle: str, output: Path,
                tools_dir: Path = TOOLS_DIR) -> Path:
    """Write the folded stacks ``folded`` as an interactive SVG flame graph to ``output``."""
    command = [inferno("inferno-flamegraph", tools_dir), "--title", title, "--subtitle",
               subtitle, "--countname", "ms of CPU", "--factor", "0.000001", "--hash", "-q"]
    output.write_text(_run(command, folded, f"flame graph {output.name}"))
    return output


def diff_graph(a: Path, b: Path, title: str, subtitle: str, output: Path,
               tools_dir: Path = TOOLS_DIR) -> Path:
    """Write the differential flame graph of the folded files ``a`` -> ``b`` to ``output``."""
    diffed = _run([inferno("inferno-diff-folded", tools_dir), "-n", "-q", str(a), str(b)], "",
                  f"differential of {a.name} and {b.name}")
    command = [inferno("inferno-flamegraph", tools_dir), "--title", title, "--subtitle",
               subtitle, "--countname", "ms of CPU", "--factor", "0.000001", "-q"]
    output.write_text(_run(command, diffed, f"flame graph {output.name}"))
    return output
