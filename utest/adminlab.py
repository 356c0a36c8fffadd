"""A three-node lab built the way a lab admin builds one, for the real-lab end-to-end tests.

Plain ``ip`` and ``sshd`` commands, not the library's provisioning: network namespaces
``<prefix>-tg``, ``<prefix>-dut``, ``<prefix>-server`` joined by veths with addresses, routes and
``ip_forward`` on the DUT (the 3node shape), and one sshd per namespace reached from the root
namespace over a management bridge (198.19.N.0/24, N claimed under the same lock the library's
netns provisioning uses, so the two never pick the same subnet).

Each namespace has its own user database: ``ip netns exec NS`` bind-mounts every file of
``/etc/netns/NS/`` over ``/etc/``, so ``passwd``, ``group``, ``shadow`` and ``sudoers`` there add
a non-root user ``perflab`` (a uid unused on this machine, an unlocked account, password-less
sudo) without touching the host's ``/etc``. Every user's home is under the lab's own directory
(``/tmp/hslab-<prefix>/home/<user>``; root's too, so the host's ``/root`` is never read or
written), and sshd's ``AuthorizedKeysFile`` points there with an absolute path. The host keys
go into ``known_hosts`` in that directory, for the topology to name.

:meth:`AdminLab.state` snapshots what the library must not change (addresses, routes, MTUs,
ip_forward, kernel.bpf_stats_enabled); :meth:`AdminLab.leftovers` lists what a run left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LAB_USER = "perflab"
NODES = ("tg", "dut", "server")
LINKS = (("tg", "eth1", "198.18.1.2/24", "dut", "eth1", "198.18.1.1/24"),
         ("dut", "eth2", "198.18.2.1/24", "server", "eth1", "198.18.2.2/24"))
ROUTES = {"tg": ("198.18.2.0/24", "198.18.1.1"), "server": ("198.18.1.0/24", "198.18.2.1")}
LOCK = Path("/run/hoststack/.lock")  # the library's lock for management subnets
SUDOERS_LINE = f"{LAB_USER} ALL=(ALL) NOPASSWD: ALL"


def sh(*command: str, check: bool = True, timeout: float = 20) -> str:
    """Run ``command`` on this machine; return stdout; fail with its stderr."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)!r} exited {result.returncode}: "
                           f"{result.stderr.strip()}")
    return result.stdout


