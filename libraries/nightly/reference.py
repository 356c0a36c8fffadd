"""The nightly's pinned reference: one side of a comparison, run beside the build under test.

A reference file is declared like one side of an A/B comparison file
(:mod:`libraries.ab.comparison`): a ``name`` and what the reference build sets differently
from the topology, which is the build under test ("today"):

    name: nginx-1.30.4-ref                              # names the reference's series
    tools: {dut: {nginx: /opt/nginx-ref/sbin/nginx}}    # its binaries per node
    vpp: {dut: {bin: /opt/vpp-ref/bin/vpp, ...}}        # its VPP install
    env: {nginx: {OPENSSL_ia32cap: "..."}}              # startup, vcl, nginx, sysctl: as a side

:func:`comparison_text` turns it into the comparison the suites run (side ``a`` the reference,
side ``b`` today, so every ratio is today / reference). The text depends only on what the
reference declares, never on where its file lies or when the night runs: its sha256, which
keys the history's series, is the same every night and changes exactly when the reference
does (a new series, marked on the dashboard).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from libraries.ab.comparison import Side, read_mapping
from libraries.results.family import NightFamily
from libraries.testbed.errors import TopologyError
from libraries.testbed.topology_file import format_errors

TODAY = "today"
"""Side b's name: the topology as it is tonight."""
FILE = "reference-comparison.yaml"
"""The comparison the nightly writes into its run folder."""


@dataclass(frozen=True)
class Reference:
    """A loaded reference: its file ``path``, the file's ``sha256`` and the validated
    ``side``."""

    path: Path
    sha256: str
    side: Side

    def as_dict(self) -> dict[str, Any]:
        """What ``run.json`` keeps of it."""
        return {"path": str(self.path), "sha256": self.sha256, "name": self.side.name,
                "sets": self.side.changes()}


def load_reference(path: Path) -> Reference:
    """Read and validate a reference file; :class:`TopologyError` naming the file and key of
    every problem (checks against the topology are the suites', as for any comparison)."""
    text, data = read_mapping(path, "reference file", "a mapping with the reference's name "
                              "and what it sets (tools, vpp, nginx, startup, vcl, sysctl, env)")
    try:
        side = Side.model_validate(data)
    except ValidationError as error:
        raise TopologyError(format_errors(str(path), error)) from None
    if side.name == TODAY:
        raise TopologyError(f"{path}: name: {TODAY!r} is the build under test's side; give "
                            "the reference a name of its own")
    if not side.changes():
        raise TopologyError(f"{path}: the reference sets nothing (no tools, vpp, nginx, "
                            "startup, vcl, sysctl or env): it would be the build under test "
                            "itself; name the reference build's binaries or settings")
    return Reference(path, hashlib.sha256(text.encode()).hexdigest(), side)


def comparison_text(reference: Reference) -> str:
    """The comparison file of a night: ``a`` the reference, ``b`` today (the topology)."""
    side = {"name": reference.side.name, **reference.side.model_dump(
        mode="json", exclude={"name"}, exclude_defaults=True)}
    body = yaml.safe_dump({"name": f"reference {reference.side.name}", "a": side,
                           "b": {"name": TODAY}}, sort_keys=True, default_flow_style=False)
    return ("# Written by the nightly: side a is the pinned reference, side b the topology as "
            "it is tonight.\n" + body)


def write_comparison(reference: Reference, folder: Path) -> Path:
    """Write the night's comparison into ``folder``; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    path.write_text(comparison_text(reference), encoding="utf-8")
    return path


SCATTER_PCT = 1.0
"""The night-to-night spread of the true ratio today / reference (percent) each night's A/B
verdict tolerates (``AB_SCATTER``): the same prior the gate uses
(:data:`libraries.trend.ratio.SCATTER_PRIOR`)."""
NIGHT_LOOK = 20
"""Rounds between looks in a night (``AB_LOOK``): at a night's small per-test level the
signed-rank interval needs about 13 rounds before a look can decide."""


def robot_variables(run_dir: Path, duet: bool = False,
                    family: NightFamily | None = None) -> tuple[str, ...]:
    """The robot variables of a night against a reference whose comparison is written into
    ``run_dir``: a night no look decides passes (its ratio is the night's data point), a
    test that uses nothing the reference sets is measured plainly, and each A/B verdict runs
    at its share of the night's family-wise level (``AB_ALPHA``: ``family.test_alpha``,
    :mod:`libraries.results.family`) tolerating the night-to-night scatter of the true ratio
    (``AB_SCATTER``). They come before the user's own arguments, which may override them. In
    a ``duet`` night the launcher gives the comparison itself (``AB`` is its to set)."""
    family = family or NightFamily()
    comparison = () if duet else ("--variable", f"AB:{run_dir / FILE}")
    return (*comparison, "--variable", "AB_INCONCLUSIVE:pass", "--variable",
            "AB_UNUSED:plain", "--variable", f"AB_ALPHA:{family.test_alpha:.6g}",
            "--variable", f"AB_SCATTER:{SCATTER_PCT:g}", "--variable", f"AB_LOOK:{NIGHT_LOOK}")
