"""Which stream module an nginx build loads (``nginx -V``): Debian's dynamic module, a source
build's own dynamic module under its prefix, a build with stream compiled in, and builds or
outputs the stream proxy cannot use."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from libraries.testbed.errors import HostStackError
from libraries.testbed.node import CommandResult
from libraries.tools.nginx.service import stream_module_from_build, stream_module_of

FIXTURES = Path(__file__).parent / "fixtures"
HEADER = "nginx version: nginx/1.31.4\nbuilt by gcc 12.2.0 (Debian 12.2.0-14+deb12u1)\n"


def configure(arguments: str) -> str:
    return f"{HEADER}configure arguments: {arguments}\n"


def test_debian_nginx_loads_its_packaged_module():
    text = (FIXTURES / "nginx" / "nginx_V_debian.txt").read_text()
    assert stream_module_from_build(text) == "/usr/lib/nginx/modules/ngx_stream_module.so"


def test_a_source_build_loads_the_module_under_its_own_prefix():
    text = (FIXTURES / "nginx" / "nginx_V_source_dynamic.txt").read_text()
    assert stream_module_from_build(text) == "/opt/nginx-candidate/modules/ngx_stream_module.so"


def test_stream_compiled_in_needs_no_load_module():
    text = (FIXTURES / "ebpf_stream" / "nginx_V_ebpf.txt").read_text()
    assert stream_module_from_build(text) is None


@pytest.mark.parametrize("arguments, module", [
    ("--prefix=/opt/nginx-candidate --with-stream=dynamic --with-http_ssl_module",
     "/opt/nginx-candidate/modules/ngx_stream_module.so"),
    ("--prefix=/opt/cand/ --with-stream=dynamic --modules-path=/opt/mods/",
     "/opt/mods/ngx_stream_module.so"),
    ("--with-stream=dynamic", "/usr/local/nginx/modules/ngx_stream_module.so"),
    ("--prefix=/opt/x --with-cc-opt='-O2 -g --with-stream=dynamic' --with-stream", None),
])
def test_source_builds_load_their_own_module(arguments, module):
    assert stream_module_from_build(configure(arguments)) == module


@pytest.mark.parametrize("text, problem", [
    (configure("--prefix=/opt/x --with-stream_ssl_module --with-http_ssl_module"),
     "/opt/x/sbin/nginx was built without the stream module"),
    (configure("--with-stream=static"), "neither --with-stream nor --with-stream=dynamic"),
    ("nginx version: nginx/1.31.4\n", "printed no 'configure arguments:' line"),
    ("garbage\x00\n", "printed no 'configure arguments:' line"),
    (configure("--prefix=/opt/x --with-cc-opt='-O2 --with-stream"),
     "configure arguments do not parse (No closing quotation)"),
])
def test_builds_without_a_usable_stream_module_are_refused(text, problem):
    with pytest.raises(HostStackError, match=re.escape(problem)):
        stream_module_from_build(text, "/opt/x/sbin/nginx")


@dataclass
class AnsweringNode:
    """Answers ``-V`` and ``test -f`` like a node; records the commands."""

    version: tuple[int, str]
    present: set[str]
    name: str = "dut"
    where: str = "node dut (root@127.0.0.1)"
    commands: list[str] = field(default_factory=list)

    def run(self, command: str, timeout: float = 60.0, sudo: bool = False, check: bool = True,
            quiet: bool = False) -> CommandResult:
        assert timeout <= 15
        self.commands.append(command)
        if command.endswith(" -V 2>&1"):
            return CommandResult(command, self.version[0], self.version[1], "", 0.01)
        match = re.fullmatch(r"test -f (\S+)", command)
        assert match, command
        return CommandResult(command, 0 if match.group(1) in self.present else 1, "", "", 0.01)


def test_the_module_must_exist_on_the_node():
    text = configure("--prefix=/opt/cand --with-stream=dynamic")
    module = "/opt/cand/modules/ngx_stream_module.so"
    assert stream_module_of(AnsweringNode((0, text), {module}), "/opt/cand/sbin/nginx") == module
    with pytest.raises(HostStackError, match=r"node dut .*loads the stream module from "
                                             r"/opt/cand/modules/ngx_stream_module.so.*missing"):
        stream_module_of(AnsweringNode((0, text), set()), "/opt/cand/sbin/nginx")


def test_built_in_stream_asks_for_no_file_and_failures_name_the_node():
    node = AnsweringNode((0, configure("--with-stream")), set())
    assert stream_module_of(node, "/opt/e/sbin/nginx") is None
    assert node.commands == ["/opt/e/sbin/nginx -V 2>&1"]
    with pytest.raises(HostStackError, match=r"node dut .*`/opt/e/sbin/nginx -V` exited 127: "
                                             r".*not found"):
        stream_module_of(AnsweringNode((127, "sh: 1: /opt/e/sbin/nginx: not found"), set()),
                         "/opt/e/sbin/nginx")
    with pytest.raises(HostStackError, match=r"node dut .*built without the stream module"):
        stream_module_of(AnsweringNode((0, configure("--prefix=/x")), set()), "nginx")
