"""Where a suite's applications sit on the VPPs it runs: the running instances by node, each
application's app namespace and address (the one-node loopback layout), the environment that
puts an application on VPP's host stack (``LD_PRELOAD`` + an uploaded VCL config), and the
check that VPP lists an application's listener.

One :class:`VppPlacement` per suite, held by the VPP keyword library, which fills it as it
starts VPP and lays out its host stack; the cases read it (through their context).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from libraries.vpp.instance import VppInstance, vcl_config
from libraries.vpp.vppctl import parse_show_session_verbose, require_listener, run_vppctl

SECRET = 1234
"""The app namespaces' secret (seeds 000/001)."""


@dataclass(frozen=True)
class AppPlacement:
    """Where an application runs over VPP: node, app namespace (None: default), address."""

    node: str
    namespace_id: str | None
    address: str | None


@dataclass
class VppPlacement:
    """The VPPs a suite runs (``instances``, by node name) and its applications' placements
    (``apps``, by application: server, proxy, client)."""

    instances: dict[str, VppInstance] = field(default_factory=dict)
    apps: dict[str, AppPlacement] = field(default_factory=dict)

    def runs_vpp(self, name: str) -> bool:
        """True while this suite's VPP runs on node ``name``."""
        return name in self.instances

    def app_address(self, app: str) -> str | None:
        """The address ``app`` listens on inside VPP (one-node layout), else None."""
        placement = self.apps.get(app)
        return placement.address if placement else None

    def app_environment(self, name: str, app: str, program: str,
                        extra: tuple[str, ...] = ()) -> tuple[dict[str, str], str, str]:
        """``LD_PRELOAD`` and ``VCL_CONFIG`` for ``app`` on node ``name`` (the seeds' VCL block
        for ``program`` plus ``extra`` lines, uploaded), the config's path and its text."""
        instance = self.instances[name]
        placement = self.apps.get(app, AppPlacement(name, None, None))
        secret = SECRET if placement.namespace_id else None
        text = vcl_config(program, placement.namespace_id, secret,
                          instance.install.app_socket_dir, extra)
        path = f"{instance.node.workdir}/vcl-{app}.conf"
        instance.node.put(text, path)
        return {"LD_PRELOAD": instance.install.ldpreload, "VCL_CONFIG": path}, path, text

    def sessions(self, name: str) -> str:
        """``show session verbose`` of the VPP on node ``name``."""
        instance = self.instances[name]
        return run_vppctl(instance.node, "show session verbose",
                          socket=instance.install.cli_socket, vppctl=instance.install.vppctl)

    @staticmethod
    def require_listener(text: str, port: int, app: str) -> None:
        """Fail with "the application is not on VPP's host stack" unless ``text`` (the
        sessions) shows a listener on ``port``."""
        require_listener(parse_show_session_verbose(text), port, app)
