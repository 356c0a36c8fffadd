"""nginx stream eBPF (sockmap) module: detect it, and prove that it really spliced connections.

The module (github mrpre/nginx-stream-ebpf-module) is compiled into nginx, so an nginx with
it is a separate binary (:func:`has_ebpf_module` asks it to accept ``ebpf_enable on;``).
Misconfigured (an ``ebpf_enable on`` server after an ``off`` one, workers not root) it
silently proxies natively, so each eBPF trial collects :class:`EngagementEvidence` from two sources:

- the error log: ``[stream_ebpf]  update sock map index N to client fd X`` (and ``upstream``)
  per spliced connection, logged at ``error`` severity (``error_log ... notice`` shows them and
  the start-up lines); ``ngx_stream_ebpf_proxy_handler without ebpf object`` per fallen-back
  connection; ``call 'ngx_ebpf_init' fail`` per worker that could not load the program;
- ``run_cnt`` of the ``stream_verdict`` sk_skb program (``bpftool -j prog show name
  stream_verdict``), counted only while the kernel's BPF run statistics are on
  (:func:`~libraries.tools.ebpf_stream.bpf_stats.bpf_stats_enabled` keeps them on).

Typical trial::

    with bpf_stats_enabled(dut) as stats:
        mark = mark_engagement(dut, handle.error_log)
        result = run_iperf3_client(tg, ...)
        evidence = collect_engagement(dut, mark, stats)
    evidence.require_engaged()          # HostStackError: eBPF path not engaged ...
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import HostStackError, ParseError, RenderError
from libraries.tools.ebpf_stream.bpf_stats import StatsHold
from libraries.tools.ebpf_stream.evidence import (
    VERDICT_PROGRAM,
    ErrorLogEvidence,
    VerdictStats,
    parse_bpftool_prog_json,
    parse_error_log,
)
from libraries.tools.nginx import StreamProxyParams

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)

# EBPF_MAP_SIZE in the module's ebpf_kern.c: sockmap slots are indexed by nginx connection
# number, so worker_connections must not exceed it.
EBPF_MAP_SIZE = 100000


# ---------------------------------------------------------------------------- the binary
#: a config only an nginx with the stream eBPF module accepts (``ebpf_enable`` is valid in the
#: stream block itself, so no server, no listen socket and no port is involved)
PROBE_CONFIG = """\
error_log {prefix}/error.log notice;
pid {prefix}/nginx.pid;
events {{}}
stream {{ ebpf_enable on; }}
"""


def has_ebpf_module(node: Node, nginx_binary: str) -> tuple[bool, str]:
    """Whether ``nginx_binary`` on ``node`` has the stream eBPF module, told by what it does:
    ``nginx -t`` (as root, as the proxy runs) of :data:`PROBE_CONFIG`. The module's own
    ``config`` wants a relative ``--add-module=`` path, so ``nginx -V`` need not name it.

    Returns ``(True, description)`` or ``(False, reason to skip)``; raises HostStackError
    quoting nginx when the test fails for another reason.
    """
    prefix = f"{node.workdir}/nginx-ebpf-probe"
    # <prefix>/logs: a source build opens its compiled-in error log before reading the config
    node.run(f"mkdir -p {shlex.quote(prefix)}/logs", timeout=10, sudo=True)
    node.put(PROBE_CONFIG.format(prefix=prefix), f"{prefix}/nginx.conf", sudo=True)
    result = node.run(f"{shlex.quote(nginx_binary)} -t -c {shlex.quote(prefix)}/nginx.conf "
                      f"-p {shlex.quote(prefix)}/ 2>&1", timeout=20, sudo=True, check=False)
    return ebpf_module_in_test_output(result.exit_code, result.stdout, nginx_binary, node.name)


def ebpf_module_in_test_output(exit_code: int, output: str, nginx_binary: str,
                               node: str) -> tuple[bool, str]:
    """The decision of :func:`has_ebpf_module` for the ``nginx -t`` answer already read."""
    text = output.strip()
    if exit_code == 0 and "test is successful" in text:
        return True, (f"nginx at {nginx_binary} has the stream eBPF module (`nginx -t` "
                      "accepts `stream { ebpf_enable on; }`)")
    unknown = re.search(r'unknown directive "(ebpf_enable|stream)".*', text)
    if unknown is not None:
        lacks = ("stream eBPF module" if unknown.group(1) == "ebpf_enable" else
                 "stream eBPF module (no built-in stream module, which the module needs)")
        return False, (f"nginx at {nginx_binary} has no {lacks}: `nginx -t` says "
                       f"{unknown.group(0)!r}")
    if exit_code in (126, 127):
        return False, f"nginx binary missing on {node}: {nginx_binary} ({text[-300:]!r})"
    raise HostStackError(f"{node}: `{nginx_binary} -t` of a stream block with `ebpf_enable on;` "
                         f"exited {exit_code} without telling whether the eBPF module is "
                         f"there: {text[-600:]!r}")


def check_ebpf_config(params: StreamProxyParams) -> None:
    """Refuse a stream config the module would silently proxy natively.

    Rules (the module's README, and what its build showed): at least one server proxies with
    eBPF (and the renderer already refuses an eBPF server after a non-eBPF one), ``user
    root`` (an unprivileged worker cannot load the program and falls back),
    ``worker_connections`` within EBPF_MAP_SIZE, and no ``load_module`` (stream is compiled
    into that binary).
    """
    if not any(params.proxies_with_ebpf(s) for s in params.servers):
        raise RenderError("StreamProxyParams.servers: expected at least one server with eBPF "
                          "(ebpf=True or ebpf_enable=True), got none")
    if params.instance.user != "root":
        raise RenderError(f"NginxInstance.user: expected 'root' for the eBPF module (an "
                          f"unprivileged worker cannot load its BPF program and silently "
                          f"proxies natively), got {params.instance.user!r}")
    if params.instance.worker_connections > EBPF_MAP_SIZE:
        raise RenderError(f"NginxInstance.worker_connections: expected at most {EBPF_MAP_SIZE} "
                          f"(the eBPF module's sockmap size), got "
                          f"{params.instance.worker_connections}")
    if params.load_module is not None:
        raise RenderError(f"StreamProxyParams.load_module: expected None for the eBPF build "
                          f"(stream is compiled in), got {params.load_module!r}")



def read_verdict_stats(node: Node, bpftool: str = "bpftool",
                       name: str = VERDICT_PROGRAM) -> VerdictStats:
    """``bpftool -j prog show name NAME`` on ``node``, parsed. bpftool exits 255 with no
    output when no program has the name: that is empty stats, not an error."""
    command = f"{shlex.quote(bpftool)} -j prog show name {shlex.quote(name)}"
    result = node.run(command, timeout=20, sudo=True, check=False)
    source = f"{node.name}: output of {command!r} (exit {result.exit_code})"
    if result.exit_code == 255 and not result.stdout.strip():
        return VerdictStats((), f"no BPF program named {name} is loaded on {node.name}")
    if result.exit_code not in (0, 255):
        raise HostStackError(f"{node.name}: command {command!r} exited {result.exit_code}: "
                             f"{(result.stderr or result.stdout).strip()[-500:]}")
    stats = parse_bpftool_prog_json(result.stdout, name, source)  # 255 + {"error": ...} raises
    if result.exit_code != 0:
        raise ParseError(source, "bpftool failed but printed no error", result.stdout)
    return stats


# ---------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class EngagementMark:
    """State before a trial: ``error_log`` path, its size ``log_offset`` (bytes) and the
    ``verdict`` programs' counters."""

    error_log: str
    log_offset: int
    verdict: VerdictStats


@dataclass(frozen=True)
class EngagementEvidence:
    """Whether the eBPF module spliced the trial's connections.

    Fields: ``sock_map_updates`` (update lines, client and upstream), ``spliced_connections``,
    ``client_fds``, ``fallbacks`` ("without ebpf object" connections), ``init_failures``,
    ``verdict_programs`` (stream_verdict programs loaded), ``verdict_runs`` (run_cnt growth;
    None when not measured), ``verdict_run_time_ns``, ``stats_reason`` (why there are no
    counters, else None).
    """

    sock_map_updates: int
    spliced_connections: int
    client_fds: tuple[int, ...]
    fallbacks: int
    init_failures: int
    verdict_programs: int
    verdict_runs: int | None
    verdict_run_time_ns: int | None = None
    stats_reason: str | None = None

    @classmethod
    def from_parts(cls, log: ErrorLogEvidence, before: VerdictStats | None,
                   after: VerdictStats | None) -> EngagementEvidence:
        runs: int | None = None
        run_time: int | None = None
        reason = None if after is None else after.reason
        if before is not None and after is not None and after.programs:
            runs, run_time = after.growth_since(before)
        return cls(len(log.updates), log.spliced_connections, log.client_fds, log.fallbacks,
                   log.init_failures, len(after.programs) if after else 0, runs, run_time,
                   reason)

    @property
    def engaged(self) -> bool:
        """Sockets went into the sockmap, the verdict program ran (when counted), and no
        eBPF connection fell back."""
        return (self.spliced_connections > 0 and self.fallbacks == 0
                and self.init_failures == 0 and self.verdict_runs != 0)

    def require_engaged(self) -> None:
        """Raise HostStackError naming the evidence when the trial was not spliced."""
        if self.engaged:
            return
        runs = "not measured" if self.verdict_runs is None else str(self.verdict_runs)
        raise HostStackError(
            "eBPF path not engaged (fell back to native proxying): "
            f"{self.spliced_connections} connection(s) put into the sockmap, "
            f"{self.fallbacks} handled 'without ebpf object', {self.init_failures} worker "
            f"program load failure(s), {self.verdict_programs} {VERDICT_PROGRAM} program(s) "
            f"loaded, run count growth {runs}"
            + (f" ({self.stats_reason})" if self.stats_reason else "")
            + "; expected sockmap updates and a growing run count (eBPF servers first in "
            "the stream block, user root, BPF run statistics on)"
        )

    def as_record(self) -> dict[str, Any]:
        """Counts for the JSON record (every field but ``client_fds``, plus ``engaged``)."""
        record = asdict(self)
        del record["client_fds"]
        return {**record, "engaged": self.engaged}


def _log_size(node: Node, path: str) -> int:
    result = node.run(f"stat -c %s {shlex.quote(path)}", timeout=10, sudo=True)
    if not result.stdout.strip().isdigit():
        raise ParseError(f"{node.name}: size of {path}", "expected a byte count", result.stdout)
    return int(result.stdout)


def mark_engagement(node: Node, error_log: str, bpftool: str = "bpftool") -> EngagementMark:
    """Record where the error log ends and the verdict counters before a trial."""
    return EngagementMark(error_log, _log_size(node, error_log), read_verdict_stats(node, bpftool))


def collect_engagement(node: Node, mark: EngagementMark, stats: StatsHold,
                       bpftool: str = "bpftool") -> EngagementEvidence:
    """Evidence for the trial since ``mark``: the error log's new lines and the counters'
    growth (read while nginx still runs: its programs go away with its workers), the growth
    only where ``stats`` still kept the kernel counting."""
    after = read_verdict_stats(node, bpftool)
    counted, why_not = stats.counting()
    text = node.run(f"tail -c +{mark.log_offset + 1} {shlex.quote(mark.error_log)}",
                    timeout=20, sudo=True).stdout
    log = parse_error_log(text, f"{node.name}: {mark.error_log} from byte {mark.log_offset}")
    if counted:
        evidence = EngagementEvidence.from_parts(log, mark.verdict, after)
    else:
        evidence = EngagementEvidence.from_parts(log, None, VerdictStats(after.programs, why_not))
    LOG.info("%s: eBPF engagement: %s", node.name, evidence.as_record())
    return evidence
