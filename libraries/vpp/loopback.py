"""The seeds' one-node VPP layout: a loopback, IP table and app namespace per application.

``LoopbackHostStackPlan`` describes it (cross-table routes join the applications' tables along
the plan's links); ``configure_loopback_host_stack`` applies it through a
:class:`~libraries.vpp.hoststack.HostStack` in the seed's order and returns what it created;
``teardown_loopback_host_stack`` undoes it, also after a partial failure.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any

from libraries.testbed.errors import PapiError
from libraries.vpp.hoststack import HostStack, interface_address

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamespaceSpec:
    """One application's place: app namespace id, its IP table, loopback address, secret."""

    namespace_id: str
    table_id: int
    address: str
    secret: int


@dataclass(frozen=True)
class CrossTableRoute:
    """``ip route add <prefix> table <table_id> via lookup in table <via_table_id>``."""

    prefix: str
    table_id: int
    via_table_id: int


@dataclass(frozen=True)
class LoopbackHostStackPlan:
    """The seeds' 1node layout: loopback + table + namespace per app, routes along ``links``.

    For each link (a, b), b's host address is routed in a's table via b's table, then (after
    all forward routes) a's in b's via a's, which is the seeds' order.
    """

    namespaces: tuple[NamespaceSpec, ...]
    links: tuple[tuple[str, str], ...]
    enable_session: bool = False

    def __post_init__(self) -> None:
        ids = [ns.namespace_id for ns in self.namespaces]
        tables = [ns.table_id for ns in self.namespaces]
        if not ids or len(set(ids)) != len(ids) or len(set(tables)) != len(tables):
            raise PapiError(f"loopback plan: expected distinct namespace ids and tables, "
                            f"got {ids} / {tables}")
        if 0 in tables:
            raise PapiError("loopback plan: table 0 is VPP's default table; use 1 and up")
        for a, b in self.links:
            if a not in ids or b not in ids:
                raise PapiError(f"loopback plan: link ({a}, {b}) names an unknown namespace; "
                                f"known: {ids}")
        for ns in self.namespaces:
            interface_address(ns.address)

    def namespace(self, namespace_id: str) -> NamespaceSpec:
        return next(ns for ns in self.namespaces if ns.namespace_id == namespace_id)

    def routes(self) -> tuple[CrossTableRoute, ...]:
        """The cross-table routes, in the order they are added."""
        def host(ns: NamespaceSpec) -> str:
            address = ipaddress.ip_interface(ns.address).ip
            return f"{address}/{address.max_prefixlen}"

        pairs = [(self.namespace(a), self.namespace(b)) for a, b in self.links]
        forward = [CrossTableRoute(host(b), a.table_id, b.table_id) for a, b in pairs]
        backward = [CrossTableRoute(host(a), b.table_id, a.table_id) for a, b in pairs]
        return tuple(forward + backward)

    @classmethod
    def ssl_proxy(cls, addresses: tuple[str, str, str] = (
            "198.19.1.1/24", "198.19.2.1/24", "198.19.3.1/24"),
            secret: int = 1234, tables: tuple[int, int, int] = (1, 2, 3),
            enable_session: bool = False) -> LoopbackHostStackPlan:
        """Seed 000: namespaces server, proxy, client; the proxy reaches both others."""
        ids = ("server", "proxy", "client")
        return cls(tuple(NamespaceSpec(n, t, a, secret)
                         for n, t, a in zip(ids, tables, addresses, strict=True)),
                   links=(("proxy", "server"), ("proxy", "client")),
                   enable_session=enable_session)

    @classmethod
    def tcp_term(cls, addresses: tuple[str, str] = ("198.19.1.1/24", "198.19.2.1/24"),
                 secrets: tuple[int, int] = (1234, 5678), tables: tuple[int, int] = (1, 2),
                 enable_session: bool = False) -> LoopbackHostStackPlan:
        """Seed 001: namespaces server and client, each reaching the other."""
        ids = ("server", "client")
        return cls(tuple(NamespaceSpec(n, t, a, s)
                         for n, t, a, s in zip(ids, tables, addresses, secrets, strict=True)),
                   links=(("client", "server"),), enable_session=enable_session)


@dataclass(frozen=True)
class ConfiguredNamespace:
    """What was created for one namespace: namespace_id, sw_if_index, table_id, address,
    secret, appns_index."""

    namespace_id: str
    sw_if_index: int
    table_id: int
    address: str
    secret: int
    appns_index: int


