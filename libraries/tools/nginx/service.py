"""Run an nginx instance on a node: upload its config, check it with ``nginx -t``, start it
in the foreground under our process tracking, and wait until it listens.

Shared by the SSL proxy, stream proxy and sslsniff cases; the configs themselves come from
:mod:`libraries.tools.nginx.config`.
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import HostStackError, NodeError
from libraries.testbed.node import Node, Process
from libraries.tools.nginx.config import TEMP_PATHS

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class NginxHandle:
    """A running nginx: its node, process, config file, prefix, error log and ports."""

    node: str
    name: str
    process: Process
    config_path: str
    prefix: str
    error_log: str
    ports: tuple[int, ...]


def instance_prefix(node: Node, name: str) -> str:
    """Per-instance directory under the node's work directory."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"nginx instance name {name!r}: expected letters, digits, _ . -")
    return f"{node.workdir}/{name}"


def nginx_command(binary: str, config_path: str, prefix: str,
                  env: dict[str, str] | None = None,
                  cpus: list[int] | None = None) -> NodeCommand:
    """nginx with ``config_path`` under ``prefix`` (``-c <config> -p <prefix>/``), a
    background process pinned to ``cpus``, ``env`` for nginx itself."""
    return NodeCommand((binary, "-c", config_path, "-p", f"{prefix}/"),
                       cpus=tuple(cpus or ()), env=tuple((env or {}).items()))


def start_nginx(
    node: Node,
    name: str,
    config: str,
    ports: list[int],
    binary: str = "nginx",
    env: dict[str, str] | None = None,
    cpus: list[int] | None = None,
    startup_timeout: float = 10.0,
) -> NginxHandle:
    """Upload ``config`` as ``<prefix>/nginx.conf``, validate it, start nginx, wait for
    ``ports``.

    The config must use ``daemon off;`` and keep pid, error log and temp paths under
    :func:`instance_prefix` (the renderers in :mod:`libraries.tools.nginx.config` do). Fails with
    nginx's own message and the config's line when ``nginx -t`` rejects it, naming the holder
    when a port is in use, and with nginx's output when it exits before listening.
    """
    prefix = instance_prefix(node, name)
    config_path = f"{prefix}/nginx.conf"
    # <prefix>/logs: a source-built nginx opens its compiled-in default error log there
    # before it reads the config.
    dirs = " ".join(shlex.quote(f"{prefix}/{d}") for d in (*(f"{t}_temp" for t in TEMP_PATHS),
                                                          "logs"))
    node.run(f"mkdir -p {shlex.quote(prefix)} {dirs}", timeout=10, sudo=True)
    node.put(config, config_path, sudo=True)
    command = nginx_command(binary, config_path, prefix, env, cpus)
    check = node.run(NodeCommand.shell(f"{command.quoted()} -t 2>&1", 20), sudo=True,
                     check=False)
    if check.exit_code != 0:
        raise HostStackError(
            f"{node.where}: nginx rejected {config_path} (`{binary} -t` exited "
            f"{check.exit_code}):\n    {check.stdout.strip()}\n--- {config_path} ---\n{config}"
        )
    for port in ports:
        node.ensure_port_free(port)
    process = node.start(command, name=name, sudo=True)
    try:
        for port in ports:
            node.wait_for_listener(port, process, timeout=startup_timeout)
    except NodeError:
        node.stop(process, grace=1)
        raise
    return NginxHandle(node.name, name, process, config_path, prefix,
                       _error_log_path(config, prefix), tuple(ports))


def _error_log_path(config: str, prefix: str) -> str:
    match = re.search(r"^\s*error_log\s+(\S+)", config, flags=re.M)
    return match.group(1) if match else f"{prefix}/logs/error.log"


