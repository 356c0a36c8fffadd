"""VPP on a node: start it from a rendered startup.conf, reach its API socket over SSH, stop it.

Each VPP keeps its sockets (API, CLI, stats, one per app namespace) in its own runtime
directory under the node's per-run workdir (``<workdir>/vpp``, :func:`run_install`), never in
the shared /run/vpp: two runs on one machine (pabot, or two checkouts) collided there, each
deleting the other's sockets. The API socket lives on the DUT; the runner reaches it through
an OpenSSH unix-socket forward (``ssh -N -L <local.sock>:<remote api.sock>``) and talks PAPI
with the API definitions copied from the DUT's own install, as CSIT does. Nothing is left
behind by :func:`stop_vpp`: the forward, the PAPI client, the VPP process and its sockets go,
and ``show`` diagnostics are logged first.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import HostStackError, NodeError, PapiError
from libraries.testbed.node import Node, Process
from libraries.testbed.ssh import trusted_known_hosts
from libraries.testbed.topology import VppInstall
from libraries.vpp.conf_params import VppStartupParams, vcl_for_program
from libraries.vpp.hoststack import HostStack, VppThread
from libraries.vpp.papi import PapiConnection, fetch_api_definitions
from libraries.vpp.ports import StartupContribution
from libraries.vpp.vppctl import collect_diagnostics

LOG = logging.getLogger(__name__)
# Each worker's session message queue (VPP's default and minimum: 2048 events) with several
# workers: a worker then serves its share of every app's sessions.
WORKER_EVENT_QUEUE_LENGTH = 16384
JUMBO_DATA_SIZE = 10000  # seed 001's suggestion for MTU 9000: buffers { default data-size }


@dataclass(frozen=True)
class VppLayout:
    """What a VPP start asks for beyond the install: main core, worker cores (none: seed
    001's ``workers 0``), the ports' startup.conf part, a jumbo MTU (seed 001's
    ``tcp { mtu }`` + ``buffers { default data-size 10000 }``) when above 1500, and sections
    appended at the end (an A/B side's)."""

    main_core: int | None = None
    workers: tuple[int, ...] = ()
    ports: StartupContribution = field(default_factory=StartupContribution)
    mtu: int | None = None
    extra_sections: tuple[tuple[str, str], ...] = ()


@dataclass
class VppInstance:
    """A VPP started by :func:`start_vpp` (``papi`` is connected while it runs)."""

    node: Node
    install: VppInstall
    process: Process
    startup_path: str
    papi: PapiConnection
    forward: subprocess.Popen | None
    local_dir: tempfile.TemporaryDirectory

    @property
    def hoststack(self) -> HostStack:
        """Typed host-stack operations over this instance's PAPI connection."""
        return HostStack(self.papi)


def run_install(install: VppInstall, workdir: str) -> VppInstall:
    """``install`` with this run's socket paths: API, CLI and app-namespace sockets in
    ``<workdir>/vpp`` (VPP's runtime-dir, so its stats socket goes there too). The topology's
    socket paths are not used by a VPP the library starts."""
    runtime = f"{workdir}/vpp"
    return install.model_copy(update={"api_socket": f"{runtime}/api.sock",
                                      "cli_socket": f"{runtime}/cli.sock",
                                      "app_socket_dir": f"{runtime}/app_ns_sockets"})


def startup_params(install: VppInstall, layout: VppLayout, workdir: str,
                   hugepages: bool) -> VppStartupParams:
    """startup.conf for ``install`` (its sockets: see :func:`run_install`) and ``layout``
    (log in ``workdir``); 4k pages without ``hugepages`` (how VPP runs on a VM with none)."""
    jumbo = layout.mtu is not None and layout.mtu > 1500
    return VppStartupParams(
        cli_listen=install.cli_socket, api_socket=install.api_socket,
        runtime_dir=install.app_socket_dir.rsplit("/", 1)[0],
        log_path=f"{workdir}/vpp.log", main_core=layout.main_core,
        corelist_workers=layout.workers or None, workers=None if layout.workers else 0,
        session_event_queue_length=WORKER_EVENT_QUEUE_LENGTH if layout.workers else None,
        tcp_mtu=layout.mtu if jumbo else None,
        default_data_size=JUMBO_DATA_SIZE if jumbo else None,
        dpdk_devices=layout.ports.dpdk_devices, dpdk_vdevs=layout.ports.dpdk_vdevs,
        plugins_path=install.plugins, no_hugepages=not hugepages,
        extra_sections=layout.extra_sections,
    )


def has_hugepages(node: Node) -> bool:
    """True when the node has hugepages reserved (``/proc/sys/vm/nr_hugepages`` > 0)."""
    pages = node.run("cat /proc/sys/vm/nr_hugepages", timeout=10, quiet=True).stdout.strip()
    return pages not in ("", "0")


def jumbo_needs_hugepages(layout: VppLayout, hugepages: bool) -> str | None:
    """Why ``layout`` cannot run on a node without hugepages (None: it can): seed 001's jumbo
    buffers (default data-size 10000) do not fit in 4k pages (VPP: 'buffer size (10304) is
    greater than page size (4096)')."""
    if layout.mtu is None or layout.mtu <= 1500 or hugepages:
        return None
    return (f"VPP's jumbo buffers (buffers {{ default data-size {JUMBO_DATA_SIZE} }}, seed 001) "
            "need hugepages and the node has none (/proc/sys/vm/nr_hugepages is 0): a buffer "
            "cannot span 4k pages")


def check_threads(threads: list[VppThread], layout: VppLayout) -> None:
    """VPP runs its main thread on ``layout.main_core`` and one worker per declared core, on
    those cores (``show_threads``); HostStackError saying what differs otherwise."""
    workers = [t for t in threads if t.type == "workers"]
    seen = tuple(t.cpu_id for t in workers)
    if seen != layout.workers:
        raise HostStackError(f"VPP runs {len(workers)} workers on CPUs {list(seen)}; "
                             f"the topology declares vpp_workers {list(layout.workers)}")
    main = [t for t in threads if t.id == 0]
    if layout.main_core is not None and (not main or main[0].cpu_id != layout.main_core):
        raise HostStackError(f"VPP's main thread runs on CPU "
                             f"{main[0].cpu_id if main else '?'}, not on vpp_main "
                             f"{layout.main_core}")


def _forward_socket(node: Node, remote: str, local: str) -> subprocess.Popen:
    target = node.target
    if target.key_file is None:
        raise HostStackError(
            f"{node.where}: forwarding VPP's API socket needs key-based SSH (topology key:)")
    command = [
        "ssh", "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
        "-o", "StreamLocalBindUnlink=yes", "-o", "ServerAliveInterval=15",
        "-o", f"ConnectTimeout={int(target.connect_timeout)}",
        "-i", str(Path(target.key_file).expanduser()), "-p", str(target.port),
        "-L", f"{local}:{remote}",
    ]
    known = trusted_known_hosts(target, node.where)
    if known:
        command += ["-o", f"UserKnownHostsFile={' '.join(known)}"]
    command += ["-o", "StrictHostKeyChecking=yes"]
    command.append(f"{target.user}@{target.host}")
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)


def _connect_papi(node: Node, install: VppInstall, local_dir: Path,
                  deadline: float) -> tuple[PapiConnection, subprocess.Popen]:
    fetch_api_definitions(node, install.api_dir, str(local_dir / "api"))
    local_socket = str(local_dir / "api.sock")
    forward = _forward_socket(node, install.api_socket, local_socket)
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if forward.poll() is not None:
            stderr = forward.stderr.read().decode(errors="replace") if forward.stderr else ""
            raise HostStackError(f"{node.where}: ssh forward of {install.api_socket} exited "
                                 f"{forward.returncode}: {stderr.strip()}")
        if Path(local_socket).exists():
            papi = PapiConnection(local_socket, str(local_dir / "api"))
            try:
                papi.connect("hoststack-perf")
                return papi, forward
            except PapiError as error:
                last_error = error
        time.sleep(0.2)
    forward.terminate()
    raise HostStackError(f"{node.where}: VPP API at {install.api_socket} did not answer in "
                         f"time: {last_error}")


def start_vpp(node: Node, install: VppInstall, main_core: int | None = None,
              timeout: float = 30.0, layout: VppLayout | None = None) -> VppInstance:
    """Render startup.conf, start VPP in the background, wait (bounded) until its API answers,
    check its threads against ``layout`` (default: ``main_core`` only, no workers).

    Fails with VPP's own output when it exits during start-up; stops it on any failure.
    """
    layout = layout or VppLayout(main_core=main_core)
    install = run_install(install, node.workdir)
    params = startup_params(install, layout, node.workdir, hugepages=has_hugepages(node))
    startup_path = f"{node.workdir}/startup.conf"
    node.put(params.render(), startup_path, sudo=True)
    runtime = shlex.quote(str(params.runtime_dir))
    node.run(f"rm -rf {runtime}; mkdir -p {runtime}", timeout=10, sudo=True)
    process = node.start(NodeCommand((install.bin, "-c", startup_path)), "vpp", sudo=True)
    deadline = time.monotonic() + timeout
    local_dir = tempfile.TemporaryDirectory(prefix="hoststack-vpp-")
    try:
        while node.run(f"test -S {shlex.quote(install.api_socket)}", timeout=10, check=False,
                       quiet=True).exit_code != 0:
            if not node.is_running(process):
                raise HostStackError(f"{node.where}: VPP exited during start-up: "
                                     f"{node.read_log(process)[-2000:]}")
            if time.monotonic() > deadline:
                raise HostStackError(f"{node.where}: VPP created no API socket "
                                     f"{install.api_socket} in {timeout:g} s")
            time.sleep(0.2)
        if node.target.user != "root":
            # VPP runs as root: its API socket is root's, and the SSH forward opens it as the
            # login user (a sudo lab); hand this run's socket to that user.
            node.run(f"chown {shlex.quote(node.target.user)} {shlex.quote(install.api_socket)}",
                     timeout=10, sudo=True)
        papi, forward = _connect_papi(node, install, Path(local_dir.name), deadline)
    except (HostStackError, NodeError):
        node.stop(process, grace=2)
        local_dir.cleanup()
        raise
    instance = VppInstance(node, install, process, startup_path, papi, forward, local_dir)
    try:
        version = instance.hoststack.show_version()
        threads = instance.hoststack.list_threads()
        check_threads(threads, layout)
    except HostStackError as error:
        stop_vpp(instance)
        raise HostStackError(f"{node.where}: {error}") from error
    LOG.info("%s: VPP %s up (pid %d), threads: %s", node.name, version.version, process.pid,
             ", ".join(f"{t.name} on CPU {t.cpu_id}" for t in threads))
    return instance


def vpp_diagnostics(instance: VppInstance) -> dict[str, str]:
    """``show session verbose``, ``show app``, ``show errors``, ``show hardware``, ``show log``."""
    return collect_diagnostics(instance.node, socket=instance.install.cli_socket,
                               vppctl=instance.install.vppctl)


def release_local_side(instance: VppInstance) -> list[str]:
    """Disconnect PAPI and close the socket forward (local processes and files only, so it
    also works once the node is gone); returns the errors met."""
    errors = []
    try:
        if instance.papi.connected:
            instance.papi.disconnect()
    except PapiError as error:
        errors.append(str(error))
    if instance.forward is not None and instance.forward.poll() is None:
        instance.forward.terminate()
        try:
            instance.forward.wait(timeout=5)
        except subprocess.TimeoutExpired:
            instance.forward.kill()
    instance.local_dir.cleanup()
    return errors


def stop_vpp(instance: VppInstance) -> str:
    """Disconnect PAPI, close the forward, stop VPP, remove its runtime directory (every
    socket); return VPP's output."""
    errors = release_local_side(instance)
    output = instance.node.stop(instance.process, grace=5)
    # a VPP that died leaves its API/CLI/stats sockets; every VPP leaves one socket per app
    # namespace: the run's runtime directory holds them all
    runtime = shlex.quote(instance.install.app_socket_dir.rsplit("/", 1)[0])
    instance.node.run(f"rm -rf {runtime}", timeout=10, sudo=True, check=False)
    if errors:
        raise HostStackError("; ".join(errors))
    return output


def vcl_config(program: str, namespace_id: str | None, secret: int | None,
               socket_dir: str, extra: tuple[str, ...] = ()) -> str:
    """VCL config for one app: the seeds' block for ``program`` (iperf3, nginx, wrk; see
    ``vcl_for_program``) in its app namespace (or VPP's default one), plus ``extra`` lines."""
    params = vcl_for_program(program, namespace_id, secret, socket_dir)
    return (replace(params, extra=tuple(extra)) if extra else params).render()
