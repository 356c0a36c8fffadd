"""What a side runs, by content: the sha256 of every binary and VPP folder a side of a
comparison names and of every shared library those load, read on the node where the
comparison is resolved.

A side's declared text names paths; a binary rebuilt or upgraded at the same path is another
build, and so is the same binary loading an upgraded libssl, libcrypto or libvppinfra. So
each path a side names (its ``tools`` per node, its ``vpp`` install: bin, vppctl, the
LD_PRELOAD library, the API and plugin folders) is hashed on its node, and ``ldd`` lists
what each named file (and each ``*.so`` in a named folder: VPP's plugins) loads there, as
it will run: with the ``LD_LIBRARY_PATH`` the side gives that tool. One command per node
with a timeout does all of it (:func:`hash_command`); its output is parsed strictly
(:func:`parse_node_files`: anything unexpected is an error quoting it, and a library ``ldd``
reports "not found" is an error naming it, as the side could not run). A statically linked
file loads nothing. A file's key is its sha256, a folder's the sha256 over its files'
``<sha256>  ./<relative path>`` lines (sorted, so the order the file system lists them in
does not matter).

A library is keyed by the path ``ldd`` resolved with its folder's symbolic links resolved
(``dut:/usr/lib/x86_64-linux-gnu/libssl.so.3`` for ``/lib/x86_64-linux-gnu/libssl.so.3`` on
a merged-/usr system) but its file name kept as the binary asks for it: an upgrade that
moves ``libz.so.1`` from ``libz.so.1.2.13`` to ``libz.so.1.2.14`` keeps one key whose hash
changes, so the dashboard says "libz.so.1" changed rather than one file gone and another
new.

The record keeps them (``ab.sides.<side>.files``: ``"<node>:<path>" -> sha256``, named paths
and libraries alike, and ``ab.sides.<side>.loaded_by``: each library's key -> the named
entries that load it, a plugin's libraries under its folder; a key absent from
``loaded_by`` is a named path, as in every record made before libraries were keyed) and
the history's series key carries a digest of ``files``
(:func:`libraries.history.ab_series.files_digest`): a changed file or library starts a new
series, and the dashboard says which file changed, when, and for a library which binary
loads it. Paths only the topology names (today's build, side ``b`` of a nightly) are not
keyed: they are the build under test.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from libraries.ab.comparison import ComparisonFile, Side, side_topology
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology import Topology

HASH_TIMEOUT = 120.0
"""Seconds for hashing every path a side names on one node, listing what each loads and
hashing those libraries (a plugin folder is ~100 files, each listed by ``ldd``)."""
LOADER_ENV = ("LD_LIBRARY_PATH",)
"""A tool's environment variables that change which libraries it loads, given to its ``ldd``
(``LD_PRELOAD`` is not: it would load into ``ldd`` itself; VPP's LD_PRELOAD library is a
named path, listed by its own ``ldd``)."""
_MARK = "#fp "
_HASH = ("printf '#fp hash %s\\n' {p}; if [ -d {p} ]; then (cd {p} && find . -type f -print0 | "
         "LC_ALL=C sort -z | xargs -0 -r sha256sum) | sha256sum; else sha256sum < {p}; fi")
_LDD = ("if [ -d {p} ]; then printf '#fp dir %s\\n' {p}; find {p} -type f -name '*.so' | "
        "LC_ALL=C sort | while IFS= read -r f; do printf '#fp ldd %s\\n' \"$f\"; "
        "LC_ALL=C ldd \"$f\" 2>&1; printf '#fp exit %s\\n' \"$?\"; done; else "
        "printf '#fp ldd %s\\n' {p}; {env}LC_ALL=C ldd {p} 2>&1; printf '#fp exit %s\\n' \"$?\"; "
        "fi")
_LIBS = ("printf '%s\\n' \"$fp_ldd\"; printf '%s\\n' \"$fp_ldd\" | sed -n "
         "-e 's/^[[:space:]]*[^[:space:]]* => \\(\\/.*\\) (0x[0-9a-f]*)$/\\1/p' "
         "-e 's/^[[:space:]]*\\(\\/.*\\) (0x[0-9a-f]*)$/\\1/p' | LC_ALL=C sort -u | "
         "while IFS= read -r l; do printf '#fp lib %s\\n' \"$l\"; "
         "(cd -P -- \"$(dirname -- \"$l\")\" && pwd); sha256sum < \"$l\"; done")
_SHA = re.compile(r"^([0-9a-f]{64})  -$")
_LOADED = re.compile(r"^(?P<name>\S+) => (?P<path>/.*) \(0x[0-9a-f]+\)$")
_MISSING = re.compile(r"^(?P<name>\S+) => not found$")
_VIRTUAL = re.compile(r"^(?P<name>[^/\s]\S*)(?: =>)? +\(0x[0-9a-f]+\)$")
"""The kernel's vDSO (``linux-vdso.so.1 (0x...)``; old glibc: ``linux-gate.so.1 =>  (0x...)``):
no file."""
_LOADER = re.compile(r"^(?P<path>/.*) \(0x[0-9a-f]+\)$")
_NOTHING = ("statically linked", "not a dynamic executable")
_WARNING = "ldd: warning: "


@dataclass(frozen=True)
class SideFiles:
    """One side's keyed content: ``files`` (``"<node>:<path>" -> sha256``, the paths it names
    and the libraries they load) and ``loaded_by`` (a library's key -> the named entries
    that load it, sorted)."""

    files: dict[str, str] = field(default_factory=dict)
    loaded_by: dict[str, list[str]] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The side's record fields (``files``, ``loaded_by``), each only when not empty."""
        return {**({"files": self.files} if self.files else {}),
                **({"loaded_by": self.loaded_by} if self.loaded_by else {})}


