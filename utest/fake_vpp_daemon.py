"""``vpp -c startup.conf`` stand-in for process-level tests: serves the fake VPP API on the
``socksvr { socket-name ... }`` of the given startup.conf until SIGTERM, with what VPP would
take from the file: an interface per ``dpdk { dev PCI { name X } }``, one per
``vdev net_af_packetN,iface=IF`` with IF's MAC address (read from sysfs, as DPDK's PMD does;
the daemon runs in the node's network namespace), the main thread on ``cpu { main-core }``
and a worker per ``corelist-workers`` CPU.

Run as ``python -m utest.fake_vpp_daemon -c STARTUP`` (with the repository on PYTHONPATH).
``FAKE_VPP_EXIT=<text>`` makes it print the text and exit 1 instead (VPP failing at start-up).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from libraries.testbed.topology import VppInstall
from utest.fake_vpp import FIXTURE_API_DIR, FakeVpp

REPO = Path(__file__).resolve().parent.parent


def fake_vpp_install(node: Any, directory: Path, fail: str | None = None) -> VppInstall:
    """A VPP install whose ``bin`` runs this daemon (``fail``: exit at start-up with that
    text), with its API and CLI sockets in ``node``'s work directory."""
    script = directory / "vpp"
    env = f"FAKE_VPP_EXIT={fail!r} " if fail else ""
    script.write_text(f"#!/bin/sh\n{env}PYTHONPATH={REPO} exec {sys.executable} "
                      f"-m utest.fake_vpp_daemon \"$@\"\n")
    script.chmod(0o755)
    return VppInstall(bin=str(script), vppctl="/bin/false", api_dir=FIXTURE_API_DIR,
                      api_socket=f"{node.workdir}/api.sock",
                      cli_socket=f"{node.workdir}/cli.sock",
                      plugins="/nonexistent/plugins")


def startup_state(text: str) -> dict[str, Any]:
    """FakeVpp's dpdk_interfaces, main_core and workers as VPP would take them from ``text``."""
    names = re.findall(r"\bdev\s+\S+\s*\{\s*name\s+(\S+)", text)
    macs = [Path(f"/sys/class/net/{iface}/address").read_text().strip()
            for iface in re.findall(r"^\s*vdev\s+net_af_packet\d+,iface=(\S+)", text, re.M)]
    main = re.search(r"\bmain-core\s+(\d+)", text)
    workers = re.search(r"\bcorelist-workers\s+([\d,-]+)", text)
    cpus: list[int] = []
    for part in workers.group(1).split(",") if workers else []:
        first, _, last = part.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return {"dpdk_interfaces": names, "dpdk_vdev_macs": macs,
            "main_core": int(main.group(1)) if main else 0, "workers": cpus}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "-c":
        print(f"usage: fake vpp -c STARTUP (got {argv})", file=sys.stderr)
        return 2
    failure = os.environ.get("FAKE_VPP_EXIT")
    if failure:
        print(failure, flush=True)
        return 1
    with open(argv[1], encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"socksvr\s*\{[^}]*socket-name\s+(\S+)", text)
    if match is None:
        print(f"{argv[1]}: no socksvr socket-name", file=sys.stderr)
        return 2
    fake = FakeVpp(match.group(1), **startup_state(text)).start()
    print(f"fake vpp: serving the API on {match.group(1)}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    fake.stop()
    print("fake vpp: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
