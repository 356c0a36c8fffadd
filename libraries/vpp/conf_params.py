"""Typed, validated parameters for the VCL config and VPP's startup.conf templates.

Defaults follow the seeds: ``VclParams()`` is seed 000's VCL block (64M heap, 4 GB segments,
4 MB fifos, global scope); ``VppStartupParams(no_hugepages=True)`` is the stanza set that
runs VPP without hugepages (measured on a VM with none). A bad value raises RenderError
naming the field and what was expected, on construction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from libraries.testbed.errors import RenderError
from libraries.tools.render import render

APP_NS_SOCKET_DIR = "/var/run/vpp/app_ns_sockets"
DPDK_PLUGIN = "dpdk_plugin.so"
_SIZE = re.compile(r"^\d+[kKmMgG]?$")
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")
_VDEV = re.compile(r"^net_af_packet\d+,iface=[A-Za-z0-9_.\-]+$")


def _fail(owner: Any, field: str, expected: str, value: Any) -> RenderError:
    return RenderError(f"{type(owner).__name__}.{field}: expected {expected}, got {value!r}")


def _check(owner: Any, field: str, ok: bool, expected: str) -> None:
    if not ok:
        raise _fail(owner, field, expected, getattr(owner, field))


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _optional_int(owner: Any, field: str, minimum: int) -> None:
    value = getattr(owner, field)
    _check(owner, field, value is None or _is_int(value, minimum), f"an integer >= {minimum}")


def _optional_text(accepts: Callable[[str], bool], expected: str
                   ) -> Callable[[Any, str], None]:
    """A check of an optional text field: None, or a string ``accepts`` takes (else
    RenderError naming the field and ``expected``)."""
    def check(owner: Any, field: str) -> None:
        value = getattr(owner, field)
        _check(owner, field, value is None or (isinstance(value, str) and accepts(value)),
               expected)
    return check


def _absolute(path: str) -> bool:
    return path.startswith("/") and bool(_NAME.match(path))


_optional_size = _optional_text(lambda v: bool(_SIZE.match(v)), "a size like '64M', '4k' or '1G'")
_optional_path = _optional_text(_absolute, "an absolute path without spaces or braces")
_optional_path_list = _optional_text(lambda v: all(map(_absolute, v.split(":"))),
                                     "absolute paths without spaces or braces, ':'-separated")
_optional_name = _optional_text(lambda v: bool(_NAME.match(v)),
                                "a name of letters, digits, '_', '-', '.'")


def _tuple(owner: Any, field: str) -> tuple:
    value = getattr(owner, field)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise _fail(owner, field, "a list", value)
    object.__setattr__(owner, field, tuple(value))
    return tuple(value)


@dataclass(frozen=True, kw_only=True)
class VclParams:
    """VCL config of one LD_PRELOADed application (``VCL_CONFIG`` file).

    Fields (None: line omitted): heapsize ('64M'), segment_size, add_segment_size,
    rx_fifo_size, tx_fifo_size (bytes), namespace_id / namespace_secret (app namespace),
    app_scope_global / app_scope_local, use_mq_eventfd (needed by event-driven apps:
    nginx, wrk), app_socket_api (None: ``/var/run/vpp/app_ns_sockets/<namespace_id or
    default>``), extra (more option lines, e.g. an A/B side's ``rx-fifo-size 400000``).
    """

    heapsize: str | None = "64M"
    segment_size: int | None = 4000000000
    add_segment_size: int | None = 4000000000
    rx_fifo_size: int | None = 4000000
    tx_fifo_size: int | None = 4000000
    namespace_id: str | None = None
    namespace_secret: int | None = None
    use_mq_eventfd: bool = False
    app_scope_global: bool = True
    app_scope_local: bool = False
    app_socket_api: str | None = None
    extra: tuple[str, ...] = ()

    template = "vcl/vcl.conf.j2"

    def __post_init__(self) -> None:
        _optional_size(self, "heapsize")
        for field in ("segment_size", "add_segment_size", "rx_fifo_size", "tx_fifo_size"):
            _optional_int(self, field, 1)
        _optional_name(self, "namespace_id")
        _optional_int(self, "namespace_secret", 0)
        _optional_path(self, "app_socket_api")
        _check(self, "extra", all(isinstance(line, str) and re.fullmatch(
            r"[a-z0-9-]+( [^{}\n]+)?", line) for line in _tuple(self, "extra")),
            "VCL option lines like 'rx-fifo-size 400000'")
        _check(
            self, "namespace_secret",
            self.namespace_secret is None or self.namespace_id is not None,
            "no secret without a namespace_id",
        )

    @property
    def socket_path(self) -> str:
        """The app-socket-api path rendered."""
        if self.app_socket_api:
            return self.app_socket_api
        return f"{APP_NS_SOCKET_DIR}/{self.namespace_id or 'default'}"

    def render(self) -> str:
        """The VCL config text."""
        return render(self.template, self)


def vcl_for_program(program: str, namespace_id: str | None, secret: int | None,
                    socket_dir: str) -> VclParams:
    """The seeds' VCL block for ``program``: iperf3 as seed 001 (4 MB fifos only), nginx as
    seed 000 (64M heap, 4 GB segments, 4 MB fifos), wrk as seed 000's wrk2 (plus
    ``use-mq-eventfd``: an event-driven app busy-polls without it, as measured). nginx gets
    ``use-mq-eventfd`` too (measured: without it preloaded nginx busy-polls a core)."""
    socket = f"{socket_dir}/{namespace_id or 'default'}"
    common: dict[str, Any] = {"namespace_id": namespace_id, "namespace_secret": secret,
                              "app_socket_api": socket}
    if program == "iperf3":
        return VclParams(heapsize=None, segment_size=None, add_segment_size=None, **common)
    if program in ("nginx", "wrk"):
        return VclParams(use_mq_eventfd=True, **common)
    raise RenderError(f"no VCL profile for program {program!r}: expected iperf3, nginx or wrk")


@dataclass(frozen=True, kw_only=True)
class DpdkDevice:
    """A NIC handed to VPP's dpdk plugin: pci ('0000:01:00.0') and interface name ('eth0')."""

    pci: str
    name: str

    def __post_init__(self) -> None:
        _check(self, "pci", isinstance(self.pci, str) and bool(_PCI.match(self.pci)),
               "a PCI address like '0000:01:00.0'")
        _check(self, "name", isinstance(self.name, str) and bool(_NAME.match(self.name)),
               "an interface name of letters, digits, '_', '-', '.'")