@dataclass(frozen=True)
class NodeFiles:
    """What one node's :func:`hash_command` found: ``named`` (path -> sha256, as named),
    ``libraries`` (resolved path -> sha256) and ``loaded_by`` (resolved path -> the named
    paths that load it)."""

    named: dict[str, str]
    libraries: dict[str, str]
    loaded_by: dict[str, list[str]]


def side_paths(side: Side) -> dict[str, list[str]]:
    """Per node, the paths ``side`` names (tools and VPP install), sorted."""
    found: dict[str, set[str]] = {}
    for node, tools in side.tools.items():
        found.setdefault(node, set()).update(tools.values())
    for node, paths in side.vpp.items():
        found.setdefault(node, set()).update(paths.model_dump(exclude_none=True).values())
    return {node: sorted(paths) for node, paths in sorted(found.items())}


def loader_env(side: Side, topology: Topology) -> dict[str, dict[str, str]]:
    """Per node, each named tool binary's :data:`LOADER_ENV` variables as the side runs it
    (the topology's tool environment with the side's over it); binaries without any are
    left out."""
    nodes = side_topology(topology, side).nodes
    found: dict[str, dict[str, str]] = {}
    for node, tools in side.tools.items():
        for tool, path in tools.items():
            env = {k: v for k, v in nodes[node].tool_env.get(tool, {}).items()
                   if k in LOADER_ENV}
            if env:
                found.setdefault(node, {})[path] = " ".join(
                    f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    return found


def hash_command(paths: list[str], env: dict[str, str] | None = None) -> str:
    """One shell command printing, in order: ``#fp hash <path>`` and its ``<sha256>  -`` per
    path; per path, ``#fp ldd <path>``, ``ldd``'s output (run with ``env[path]``, a
    ``NAME=value`` prefix, when given) and ``#fp exit <code>``, or for a folder ``#fp dir
    <path>`` and that per ``*.so`` in it; then per library those list (sorted, once each)
    ``#fp lib <path>``, its folder with symbolic links resolved and ``<sha256>  -``."""
    env = env or {}
    hashes = "; ".join(_HASH.format(p=shlex.quote(path)) for path in paths)
    ldd = "; ".join(_LDD.format(p=shlex.quote(path),
                                env=f"{env[path]} " if path in env else "") for path in paths)
    return f"{hashes}; fp_ldd=$({ldd}); {_LIBS}"


def parse_ldd(lines: list[str], where: str) -> list[str]:
    """The paths of the libraries one ``ldd`` run lists (``name => /path (0x...)`` and the
    loader's ``/path (0x...)`` line; none for a statically linked file); an error naming
    ``where`` for a library "not found" or a line of any other shape."""
    found = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(_WARNING) or line in _NOTHING or _VIRTUAL.match(line):
            continue
        if missing := _MISSING.match(line):
            raise HostStackError(f"{where}: library {missing['name']} not found on the node "
                                 "(the side cannot run)")
        if loaded := _LOADED.match(line) or _LOADER.match(line):
            found.append(loaded["path"])
            continue
        raise HostStackError(f"{where}: unexpected line {raw!r} in ldd's output "
                             f"{chr(10).join(lines)!r}")
    return found


def _sections(output: str, where: str) -> list[tuple[str, str, list[str]]]:
    """``(kind, path, lines)`` per ``#fp <kind> <path>`` header of :func:`hash_command`'s
    output (``exit`` lines end an ``ldd`` section)."""
    sections: list[tuple[str, str, list[str]]] = []
    for line in output.splitlines():
        if line.startswith(_MARK):
            kind, _, rest = line[len(_MARK):].partition(" ")
            if kind not in ("hash", "dir", "ldd", "exit", "lib") or not rest:
                raise HostStackError(f"{where}: unexpected line {line!r} in {output!r}")
            sections.append((kind, rest, []))
        elif sections:
            sections[-1][2].append(line)
        elif line.strip():
            raise HostStackError(f"{where}: unexpected line {line!r} before the first path "
                                 f"in {output!r}")
    return sections


def _one_sha(lines: list[str], what: str, where: str, output: str) -> str:
    found = _SHA.match(lines[-1]) if lines else None
    if found is None:
        raise HostStackError(f"{where}: expected one sha256 for {what}, got {lines!r} in "
                             f"{output!r}")
    return found[1]


def parse_node_files(output: str, paths: list[str], where: str) -> NodeFiles:
    """What one node's :func:`hash_command` found (:class:`NodeFiles`); an error naming
    ``where`` and quoting the output when it is not one hash per path, one ``ldd`` listing
    per named file (or folder member), and one folder and hash per library listed."""
    sections = _sections(output, where)
    named: dict[str, str] = {}
    listed: dict[str, list[str]] = {}
    folders: list[str] = []
    resolved: dict[str, tuple[str, str]] = {}
    current: str | None = None
    for kind, path, lines in sections:
        if kind == "hash" and len(lines) == 1 and path not in named:
            named[path] = _one_sha(lines, path, where, output)
        elif kind == "dir":
            folders.append(path)
        elif kind == "ldd" and current is None:
            current, listed[path] = path, lines
        elif kind == "exit" and current is not None:
            _check_exit(path, listed[current], f"{where}: ldd {current}")
            listed[current] = parse_ldd(listed[current], f"{where}: ldd {current}")
            current = None
        elif kind == "lib" and len(lines) == 2 and lines[0].startswith("/"):
            real = posixpath.join(lines[0], posixpath.basename(path))
            resolved[path] = (real, _one_sha(lines, path, where, output))
        else:
            raise HostStackError(f"{where}: unexpected {kind} section for {path} "
                                 f"({lines!r}) in {output!r}")
    if list(named) != paths or current is not None:
        raise HostStackError(f"{where}: expected one sha256 per path of {paths}, got "
                             f"{output.strip()!r}")
    return _node_files(named, listed, folders, resolved, f"{where}: {output!r}")


def _check_exit(code: str, lines: list[str], where: str) -> None:
    """``ldd`` exits 1 on a file that is no dynamic executable (a script, a static PIE), and
    that alone: any other failure is an error quoting its output."""
    text = [line.strip() for line in lines if line.strip()]
    if code == "0" or (code == "1" and text == ["not a dynamic executable"]):
        return
    raise HostStackError(f"{where}: exit {code}: {chr(10).join(lines)!r}")


def _node_files(named: dict[str, str], listed: dict[str, list[str]], folders: list[str],
                resolved: dict[str, tuple[str, str]], where: str) -> NodeFiles:
    """Each library's real path, hash and loaders; an error when the named files, the
    ``ldd`` listings and the hashed libraries do not match one another."""
    owners = {}
    for path in listed:
        owner = path if path in named else next(
            (folder for folder in folders if path.startswith(folder.rstrip("/") + "/")), None)
        if owner is None:
            raise HostStackError(f"{where}: ldd listed {path}, which no named path holds")
        owners[path] = owner
    unlisted = [p for p in named if p not in listed and p not in folders]
    if unlisted or set(resolved) != {lib for libs in listed.values() for lib in libs}:
        raise HostStackError(f"{where}: expected one ldd listing per named file (missing "
                             f"{unlisted}) and one hash per library listed")
    libraries: dict[str, str] = {}
    loaded_by: dict[str, set[str]] = {}
    for path, libs in listed.items():
        for lib in libs:
            real, digest = resolved[lib]
            if libraries.setdefault(real, digest) != digest:
                raise HostStackError(f"{where}: {real} hashed twice with different sums")
            if real not in named:
                loaded_by.setdefault(real, set()).add(owners[path])
    return NodeFiles(named, libraries,
                     {lib: sorted(by) for lib, by in sorted(loaded_by.items())})


def side_files(testbed: Testbed, loaded: ComparisonFile) -> dict[str, SideFiles]:
    """Per side (``a``, ``b``): ``"<node>:<path>" -> sha256`` of every path it names and
    every library those load on their node, and which named entry loads each library."""
    found: dict[str, SideFiles] = {}
    for key, side in (("a", loaded.comparison.a), ("b", loaded.comparison.b)):
        files: dict[str, str] = {}
        loaded_by: dict[str, list[str]] = {}
        env = loader_env(side, testbed.topology)
        for node, paths in side_paths(side).items():
            result = testbed.nodes[node].run(hash_command(paths, env.get(node)),
                                             timeout=HASH_TIMEOUT, check=False, quiet=True)
            where = f"{loaded.path}: {key}: hashing on {node}"
            if result.exit_code != 0:
                raise HostStackError(f"{where}: exit {result.exit_code}: "
                                     f"{(result.stderr or result.stdout).strip()}")
            got = parse_node_files(result.stdout, paths, where)
            files.update({f"{node}:{path}": digest for path, digest in got.named.items()})
            files.update({f"{node}:{path}": digest
                          for path, digest in got.libraries.items() if path not in got.named})
            loaded_by.update({f"{node}:{lib}": [f"{node}:{path}" for path in by]
                              for lib, by in got.loaded_by.items()})
        found[key] = SideFiles(files, dict(sorted(loaded_by.items())))
    return found
