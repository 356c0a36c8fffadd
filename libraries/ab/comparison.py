"""A/B comparison files: two sides of the system under test, ``a`` (the baseline) and ``b`` (the
candidate), each a name and overrides of the topology for that side.

    name: nginx-1.26-vs-1.22          # optional
    aa: false                         # true: an A/A check (identical sides allowed)
    a: {name: debian-nginx}
    b:
      name: nginx-1.26
      tools: {dut: {nginx: /opt/nginx-1.26/sbin/nginx}}     # binaries per node
      vpp: {dut: {bin: /opt/vpp-b/bin/vpp, ...}}             # the VPP install per node
      nginx: {proxy: {http: ["ssl_buffer_size 4k;"], server: [...]}, server: {...}}
      startup: {dut: {tcp: "cc-algo cubic"}}                 # VPP startup.conf sections
      vcl: {proxy: ["rx-fifo-size 400000"]}                  # VCL options per app
      sysctl: {dut: {net.core.rmem_max: 8388608}}            # set for this side, restored after
      env: {nginx: {OPENSSL_ia32cap: "~0x200000200000000"}}  # environment per tool

Validated like a topology (unknown keys and bad values named with file and key path), and
against the topology it is used with: a node, tool or VPP install the topology lacks is an
error before anything is measured, and so are two identical sides unless ``aa: true``.
Checks that need the nodes (a binary that does not answer its version command, a sysctl the
node does not have) are :mod:`libraries.keywords.ab`'s, in the suite setup.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from libraries.testbed.errors import TopologyError
from libraries.testbed.topology import KNOWN_TOOLS, Topology, VppInstall
from libraries.testbed.topology_file import format_errors
from libraries.tools.nginx import directive_problem

NginxRole = Literal["proxy", "server", "stream"]
"""nginx instances a side may configure: the HTTPS reverse proxy (ssl_proxy), the HTTPS
server (ssl_proxy, sslsniff), the stream proxy (ebpf_stream)."""
VclApp = Literal["server", "proxy", "client"]
SysctlKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$")]
def _one_line_block(text: str) -> str:
    """A directive or a one-line block (:func:`~libraries.tools.nginx.directive_problem`)."""
    if (problem := directive_problem(text)) is not None:
        raise ValueError(f"{text!r}: expected {problem}")
    return text


Directive = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\n]+[;}]$"),
                      AfterValidator(_one_line_block)]
StartupBody = Annotated[str, StringConstraints(pattern=r"^[^{}]*$")]
VclLine = Annotated[str, StringConstraints(min_length=1, pattern=r"^[a-z0-9-]+( [^{}\n]+)?$")]
SysctlValue = Annotated[str, BeforeValidator(lambda v: str(v) if type(v) is int else v),
                        StringConstraints(pattern=r"^[A-Za-z0-9_. \t-]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NginxDirectives(_Strict):
    """Directives added to an nginx role's ``http`` block and ``server`` block (each ends
    with ``;``)."""

    http: tuple[Directive, ...] = ()
    server: tuple[Directive, ...] = ()


class VppPaths(_Strict):
    """The parts of a node's VPP install a side replaces."""

    bin: str | None = None
    vppctl: str | None = None
    ldpreload: str | None = None
    api_dir: str | None = None
    plugins: str | None = None


