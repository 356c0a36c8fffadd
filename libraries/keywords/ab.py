"""Keywords for A/B runs: ``robot -v AB:<comparison file> ...`` runs every selected measuring
test as an A/B test of two sides of the system under test (:mod:`libraries.testbed.comparison`),
measured side by side in one run and judged per round (:mod:`libraries.results.ab`).

The suite setup loads the file against the topology and checks it on the nodes before anything
is measured: every binary a side names answers its version command, every sysctl a side sets
exists and can be written back (the original values are kept). A test's set-up keywords start
its processes for side ``a`` and register them as *components* (what they use: a tool on a
node, an nginx role, a tool's environment, a node's VPP, an app's VCL); switching side then
stops and starts only the components whose inputs differ between the sides (VPP and
everything on it when the VPP install or its startup sections differ), sets the sysctls, and
is timed. Each test's teardown puts the original sysctls and topology back, failures included.
"""

from __future__ import annotations

import logging
import math
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from libraries.keywords import current_testbed
from libraries.results.ab import AbOutcome, AbSettings, measure_ab
from libraries.results.ab_record import ab_block, ab_message
from libraries.results.measurement import Direction, Measurement, Trial, TrialObserver
from libraries.results.plan import TrialPlan
from libraries.results.telemetry import unavailable_block
from libraries.results.versions import tool_version
from libraries.testbed.comparison import ComparisonFile, Side, load_comparison, side_topology
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.provision import Testbed

LOG = logging.getLogger(__name__)
AB_LIBRARY = "libraries.keywords.ab.AbKeywords"
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


class AbSession:
    """The A/B state of one suite: the comparison, the side now active, the components of the
    running test and the sysctls to put back."""

    def __init__(self, loaded: ComparisonFile, testbed: Testbed, settings: AbSettings,
                 originals: dict[str, dict[str, str]],
                 versions: dict[str, dict[str, dict[str, str]]]):
        self.loaded, self.testbed, self.settings = loaded, testbed, settings
        self.base = testbed.topology
        self.originals = originals
        self.versions = versions
        self.side = "a"
        self.components: list[Component] = []

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
        """Keep (or replace) the component ``name`` of the running test."""
        self.components = [c for c in self.components if c.name != name]
        self.components.append(Component(name, frozenset(uses), stop, start))

    # -- switching ------------------------------------------------------------------------------

    def activate(self, side: str) -> None:
        """Make ``side`` active: the testbed's topology as it sees it, its sysctls set (a key
        only the other side sets goes back to its original value)."""
        self.side = side
        self.testbed.topology = side_topology(self.base, self.sides[side])
        for node, values in self._sysctls(self.sides[side]).items():
            _write_sysctls(self.testbed.nodes[node], values)

    def _sysctls(self, side: Side) -> dict[str, dict[str, str]]:
        return {node: {key: str(side.sysctl.get(node, {}).get(key, original))
                       for key, original in keys.items()}
                for node, keys in self.originals.items()}

    def affected(self) -> list[Component]:
        """The components whose inputs differ between the sides, in start order."""
        a, b = self.sides["a"], self.sides["b"]
        return [c for c in self.components if any(_differs(a, b, use) for use in c.uses)]

    def unused_difference(self) -> str | None:
        """Why the running test cannot tell the sides apart, or None when it can: the sides
        differ only in nginx roles, VPP installs, startup sections or VCL lines that no
        component of the test uses (a VPP comparison run on a kernel test, a proxy knob on
        tcp_term). Binaries, environments and sysctls always count: a tool started per trial
        (wrk, an iperf3 client) is no component but reads the side's topology."""
        a, b = self.sides["a"], self.sides["b"]
        if self.loaded.comparison.aa or a.tools != b.tools or a.env != b.env or \
                self._sysctls(a) != self._sysctls(b) or self.affected():
            return None
        changed = sorted({f"{kind}.{key}" for kind in ("nginx", "vpp", "startup", "vcl")
                          for key in {*getattr(a, kind), *getattr(b, kind)}
                          if getattr(a, kind).get(key) != getattr(b, kind).get(key)})
        used = ", ".join(c.name for c in self.components) or "none"
        return (f"A/B {self.loaded.title}: the sides differ only in {', '.join(changed)}, "
                f"which this test does not use (its components: {used}): nothing to compare "
                "(an A/A check says `aa: true`)")

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
        logger.info(f"A/B: side {side} ({self.sides[side].name}) now active in {seconds:.2f} s"
                    f" ({', '.join(c.name for c in changed) or 'nothing'} restarted)")
        return seconds

    def restore(self) -> list[str]:
        """Forget the test's components; the original topology and sysctls back. Returns the
        errors met (each step is tried)."""
        self.components = []
        self.side = "a"
        self.testbed.topology = self.base
        errors = []
        for node, values in self.originals.items():
            try:
                _write_sysctls(self.testbed.nodes[node], values)
            except HostStackError as error:
                errors.append(str(error))
        return errors

    # -- measuring -----------------------------------------------------------------------------

    def measure(self, case: str, stack: str, parameters: dict[str, Any],
                variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
                build: Callable[[dict[str, list[Any]], float], Measurement],
                metrics: Mapping[str, Direction],
                observer: TrialObserver | None = None) -> Measurement:
        """Measure ``variants`` on both sides (:func:`~libraries.results.ab.measure_ab`) and
        return the A/B test's measurement: per metric the per-round ratios b / a as
        ``ab_<metric>_ratio``, both sides' figures as evidence, the comparison in ``ab``."""
        if self.side != "a":
            raise HostStackError("an A/B test starts on side a (set-up keywords start it)")
        unused = self.unused_difference()
        if unused:
            raise SkipExecution(unused)
        outcome = measure_ab(variants, plan, build, metrics, self.settings, self.switch,
                             observer)
        self.switch("a")
        return self._measurement(case, stack, parameters, outcome)

    def _measurement(self, case: str, stack: str, parameters: dict[str, Any],
                     outcome: AbOutcome) -> Measurement:
        measurement = Measurement(case=case, stack=stack,
                                  parameters={**parameters, "ab": self.loaded.title},
                                  alpha=self.settings.alpha_per_look)
        for metric, comparison in outcome.comparisons.items():
            measurement.add(f"ab_{metric}_ratio", list(comparison.ratios), "ratio",
                            comparison.direction)
        measurement.telemetry = unavailable_block("A/B run: CPU telemetry is not collected "
                                                  "per side")
        measurement.evidence["sides"] = {
            side: {"metrics": {name: m.as_record() for name, m in built.metrics.items()},
                   "evidence": built.evidence, "notes": built.notes}
            for side, built in outcome.sides.items()}
        measurement.ab = self.block(outcome)
        measurement.notes.append(self.message(outcome))
        return measurement

    def block(self, outcome: AbOutcome) -> dict[str, Any]:
        """The record's ``ab`` block (:func:`~libraries.results.ab_record.ab_block`)."""
        return ab_block(self.loaded, self.versions, self.settings, outcome)

    def message(self, outcome: AbOutcome) -> str:
        """The test's message (:func:`~libraries.results.ab_record.ab_message`)."""
        return ab_message(self.loaded, self.versions, self.settings, outcome)


