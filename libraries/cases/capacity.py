"""Where the capacity case may measure: a capacity under a latency goal is searched on VPP only
where VPP's cores are its own (:func:`skip_where_vpp_shares_its_cores`)."""

from __future__ import annotations

from libraries.cases.context import CaseContext, Skip


def skip_where_vpp_shares_its_cores(ctx: CaseContext, node: str, stack: str) -> None:
    """Skip the test where ``stack`` is ``vpp`` and VPP on ``node`` forwards on a core the
    topology also pins other programs to (``Topology.vpp_core_sharers``), or on cores it does
    not pin. An A/B run (the context's A/B session) and the kernel stack are never skipped
    here; ``-v CAPACITY_SHARED_CORES:yes`` (the context's ``settings.shared_cores``) measures
    anyway, with a warning naming the keys."""
    if stack != "vpp" or ctx.ab is not None:
        return
    anyway = ctx.settings.shared_cores
    topology = ctx.testbed.topology
    name = topology.resolve_node(node)
    sharers = topology.vpp_core_sharers(name)
    if anyway and sharers != []:
        ctx.log.warn(f"{name}: capacity measured with VPP's cores shared (-v "
                     f"CAPACITY_SHARED_CORES:yes): {', '.join(sharers or ['not pinned'])}; "
                     "the figure includes how the programs take turns on the core")
        return
    if sharers is None:
        raise Skip(
            f"{name}: VPP's cores are not pinned (nodes.{name}.cpus.vpp_main is not set): a "
            "capacity under a latency goal needs VPP on cores of its own (-v "
            "CAPACITY_SHARED_CORES:yes measures it anyway)")
    if sharers:
        raise Skip(
            f"{name}: VPP forwards on CPU "
            f"{', '.join(map(str, topology.vpp_cores(name) or []))}, which "
            f"{', '.join(sharers)} also pin programs to: VPP's main loop polls and "
            "leaves the core only when the scheduler takes it, so a capacity under a "
            "latency goal would measure how they take turns on it, not the host stack; "
            "give VPP cores of its own in the topology "
            f"(nodes.{name}.cpus.vpp_main / vpp_workers), or measure it anyway with -v "
            "CAPACITY_SHARED_CORES:yes")
