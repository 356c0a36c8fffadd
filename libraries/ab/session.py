"""An A/B session: the two sides of a comparison file on a running testbed, the side now active,
the components of the running test, and switching between the sides.

A test's set-up starts its processes for side ``a`` and registers them as *components* (what
they use: a tool on a node, an nginx role, a tool's environment, a node's VPP, an app's VCL);
each measured trial declares what it runs too (a tool started per trial: wrk, an iperf3
client). Switching side stops and starts only the components whose inputs differ between the
sides, and every component on a node whose sysctls differ (a socket takes many sysctls when
it is made: an iperf3 server's or nginx's listener made before the switch would serve the next
trial with the other side's buffers), sets the sysctls in between, and is timed. A test whose
every difference is unused by what it runs has nothing to compare (:class:`NothingToCompare`).
No Robot Framework here: the keyword layer (``libraries.keywords.ab``) holds the session of a
suite.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from libraries.ab.comparison import ComparisonFile, Side, side_topology
from libraries.ab.duet import measure_duet, serve_duet
from libraries.ab.duet_link import DuetLink
from libraries.ab.fingerprint import SideFiles
from libraries.ab.record_block import ab_block, ab_message, side_costs
from libraries.ab.rounds import AbOutcome, measure_ab, metric_alpha
from libraries.results.adaptive import trial_name
from libraries.results.measurement import Direction, Measurement, Say, Trial, TrialObserver, silent
from libraries.results.plan import AbSettings, TrialPlan
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.tools.sysctl import (
    clear_originals,
    read_sysctls,
    write_sysctls,
)

LOG = logging.getLogger(__name__)

Use = tuple[str, ...]
"""What a component uses: ``("tool", node, tool)``, ``("nginx", role)``, ``("env", tool)``,
``("vpp", node)`` (its install and startup sections), ``("vcl", app)``."""


@dataclass
class Component:
    """A process (or VPP) a test started that a side may change: ``stop`` it, ``start`` it
    again for the side now active."""

    name: str
    uses: frozenset[Use]
    stop: Callable[[], None]
    start: Callable[[], None]


def _differs(a: Side, b: Side, use: Use) -> bool:
    kind = use[0]
    if kind == "tool":
        return a.tools.get(use[1], {}).get(use[2]) != b.tools.get(use[1], {}).get(use[2])
    if kind == "nginx":
        return a.nginx.get(use[1]) != b.nginx.get(use[1])  # type: ignore[call-overload]
    if kind == "env":
        return a.env.get(use[1]) != b.env.get(use[1])
    if kind == "vpp":
        return a.vpp.get(use[1]) != b.vpp.get(use[1]) or \
            a.startup.get(use[1]) != b.startup.get(use[1])
    if kind == "vcl":
        return a.vcl.get(use[1]) != b.vcl.get(use[1])  # type: ignore[call-overload]
    raise ValueError(f"unknown component use {use!r}")


def _nodes(component: Component) -> set[str]:
    """The nodes ``component`` runs on: those of its tools and VPP."""
    return {use[1] for use in component.uses if use[0] in ("tool", "vpp")}


def _differences(a: Side, b: Side) -> list[str]:
    """Every key the sides set differently: ``tools.dut.nginx``, ``nginx.proxy``, ``env.wrk``,
    ``vpp.dut``, ``startup.dut``, ``vcl.server``."""
    found = {f"tools.{node}.{tool}" for node in {*a.tools, *b.tools}
             for tool in {*a.tools.get(node, {}), *b.tools.get(node, {})}
             if a.tools.get(node, {}).get(tool) != b.tools.get(node, {}).get(tool)}
    for kind in ("nginx", "env", "vpp", "startup", "vcl"):
        found |= {f"{kind}.{key}" for key in {*getattr(a, kind), *getattr(b, kind)}
                  if getattr(a, kind).get(key) != getattr(b, kind).get(key)}
    return sorted(found)


class AbSession:
    """The A/B state of one suite: the comparison, the side now active, the components of the
    running test and the sysctls to put back. With ``duet`` (:mod:`libraries.ab.duet`) this
    run measures beside the other side's run, each on its own testbed: the run's own side (the
    link's) is active from the start and after every test, its set-up keywords start its
    components, and it switches only at side a's run's word (the runs cross sides round by
    round)."""

    def __init__(self, loaded: ComparisonFile, testbed: Testbed, settings: AbSettings,
                 originals: dict[str, dict[str, str]],
                 versions: dict[str, dict[str, dict[str, str]]],
                 duet: DuetLink | None = None, files: dict[str, SideFiles] | None = None):
        self.loaded, self.testbed, self.settings = loaded, testbed, settings
        self.files = files or {}
        self.base = testbed.topology
        self.originals = originals
        self.versions = versions
        self.side = "a"
        self.components: list[Component] = []
        self.duet = duet
        self.test = ""
        if duet is not None:
            self.activate(duet.side)

    @property
    def sides(self) -> dict[str, Side]:
        """``{"a": ..., "b": ...}``."""
        return {"a": self.loaded.comparison.a, "b": self.loaded.comparison.b}

    @property
    def active(self) -> Side:
        """The side now under test."""
        return self.sides[self.side]

    # -- what the case libraries ask ----------------------------------------------------------

    def nginx(self, role: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The active side's extra (http, server) directives for nginx ``role``."""
        given = self.active.nginx.get(role)  # type: ignore[call-overload]
        return (given.http, given.server) if given else ((), ())

    def startup(self, node: str) -> tuple[tuple[str, str], ...]:
        """The active side's VPP startup sections for ``node``."""
        return tuple(self.active.startup.get(node, {}).items())

    def vcl(self, app: str) -> tuple[str, ...]:
        """The active side's VCL lines for ``app``."""
        return tuple(self.active.vcl.get(app, ()))  # type: ignore[call-overload]

    def register(self, name: str, uses: set[Use], stop: Callable[[], None],
                 start: Callable[[], None]) -> None:
        """Keep the component ``name`` of the running test: a new one after the others (the
        start order), one registered again (its restart during a switch re-registers it) in
        its place, so the next switch still starts VPP before what runs on it."""
        component = Component(name, frozenset(uses), stop, start)
        names = [c.name for c in self.components]
        if name in names:
            self.components[names.index(name)] = component
        else:
            self.components.append(component)

    # -- switching ------------------------------------------------------------------------------

    def activate(self, side: str) -> None:
        """Make ``side`` active: the testbed's topology as it sees it, its sysctls set (a key
        only the other side sets goes back to its original value)."""
        self.side = side
        self.testbed.topology = side_topology(self.base, self.sides[side])
        for node, values in self._sysctls(self.sides[side]).items():
            write_sysctls(self.testbed.nodes[node], values)

    def _sysctls(self, side: Side) -> dict[str, dict[str, str]]:
        return {node: {key: str(side.sysctl.get(node, {}).get(key, original))
                       for key, original in keys.items()}
                for node, keys in self.originals.items()}

    def affected(self) -> list[Component]:
        """The components whose inputs differ between the sides, or that run on a node whose
        sysctls differ, in start order."""
        a, b = self.sides["a"], self.sides["b"]
        nodes = self._sysctl_nodes()
        return [c for c in self.components
                if any(_differs(a, b, use) for use in c.uses) or _nodes(c) & nodes]

    def _sysctl_nodes(self) -> set[str]:
        """The nodes whose sysctls differ between the sides."""
        on_a, on_b = self._sysctls(self.sides["a"]), self._sysctls(self.sides["b"])
        return {node for node in on_a if on_a[node] != on_b[node]}

    def unused_difference(self, trial_uses: frozenset[Use] = frozenset()) -> str | None:
        """Why the running test cannot tell the sides apart, or None when it can: every
        difference of the sides lies in something neither a component of the test nor its
        trials (``trial_uses``: the tools a trial starts, e.g. ``("tool", "tg", "wrk")``) use
        (nginx builds on tcp_term, a VPP comparison on a kernel test, a proxy knob on the
        stream case). Sysctls always count: they are the node's, whatever runs."""
        a, b = self.sides["a"], self.sides["b"]
        if self.loaded.comparison.aa or self._sysctl_nodes():
            return None
        used = trial_uses | {use for c in self.components for use in c.uses}
        if any(_differs(a, b, use) for use in used):
            return None
        changed = _differences(a, b)
        runs = sorted({c.name for c in self.components} |
                      {f"{u[2]} on {u[1]}" for u in trial_uses if u[0] == "tool"})
        return (f"A/B {self.loaded.title}: the sides differ only in {', '.join(changed)}, "
                f"which this test does not use (it runs: {', '.join(runs) or 'nothing'}): "
                "nothing to compare (an A/A check says `aa: true`)")

    def switch(self, side: str) -> float:
        """Switch to ``side`` (see the module); the seconds it took."""
        started = time.monotonic()
        changed = self.affected() if side != self.side else []
        for component in reversed(changed):
            component.stop()
        self.activate(side)
        for component in changed:
            component.start()
        seconds = time.monotonic() - started
        LOG.info("A/B: side %s (%s) now active in %.2f s (%s restarted)", side,
                 self.sides[side].name, seconds, ", ".join(c.name for c in changed) or "nothing")
        return seconds

    def restore(self) -> list[str]:
        """Forget the test's components; the original topology and sysctls back. Returns the
        errors met (each step is tried)."""
        return list(self._restore().values())

    def _restore(self) -> dict[str, str]:
        """:meth:`restore`'s work: the error of each node whose sysctls did not go back."""
        self.components = []
        if self.duet is not None:  # the run's own side stays, for the next test's set-up
            try:
                self.activate(self.duet.side)
            except HostStackError as error:
                return {"*": str(error)}
            return {}
        self.side = "a"
        self.testbed.topology = self.base
        failed = {}
        for node, values in self.originals.items():
            try:
                write_sysctls(self.testbed.nodes[node], values)
            except HostStackError as error:
                failed[node] = str(error)
        return failed

    def close(self) -> list[str]:
        """:meth:`restore`, then the originals kept on each node removed (they are back).
        Returns the errors met; a node whose originals could not be put back keeps them."""
        duet, self.duet = self.duet, None
        failed = self._restore()
        errors = list(failed.values())
        if duet is not None:
            duet.close()
        if self.base.provision is None:
            for node in self.originals.keys() - failed.keys():
                try:
                    clear_originals(self.testbed.nodes[node])
                except HostStackError as error:
                    errors.append(str(error))
        return errors

    # -- measuring -----------------------------------------------------------------------------

    def measure(self, case: str, stack: str, parameters: dict[str, Any],
                variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
                build: Callable[[dict[str, list[Any]], float], Measurement],
                metrics: Mapping[str, Direction],
                observer: TrialObserver | None = None,
                trial_uses: frozenset[Use] = frozenset(),
                costs: Mapping[str, Direction] | None = None, say: Say = silent) -> Measurement:
        """Measure ``variants`` on both sides (:func:`~libraries.ab.rounds.measure_ab`) and
        return the A/B test's measurement: per metric the per-round ratios b / a as
        ``ab_<metric>_ratio``, both sides' figures as evidence, the comparison in ``ab``.
        ``costs``: cost metrics judged beside ``metrics`` at the same looks where both sides
        have them (:mod:`libraries.results.cost`; the looks' level split over all of them);
        ``say``: each look's line on the console. Raises :class:`NothingToCompare` when the
        test uses nothing the sides change."""
        judged = {**metrics, **(costs or {})}
        optional = frozenset(costs or {})
        if self.duet is not None:
            return self._measure_duet(case, stack, parameters, variants, plan, build, judged,
                                      observer, trial_uses, optional, say)
        if self.side != "a":
            raise HostStackError("an A/B test starts on side a (set-up keywords start it)")
        unused = self.unused_difference(trial_uses)
        if unused:
            raise NothingToCompare(unused)
        named = {variant: self._named(trial) for variant, trial in variants.items()}
        outcome = measure_ab(named, plan, build, judged, self.settings, self.switch, observer,
                             optional=optional, say=say)
        self.switch("a")
        return self._measurement(case, stack, parameters, outcome, judged, optional)

    def _measure_duet(self, case: str, stack: str, parameters: dict[str, Any],
                      variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
                      build: Callable[[dict[str, list[Any]], float], Measurement],
                      metrics: Mapping[str, Direction], observer: TrialObserver | None,
                      trial_uses: frozenset[Use],
                      optional: frozenset[str] = frozenset(), say: Say = silent) -> Measurement:
        """:meth:`measure` beside the other side's run (:mod:`libraries.ab.duet`): side a
        leads and returns the A/B measurement; side b follows and raises
        :class:`MeasuredBeside` (its trials are in side a's record)."""
        link = self.duet
        assert link is not None
        unused = self.unused_difference(trial_uses)
        if unused:  # both runs reach the same answer and skip alike
            raise NothingToCompare(unused)
        if any(use[0] == "vpp" for c in self.components for use in c.uses):
            raise NothingToCompare(
                "duet A/B: this test runs VPP; two VPPs polling the same cores would measure "
                "each other (run it as a sequential A/B test, without the duet launcher)")
        named = {variant: self._named(trial) for variant, trial in variants.items()}
        link.start_test(self.test)
        self._check_own_sysctls()
        if link.side == "b":
            stopped = serve_duet(named, build, link, self.switch, observer)
            raise MeasuredBeside(f"duet A/B: side b's run ({self.sides['b'].name}) measured "
                                 "beside side a's, whose run records and judges this test "
                                 f"({stopped})")
        outcome = measure_duet(named, plan, build, metrics, self.settings, link, self.switch,
                               observer, optional=optional, say=say)
        return self._measurement(case, stack, parameters, outcome, metrics, optional)

    def _check_own_sysctls(self) -> None:
        """Each run's sysctls read back as its side's: a key that is the host's rather than
        the network namespace's would carry the other run's value (both testbeds share the
        kernel), and the comparison would then compare nothing."""
        expected = self._sysctls(self.active)
        for node, values in expected.items():
            found = read_sysctls(self.testbed.nodes[node], sorted(values))
            wrong = {k: v for k, v in found.items() if v.split() != str(values[k]).split()}
            if wrong:
                raise HostStackError(
                    f"duet A/B side {self.side}: on {node} " + ", ".join(
                        f"{k} reads {v!r}, not this side's {values[k]!r}"
                        for k, v in wrong.items()) +
                    ": the key is shared by both sides' testbeds (not per network namespace); "
                    "compare it in a sequential A/B run")

    def _named(self, trial: Callable[[Trial], Any]) -> Callable[[Trial], Any]:
        """``trial``, whose failure (errors, a proof missing, a process dead) names the side
        it happened on, the round (:func:`~libraries.results.adaptive.trial_name`) and, in a
        duet, the run: ``A/B side b (candidate) on side a's run, round 7 of proxy: ...``."""
        def run(given: Trial) -> Any:
            try:
                return trial(given)
            except HostStackError as error:
                where = f" on side {self.duet.side}'s run" if self.duet is not None else ""
                raise HostStackError(f"A/B side {self.side} ({self.active.name}){where}, "
                                     f"{trial_name(given)}: {error}") from error
        return run

    def _measurement(self, case: str, stack: str, parameters: dict[str, Any],
                     outcome: AbOutcome, metrics: Mapping[str, Direction] | None = None,
                     costs: frozenset[str] = frozenset()) -> Measurement:
        asked = dict(metrics) if metrics is not None else \
            {m: c.direction for m, c in outcome.comparisons.items()}
        measurement = Measurement(case=case, stack=stack,
                                  parameters={**parameters, "ab": self.loaded.title},
                                  alpha=metric_alpha(self.settings, len(asked)))
        for metric, comparison in outcome.comparisons.items():
            measurement.add(f"ab_{metric}_ratio", list(comparison.ratios), "ratio",
                            comparison.direction)
        measurement.evidence["sides"] = {
            side: {"metrics": {name: m.as_record() for name, m in built.metrics.items()},
                   "evidence": built.evidence, "notes": built.notes,
                   "unavailable": built.unavailable, "invalid": built.invalid}
            for side, built in outcome.sides.items()}
        measurement.sides = dict(outcome.sides)
        for side, built in outcome.sides.items():  # a result that must not stand, either side
            name = f"side {side} ({self.sides[side].name})"
            measurement.invalid += [f"{name}: {why}" for why in built.invalid]
            measurement.invalid += [f"{name}: {metric}, compared, is unavailable: {why}"
                                    for metric, why in built.unavailable.items()
                                    if metric in outcome.comparisons]
        measurement.ab = self.block(outcome, asked, costs)
        measurement.cost = side_costs(outcome.sides, measurement.ab)
        measurement.notes.append(self.message(outcome, costs))
        return measurement

    def block(self, outcome: AbOutcome, metrics: Mapping[str, Direction] | None = None,
              costs: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The record's ``ab`` block (:func:`~libraries.results.ab_record.ab_block`)."""
        return ab_block(self.loaded, self.versions, self.settings, outcome, self.files,
                        metrics, costs)

    def message(self, outcome: AbOutcome, costs: frozenset[str] = frozenset()) -> str:
        """The test's message (:func:`~libraries.results.ab_record.ab_message`)."""
        return ab_message(self.loaded, self.versions, self.settings, outcome, costs,
                          duet=self.duet is not None)


class NothingToCompare(HostStackError):
    """The running test uses nothing the two sides set differently (the case runner skips
    it with this reason)."""


class MeasuredBeside(Exception):
    """Side b of a duet measured the test beside side a, whose run records it (the case
    runner skips side b's test with this message)."""
