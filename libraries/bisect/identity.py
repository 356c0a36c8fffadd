"""Which builds of a bisection are the same files, by content.

A build names paths (its tools per node, its VPP install) and settings (nginx directives,
startup.conf sections, VCL lines, sysctls, environment). Copies of one install at two paths
are one build, and a build whose library changed is another: so a build is keyed by its
settings with every path it names replaced by that file's sha256, together with every further
file the fingerprint reports (the shared libraries a binary loads, once
:mod:`libraries.ab.fingerprint` hashes them; taken as it keys them). Two builds are the same
(:meth:`Identities.same`) when both keys are known and equal: a range whose ends are the same
is clear without measuring (:func:`libraries.bisect.bisection.bisect`). A key that cannot be
made (a named path not hashed) is unknown, and unknown is never "the same".

The files come from :func:`libraries.ab.fingerprint.side_files`, used as it is: before the
search on a testbed brought up for it (:func:`hash_builds`; on the local testbed that takes
seconds), and from every comparison's record (``ab.sides.<side>.files``, which the A/B
session's own hashing wrote: :mod:`libraries.bisect.comparison_run`), so a lab that could not be
reached before the search still learns each build's files from its first comparison. A build
whose files two sources report differently (rebuilt during the bisection) is unknown from
then on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libraries.ab.comparison import Comparison, ComparisonFile, Side
from libraries.ab.fingerprint import side_files, side_paths
from libraries.bisect.builds import Builds
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology import Topology

Files = Mapping[str, str]
"""``"<node>:<path>" -> sha256``, as :func:`~libraries.ab.fingerprint.side_files` gives it."""


def content_key(side: Side, files: Files) -> str | None:
    """A digest of what ``side`` runs, by content (the module docstring); None when a path it
    names is not among ``files``."""
    named = {f"{node}:{path}" for node, paths in side_paths(side).items() for path in paths}
    if not named <= set(files):
        return None

    def digest(node: str, path: str) -> str:
        return f"sha256:{files[f'{node}:{path}']}"

    changes: dict[str, Any] = side.changes()
    if side.tools:
        changes["tools"] = {node: {tool: digest(node, path) for tool, path in tools.items()}
                            for node, tools in side.tools.items()}
    if side.vpp:
        changes["vpp"] = {node: {part: digest(node, path) for part, path in
                                 paths.model_dump(exclude_none=True).items()}
                          for node, paths in side.vpp.items()}
    loaded = sorted((key, value) for key, value in files.items() if key not in named)
    text = json.dumps({"changes": changes, "loaded": loaded}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Identities:
    """Each build's content key as far as known (index -> key; None: two sources disagreed,
    unknown for good), and where each came from."""

    sides: tuple[Side, ...]
    keys: dict[int, str | None] = field(default_factory=dict)
    source: dict[int, str] = field(default_factory=dict)

    def learn(self, index: int, files: Files, where: str) -> None:
        """Build ``index`` runs ``files`` (``where``: how that is known)."""
        key = content_key(self.sides[index], files)
        if key is None:
            return
        if index in self.keys and self.keys[index] != key:
            self.keys[index] = None
            self.source[index] += f"; {where} reported other files: unknown from then on"
            return
        self.keys.setdefault(index, key)
        self.source.setdefault(index, where)

    def same(self, a: int, b: int) -> bool:
        """True when builds ``a`` and ``b`` are known to be the same files."""
        key = self.keys.get(a)
        return key is not None and key == self.keys.get(b)

    def groups(self) -> list[list[int]]:
        """The builds known to be the same files as another, grouped (groups of two or
        more, in order)."""
        found: dict[str, list[int]] = {}
        for index, key in sorted(self.keys.items()):
            if key is not None:
                found.setdefault(key, []).append(index)
        return [group for group in found.values() if len(group) > 1]


def hash_builds(builds: Builds, testbed: Testbed, indices: list[int]
                ) -> tuple[dict[int, dict[str, str]], dict[int, str]]:
    """The files of builds ``indices`` hashed on ``testbed``'s nodes, each as a side of an
    A/A comparison (:func:`~libraries.ab.fingerprint.side_files`), and why each build that
    could not be hashed was not (a binary not made yet, a node that did not answer)."""
    files: dict[int, dict[str, str]] = {}
    problems: dict[int, str] = {}
    for index in indices:
        side = builds.sides[index]
        loaded = ComparisonFile(builds.path, "", "", Comparison(
            name=f"bisect {builds.title}: hashing {side.name}", aa=True, a=side, b=side))
        try:
            files[index] = side_files(testbed, loaded)["a"].files
        except HostStackError as error:
            problems[index] = str(error)
    return files, problems


Up = Callable[[Topology], Testbed]
"""Brings a topology up as a testbed (:meth:`Testbed.up`)."""


def _up(topology: Topology) -> Testbed:
    return Testbed.up(topology, owner="bisect")


def hash_before(builds: Builds, topology: Topology, identities: Identities,
                up: Up = _up) -> str:
    """Hash every build on a testbed of ``topology`` brought up for it and taken down again,
    into ``identities``; what happened, in a line for the console."""
    try:
        testbed = up(topology)
    except (HostStackError, OSError) as error:
        return (f"could not bring {topology.name} up to hash the builds ({error}): which "
                "builds are the same files is learned from each comparison's record")
    try:
        files, problems = hash_builds(builds, testbed, list(range(len(builds.sides))))
    finally:
        try:
            testbed.down()
        except HostStackError as error:
            print(f"bisect: the testbed brought up to hash the builds: {error}")
    for index, found in files.items():
        identities.learn(index, found, "hashed before the search")
    names = builds.names
    same = "; ".join(" = ".join(names[i] for i in group) for group in identities.groups())
    text = (f"hashed {len(files)} of {len(names)} builds before the search: "
            + (f"the same files: {same}" if same else "no two are the same files"))
    if problems:
        text += "; not hashed (their comparisons' records will tell): " + "; ".join(
            f"{names[i]}: {why}" for i, why in problems.items())
    return text
