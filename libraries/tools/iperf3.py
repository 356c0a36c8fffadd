"""iperf3: server and client command lines, ``--json`` parser, client runner.

The receiver's figure is the throughput (with ``-R`` the client is the receiver). Retransmits
and congestion window come from TCP_INFO on the sending side; VPP's host stack does not
implement TCP_INFO, so there iperf3 prints meaningless numbers in those columns (seed 001):
parse such runs with ``stack_reports_tcp_info=False`` and they are reported as unavailable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libraries.testbed.command import Ledger, NodeCommand
from libraries.testbed.errors import CommandError, ParseError

if TYPE_CHECKING:
    from libraries.testbed.node import Node, Process

LOG = logging.getLogger(__name__)

_MAX_STREAMS = 128  # iperf3's own limit for -P


def _check_int(what: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"iperf3 option {what}: expected an integer in {low}..{high}, "
                         f"got {value!r}")


def _check_address(what: str, value: object) -> None:
    if not isinstance(value, str) or not value or value.startswith("-") or any(
        char.isspace() for char in value
    ):
        raise ValueError(f"iperf3 option {what}: expected a host name or address, got {value!r}")


def _cpu_tuple(what: str, cpus: Sequence[int]) -> tuple[int, ...]:
    values = tuple(cpus)
    if not values or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in values):
        raise ValueError(f"iperf3 option {what}: expected a non-empty list of CPU numbers, "
                         f"got {cpus!r}")
    return values


@dataclass(frozen=True)
class IperfServerOptions:
    """An iperf3 server: ``port`` (-p), ``bind`` (-B address, optional), ``one_off`` (-1: exit
    after one test; otherwise it serves test after test until stopped), ``affinity`` (-A CPU),
    ``cpus`` (``taskset -c`` list), ``ipv4_only`` (-4: an IPv4 listener, as seed 001 runs it
    over VPP, whose session layer does not match IPv4 connections against an IPv6 wildcard
    listener). The server runs in the foreground: start it with
    :func:`start_iperf3_server` (or ``Node.start``), which tracks and stops it."""

    port: int = 5201
    bind: str | None = None
    one_off: bool = False
    affinity: int | None = None
    cpus: Sequence[int] | None = None
    ipv4_only: bool = False

    def __post_init__(self) -> None:
        _check_int("port", self.port, 1, 65535)
        if self.bind is not None:
            _check_address("bind", self.bind)
        if self.affinity is not None:
            _check_int("affinity", self.affinity, 0, 4095)
        if self.cpus is not None:
            object.__setattr__(self, "cpus", _cpu_tuple("cpus", self.cpus))


@dataclass(frozen=True)
class IperfClientOptions:
    """An iperf3 client run (always ``--json``).

    ``server`` (-c host), ``port`` (-p), ``duration`` (-t, whole seconds), ``reverse`` (-R:
    the server sends, the client receives), ``parallel`` (-P streams), ``mss`` (-M bytes,
    optional), ``bind`` (-B local address, optional), ``affinity`` (-A client CPU) and
    ``server_affinity`` (second -A number, the server's CPU), ``omit`` (-O: seconds of warm-up
    left out of the totals), ``cpus`` (``taskset -c`` list for the client process).
    """

    server: str
    port: int = 5201
    duration: int = 10
    reverse: bool = False
    parallel: int = 1
    mss: int | None = None
    bind: str | None = None
    affinity: int | None = None
    server_affinity: int | None = None
    omit: int = 0
    cpus: Sequence[int] | None = None

    def __post_init__(self) -> None:
        _check_address("server", self.server)
        _check_int("port", self.port, 1, 65535)
        _check_int("duration", self.duration, 1, 86400)
        _check_int("parallel", self.parallel, 1, _MAX_STREAMS)
        _check_int("omit", self.omit, 0, 3600)
        if self.mss is not None:
            _check_int("mss", self.mss, 88, 9216)
        if self.bind is not None:
            _check_address("bind", self.bind)
        if self.affinity is not None:
            _check_int("affinity", self.affinity, 0, 4095)
        if self.server_affinity is not None:
            if self.affinity is None:
                raise ValueError("iperf3 option server_affinity: needs affinity (-A n,m) too")
            _check_int("server_affinity", self.server_affinity, 0, 4095)
        if self.cpus is not None:
            object.__setattr__(self, "cpus", _cpu_tuple("cpus", self.cpus))


def iperf3_server_command(
    binary: str, options: IperfServerOptions, *, env: Mapping[str, str] | None = None
) -> NodeCommand:
    """The command of an iperf3 server (``[-4] -s -p PORT [-B addr] [-1] [-A n]``), a
    background process pinned to ``options.cpus``, ``env`` for iperf3 itself (e.g. LD_PRELOAD
    + VCL_CONFIG), not for taskset."""
    argv = [binary, *(["-4"] if options.ipv4_only else []), "-s", "-p", str(options.port)]
    if options.bind is not None:
        argv += ["-B", options.bind]
    if options.one_off:
        argv.append("-1")
    if options.affinity is not None:
        argv += ["-A", str(options.affinity)]
    return NodeCommand(tuple(argv), cpus=tuple(options.cpus or ()), env=tuple((env or {}).items()))


def iperf3_client_command(
    binary: str, options: IperfClientOptions, timeout: float | None = None, *,
    env: Mapping[str, str] | None = None, cpu_ledger: str | None = None,
) -> NodeCommand:
    """The command of an iperf3 client with ``--json``: pinned to ``options.cpus``, ``env``
    for iperf3 itself, its CPU left in ``cpu_ledger`` as ``iperf3-client``, stopped after
    ``timeout`` (default :func:`default_timeout`); ``Node.run`` renders it."""
    argv = [binary, "-c", options.server, "-p", str(options.port), "-t", str(options.duration),
            "--json"]
    if options.reverse:
        argv.append("-R")
    if options.parallel != 1:
        argv += ["-P", str(options.parallel)]
    if options.mss is not None:
        argv += ["-M", str(options.mss)]
    if options.bind is not None:
        argv += ["-B", options.bind]
    if options.affinity is not None:
        pair = str(options.affinity)
        if options.server_affinity is not None:
            pair += f",{options.server_affinity}"
        argv += ["-A", pair]
    if options.omit:
        argv += ["-O", str(options.omit)]
    return NodeCommand(tuple(argv), default_timeout(options) if timeout is None else timeout,
                       tuple(options.cpus or ()), tuple((env or {}).items()),
                       Ledger(cpu_ledger, "iperf3-client") if cpu_ledger else None)


@dataclass(frozen=True)
class IperfResult:
    """Totals of one iperf3 client run (from ``end.sum_sent`` / ``end.sum_received``).

    Fields: ``sender_bps`` and ``receiver_bps`` (bits/s), ``throughput_bps`` (the receiver's,
    the figure to report), ``sender_bytes``, ``receiver_bytes``, ``duration_s`` (receiver's
    seconds), ``retransmits`` (sender's TCP retransmits; ``None`` when unavailable),
    ``max_snd_cwnd`` (bytes, largest over streams; ``None`` when unavailable: not reported,
    this client was not the sender, or the stack has no TCP_INFO), ``reverse`` (-R),
    ``streams`` (-P), ``protocol`` (``"TCP"``, ...), ``raw`` (the JSON text). ``gbps`` is
    ``throughput_bps`` in Gbit/s.
    """

    sender_bps: float
    receiver_bps: float
    throughput_bps: float
    sender_bytes: int
    receiver_bytes: int
    duration_s: float
    retransmits: int | None
    max_snd_cwnd: int | None
    reverse: bool
    streams: int
    protocol: str
    raw: str = field(default="", repr=False, compare=False)

    @property
    def gbps(self) -> float:
        """Receiver throughput in Gbit/s (10^9 bit/s)."""
        return self.throughput_bps / 1e9


class _Json:
    """Typed access to iperf3's JSON that raises ParseError quoting the text."""

    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source

    def fail(self, problem: str) -> ParseError:
        return ParseError(self.source, problem, self.text)

    def obj(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = parent.get(key)
        if not isinstance(value, dict):
            raise self.fail(f"missing or invalid {path}.{key} (expected an object)")
        return value

    def number(self, parent: Mapping[str, Any], key: str, path: str) -> float:
        value = parent.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(f"{path}.{key} is {value!r}, expected a non-negative number")
        return float(value)

    def count(self, parent: Mapping[str, Any], key: str, path: str) -> int:
        value = parent.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{path}.{key} is {value!r}, expected a non-negative integer")
        return value


def parse_iperf3_json(
    text: str, stack_reports_tcp_info: bool = True, source: str = "iperf3 --json output"
) -> IperfResult:
    """Parse the ``--json`` report of an iperf3 client into an :class:`IperfResult`.

    ``stack_reports_tcp_info=False`` (VPP's host stack on the sending side) marks
    retransmits and cwnd unavailable. Raises :class:`ParseError` quoting the text when it is
    not JSON (or truncated), when iperf3 put an ``error`` in it (e.g. "unable to connect to
    server: Connection refused"), or when ``end.sum_sent`` / ``end.sum_received`` are missing.
    ``source`` names the output in error messages.
    """
    reader = _Json(text, source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise reader.fail(f"not valid JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(document, dict):
        raise reader.fail("expected a JSON object at the top level")
    if "error" in document:
        raise reader.fail(f"iperf3 reported an error: {document['error']!r}")
    end = reader.obj(document, "end", "")
    sent = reader.obj(end, "sum_sent", "end")
    received = reader.obj(end, "sum_received", "end")
    test_start = reader.obj(reader.obj(document, "start", ""), "test_start", "start")

    reverse = bool(test_start.get("reverse", 0))
    streams = reader.count(test_start, "num_streams", "start.test_start")
    protocol = test_start.get("protocol")
    if not isinstance(protocol, str):
        raise reader.fail(f"start.test_start.protocol is {protocol!r}, expected a name")

    retransmits: int | None = None
    if stack_reports_tcp_info and "retransmits" in sent:
        retransmits = reader.count(sent, "retransmits", "end.sum_sent")

    # cwnd is measured only where this client sends (not with -R) and TCP_INFO exists.
    local_sender = bool(sent.get("sender", not reverse))
    max_snd_cwnd: int | None = None
    if stack_reports_tcp_info and local_sender:
        windows = [
            stream["sender"]["max_snd_cwnd"]
            for stream in end.get("streams", [])
            if isinstance(stream, dict) and isinstance(stream.get("sender"), dict)
            and "max_snd_cwnd" in stream["sender"]
        ]
        if any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in windows):
            raise reader.fail(f"end.streams[].sender.max_snd_cwnd values {windows!r} are not "
                              f"non-negative integers")
        max_snd_cwnd = max(windows) if windows else None

    receiver_bps = reader.number(received, "bits_per_second", "end.sum_received")
    if reader.count(received, "bytes", "end.sum_received") == 0:
        # a connection that carried nothing is a failed measurement, never 0 Gbit/s
        raise reader.fail("end.sum_received.bytes is 0: the receiver got no data (path "
                          "stalled or blocked)")
    return IperfResult(
        sender_bps=reader.number(sent, "bits_per_second", "end.sum_sent"),
        receiver_bps=receiver_bps,
        throughput_bps=receiver_bps,
        sender_bytes=reader.count(sent, "bytes", "end.sum_sent"),
        receiver_bytes=reader.count(received, "bytes", "end.sum_received"),
        duration_s=reader.number(received, "seconds", "end.sum_received"),
        retransmits=retransmits,
        max_snd_cwnd=max_snd_cwnd,
        reverse=reverse,
        streams=streams,
        protocol=protocol,
        raw=text,
    )


def default_timeout(options: IperfClientOptions) -> float:
    """Hard timeout for a client run: test time plus a margin for connect and result exchange."""
    return options.duration + options.omit + max(15.0, 0.25 * options.duration)


def run_iperf3_client(
    node: Node,
    binary: str,
    options: IperfClientOptions,
    timeout: float | None = None,
    *,
    stack_reports_tcp_info: bool = True,
    env: Mapping[str, str] | None = None,
    cpu_ledger: str | None = None,
) -> IperfResult:
    """Run an iperf3 client on ``node`` with a hard timeout and parse its JSON report.

    iperf3 --json may exit 0 even on failure (it reports errors inside the JSON), so the
    output decides: :class:`ParseError` (quoting iperf3's message) for an error report,
    :class:`CommandError` when it printed nothing or exited non-zero, :class:`CommandTimeout`
    past ``timeout`` (default :func:`default_timeout`). With ``cpu_ledger`` (a directory on
    the node) the client's CPU time is left there as ``iperf3-client`` for the next
    telemetry snapshot.
    """
    value = iperf3_client_command(binary, options, timeout, env=env, cpu_ledger=cpu_ledger)
    command = value.tool_line()
    result = node.run(value, check=False)
    LOG.debug("%s: iperf3 output:\n%s%s", node.name, result.stdout, result.stderr)
    if not result.stdout.strip():
        raise CommandError(node.name, command, result.exit_code, result.stdout, result.stderr)
    parsed = parse_iperf3_json(
        result.stdout,
        stack_reports_tcp_info=stack_reports_tcp_info,
        source=f"{node.name}: output of {command!r} (exit {result.exit_code})",
    )
    if result.exit_code != 0:
        raise CommandError(node.name, command, result.exit_code, result.stdout, result.stderr)
    LOG.info("%s: iperf3 receiver %.3f Gbit/s (sender %.3f), retransmits %s",
             node.name, parsed.gbps, parsed.sender_bps / 1e9, parsed.retransmits)
    return parsed


def start_iperf3_server(
    node: Node,
    binary: str,
    options: IperfServerOptions,
    name: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Process:
    """Start an iperf3 server in the background on ``node`` and return its process handle.

    The command value pins it (``Node.start``: the shell pins itself, then ``exec``s iperf3),
    and ``env`` goes to iperf3 only. Stop it with ``node.stop(process)``.
    """
    return node.start(iperf3_server_command(binary, options, env=env),
                      name=name or f"iperf3-server-{options.port}")
