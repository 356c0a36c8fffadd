"""Which host stack an application runs on: the Linux kernel's, or VPP's through LD_PRELOAD
and VCL where the suite runs VPP on the application's node (``CaseContext.vpp``), and the
address it is reached at. Plain functions of a :class:`~libraries.cases.context.CaseContext`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from libraries.cases.context import CaseContext
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Process


def app_environment(ctx: CaseContext, node: str, app: str, stack: str,
                    program: str) -> dict[str, str] | None:
    """Environment putting ``app`` (run by ``program``: iperf3, nginx, wrk) on VPP's host
    stack when ``stack`` is vpp and this suite's VPP runs on ``node``; None (kernel stack)
    otherwise."""
    if stack == "kernel":
        return None
    if stack != "vpp":
        raise HostStackError(f"unknown stack {stack!r}: expected kernel or vpp")
    placement = ctx.vpp
    name = ctx.testbed.topology.resolve_node(node) if placement is not None else node
    if placement is None or not placement.runs_vpp(name):
        return None  # e.g. the TG of a 3node testbed: only the DUT runs VPP
    env, path, text = placement.app_environment(name, app, program, ctx.side_vcl(app))
    ctx.log.info(f"VCL config of {app} on {name} ({path}):\n{text}")
    return env


def client_environment(ctx: CaseContext, node: str, stack: str,
                       program: str) -> Callable[[], dict[str, str] | None]:
    """:func:`app_environment` of the ``client`` app, as a getter read per trial. In an A/B
    run a side with other client VCL lines or another VPP install (its LD_PRELOAD) renders it
    again on every switch: the client starts per trial, so it is a component with nothing to
    stop."""
    env = {"now": app_environment(ctx, node, "client", stack, program)}
    if env["now"] is not None:
        def render() -> None:
            env["now"] = app_environment(ctx, node, "client", stack, program)

        ctx.component_started(f"vcl-client-{node}", {("vcl", "client"), ("vpp", node)},
                              lambda: None, render)
    return lambda: env["now"]


def app_address(ctx: CaseContext, app: str, target: str, seen_from: str, stack: str) -> str:
    """Address to reach ``app`` on ``target``: its VPP namespace's address in the loopback
    layout, else the topology's address of ``target`` as seen from ``seen_from``."""
    placement = ctx.vpp if stack == "vpp" else None
    address = placement.app_address(app) if placement is not None else None
    return address or ctx.testbed.topology.address_of(target, seen_from=seen_from)


def require_app_on_vpp(ctx: CaseContext, node: str, port: int, app: str) -> None:
    """Fail with "the application is not on VPP's host stack" unless VPP lists ``app``'s
    listener on ``port``; log the sessions either way."""
    if ctx.vpp is None:
        raise HostStackError("VPP keywords are not imported in this suite")
    name = ctx.testbed.topology.resolve_node(node)
    text = ctx.vpp.sessions(name)
    ctx.log.info(f"VPP sessions on {name}:\n{text}")
    ctx.vpp.require_listener(text, port, app)


def wait_until_listed(ctx: CaseContext, node: str, port: int, app: str, process: Process,
                      timeout: float = 10.0) -> None:
    """Wait until VPP lists ``app``'s listener on ``port`` (an app over VPP has no kernel
    socket to wait for); fail with its output if it exits, or with VPP's sessions."""
    if ctx.vpp is None:
        raise HostStackError("VPP keywords are not imported in this suite")
    target = ctx.testbed.node(node)
    deadline = time.monotonic() + timeout
    while True:
        if not target.is_running(process):
            raise HostStackError(f"{target.where}: {app} exited before listening on VPP: "
                                 f"{target.read_log(process)[-2000:]!r}")
        try:
            require_app_on_vpp(ctx, node, port, app)
            return
        except HostStackError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)