def _write_sysctls(node: Any, values: dict[str, str]) -> None:
    if values:
        command = "; ".join(f"sysctl -q -w {shlex.quote(f'{k}={v}')} >/dev/null"
                            for k, v in values.items())
        node.run(f"set -e; {command}", timeout=20, sudo=True)


def current_ab() -> AbSession | None:
    """This suite's A/B session, or None (no ``-v AB``, or a suite without the library)."""
    try:
        library_ = BuiltIn().get_library_instance(AB_LIBRARY)
    except RuntimeError:
        return None
    return library_.session


def settings_from_variables(variable: Callable[[str, Any], Any]) -> AbSettings:
    """``-v AB_MARGIN`` (percent, default 2), ``AB_LOOK`` (10), ``AB_MAX_ROUNDS`` (40),
    ``AB_BUDGET`` (600 s) and ``ALPHA`` (0.05); ``ValueError`` naming the variable."""
    values = {}
    for name, default, kind in (("AB_MARGIN", 2, float), ("AB_LOOK", 10, int),
                                ("AB_MAX_ROUNDS", 40, int), ("AB_BUDGET", 600, float),
                                ("ALPHA", 0.05, float)):
        given = variable(name, default)
        try:
            number = kind(str(given).rstrip("%"))
        except ValueError:
            raise ValueError(f"-v {name}:{given}: expected a {'whole ' if kind is int else ''}"
                             f"number, got {given!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"-v {name}:{given}: expected a finite number")
        values[name] = number
    return AbSettings(margin=values["AB_MARGIN"] / 100.0, look=int(values["AB_LOOK"]),
                      max_rounds=int(values["AB_MAX_ROUNDS"]), budget_s=values["AB_BUDGET"],
                      alpha=values["ALPHA"])


@library(scope="SUITE", auto_keywords=False)
class AbKeywords:
    """Set up, switch and restore the two sides of an A/B run (``-v AB:<file>``)."""

    def __init__(self) -> None:
        self.session: AbSession | None = None

    @keyword("Set Up A/B Comparison")
    def set_up_ab_comparison(self, path: str = "") -> None:
        """With ``path`` (``${AB}``; empty: not an A/B run, nothing happens): load the
        comparison file against the testbed's topology and check it on the nodes: every
        binary a side names answers its version command, every sysctl exists and can be
        written back. Fails naming the file, key or node before anything is measured."""
        if not path:
            self.session = None
            return
        testbed = current_testbed()
        builtin = BuiltIn()
        try:
            settings = settings_from_variables(
                lambda name, default: builtin.get_variable_value("${" + name + "}", default))
        except ValueError as error:
            raise HostStackError(str(error)) from None
        loaded = load_comparison(path, testbed.topology)
        versions = self._versions(testbed, loaded)
        originals = self._originals(testbed, loaded)
        self.session = AbSession(loaded, testbed, settings, originals, versions)
        logger.info(f"A/B comparison {loaded.title} ({path}, sha256 {loaded.sha256[:12]}): "
                    f"a = {loaded.comparison.a.name}, b = {loaded.comparison.b.name}; "
                    f"looks at rounds {list(settings.looks)} at alpha "
                    f"{settings.alpha_per_look:.3g} each, margin {settings.margin:.0%}")

    @staticmethod
    def _versions(testbed: Testbed, loaded: ComparisonFile) -> dict[str, dict[str, dict[str,
                                                                                        str]]]:
        """Per side, node and tool either side overrides: the version of that side's binary
        (the topology's where the side keeps it), and the VPP paths a side replaces."""
        sides = {"a": loaded.comparison.a, "b": loaded.comparison.b}
        tools = {(node, tool) for side in sides.values() for node, names in side.tools.items()
                 for tool in names}
        found: dict[str, dict[str, dict[str, str]]] = {"a": {}, "b": {}}
        for key, side in sides.items():
            for node, tool in sorted(tools):
                binary = side.tools.get(node, {}).get(tool) or \
                    testbed.topology.nodes[node].tools[tool]
                try:
                    version = tool_version(testbed.nodes[node], tool, binary)
                except (ToolMissing, ValueError) as error:
                    raise HostStackError(f"{loaded.path}: {key}.tools.{node}.{tool}: {binary} "
                                         f"does not answer its version command: {error}"
                                         ) from None
                found[key].setdefault(node, {})[tool] = version
            for node, paths in side.vpp.items():
                for name, binary in paths.model_dump(exclude_none=True).items():
                    check = testbed.nodes[node].run(f"test -e {shlex.quote(binary)}",
                                                    timeout=10, check=False, quiet=True)
                    if check.exit_code != 0:
                        raise HostStackError(f"{loaded.path}: {key}.vpp.{node}.{name}: "
                                             f"{binary} does not exist on {node}")
                    found[key].setdefault(node, {})[f"vpp {name}"] = binary
        return found

    @staticmethod
    def _originals(testbed: Testbed, loaded: ComparisonFile) -> dict[str, dict[str, str]]:
        """The current value of every sysctl either side sets; each is written back as it is
        to prove the node lets the test set it."""
        keys: dict[str, set[str]] = {}
        for side in (loaded.comparison.a, loaded.comparison.b):
            for node, values in side.sysctl.items():
                keys.setdefault(node, set()).update(values)
        originals: dict[str, dict[str, str]] = {}
        for node, names in keys.items():
            target = testbed.nodes[node]
            for name in sorted(names):
                read = target.run(f"sysctl -n {shlex.quote(name)}", timeout=10, check=False,
                                  quiet=True)
                if read.exit_code != 0:
                    raise HostStackError(f"{loaded.path}: sysctl.{name} on {node}: no such "
                                         f"sysctl ({(read.stderr or read.stdout).strip()})")
                originals.setdefault(node, {})[name] = " ".join(read.stdout.split())
            try:
                _write_sysctls(target, originals[node])
            except HostStackError as error:
                raise HostStackError(f"{loaded.path}: sysctl on {node}: the node does not let "
                                     f"the test set {sorted(names)}: {error}") from None
        return originals

    @keyword("Restore A/B Sides")
    def restore_ab_sides(self) -> None:
        """Put the original topology and sysctls back after a test (no-op outside A/B)."""
        if self.session is not None:
            errors = self.session.restore()
            if errors:
                raise HostStackError("A/B: could not restore: " + "; ".join(errors))

    @keyword("Check A/B Verdict")
    def check_ab_verdict(self, measurement: Measurement) -> None:
        """Fail on a regression of the candidate, saying by how much and after how many
        rounds; pass with a warning and the tag ``AB_INCONCLUSIVE`` when inconclusive."""
        check_ab_verdict(measurement)


class AbRegression(HostStackError):
    """The candidate is slower than the baseline: the test fails with the comparison alone."""

    ROBOT_SUPPRESS_NAME = True


def check_ab_verdict(measurement: Measurement) -> None:
    """See ``Check A/B Verdict``: tags the test ``AB_<VERDICT>``."""
    block = measurement.ab or {}
    verdict = str(block.get("verdict"))
    message = measurement.notes[-1] if measurement.notes else "A/B"
    BuiltIn().set_tags(f"AB_{verdict.upper().replace(' ', '_')}")
    if verdict == "regression":
        raise AbRegression(message)
    if verdict == "inconclusive":
        logger.warn(f"A/B inconclusive: {message}")