def _keypair(path: Path, comment: str) -> str:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class AdminLab:
    """The lab: ``prefix``, ``base`` directory, management ``addresses`` per node, the
    runner's private ``key`` and the ``known_hosts`` file holding the nodes' host keys."""

    prefix: str = field(default_factory=lambda: "hl" + os.urandom(2).hex())
    base: Path = Path()
    uid: int = 0
    addresses: dict[str, str] = field(default_factory=dict)
    key: Path = Path()
    known_hosts: Path = Path()
    _sshd: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def namespaces(self) -> dict[str, str]:
        return {node: f"{self.prefix}-{node}" for node in NODES}

    # -- build --------------------------------------------------------------------------------

    def up(self) -> AdminLab:
        """Build the lab; on failure remove what was built and re-raise."""
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix=f"hslab-{self.prefix}-", dir="/tmp"))
        self.base.chmod(0o755)  # the lab user must reach its home below it
        self.uid = self._free_uid()
        (self.base / "ssh").mkdir(mode=0o700)
        self.key = self.base / "ssh" / "runner_ed25519"
        runner_pub = _keypair(self.key, "runner")
        subnet = self._claim_subnet()
        hosts = list(subnet.hosts())
        known = []
        for index, (node, ns) in enumerate(self.namespaces.items()):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            leg = f"{self.prefix}-m{index}"
            sh("ip", "link", "add", leg, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            sh("ip", "link", "set", leg, "master", f"{self.prefix}-br", "up")
            address = str(hosts[10 + index])
            self.addresses[node] = address
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            host_pub = _keypair(self.base / "ssh" / f"{node}_host_ed25519", f"{node}-host")
            known.append(f"{address} {' '.join(host_pub.split()[:2])}\n")
        for a, a_if, a_ip, b, b_if, b_ip in LINKS:
            a_ns, b_ns = self.namespaces[a], self.namespaces[b]
            sh("ip", "link", "add", a_if, "netns", a_ns, "type", "veth", "peer", b_if,
               "netns", b_ns)
            for ns, ifname, ip in ((a_ns, a_if, a_ip), (b_ns, b_if, b_ip)):
                sh("ip", "-n", ns, "addr", "add", ip, "dev", ifname)
                sh("ip", "-n", ns, "link", "set", ifname, "up")
        for node, (to, via) in ROUTES.items():
            sh("ip", "-n", self.namespaces[node], "route", "add", to, "via", via)
        sh("ip", "netns", "exec", self.namespaces["dut"], "sysctl", "-q", "-w",
           "net.ipv4.ip_forward=1")
        self.known_hosts = self.base / "known_hosts"
        self.known_hosts.write_text("".join(known))
        self._homes(runner_pub)
        for node, ns in self.namespaces.items():
            self._user_database(ns)
            self._start_sshd(node, ns)
        for node, address in self.addresses.items():
            _wait_for_tcp(address, 22, f"sshd of {node}")

    def _free_uid(self) -> int:
        taken = {entry.pw_uid for entry in pwd.getpwall()}
        running = set(sh("ps", "-eo", "uid=").split())
        for _ in range(100):
            uid = random.randint(47000, 47999)
            if uid not in taken and str(uid) not in running:
                return uid
        raise RuntimeError("no free uid in 47000-47999")

    def _claim_subnet(self) -> ipaddress.IPv4Network:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = {int(m) for m in re.findall(r"inet 198\.19\.(\d+)\.",
                                               sh("ip", "-o", "-4", "addr", "show"))}
            free = [n for n in range(1, 251) if n not in used]
            subnet = ipaddress.IPv4Network(f"198.19.{random.choice(free)}.0/24")
            bridge = f"{self.prefix}-br"
            sh("ip", "link", "add", bridge, "type", "bridge")
            sh("ip", "addr", "add", f"{next(subnet.hosts())}/24", "dev", bridge)
            sh("ip", "link", "set", bridge, "up")
        return subnet

    def _homes(self, runner_pub: str) -> None:
        for user, uid in ((LAB_USER, self.uid), ("root", 0)):
            ssh_dir = self.base / "home" / user / ".ssh"
            ssh_dir.mkdir(parents=True)
            (ssh_dir / "authorized_keys").write_text(runner_pub + "\n")
            (ssh_dir / "authorized_keys").chmod(0o600)
            ssh_dir.chmod(0o700)
            for path in (ssh_dir.parent, ssh_dir, ssh_dir / "authorized_keys"):
                os.chown(path, uid, uid)
        (self.base / "home").chmod(0o755)

    def _user_database(self, ns: str) -> None:
        """passwd/group/shadow/sudoers of the namespace: the host's plus the lab user; root's
        home is the lab's too (its keys live there, the host's /root stays untouched)."""
        etc = Path("/etc/netns") / ns
        etc.mkdir(parents=True, exist_ok=True)
        home = self.base / "home"
        passwd = re.sub(r"^(root:[^:]*:0:0:[^:]*:)[^:]*:", rf"\g<1>{home}/root:",
                        Path("/etc/passwd").read_text(), flags=re.M)
        (etc / "passwd").write_text(
            passwd + f"{LAB_USER}:x:{self.uid}:{self.uid}:perf lab:{home}/{LAB_USER}:/bin/bash\n")
        (etc / "group").write_text(Path("/etc/group").read_text()
                                   + f"{LAB_USER}:x:{self.uid}:\n")
        shadow = etc / "shadow"
        # '*': no password, but not locked ('!' would lock the account: sshd refuses keys)
        shadow.write_text(Path("/etc/shadow").read_text() + f"{LAB_USER}:*:20000:0:99999:7:::\n")
        shadow.chmod(0o640)
        sudoers = etc / "sudoers"
        sudoers.write_text(Path("/etc/sudoers").read_text() + f"\n{SUDOERS_LINE}\n")
        sudoers.chmod(0o440)  # sudo refuses a sudoers that is not root-owned 0440

    def _start_sshd(self, node: str, ns: str) -> None:
        ssh = self.base / "ssh"
        config = ssh / f"sshd_{node}.conf"
        config.write_text("\n".join([
            f"ListenAddress {self.addresses[node]}",
            f"HostKey {ssh / f'{node}_host_ed25519'}",
            f"PidFile {ssh / f'sshd_{node}.pid'}",
            f"AuthorizedKeysFile {self.base}/home/%u/.ssh/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "PrintMotd no",
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "",
        ]))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self._sshd[node] = subprocess.Popen(
            ["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(ssh / f"sshd_{node}.log", "wb"),  # noqa: SIM115
            start_new_session=True,
        )

    # -- topology -----------------------------------------------------------------------------

    def topology(self, user: str, name: str = "adminlab", **extra: object) -> dict:
        """A topology of this lab as a user would write it (no ``provision:``)."""
        login = {"user": user, "key": str(self.key), "sudo": user != "root"}
        nodes = {
            "tg": {"roles": ["tg"], "cpus": {"load": [1]},
                   "tools": {"wrk": "wrk", "iperf3": "iperf3"},
                   "routes": [{"to": ROUTES["tg"][0], "via": ROUTES["tg"][1]}]},
            "dut": {"roles": ["dut"], "cpus": {"proxy": [0], "server": [0]},
                    "tools": {"nginx": "nginx", "iperf3": "iperf3", "bpftrace": "bpftrace",
                              "bpftool": "bpftool",
                              "nginx_ebpf": "/opt/nginx-ebpf/sbin/nginx"},
                    "optional_tools": ["nginx_ebpf"], "ip_forward": True},
            "server": {"roles": ["server"], "cpus": {"server": [1]},
                       "tools": {"nginx": "nginx", "iperf3": "iperf3"},
                       "routes": [{"to": ROUTES["server"][0], "via": ROUTES["server"][1]}]},
        }
        for node, spec in nodes.items():
            spec.update(host=self.addresses[node], **login)
        links = [{"a": f"{a}:{a_if}", "a_ip": a_ip, "b": f"{b}:{b_if}", "b_ip": b_ip}
                 for a, a_if, a_ip, b, b_if, b_ip in LINKS]
        return {"name": name, "known_hosts": str(self.known_hosts), "nodes": nodes,
                "links": links, **extra}

    def write_topology(self, user: str, path: Path, **extra: object) -> Path:
        """:meth:`topology` as a YAML (JSON is YAML) file."""
        path.write_text(json.dumps(self.topology(user, **extra), indent=2))
        return path

    # -- what a run must leave as it was ---------------------------------------------------------

    def state(self) -> dict[str, str]:
        """Addresses, routes, MTUs and ip_forward per node, and kernel.bpf_stats_enabled."""
        found = {}
        for node, ns in self.namespaces.items():
            found[f"{node} addresses"] = sh("ip", "-n", ns, "-o", "-4", "addr", "show")
            found[f"{node} routes"] = sh("ip", "-n", ns, "-4", "route", "show")
            links = sh("ip", "-n", ns, "-o", "link", "show")
            found[f"{node} mtus"] = " ".join(
                f"{name}={mtu}" for name, mtu in re.findall(r"^\d+: ([^:@]+)\S*:.* mtu (\d+)",
                                                          links, flags=re.M))
            found[f"{node} ip_forward"] = sh("ip", "netns", "exec", ns, "cat",
                                             "/proc/sys/net/ipv4/ip_forward")
        found["kernel.bpf_stats_enabled"] = Path("/proc/sys/kernel/bpf_stats_enabled").read_text()
        return found

    def sshd_pids(self) -> set[int]:
        """The sshd listeners' PIDs."""
        return {p.pid for p in self._sshd.values()}

    def namespace_pids(self) -> dict[int, str]:
        """PID -> node of every process in the lab's namespaces."""
        return {int(pid): node for node, ns in self.namespaces.items()
                for pid in sh("ip", "netns", "pids", ns, check=False).split()}

    def leftovers(self, run_prefixes: set[str], settle: float = 8.0) -> list[str]:
        """What a finished run left: processes in the lab's namespaces (besides the sshd
        listeners) or of the lab user, its ``/tmp/hoststack-<prefix>`` directories, and
        uprobes held by any of those processes. Waits up to ``settle`` s for SSH sessions to
        close."""
        deadline = time.monotonic() + settle
        while True:
            found = self._leftovers_now(run_prefixes)
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.25)

    def _leftovers_now(self, run_prefixes: set[str]) -> list[str]:
        found = []
        listeners = self.sshd_pids()
        pids = {pid: node for pid, node in self.namespace_pids().items() if pid not in listeners}
        for line in sh("ps", "-eo", "pid=,uid=,stat=,args=").splitlines():
            pid, uid, stat, args = [*line.split(None, 3), ""][:4]
            if stat.startswith("Z"):
                continue
            if int(pid) in pids or int(uid) == self.uid:
                found.append(f"process on {pids.get(int(pid), '?')}: {pid} uid {uid} {args}")
        found += [str(path) for prefix in run_prefixes
                  for path in Path("/tmp").glob(f"hoststack-{prefix}*")]
        found += [str(path) for path in Path("/tmp").glob("hoststack-*")
                  if _owner(path) == self.uid]
        perf = json.loads(sh("bpftool", "-j", "perf", "show", check=False) or "[]")
        found += [f"uprobe held by pid {e.get('pid')}: {e.get('filename')}" for e in perf
                  if str(e.get("fd_type", "")).startswith("uprobe") and e.get("pid") in pids]
        return found

    # -- remove ----------------------------------------------------------------------------------

    def down(self) -> None:
        """Remove everything of the lab: processes, namespaces, links, files."""
        for pid in self.namespace_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for sshd in self._sshd.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=5)
            if sshd.stderr:
                sshd.stderr.close()
        for ns in self.namespaces.values():
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        sh("ip", "link", "del", f"{self.prefix}-br", check=False)
        if self.base != Path() and self.base.is_dir():
            shutil.rmtree(self.base, ignore_errors=True)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def _wait_for_tcp(host: str, port: int, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} ({host}:{port}) not reachable: {error}") from None
            time.sleep(0.02)
