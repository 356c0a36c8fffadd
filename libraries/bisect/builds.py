"""The ordered builds of a bisection, from a YAML file.

Either a list, oldest (believed good) first, each build one side of an A/B comparison
(:class:`libraries.ab.comparison.Side`: a name and its overrides)::

    name: nginx 1.25.0..1.25.4            # optional
    builds:
      - {name: 1.25.0, tools: {dut: {nginx: /opt/nginx-1.25.0/sbin/nginx}}}
      - {name: 1.25.1, tools: {dut: {nginx: /opt/nginx-1.25.1/sbin/nginx}}}

or a template over revisions, ``{rev}`` replaced in every string of the template, with an
optional build command run for a revision whose binaries are missing (its exit status says
whether the build exists; a failed build is skipped, as ``git bisect skip`` does). The
revision goes into the build command shell-quoted (:func:`build_command`), and with a build
command every revision must be made of a revision's characters (:data:`REVISION`: letters,
digits and ``._/+@~^-``, starting with a letter or digit): a name with shell syntax
(``;``, ``$(...)``, spaces, quotes) is refused before anything runs::

    template: {tools: {dut: {nginx: "/opt/nginx-{rev}/sbin/nginx"}}}
    revisions: [a1b2c3d, e4f5a6b, 0c1d2e3]
    build: git -C /src/nginx checkout {rev} && cd /src/nginx && ./auto/configure
           --prefix=/opt/nginx-{rev} && make -j2 install
    build_timeout: 1800                   # seconds per build (default 1800)

Checks before anything is measured (:func:`check_builds`): the file against the model, every
build against the topology (a node, tool or VPP install it lacks), two builds changing the
same things, and, on a topology whose nodes run on this host (``provision: netns``), every
binary a build names: it exists and answers its version command; a missing one is an error
unless a build command can make it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from libraries.ab.comparison import Side, side_problems
from libraries.testbed.errors import TopologyError
from libraries.testbed.teardown import process_stat
from libraries.testbed.topology import Topology
from libraries.testbed.topology_file import format_errors
from libraries.tools.versions import PROBES, parse_version, version_command

VERSION_TIMEOUT_S = 15.0
REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+@~^-]*")
"""What a revision handed to a build command may be made of (a commit, tag or branch)."""


class BuildList(BaseModel):
    """The whole file: a list of ``builds``, or a ``template`` over ``revisions``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    builds: tuple[Side, ...] = ()
    template: dict[str, Any] | None = None
    revisions: tuple[str, ...] = ()
    build: str | None = None
    build_timeout: float = Field(default=1800.0, gt=0)

    @model_validator(mode="after")
    def _one_form(self) -> BuildList:
        if bool(self.builds) == (self.template is not None):
            raise ValueError("give either builds: [...] or template: {...} with revisions: "
                             "[...], not both and not neither")
        if self.template is not None and not self.revisions:
            raise ValueError("template: needs revisions: [...] (oldest first)")
        if self.builds and (self.revisions or self.build):
            raise ValueError("revisions: and build: go with template:, not with builds:")
        if self.build is not None:
            bad = [rev for rev in self.revisions if not REVISION.fullmatch(rev)]
            if bad:
                raise ValueError(f"revisions {bad!r}: a revision handed to the build command "
                                 "must be letters, digits and ._/+@~^- (starting with a letter "
                                 "or digit), not shell syntax")
        return self


@dataclass(frozen=True)
class Builds:
    """Loaded builds: the file, the sides in order, the build command (``{rev}`` in it) and
    each side's revision (its name for a plain list)."""

    path: str
    title: str
    sides: tuple[Side, ...]
    build: str | None
    build_timeout: float

    @property
    def names(self) -> list[str]:
        """The builds' names, in order."""
        return [side.name for side in self.sides]


def _fill(value: Any, rev: str) -> Any:
    if isinstance(value, str):
        return value.replace("{rev}", rev)
    if isinstance(value, dict):
        return {key: _fill(item, rev) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, rev) for item in value]
    return value


