"""Build a topology on this machine out of network namespaces (``provision: netns``).

One namespace per node, veth pairs for the topology's links (addresses, MTU, routes,
``ip_forward``), and a management bridge in the root namespace with one veth leg into every
namespace, so that an sshd inside each namespace is reached over real SSH exactly as a lab
machine would be. All names carry a per-testbed prefix, so two runs (pabot) never collide; the
management subnet (198.19.N.0/24, inside the RFC 2544 range) is picked free under a lock.

State lives in ``/run/hoststack/<prefix>/``: keys, sshd configs, pid files and ``state.json``
naming the owner process and the *keeper*: one ``sh`` that starts every node's sshd and waits
for them, so that their parent reaps them the moment they exit (see
:mod:`libraries.testbed.teardown`, which removes a testbed and sweeps those whose owner died).
:meth:`LocalTestbed.down` removes everything of one prefix, failures included.

Root's login shell may run heavy rc files (pyenv here): each namespace gets an
``/etc/netns/<ns>/passwd`` (bind-mounted over /etc/passwd by ``ip netns exec``) giving root
``/bin/sh``, so a command over SSH costs no rc-file time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from libraries.testbed.errors import NodeError
from libraries.testbed.run_paths import workdir_root
from libraries.testbed.ssh import SshTarget
from libraries.testbed.teardown import (
    STATE_ROOT,
    state_dir,
    sweep_stale,
    teardown_prefix,
)
from libraries.testbed.topology import Topology

LOG = logging.getLogger(__name__)
MGMT_SUPERNET = ipaddress.IPv4Network("198.19.0.0/16")
SSHD = "/usr/sbin/sshd"
_PREFIX_RE = re.compile(r"^h[a-z0-9]{2,7}$")


@dataclass(frozen=True)
class NetnsTestbedInfo:
    """What ``up`` built: the prefix, the management subnet and each node's SSH target."""

    prefix: str
    topology: str
    mgmt_subnet: str
    namespaces: dict[str, str]
    targets: dict[str, SshTarget]
    workdir_root: str


def _ip(*args: str, check: bool = True, timeout: float = 10) -> subprocess.CompletedProcess:
    command = ["ip", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            check=False)
    if check and result.returncode != 0:
        raise NodeError(
            f"local testbed: command {' '.join(command)!r} exited {result.returncode}: "
            f"{result.stderr.strip()}"
        )
    return result