def stub_status_requests(node: Node, port: int, address: str = "127.0.0.1") -> int:
    """Total requests nginx has handled, read from its ``stub_status`` page on ``port``."""
    url = f"http://{address}:{int(port)}/status"
    text = node.run(f"curl -sS --max-time 5 {shlex.quote(url)}", timeout=10, quiet=True).stdout
    # "Active connections: 1\nserver accepts handled requests\n 10 10 42\nReading: ..."
    match = re.search(r"server accepts handled requests\s*\n\s*(\d+)\s+(\d+)\s+(\d+)", text)
    if match is None:
        raise HostStackError(f"{node.where}: {url} is not an nginx stub_status page: {text!r}")
    return int(match.group(3))


def stream_module_from_build(configure: str, binary: str = "nginx") -> str | None:
    """Which ``load_module`` an nginx build needs for the stream proxy, from its ``nginx -V``
    output: the path of ``ngx_stream_module.so`` when stream is a dynamic module
    (``--with-stream=dynamic``, in ``--modules-path`` or else ``<--prefix>/modules``), None
    when it is built in (``--with-stream``). Debian's nginx and a build from source differ here,
    so an A/B side with its own binary loads its own module, never Debian's.

    Raises :class:`HostStackError` naming ``binary`` when the output has no configure arguments
    or the build has no stream module.
    """
    match = re.search(r"^configure arguments:(.*)$", configure, flags=re.M)
    if match is None:
        raise HostStackError(f"`{binary} -V` printed no 'configure arguments:' line: "
                             f"{configure.strip()[-300:]!r}")
    try:
        words = shlex.split(match.group(1))
    except ValueError as error:
        raise HostStackError(f"`{binary} -V`: configure arguments do not parse ({error}): "
                             f"{match.group(1).strip()[-300:]!r}") from None
    options = dict(_configure_option(word) for word in words)
    stream = options.get("--with-stream", False)
    if stream is True:
        return None
    if stream != "dynamic":
        raise HostStackError(f"{binary} was built without the stream module (`{binary} -V` "
                             "shows neither --with-stream nor --with-stream=dynamic): the "
                             "stream proxy needs one")
    prefix = options.get("--prefix") or "/usr/local/nginx"
    modules = options.get("--modules-path") or f"{str(prefix).rstrip('/')}/modules"
    return f"{str(modules).rstrip('/')}/ngx_stream_module.so"


def _configure_option(word: str) -> tuple[str, str | bool]:
    name, sep, value = word.partition("=")
    return (name, value) if sep else (name, True)


def stream_module_of(node: Node, binary: str = "nginx") -> str | None:
    """:func:`stream_module_from_build` for ``binary`` on ``node`` (asks ``binary -V``);
    the module file must exist there. Raises :class:`HostStackError` naming the node."""
    result = node.run(f"{shlex.quote(binary)} -V 2>&1", timeout=15, check=False, quiet=True,
                      sudo=True)
    if result.exit_code != 0:
        raise HostStackError(f"{node.where}: `{binary} -V` exited {result.exit_code}: "
                             f"{result.stdout.strip()[-300:]!r}")
    try:
        module = stream_module_from_build(result.stdout, binary)
    except HostStackError as error:
        raise HostStackError(f"{node.where}: {error}") from None
    if module is not None:
        found = node.run(f"test -f {shlex.quote(module)}", timeout=10, check=False, quiet=True,
                         sudo=True)
        if found.exit_code != 0:
            raise HostStackError(f"{node.where}: {binary} loads the stream module from "
                                 f"{module} (`{binary} -V`: --with-stream=dynamic), which is "
                                 "missing (Debian: libnginx-mod-stream)")
    return module


def nginx_is_alive(node: Node, handle: NginxHandle) -> None:
    """Fail with its error log when the instance died (e.g. mid-trial)."""
    if not node.is_running(handle.process):
        log = node.get(handle.error_log, check=False, sudo=True)[-2000:]
        output = node.read_log(handle.process)[-1000:]
        raise HostStackError(
            f"{node.where}: nginx {handle.name} is no longer running; output: {output!r}; "
            f"error log {handle.error_log}: {log!r}"
        )