@dataclass(frozen=True)
class LoopbackHostStack:
    """Result of ``configure_loopback_host_stack``: ``namespaces`` and ``routes`` created."""

    namespaces: tuple[ConfiguredNamespace, ...]
    routes: tuple[CrossTableRoute, ...]

    def namespace(self, namespace_id: str) -> ConfiguredNamespace:
        for ns in self.namespaces:
            if ns.namespace_id == namespace_id:
                return ns
        raise PapiError(f"no VPP app namespace {namespace_id!r}; configured: "
                        f"{[ns.namespace_id for ns in self.namespaces]}")


@dataclass
class _Created:
    loopbacks: list[int] = field(default_factory=list)
    tables: list[int] = field(default_factory=list)
    bound: list[int] = field(default_factory=list)
    addresses: list[tuple[int, str]] = field(default_factory=list)
    namespaces: list[ConfiguredNamespace] = field(default_factory=list)
    routes: list[CrossTableRoute] = field(default_factory=list)


def configure_loopback_host_stack(hs: HostStack,
                                  plan: LoopbackHostStackPlan) -> LoopbackHostStack:
    """Apply ``plan`` in the seed's vppctl order; on failure undo what was done and re-raise."""
    created = _Created()
    try:
        if plan.enable_session:
            hs.enable_session_layer()
        for _ in plan.namespaces:
            sw_if_index = hs.create_loopback()
            created.loopbacks.append(sw_if_index)
            hs.set_interface_up(sw_if_index)
        for ns, sw_if_index in zip(plan.namespaces, created.loopbacks, strict=True):
            hs.add_ip_table(ns.table_id)
            created.tables.append(ns.table_id)
            hs.bind_interface_to_table(sw_if_index, ns.table_id)
            created.bound.append(sw_if_index)
        for ns, sw_if_index in zip(plan.namespaces, created.loopbacks, strict=True):
            hs.add_interface_address(sw_if_index, ns.address)
            created.addresses.append((sw_if_index, ns.address))
        for ns, sw_if_index in zip(plan.namespaces, created.loopbacks, strict=True):
            appns_index = hs.add_app_namespace(ns.namespace_id, ns.secret, sw_if_index)
            created.namespaces.append(ConfiguredNamespace(
                ns.namespace_id, sw_if_index, ns.table_id, ns.address, ns.secret, appns_index))
        for route in plan.routes():
            hs.add_route_via_table_lookup(route.prefix, route.table_id, route.via_table_id)
            created.routes.append(route)
    except PapiError:
        problems = _undo(hs, created)
        if problems:
            logger.warning("undo of the partial VPP host stack left: %s", "; ".join(problems))
        raise
    stack = LoopbackHostStack(tuple(created.namespaces), tuple(created.routes))
    logger.info("VPP loopback host stack: %s", ", ".join(
        f"{ns.namespace_id}: sw_if_index {ns.sw_if_index} table {ns.table_id} {ns.address}"
        for ns in stack.namespaces))
    return stack


def teardown_loopback_host_stack(hs: HostStack, stack: LoopbackHostStack) -> None:
    """Undo ``stack``: routes, app namespaces, addresses, table bindings, loopbacks, tables.

    Every step is tried; PapiError at the end lists the steps that failed. Not undone: the
    session layer stays enabled (VPP is normally stopped after the suite anyway).
    """
    created = _Created(
        loopbacks=[ns.sw_if_index for ns in stack.namespaces],
        tables=[ns.table_id for ns in stack.namespaces],
        bound=[ns.sw_if_index for ns in stack.namespaces],
        addresses=[(ns.sw_if_index, ns.address) for ns in stack.namespaces],
        namespaces=list(stack.namespaces), routes=list(stack.routes))
    problems = _undo(hs, created)
    if problems:
        raise PapiError("teardown of the VPP loopback host stack failed: " + "; ".join(problems))


def _undo(hs: HostStack, created: _Created) -> list[str]:
    steps: list[tuple[Any, tuple[Any, ...]]] = []
    steps += [(hs.add_route_via_table_lookup, (r.prefix, r.table_id, r.via_table_id, False))
              for r in reversed(created.routes)]
    steps += [(hs.delete_app_namespace, (ns.namespace_id, ns.secret, ns.sw_if_index))
              for ns in reversed(created.namespaces)]
    steps += [(hs.delete_interface_address, item) for item in reversed(created.addresses)]
    steps += [(hs.bind_interface_to_table, (i, 0)) for i in reversed(created.bound)]
    steps += [(hs.delete_loopback, (i,)) for i in reversed(created.loopbacks)]
    steps += [(hs.delete_ip_table, (t,)) for t in reversed(created.tables)]
    problems = []
    for function, args in steps:
        try:
            function(*args)
        except PapiError as err:
            problems.append(str(err))
    return problems
