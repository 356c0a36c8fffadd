"""What a side runs, by content: the sha256 of every binary, library and VPP folder a side of a
comparison names, read on the node where the comparison is resolved.

A side's declared text names paths; a binary rebuilt or upgraded at the same path is another
build. So each path a side names (its ``tools`` per node, its ``vpp`` install: bin, vppctl,
the LD_PRELOAD library, the API and plugin folders) is hashed on its node, one command per
node with a timeout: a file's key is its sha256, a folder's the sha256 over its files'
``<sha256>  ./<relative path>`` lines (sorted, so the order the file system lists them in
does not matter). The record keeps them (``ab.sides.<side>.files``) and the history's series
key carries a digest of them (:func:`libraries.history.ab_series.files_digest`): a
changed file starts a new series, and the dashboard says which file changed and when.
Paths only the topology names (today's build, side ``b`` of a nightly) are not keyed: they
are the build under test.
"""

from __future__ import annotations

import shlex

from libraries.ab.comparison import ComparisonFile, Side
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed

HASH_TIMEOUT = 120.0
"""Seconds for hashing every path a side names on one node (a plugin folder is ~100 files)."""
_ONE = ("if [ -d {p} ]; then (cd {p} && find . -type f -print0 | LC_ALL=C sort -z | "
        "xargs -0 -r sha256sum) | sha256sum; else sha256sum < {p}; fi")


def side_paths(side: Side) -> dict[str, list[str]]:
    """Per node, the paths ``side`` names (tools and VPP install), sorted."""
    found: dict[str, set[str]] = {}
    for node, tools in side.tools.items():
        found.setdefault(node, set()).update(tools.values())
    for node, paths in side.vpp.items():
        found.setdefault(node, set()).update(paths.model_dump(exclude_none=True).values())
    return {node: sorted(paths) for node, paths in sorted(found.items())}


def hash_command(paths: list[str]) -> str:
    """One shell command printing one ``<sha256>  -`` line per path, in order."""
    return "; ".join(_ONE.format(p=shlex.quote(path)) for path in paths)


def parse_hashes(output: str, paths: list[str], where: str) -> dict[str, str]:
    """``path -> sha256`` from :func:`hash_command`'s output; an error naming ``where`` and
    the output when it is not one hash per path."""
    lines = [line.split()[0] for line in output.splitlines() if line.strip()]
    if len(lines) != len(paths) or not all(len(h) == 64 for h in lines):
        raise HostStackError(f"{where}: expected one sha256 per path of {paths}, got "
                             f"{output.strip()!r}")
    return dict(zip(paths, lines, strict=True))


def side_files(testbed: Testbed, loaded: ComparisonFile) -> dict[str, dict[str, str]]:
    """Per side (``a``, ``b``): ``"<node>:<path>" -> sha256`` of every path it names."""
    found: dict[str, dict[str, str]] = {}
    for key, side in (("a", loaded.comparison.a), ("b", loaded.comparison.b)):
        files: dict[str, str] = {}
        for node, paths in side_paths(side).items():
            result = testbed.nodes[node].run(hash_command(paths), timeout=HASH_TIMEOUT,
                                             check=False, quiet=True)
            where = f"{loaded.path}: {key}: hashing on {node}"
            if result.exit_code != 0:
                raise HostStackError(f"{where}: exit {result.exit_code}: "
                                     f"{(result.stderr or result.stdout).strip()}")
            files.update({f"{node}:{path}": digest for path, digest in
                          parse_hashes(result.stdout, paths, where).items()})
        found[key] = files
    return found
