"""One traced trial under bpftime: loader, nginx with the agent, load, stop, proofs, cleanup.

Per trial (as the kernel suite starts and stops its tracer per trial): ``bpftime load
<sslsniff>`` starts, counted (:mod:`libraries.tools.sslsniff.seed`), and is ready once the
program printed its header (its attach calls returned); nginx starts under ``bpftime start``
and listens; the load runs; then nginx and the loader stop (failures included), the run's
shared memory is removed, and the trial must have left nothing: no process with bpftime
mapped, no shared memory, no ``~/.bpftime/runtime.log`` growth, no uprobe in the kernel (bpftime
attaches none there). The attachment proof (events > 0, all from the traced nginx's PIDs)
is checked on the loader's counts.
"""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from libraries.testbed.command import NodeCommand
from libraries.tools.bpftime import (
    BpftimeSetup,
    bpftime_leftovers,
    bpftime_state,
    cleanup_command,
    load_command,
    run_env,
    start_command,
    stop_group,
    stop_with_sigint,
)
from libraries.tools.sslsniff.kernel import perf_uprobes, uprobe_leftovers
from libraries.tools.sslsniff.seed import SeedSslsniff, counted, install_counter, wait_header
from libraries.tools.sslsniff.tracer import (
    SslsniffResult,
    TracerError,
    check_attachment,
    parse_sslsniff_output,
)

LOG = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class TracedNginx:
    """The nginx to run under bpftime: ``binary`` (absolute path), ``config`` and ``prefix``
    (absolute paths; the config listens on ``port`` and logs errors to ``error_log``)."""

    binary: str
    config: str
    prefix: str
    port: int
    error_log: str


@dataclass(frozen=True)
class BpftimeTrial:
    """A traced trial's outcome: ``result`` (the load's), ``seen`` (the loader's counts),
    ``nginx_pids`` (the traced nginx's master and workers)."""

    result: Any
    seen: SslsniffResult
    nginx_pids: tuple[int, ...]


def traced_config(config: str, prefix: str, new_prefix: str, ports: tuple[int, ...] | list[int],
                  port: int) -> str:
    """A running nginx server's config moved to ``new_prefix`` and ``port`` (its status
    server, when it has one, to ``port + 1``), for a second instance to run under bpftime.

    Raises ValueError naming what the config lacks (a template change must not silently leave
    both instances on one port or prefix).
    """
    changes = [(f"listen {ports[0]} ssl", f"listen {port} ssl"), (prefix, new_prefix)]
    if len(ports) > 1:
        changes.append((f"127.0.0.1:{ports[1]}", f"127.0.0.1:{port + 1}"))
    for old, new in changes:
        if old not in config:
            raise ValueError(f"nginx config to copy for bpftime: no {old!r} in it")
        config = config.replace(old, new)
    return config


def nginx_pids(node: Any, pgid: int) -> tuple[int, ...]:
    """PIDs of the nginx processes in process group ``pgid`` (the group also holds the
    ``bpftime start`` process that execs nginx)."""
    out = node.run(f"ps -o pid=,comm= -g {int(pgid)}", timeout=10, check=False).stdout
    return tuple(sorted(int(pid) for pid, comm in
                        (line.split(None, 1) for line in out.splitlines() if line.strip())
                        if comm.strip() == "nginx"))


def run_bpftime_trial(node: Any, setup: BpftimeSetup, program: SeedSslsniff, nginx: TracedNginx,
                      load: Callable[[], T], shm_name: str) -> BpftimeTrial:
    """Run ``load`` against ``nginx`` started under bpftime with ``program`` loaded; stop
    everything, check it left nothing and that the program saw nginx, and only nginx.

    Raises :class:`TracerError` naming what was left behind or what the proof found.
    """
    kernel = perf_uprobes(node, program.library, sudo=True)
    if kernel:
        raise TracerError(
            f"{node.where}: kernel uprobes on {program.library} are attached (another tracer: "
            f"pids {sorted({e.get('pid') for e in kernel})}); bpftime's hooks would relocate "
            "their breakpoints and nginx's workers would die of SIGTRAP: not measuring")
    before = bpftime_state(node, shm_name)
    counter = install_counter(node)
    # the agent in nginx takes its runtime settings (log, VM) from what the loader wrote
    log_path = f"{node.workdir}/bpftime-runtime.log"
    node.run(f"rm -f {shlex.quote(log_path)}", timeout=10, sudo=True)
    env = tuple(run_env(setup, log_path, shm_name).items())
    loader = node.start(NodeCommand.shell(counted(load_command(setup, program.args), counter),
                                          env=env), "bpftime-sslsniff", sudo=True)
    traced = None
    output = ""
    pids: tuple[int, ...] = ()
    try:
        wait_header(node, loader, "bpftime load sslsniff")
        traced = node.start(NodeCommand.shell(start_command(setup, nginx.binary, nginx.config,
                                                             nginx.prefix), env=env),
                            "nginx-bpftime", sudo=True)
        node.wait_for_listener(nginx.port, traced)
        pids = nginx_pids(node, traced.pid)
        result = load()
    finally:
        failing = sys.exc_info()[0] is not None
        try:
            if traced is not None:
                stop_group(node, traced, "TERM", wait=10.0, repeat=0.5)
            output = stop_with_sigint(node, loader)
        finally:
            node.run(cleanup_command(shm_name), timeout=20, sudo=True)
            left = bpftime_leftovers(before, bpftime_state(node, shm_name), shm_name)
            left += uprobe_leftovers(node)
            if left and failing:
                LOG.error("%s: bpftime left behind after a failed trial: %s", node.name, left)
            elif left:
                raise TracerError(f"{node.where}: the bpftime trial left behind: {left}")
    crashes = node.run(f"grep -c 'exited on signal' {shlex.quote(nginx.error_log)}",
                       timeout=10, check=False, sudo=True).stdout.strip()
    if crashes not in ("", "0"):
        raise TracerError(f"{node.where}: {crashes} nginx workers under bpftime died on a "
                          f"signal during the trial (see {nginx.error_log})")
    seen = parse_sslsniff_output(output, source=f"{node.name}: bpftime load sslsniff",
                                 tracer="bpftime")
    try:
        check_attachment(seen, pids, "nginx under bpftime", node.where)
    except TracerError as error:
        runtime_log = node.run(f"cat {shlex.quote(log_path)}", timeout=10, check=False).stdout
        errors = [line for line in runtime_log.splitlines() if "[error]" in line]
        raise TracerError(f"{error}; bpftime's runtime log {log_path} says: "
                          f"{errors[-10:] or 'no errors'}") from None
    return BpftimeTrial(result, seen, pids)
