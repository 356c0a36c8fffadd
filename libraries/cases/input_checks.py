"""What a run of the suites would refuse, checked before any Robot run starts: the ``-v``
settings given on its command line, the topology they name and the comparison file of an A/B
run (its sides against the topology, and on a local topology every binary a side names).

The suites check the same things at their suite set-up (``Check Measurement Settings``, ``Set
Up A/B Comparison``), but by then Robot has started and a refused suite counts as failed
tests, an exit code a CI job cannot tell from a regression. ``hoststack-perf ab``, ``duet``
and ``nightly`` call :func:`run_problems` first and exit with the bad-input code instead
(``libraries.cli.BAD_INPUT``). Nothing here measures or runs a command: it reads files and
parses values with the parsers the suites use, so both refuse the same values alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from libraries.ab.ab_settings import check_ab_plan
from libraries.ab.comparison import Side, load_comparison
from libraries.cases.run_settings import resolve_settings
from libraries.cases.testbed_settings import TOPOLOGY
from libraries.testbed.errors import TopologyError
from libraries.testbed.topology import Topology
from libraries.testbed.topology_file import load_topology


def robot_variables(robot_args: Sequence[str]) -> dict[str, str]:
    """The ``-v NAME:VALUE`` (``--variable NAME:VALUE``, ``--variable=NAME:VALUE``) settings
    among Robot's arguments; a later one wins, as in Robot."""
    found: dict[str, str] = {}
    for flag, value in itertools.pairwise([*robot_args, ""]):
        if flag in ("-v", "--variable") and ":" in value:
            name, _, given = value.partition(":")
            found[name] = given
        elif flag.startswith("--variable=") and ":" in flag:
            name, _, given = flag.removeprefix("--variable=").partition(":")
            found[name] = given
    return found


def settings_problems(variables: dict[str, str], topology: Topology | None) -> list[str]:
    """Why the settings are refused (the first bad one, as the suite set-up names it), or
    nothing: every setting's value (:func:`libraries.cases.run_settings.resolve_settings`),
    the budget on ``topology`` and, in an A/B run, the A/B plan."""
    try:
        settings = resolve_settings(variables.get,
                                    variables)
        trials = settings.trial_settings(topology)
        if settings.ab is not None:
            check_ab_plan(settings.ab, trials.plan)
    except ValueError as error:
        return [str(error)]
    return []


def absent_binaries(side: Side, key: str) -> list[str]:
    """The binaries ``side`` names (tools and VPP installs) that are no file on this host."""
    named = [(f"{key}.tools.{node}.{tool}", path) for node, tools in side.tools.items()
             for tool, path in tools.items()]
    named += [(f"{key}.vpp.{node}.bin", paths.bin) for node, paths in side.vpp.items()
              if paths.bin]
    return [f"{where}: {path}: no such file" for where, path in named if not Path(path).is_file()]


def run_problems(robot_args: Sequence[str], comparison: str | None = None,
                 topologies: Sequence[str] = ()) -> list[str]:
    """Why a Robot run of ``robot_args`` (with the comparison file ``comparison``: an A/B run)
    would be refused before it measured anything, each problem naming its file and key or its
    setting; empty when nothing is wrong. ``topologies``: the testbeds the run uses when not
    given by ``-v TOPOLOGY`` (the nightly's ``--topology``); none and no ``-v TOPOLOGY``: the
    default, unless ``-v LAB_POOL`` takes the testbed from a pool."""
    variables = robot_variables(robot_args)
    if comparison is not None:
        variables["AB"] = comparison
    names = [variables["TOPOLOGY"]] if "TOPOLOGY" in variables else list(topologies)
    if not names and "LAB_POOL" not in variables:
        names = [str(TOPOLOGY.default)]
    problems: list[str] = []
    loaded: list[Topology] = []
    for name in names:
        try:
            loaded.append(load_topology(name))
        except TopologyError as error:
            problems.append(f"-v TOPOLOGY:{name}: {error}")
    problems += settings_problems(variables, loaded[0] if loaded else None)
    if comparison is None or len(loaded) < len(names):
        return problems
    for topology in loaded:
        try:
            file = load_comparison(comparison, topology)
        except TopologyError as error:
            problems.append(str(error))
            continue
        if topology.provision == "netns":
            problems += [f"{comparison}: {problem}" for key in ("a", "b")
                         for problem in absent_binaries(getattr(file.comparison, key), key)]
    return list(dict.fromkeys(problems))