class LocalTestbed:
    """A namespace testbed for one topology under one name prefix."""

    def __init__(self, topology: Topology, prefix: str, owner: str = "robot"):
        if not _PREFIX_RE.match(prefix):
            raise ValueError(f"testbed prefix {prefix!r}: expected h + 2-7 lowercase chars")
        self.topology = topology
        self.prefix = prefix
        self.owner = owner
        self.rundir = state_dir(prefix)
        self.namespaces = {name: f"{prefix}-{name}" for name in topology.nodes}
        self.bridge = f"{prefix}-br"
        self.workdir_root = workdir_root(prefix)
        self._keeper: subprocess.Popen | None = None

    # -- up ---------------------------------------------------------------------------------

    def up(self) -> NetnsTestbedInfo:
        """Build the testbed; on any failure remove what was built and re-raise."""
        if os.geteuid() != 0:
            raise NodeError("local testbed: provision: netns needs root (run as root)")
        for tool in ("ip", SSHD):
            if shutil.which(tool) is None:
                raise NodeError(f"local testbed: {tool} not found (install iproute2 and "
                                "openssh-server: see README's setup)")
        sweep_stale()
        if self.rundir.exists():  # same prefix left over (CLI rebuild): start clean
            self.down()
        started = time.monotonic()
        try:
            info = self._build()
        except BaseException:
            LOG.info("local testbed %s: build failed, removing what was built", self.prefix)
            self.down()
            raise
        LOG.info("local testbed %s (%s) up in %.2f s", self.prefix, self.topology.name,
                 time.monotonic() - started)
        return info

    def _build(self) -> NetnsTestbedInfo:
        self.rundir.mkdir(parents=True, mode=0o700)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        subnet = self._claim_mgmt_subnet()
        self._write_state(subnet)
        host_key, host_pub = _ed25519_keypair()
        user_key, user_pub = _ed25519_keypair()
        (self.rundir / "host_key").write_bytes(host_key)
        (self.rundir / "id_ed25519").write_bytes(user_key)
        (self.rundir / "authorized_keys").write_text(user_pub + "\n")
        for path in self.rundir.iterdir():
            path.chmod(0o600)
        hosts = list(subnet.hosts())
        mgmt_ips: dict[str, str] = {}
        for index, (node, ns) in enumerate(self.namespaces.items()):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            leg = f"{self.prefix}-m{index}"
            _ip("link", "add", leg, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            _ip("link", "set", leg, "master", self.bridge, "up")
            mgmt_ip = str(hosts[10 + index])
            mgmt_ips[node] = mgmt_ip
            _ip("-n", ns, "addr", "add", f"{mgmt_ip}/{subnet.prefixlen}", "dev", "mgmt0")
            _ip("-n", ns, "link", "set", "mgmt0", "up")
        for link in self.topology.links:
            (a_node, a_if, a_ip), (b_node, b_if, b_ip) = link.ends()
            a_ns, b_ns = self.namespaces[a_node], self.namespaces[b_node]
            _ip("link", "add", a_if, "netns", a_ns, "mtu", str(link.mtu), "type", "veth",
                "peer", b_if, "netns", b_ns, "mtu", str(link.mtu))
            for ns, ifname, address in ((a_ns, a_if, a_ip), (b_ns, b_if, b_ip)):
                _ip("-n", ns, "addr", "add", str(address), "dev", ifname)
                _ip("-n", ns, "link", "set", ifname, "up")
        for node, spec in self.topology.nodes.items():
            ns = self.namespaces[node]
            for route in spec.routes:
                _ip("-n", ns, "route", "add", str(route.to), "via", str(route.via))
            if spec.ip_forward:
                _netns_exec(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        known_hosts = self.rundir / "known_hosts"
        known_hosts.write_text("".join(f"{ip} {host_pub}\n" for ip in mgmt_ips.values()))
        self._start_sshds(mgmt_ips)
        self._write_state(subnet)
        targets = {
            node: SshTarget(host=ip, port=22, user="root",
                            key_file=str(self.rundir / "id_ed25519"),
                            known_hosts=(str(known_hosts),), system_known_hosts=False)
            for node, ip in mgmt_ips.items()
        }
        for node, ip in mgmt_ips.items():
            _wait_for_tcp(ip, 22, timeout=10, what=f"sshd of {node} ({ip}:22)")
        return NetnsTestbedInfo(self.prefix, self.topology.name, str(subnet),
                                dict(self.namespaces), targets, self.workdir_root)

    def _claim_mgmt_subnet(self) -> ipaddress.IPv4Network:
        STATE_ROOT.mkdir(parents=True, exist_ok=True)
        with open(STATE_ROOT / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = set()
            for line in _ip("-o", "-4", "addr", "show").stdout.splitlines():
                match = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", line)
                if match and ipaddress.IPv4Address(match.group(1)) in MGMT_SUPERNET:
                    used.add(int(match.group(1).split(".")[2]))
            start = int(hashlib.sha1(self.prefix.encode()).hexdigest(), 16) % 250  # noqa: S324
            for offset in range(250):
                third = 1 + (start + offset) % 250
                if third not in used:
                    break
            else:
                raise NodeError("local testbed: no free management subnet in 198.19.0.0/16")
            subnet = ipaddress.IPv4Network(f"198.19.{third}.0/24")
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{next(subnet.hosts())}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        return subnet

    def _write_state(self, subnet: ipaddress.IPv4Network) -> None:
        state = {
            "prefix": self.prefix,
            "topology": self.topology.name,
            "owner": self.owner,
            "owner_pid": os.getpid(),
            "mgmt_subnet": str(subnet),
            "namespaces": self.namespaces,
            "keeper_pid": self._keeper.pid if self._keeper else None,
            "created": time.time(),
        }
        # whole or not at all: another run's sweep (sweep_stale) reads it while this one is
        # built, and took a half-written file for a dead owner's and removed the testbed
        partial = self.rundir / f".state.json.{os.getpid()}"
        partial.write_text(json.dumps(state, indent=2))
        partial.replace(self.rundir / "state.json")

    def _sshd_config(self, node: str, address: str) -> Path:
        config = self.rundir / f"sshd_{node}.conf"
        config.write_text(
            "\n".join([
                f"ListenAddress {address}",
                "Port 22",
                f"HostKey {self.rundir / 'host_key'}",
                f"PidFile {self.rundir / f'sshd_{node}.pid'}",
                f"AuthorizedKeysFile {self.rundir / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "UseDNS no",
                "PrintMotd no",
                "MaxStartups 100:30:200",
                "MaxSessions 100",
                "Subsystem sftp internal-sftp",
                "",
            ])
        )
        return config

    def _start_sshds(self, addresses: dict[str, str]) -> None:
        """One keeper ``sh`` starts every node's sshd (``-D``: it stays the keeper's child)
        and waits for them: whoever stops an sshd, its parent reaps it at once, and the keeper
        exits after the last (teardown order: :mod:`libraries.testbed.teardown`)."""
        passwd = Path("/etc/passwd").read_text()
        lines = []
        for node, ns in self.namespaces.items():
            config = self._sshd_config(node, addresses[node])
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "passwd").write_text(
                re.sub(r"^(root:[^:]*:0:0:[^:]*:[^:]*:).*$", r"\1/bin/sh", passwd, flags=re.M)
            )
            log = self.rundir / f"sshd_{node}.log"
            lines.append(f"ip netns exec {shlex.quote(ns)} {SSHD} -D -f {shlex.quote(str(config))}"
                         f" </dev/null >/dev/null 2>>{shlex.quote(str(log))} &")
        self._keeper = subprocess.Popen(
            ["sh", "-c", "\n".join([*lines, "wait"])], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

    # -- down -------------------------------------------------------------------------------

    def down(self) -> None:
        """Remove everything carrying this prefix: processes, namespaces, links, files."""
        teardown_prefix(self.prefix)
        if self._keeper is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._keeper.wait(timeout=2)
            self._keeper = None


def _netns_exec(ns: str, *command: str) -> None:
    result = subprocess.run(["ip", "netns", "exec", ns, *command], capture_output=True,
                            text=True, timeout=15, check=False)
    if result.returncode != 0:
        raise NodeError(
            f"local testbed: `ip netns exec {ns} {' '.join(command)}` exited "
            f"{result.returncode}: {result.stderr.strip()}"
        )


def _ed25519_keypair() -> tuple[bytes, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, public


def _wait_for_tcp(host: str, port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                raise NodeError(f"local testbed: {what} not reachable after {timeout:g} s: "
                                f"{error}") from None
            time.sleep(0.01)