@dataclass(frozen=True, kw_only=True)
class VppStartupParams:
    """VPP startup.conf.

    Fields (None: line omitted): nodaemon, cli_listen, log_path, runtime_dir (unix: where VPP
    puts its stats socket and app-namespace sockets; default /run/vpp); api_socket
    (socksvr socket-name); main_core, corelist_workers (CPU list) or workers (count) (cpu);
    main_heap_size, main_heap_page_size (memory); buffers_per_numa, buffers_page_size,
    default_data_size (buffers; 10000 for jumbo frames, seed 001); statseg_page_size;
    tcp_cc_algo, tcp_mtu (tcp); session_enable, use_app_socket_api, session_event_queue_length
    (session: each worker's message queue, >= 2048; raise it with several workers);
    plugins_path (':'-separated directories), enable_plugins, disable_plugins (plugin file
    names); dpdk_devices (DpdkDevice list), dpdk_vdevs (DPDK virtual devices,
    ``net_af_packet0,iface=eth1``: rendered with ``no-pci``, so not together with
    dpdk_devices); with neither, dpdk_plugin.so is disabled.
    no_hugepages=True fills every page size left unset with '4k' and buffers_per_numa with
    16384 (measured: VPP runs so without hugepages).
    extra_sections: (name, body) pairs appended at the end (an A/B side's sections; VPP reads
    a section given twice as one input, so a later key overrides an earlier one).
    """

    nodaemon: bool = True
    cli_listen: str = "/run/vpp/cli.sock"
    log_path: str | None = None
    runtime_dir: str | None = None
    api_socket: str = "/run/vpp/api.sock"
    main_core: int | None = None
    corelist_workers: tuple[int, ...] | None = None
    workers: int | None = None
    main_heap_size: str | None = "1G"
    main_heap_page_size: str | None = None
    buffers_per_numa: int | None = None
    buffers_page_size: str | None = None
    default_data_size: int | None = None
    statseg_page_size: str | None = None
    tcp_cc_algo: str | None = "cubic"
    tcp_mtu: int | None = None
    session_enable: bool = True
    use_app_socket_api: bool = True
    session_event_queue_length: int | None = None
    plugins_path: str | None = None
    enable_plugins: tuple[str, ...] = ()
    disable_plugins: tuple[str, ...] = ()
    dpdk_devices: tuple[DpdkDevice, ...] = ()
    dpdk_vdevs: tuple[str, ...] = ()
    no_hugepages: bool = False
    extra_sections: tuple[tuple[str, str], ...] = ()

    template = "vpp/startup.conf.j2"

    def __post_init__(self) -> None:
        _optional_path(self, "cli_listen")
        _optional_path(self, "log_path")
        _optional_path(self, "runtime_dir")
        _optional_path(self, "api_socket")
        _optional_path_list(self, "plugins_path")
        _optional_int(self, "main_core", 0)
        _optional_int(self, "workers", 0)
        _optional_int(self, "buffers_per_numa", 1)
        _optional_int(self, "default_data_size", 1)
        _optional_int(self, "tcp_mtu", 68)
        _optional_int(self, "session_event_queue_length", 2048)  # VPP ignores smaller ones
        _optional_name(self, "tcp_cc_algo")
        if self.corelist_workers is not None:
            cores = _tuple(self, "corelist_workers")
            _check(self, "corelist_workers", bool(cores) and all(_is_int(c, 0) for c in cores),
                   "a non-empty list of CPU numbers")
            _check(self, "workers", self.workers is None,
                   "workers unset when corelist_workers is given (one or the other)")
        for field in ("enable_plugins", "disable_plugins"):
            names = _tuple(self, field)
            _check(self, field, all(isinstance(n, str) and n.endswith(".so")
                                    and _NAME.match(n) for n in names),
                   "plugin file names like 'dpdk_plugin.so'")
        both = set(self.enable_plugins) & set(self.disable_plugins)
        _check(self, "disable_plugins", not both, f"no plugin both enabled and disabled {both}")
        devices = _tuple(self, "dpdk_devices")
        _check(self, "dpdk_devices", all(isinstance(d, DpdkDevice) for d in devices),
               "a list of DpdkDevice")
        sections = _tuple(self, "extra_sections")
        _check(self, "extra_sections", all(
            isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
            and re.fullmatch(r"[a-z0-9-]+", pair[0]) and isinstance(pair[1], str)
            and "{" not in pair[1] and "}" not in pair[1] for pair in sections),
            "(name, body) pairs: a section name and its lines, without braces")
        vdevs = _tuple(self, "dpdk_vdevs")
        _check(self, "dpdk_vdevs", all(isinstance(v, str) and _VDEV.match(v) for v in vdevs),
               "DPDK af_packet virtual devices like 'net_af_packet0,iface=eth1'")
        _check(self, "dpdk_vdevs", not (vdevs and devices),
               "no virtual devices together with dpdk_devices (they run with no-pci)")
        _check(self, "disable_plugins",
               not ((devices or vdevs) and DPDK_PLUGIN in self.disable_plugins),
               "dpdk_plugin.so not disabled when dpdk_devices or dpdk_vdevs are given")
        if self.no_hugepages:
            for field in ("main_heap_page_size", "buffers_page_size", "statseg_page_size"):
                if getattr(self, field) is None:
                    object.__setattr__(self, field, "4k")
            if self.buffers_per_numa is None:
                object.__setattr__(self, "buffers_per_numa", 16384)
        for field in ("main_heap_size", "main_heap_page_size", "buffers_page_size",
                      "statseg_page_size"):
            _optional_size(self, field)

    @property
    def plugins_disabled(self) -> tuple[str, ...]:
        """Plugins rendered with ``{ disable }``: the given ones, plus dpdk without devices."""
        used = self.dpdk_devices or self.dpdk_vdevs or DPDK_PLUGIN in self.enable_plugins
        extra = () if used else (DPDK_PLUGIN,)
        return tuple(dict.fromkeys(self.disable_plugins + extra))

    @property
    def has_buffers(self) -> bool:
        return any(v is not None for v in (self.buffers_per_numa, self.buffers_page_size,
                                           self.default_data_size))

    def render(self) -> str:
        """The startup.conf text."""
        return render(self.template, self)