class Side(_Strict):
    """One side of the comparison: its ``name`` and what it overrides."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    tools: dict[str, dict[str, str]] = Field(default_factory=dict)
    vpp: dict[str, VppPaths] = Field(default_factory=dict)
    nginx: dict[NginxRole, NginxDirectives] = Field(default_factory=dict)
    startup: dict[str, dict[Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]+$")],
                            StartupBody]] = Field(default_factory=dict)
    vcl: dict[VclApp, tuple[VclLine, ...]] = Field(default_factory=dict)
    sysctl: dict[str, dict[SysctlKey, SysctlValue]] = Field(default_factory=dict)
    env: dict[str, dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")],
                        str]] = Field(default_factory=dict)

    def changes(self) -> dict[str, Any]:
        """What this side sets, without its name (two sides are identical when these are)."""
        return self.model_dump(exclude={"name"}, exclude_defaults=True)


class Comparison(_Strict):
    """The whole file."""

    name: str = ""
    aa: bool = False
    a: Side
    b: Side


@dataclass(frozen=True)
class ComparisonFile:
    """A loaded comparison: where it came from, its text and sha256 (kept in every record),
    and the validated model."""

    path: str
    text: str
    sha256: str
    comparison: Comparison

    @property
    def title(self) -> str:
        """``name`` or ``A vs B``."""
        c = self.comparison
        return c.name or f"{c.a.name} vs {c.b.name}"


def read_mapping(path: str | Path, what: str, expected: str) -> tuple[str, dict[str, Any]]:
    """The text of the YAML file ``path`` (a ``what``) and the mapping it holds;
    :class:`TopologyError` naming the file when it cannot be read, is not YAML or holds
    something other than ``expected``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise TopologyError(f"{path}: cannot read the {what} ({error.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TopologyError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise TopologyError(f"{path}: expected {expected}, got {data!r}")
    return text, data


def load_comparison(path: str | Path, topology: Topology) -> ComparisonFile:
    """Read, validate and check ``path`` against ``topology``; :class:`TopologyError` naming
    the file and key path of every problem."""
    source = str(path)
    text, data = read_mapping(path, "comparison file", "a mapping with sides a and b")
    try:
        comparison = Comparison.model_validate(data)
    except ValidationError as error:
        raise TopologyError(format_errors(source, error)) from None
    problems = [f"{source}: {problem}" for key in ("a", "b")
                for problem in side_problems(getattr(comparison, key), key, topology)]
    if comparison.a.changes() == comparison.b.changes() and not comparison.aa:
        problems.append(f"{source}: a and b change the same things ({comparison.a.changes()}):"
                        " that is an A/A check: say `aa: true` if it is meant")
    if problems:
        raise TopologyError("\n".join(problems))
    return ComparisonFile(source, text, hashlib.sha256(text.encode()).hexdigest(), comparison)


def side_problems(side: Side, key: str, topology: Topology) -> list[str]:
    """What ``side`` names that ``topology`` lacks (a node, a tool on it, a VPP install)."""
    problems = []
    nodes = topology.nodes
    for field in ("tools", "vpp", "startup", "sysctl"):
        for node in getattr(side, field):
            if node not in nodes:
                problems.append(f"{key}.{field}.{node}: no node {node!r} in topology "
                                f"{topology.name} (nodes: {', '.join(nodes)})")
    for node, tools in side.tools.items():
        for tool in tools:
            if node in nodes and tool not in nodes[node].tools:
                problems.append(f"{key}.tools.{node}.{tool}: {node} declares no {tool} in "
                                f"topology {topology.name} (tools: "
                                f"{', '.join(sorted(nodes[node].tools))})")
    for field in ("vpp", "startup"):
        for node in getattr(side, field):
            if node in nodes and nodes[node].vpp is None:
                problems.append(f"{key}.{field}.{node}: {node} has no VPP in topology "
                                f"{topology.name}")
    for tool in side.env:
        if tool not in KNOWN_TOOLS:
            problems.append(f"{key}.env.{tool}: unknown tool: expected one of "
                            f"{', '.join(KNOWN_TOOLS)}")
    return problems


def side_topology(topology: Topology, side: Side) -> Topology:
    """``topology`` as ``side`` sees it: its binaries, VPP installs and tool environments."""
    nodes = {}
    for name, node in topology.nodes.items():
        tools = {**node.tools, **side.tools.get(name, {})}
        env = {tool: dict(values) for tool, values in node.tool_env.items()}
        for tool, values in side.env.items():
            env[tool] = {**env.get(tool, {}), **values}
        vpp = node.vpp
        if vpp is not None and name in side.vpp:
            given = side.vpp[name].model_dump(exclude_none=True)
            vpp = VppInstall(**{**vpp.model_dump(), **given})
        nodes[name] = node.model_copy(update={"tools": tools, "tool_env": env, "vpp": vpp})
    return topology.model_copy(update={"nodes": nodes})