def load_builds(path: str | Path, topology: Topology) -> Builds:
    """Read and validate ``path`` against ``topology``; :class:`TopologyError` naming the file
    and key of every problem."""
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise TopologyError(f"{source}: cannot read the builds file ({error.strerror})") from None
    except yaml.YAMLError as error:
        hint = ("; inside {...} a string holding {rev} must be quoted: "
                '{nginx: "/opt/nginx-{rev}/sbin/nginx"}') if "{rev}" in str(error) else ""
        raise TopologyError(f"{source}: not valid YAML: {error}{hint}") from None
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping with builds: or template:, got "
                            f"{data!r}")
    try:
        model = BuildList.model_validate(data)
        sides = model.builds or tuple(
            Side.model_validate({"name": rev, **_fill(model.template, rev)})
            for rev in model.revisions)
    except ValidationError as error:
        raise TopologyError(format_errors(source, error)) from None
    problems = [f"{source}: {problem}" for index, side in enumerate(sides)
                for problem in side_problems(side, f"builds.{index}", topology)]
    if len(sides) < 2:
        problems.append(f"{source}: a bisection needs at least two builds, got {len(sides)}")
    seen: dict[str, str] = {}
    for side in sides:
        key = repr(side.changes())
        if key in seen:
            problems.append(f"{source}: builds {seen[key]} and {side.name} change the same "
                            f"things ({side.changes()}): they are one build")
        seen.setdefault(key, side.name)
    names = [side.name for side in sides]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{source}: build name {name!r} is used twice")
    if problems:
        raise TopologyError("\n".join(problems))
    return Builds(source, model.name or f"{names[0]}..{names[-1]}", sides, model.build,
                  model.build_timeout)


def binaries(side: Side) -> list[tuple[str, str, str]]:
    """``(node, tool, path)`` of every binary ``side`` names (tools and VPP installs)."""
    found = [(node, tool, path) for node, tools in side.tools.items()
             for tool, path in tools.items()]
    found += [(node, "vpp", paths.bin) for node, paths in side.vpp.items() if paths.bin]
    return found


def local_problems(side: Side) -> list[str]:
    """What is wrong with ``side``'s binaries on this host: missing, or not answering the
    version command of their tool (VPP: present and executable)."""
    problems = []
    for node, tool, path in binaries(side):
        where = f"build {side.name}: {node}.{tool} {path}"
        if not Path(path).is_file():
            problems.append(f"{where}: no such file")
            continue
        if tool not in PROBES:
            continue
        command = version_command(tool, path)
        try:
            run = subprocess.run(["sh", "-c", f"{command} 2>&1"], capture_output=True,
                                 text=True, timeout=VERSION_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            problems.append(f"{where}: `{command}` did not answer in {VERSION_TIMEOUT_S:g} s")
            continue
        if parse_version(tool, run.stdout) is None:
            said = run.stdout.strip()[-200:] or "(no output)"
            problems.append(f"{where}: does not answer `{command}` (exit {run.returncode}): "
                            f"{said}")
    return problems


GROUP_EXIT_S = 10.0
"""Seconds a killed build's process group gets to exit: SIGKILL is certain but not instant (a
busy 2-core VM: a tox run found the build's ``sleep`` still running right after the kill)."""


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = process_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait_group_gone(pgid: int, seconds: float) -> list[int]:
    """Wait up to ``seconds`` for process group ``pgid`` to have no live process; the ones
    left (none: all gone)."""
    deadline = time.monotonic() + seconds
    while (left := _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def build_command(template: str, rev: str) -> str:
    """The build command for revision ``rev``: ``{rev}`` replaced by the revision,
    shell-quoted (``shlex.quote``: a plain commit id stays as it is; anything else is one
    word the shell does not interpret)."""
    return template.replace("{rev}", shlex.quote(rev))


def make_build(builds: Builds, index: int, log: Path) -> str | None:
    """Run the build command for build ``index`` (``{rev}`` = its name, quoted), its output to
    ``log``; None when it succeeded and the build then answers, else why not."""
    if builds.build is None:
        return "no build command"
    side = builds.sides[index]
    command = build_command(builds.build, side.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        # its own process group: a build that times out is stopped with its make and compilers
        run = subprocess.Popen(["sh", "-c", command], stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            run.wait(timeout=builds.build_timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
            left = _wait_group_gone(run.pid, GROUP_EXIT_S)
            return (f"build command timed out after {builds.build_timeout:g} s (log {log})"
                    + (f"; processes {left} of its group still running {GROUP_EXIT_S:g} s after "
                       "SIGKILL" if left else ""))
    if run.returncode != 0:
        return f"build command exited {run.returncode} (log {log})"
    problems = local_problems(side)
    return "; ".join(problems) + f" after the build (log {log})" if problems else None


def check_builds(builds: Builds, topology: Topology) -> tuple[list[str], set[int]]:
    """Problems to refuse the list for, before anything is measured, and the builds a build
    command is to make: on a local topology, binaries missing or silent; a missing binary is
    fine where a build command can make it (the ends included: they are built first). A lab's
    nodes are checked by the A/B suite setup of the first comparison."""
    if topology.provision != "netns":
        return [], set()
    problems: list[str] = []
    missing: set[int] = set()
    for index, side in enumerate(builds.sides):
        found = local_problems(side)
        if builds.build is not None:
            absent = [p for p in found if p.endswith(": no such file")]
            if absent:
                missing.add(index)
            found = [p for p in found if p not in absent]
        problems += found
    return problems, missing
