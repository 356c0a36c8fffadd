"""Opening an A/B session (:class:`~libraries.ab.session.AbSession`): the comparison file
loaded against the testbed's topology and checked on the nodes before anything is measured
(every binary a side names answers its version command, every sysctl exists and can be
written back, a dead run's sysctls put back first on a lab)."""

from __future__ import annotations

import logging
import os
import shlex
import socket
import time

from libraries.ab.comparison import ComparisonFile, load_comparison
from libraries.ab.duet_link import DuetLink
from libraries.ab.fingerprint import side_files
from libraries.ab.record_block import Versions
from libraries.ab.session import AbSession
from libraries.results.plan import AbSettings
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.provision import Testbed
from libraries.tools.sysctl import (
    clear_originals,
    pending_originals,
    read_sysctls,
    save_originals,
    write_sysctls,
)
from libraries.tools.versions import tool_version

LOG = logging.getLogger(__name__)


def open_session(path: str, testbed: Testbed, settings: AbSettings,
                 duet: DuetLink | None = None) -> AbSession:
    """Load the comparison file ``path`` against the testbed's topology and check it on the
    nodes before anything is measured: every binary a side names answers its version command,
    every sysctl exists and can be written back, and every path a side names is hashed
    (:mod:`libraries.ab.fingerprint`: the record's series is keyed by what runs). Errors name
    the file, key or node. With ``duet``, the testbed must be this run's own namespaces (two
    labs' nodes do not share their cores' disturbances, which is the point of a duet)."""
    loaded = load_comparison(path, testbed.topology)
    if duet is not None and testbed.topology.provision is None:
        raise HostStackError(f"{path}: a duet A/B run needs a testbed of namespaces this run "
                             f"makes (topology {testbed.topology.name} is a lab's nodes): "
                             "two labs do not share their machines' disturbances")
    return AbSession(loaded, testbed, settings, sysctl_originals(testbed, loaded),
                     side_versions(testbed, loaded), duet, side_files(testbed, loaded))


def side_versions(testbed: Testbed, loaded: ComparisonFile) -> Versions:
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


def sysctl_originals(testbed: Testbed, loaded: ComparisonFile) -> dict[str, dict[str, str]]:
    """The current value of every sysctl either side sets (:mod:`libraries.tools.sysctl`:
    resolved and written as the node runs privileged commands); each is written back as it
    is to prove the node lets the test set it. On a lab (not a testbed of this run's own
    namespaces, which die with it) the originals a dead run left on a node are put back
    first, and this run's are kept there until :meth:`AbSession.close`."""
    keys: dict[str, set[str]] = {}
    for side in (loaded.comparison.a, loaded.comparison.b):
        for node, values in side.sysctl.items():
            keys.setdefault(node, set()).update(values)
    lab = testbed.topology.provision is None
    originals: dict[str, dict[str, str]] = {}
    for node, names in keys.items():
        target = testbed.nodes[node]
        try:
            left = pending_originals(target) if lab else None
            if left is not None:
                LOG.warning("%s: a run that did not finish (%s) left sysctls changed: "
                            "putting back %s", node, left.get("owner"), left["values"])
                write_sysctls(target, left["values"])
                clear_originals(target)
            originals[node] = read_sysctls(target, sorted(names))
            write_sysctls(target, originals[node])
            if lab:
                save_originals(target, originals[node], {
                    "comparison": loaded.path, "host": socket.gethostname(),
                    "pid": os.getpid(), "started": time.time()})
        except HostStackError as error:
            raise HostStackError(f"{loaded.path}: sysctl on {node}: {error}") from None
    return originals
