"""``vpp -c startup.conf`` stand-in for process-level tests: serves the fake VPP API on the
``socksvr { socket-name ... }`` of the given startup.conf until SIGTERM.

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


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "-c":
        print(f"usage: fake vpp -c STARTUP (got {argv})", file=sys.stderr)
        return 2
    failure = os.environ.get("FAKE_VPP_EXIT")
    if failure:
        print(failure, flush=True)
        return 1
    with open(argv[1], encoding="utf-8") as handle:
        match = re.search(r"socksvr\s*\{[^}]*socket-name\s+(\S+)", handle.read())
    if match is None:
        print(f"{argv[1]}: no socksvr socket-name", file=sys.stderr)
        return 2
    fake = FakeVpp(match.group(1)).start()
    print(f"fake vpp: serving the API on {match.group(1)}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    fake.stop()
    print("fake vpp: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
