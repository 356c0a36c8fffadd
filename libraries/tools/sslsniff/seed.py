"""Seed 004's sslsniff program: bpftime's ``example/tracing/sslsniff``, a libbpf tool.

The same binary runs two ways: attached by the kernel (``sudo ./sslsniff`` in the seed; here
:func:`start_kernel_sslsniff`) and under bpftime (``bpftime load ./sslsniff``,
:mod:`libraries.tools.bpftime`). It is told to probe one libssl by path (``--no-openssl
--no-gnutls --no-nss --extra-lib openssl:LIB``: its default asks ``ldconfig``, which names
``/lib/...``, a path the kernel then reports for the probes) and, in kernel mode, one PID
(``-p``: the program attaches its uprobes to that process only; without it they also fire in
a load generator on the same machine, as in the seed, whose 4 events per request were 2 from
nginx and 2 from wrk).

The program prints every SSL_read/SSL_write with up to 8 KiB of its data; the seed's build was
made quiet. Here its output goes through an event counter on the node
(``templates/sslsniff/count_events.awk.j2``) that keeps the other lines and ends with the
bpftrace script's summary block, so :func:`~libraries.tools.sslsniff.tracer.parse_sslsniff_output`
reads both. The program prints totals only when stopped with SIGINT (SIGTERM kills it).
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from typing import Any

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import ToolMissing
from libraries.testbed.process_output import wait_for_output
from libraries.tools.bpftime import stop_with_sigint
from libraries.tools.render import render
from libraries.tools.sslsniff.kernel import (
    KernelTracer,
    RunningTracer,
    mount_tracing,
    wait_attached,
)
from libraries.tools.sslsniff.tracer import (
    DEFAULT_LIBSSL,
    LABELS,
    SUMMARY_BEGIN,
    SUMMARY_END,
    SslsniffParams,
    SslsniffResult,
    TracerError,
    exit_reason,
    parse_sslsniff_output,
)

LOG = logging.getLogger(__name__)
COUNTER_TEMPLATE = "sslsniff/count_events.awk.j2"
COUNTER_NAME = "sslsniff-count.awk"
#: what ``sslsniff --version`` prints (argp_program_version of the example)
_VERSION = re.compile(r"^(sslsniff \S+)$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class SeedSslsniff:
    """How to run the seed's sslsniff binary.

    Fields: ``binary`` (absolute path, e.g. ``/opt/bpftime/example/sslsniff``), ``library``
    (the libssl probed; nginx's), ``pid`` (kernel mode: the one process to attach to; None
    attaches to every process mapping the library, which under bpftime means the processes
    started with bpftime's agent).
    """

    binary: str
    library: str = DEFAULT_LIBSSL
    pid: int | None = None

    def __post_init__(self) -> None:
        for name in ("binary", "library"):
            value = getattr(self, name)
            if not isinstance(value, str) or not re.fullmatch(r"/[A-Za-z0-9_./+-]+", value):
                raise ValueError(f"SeedSslsniff.{name}: expected an absolute path of letters, "
                                 f"digits and _./+-, got {value!r}")
        pid = self.pid
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid < 1):
            raise ValueError(f"SeedSslsniff.pid: expected a process ID >= 1 or None, got {pid!r}")

    @property
    def args(self) -> list[str]:
        """The program's arguments: OpenSSL at ``library`` only, ``-p PID`` when given."""
        args = ["--no-openssl", "--no-gnutls", "--no-nss", "--extra-lib",
                f"openssl:{self.library}"]
        if self.pid is not None:
            args += ["-p", str(self.pid)]
        return args

    @property
    def argv(self) -> list[str]:
        """Binary and arguments (kernel mode)."""
        return [self.binary, *self.args]


def counter_script() -> str:
    """The awk event counter (see the template for its output contract)."""
    return render(COUNTER_TEMPLATE, {"labels": LABELS, "begin": SUMMARY_BEGIN,
                                     "end": SUMMARY_END})


def counted(command: str, counter_path: str) -> str:
    """``command`` with stdout and stderr piped through the counter at ``counter_path``.

    The counter ignores SIGINT, so it outlives the program and prints the summary. mawk
    (Debian's awk) reads a pipe in large blocks unless ``-W interactive``: without it the
    program's header, the readiness sign, would show only at exit.
    """
    script = shlex.quote(counter_path)
    return (f"{command} 2>&1 | (trap '' INT; if command -v mawk >/dev/null; then "
            f"exec mawk -W interactive -f {script}; else exec awk -f {script}; fi)")


def install_counter(node: Any) -> str:
    """Put the counter script in ``node``'s work directory; returns its path."""
    path = f"{node.workdir}/{COUNTER_NAME}"
    node.put(counter_script(), path)
    return path


def detect_seed_sslsniff(node: Any, binary: str) -> KernelTracer:
    """The seed's sslsniff on ``node`` as a kernel tracer (kind ``libbpf``): its version
    line and the first 16 hex digits of its SHA-256 (which build it was), and bpftool.

    Raises :class:`ToolMissing` naming what is absent, so the variant skips with the reason.
    """
    script = (f"b={shlex.quote(binary)}; test -x \"$b\" || {{ echo missing; exit 0; }}; "
              '"$b" --version 2>&1 | head -n 3; sha256sum "$b"; '
              'p=$(command -v bpftool) && echo "bpftool=$p"')
    out = node.run(script, timeout=20, check=False).stdout
    if out.strip() == "missing":
        raise ToolMissing(f"sslsniff (bpftime's example/tracing/sslsniff) not installed on "
                          f"{node.name}: {binary} missing (not packaged; build it from source)")
    version = _VERSION.search(out)
    digest = re.search(r"^([0-9a-f]{64})\s", out, re.MULTILINE)
    if version is None or digest is None:
        raise ToolMissing(f"{node.name}: {binary} does not answer like bpftime's sslsniff "
                          f"example (`--version` should print 'sslsniff 0.1'): {out.strip()!r}")
    bpftool = re.search(r"^bpftool=(\S+)$", out, re.MULTILINE)
    if bpftool is None:
        raise ToolMissing(f"bpftool not installed on {node.name}: needed to prove that "
                          "sslsniff's uprobes are attached and gone afterwards")
    return KernelTracer("libbpf", binary, f"{version.group(1)} sha256:{digest.group(1)[:16]}",
                        bpftool.group(1), ())


def nginx_worker(pids: set[int] | list[int], master: int) -> int:
    """The one nginx worker to give ``-p`` (the master does no SSL I/O); TracerError when
    there is not exactly one (the program takes a single PID)."""
    workers = sorted(set(pids) - {master})
    if len(workers) != 1:
        raise TracerError(f"the seed's sslsniff takes one -p PID: expected one nginx worker "
                          f"besides master {master}, found {workers or 'none'}")
    return workers[0]


def wait_header(node: Any, process: Any, what: str, timeout: float = 30.0) -> str:
    """Wait until the program printed its header: it has made its attach calls by then.
    Returns its output so far; TracerError with the output when it exits first, takes longer
    than ``timeout`` s, or reports that a probe did not attach ("no program attached for
    ..."; the program goes on without it). The output is read, and the process looked for, as
    the node does for any process it started (``read_log``, ``is_running``: as the user who
    started it, so a root program's log is read behind ``sudo`` from a login that is not
    root)."""
    output = wait_for_output(node, process, "FUNC", timeout, poll=0.2)
    if output.found:
        if "no program attached" in output.text:
            raise TracerError(f"{node.name}: {what}: a probe did not attach; its output:\n"
                              f"    {output.text.strip()[-2000:]}")
        return output.text
    if output.ended:
        raise TracerError(f"{node.name}: {what} exited before attaching; its output:\n"
                          f"    {exit_reason(output.text)}")
    raise TracerError(f"{node.name}: {what} printed no header after {timeout:g} s; "
                      f"its output:\n    {exit_reason(output.text)}")


def start_kernel_sslsniff(node: Any, program: SeedSslsniff, tracer: KernelTracer,
                          name: str = "sslsniff-libbpf", attach_timeout: float = 30.0,
                          sudo: bool = True) -> RunningTracer:
    """Start the program as root (as ``sudo ./sslsniff``), counted, and wait until bpftool
    shows its four uprobes (SSL_read and SSL_write, entry and return) on the library.

    Raises :class:`TracerError` with its output when it exits first or does not attach in
    ``attach_timeout`` s (it is stopped then).
    """
    if program.pid is None:
        raise TracerError("kernel mode needs a PID (-p): without it the uprobes fire in every "
                          "process using the library, the load generator included")
    mount_tracing(node)
    command = counted(" ".join(shlex.quote(a) for a in program.argv), install_counter(node))
    extra = {"sudo": True} if sudo else {}
    process = node.start(NodeCommand.shell(command), name=name, **extra)
    running = RunningTracer(process, tracer, command, program.library,
                            SslsniffParams(library=program.library, pids=(program.pid,)))
    try:
        wait_header(node, process, "sslsniff", attach_timeout)
        wait_attached(node, running, attach_timeout)
    except BaseException:
        stop_with_sigint(node, process)
        raise
    LOG.info("%s: seed sslsniff attached to %s for pid %d", node.name, program.library,
             program.pid)
    return running


def stop_kernel_sslsniff(node: Any, running: RunningTracer) -> SslsniffResult:
    """SIGINT the program (it detaches and exits), let the counter print, parse the counts."""
    log = stop_with_sigint(node, running.process)
    return parse_sslsniff_output(log, source=f"{node.name}: output of {running.command!r}",
                                 tracer="libbpf")
