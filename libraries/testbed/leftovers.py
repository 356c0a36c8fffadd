"""What a finished run left on this machine: the check behind "nothing is left after a suite,
failures included" (CI's end-to-end job runs it after the suites).

A run is known by the testbed prefixes its output names (``/tmp/hoststack-<prefix>``, the
namespaces ``<prefix>-<node>``) and the time it started. Left behind, for each prefix:

- a network namespace ``<prefix>-*`` or the testbed's state folder ``/run/hoststack/<prefix>``;
- a file or folder ``/tmp/hoststack-<prefix>*`` (every run folder on a node);
- a process whose command line or working folder names ``hoststack-<prefix>``;
- a process started after the run began that lives in a network namespace without a name:
  its testbed's namespace was deleted around it (nginx or iperf3 still running after
  teardown).

Reads ``/proc`` and the file system directly (no command, nothing changed).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
from pathlib import Path

from libraries.testbed.run_paths import WORKDIR_PATTERN, workdir_root
from libraries.testbed.teardown import NETNS_DIR, namespaces_with_prefix, state_dir

_GENERATED = re.compile(r'<robot [^>]*generated="([0-9T:.-]+)"')


def run_prefixes(output_xml: str) -> set[str]:
    """The testbed prefixes Robot's ``output.xml`` text names (the run's folders)."""
    return set(WORKDIR_PATTERN.findall(output_xml))


def run_started(output_xml: str) -> float:
    """When the run began (epoch seconds): ``output.xml``'s ``generated`` time, local time as
    Robot writes it. ``ValueError`` when the text has none."""
    found = _GENERATED.search(output_xml)
    if found is None:
        raise ValueError("output.xml: no <robot generated=...> time: not a Robot output file")
    return time.mktime(time.strptime(found.group(1).split(".")[0], "%Y-%m-%dT%H:%M:%S"))


def _net_ns(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _named_namespaces() -> set[str]:
    named = set()
    for path in NETNS_DIR.glob("*") if NETNS_DIR.is_dir() else ():
        try:
            named.add(f"net:[{path.stat().st_ino}]")
        except OSError:
            continue
    return named


def _process_start(pid: str) -> float | None:
    """Epoch seconds a process started (``/proc/<pid>/stat`` field 22), None once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in
                    Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, IndexError, StopIteration, ValueError):
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _describe(pid: str) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        args = "?"
    return f"process {pid}: {args[:200]}"


def leftovers(prefixes: set[str], since: float) -> list[str]:
    """Everything the run of ``prefixes`` that began at ``since`` left (see the module)."""
    found = [f"network namespace {name}" for prefix in sorted(prefixes)
             for name in namespaces_with_prefix(prefix)]
    found += [f"testbed state {state_dir(p)}" for p in sorted(prefixes) if state_dir(p).exists()]
    found += [str(path) for prefix in sorted(prefixes)
              for path in sorted(glob.glob(f"{workdir_root(prefix)}*"))]
    root_ns, named = _net_ns("self"), _named_namespaces()  # the checker runs in the root one
    # hoststack-<prefix>, in a command line or a working folder
    marks = tuple(Path(workdir_root(prefix)).name for prefix in prefixes)
    for pid in (entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue  # dead already, holding nothing
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except (OSError, IndexError):
            continue
        namespace, started = _net_ns(pid), _process_start(pid)
        if any(mark in args or mark in cwd for mark in marks):
            found.append(_describe(pid))
        elif namespace not in (None, root_ns) and namespace not in named and \
                started is not None and started >= since:
            found.append(f"{_describe(pid)} (in a network namespace without a name, "
                         f"{namespace})")
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m libraries.testbed.leftovers OUTPUT_XML [--settle S]``: exit 1 listing
    what the run left, 0 when it left nothing, 2 on an unreadable output file."""
    parser = argparse.ArgumentParser(
        prog="python -m libraries.testbed.leftovers",
        description="Check that a finished Robot run left no namespace, process or file.")
    parser.add_argument("output", help="the run's output.xml")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds to wait for processes still exiting (default 10)")
    args = parser.parse_args(argv)
    try:
        text = Path(args.output).read_text(encoding="utf-8", errors="replace")
        since = run_started(text)
    except (OSError, ValueError) as error:
        print(f"error: {args.output}: {error}", file=sys.stderr)
        return 2
    prefixes = run_prefixes(text)
    deadline = time.monotonic() + args.settle
    while (found := leftovers(prefixes, since)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if found:
        print(f"{args.output}: the run (testbeds {', '.join(sorted(prefixes))}) left:",
              *(f"  - {item}" for item in found), sep="\n")
        return 1
    print(f"{args.output}: nothing left by the run's {len(prefixes)} testbed(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
