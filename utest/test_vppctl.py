"""vppctl command building over a node, and the ``show session verbose`` parser."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from libraries.testbed.command import node_command
from libraries.testbed.errors import CommandError, HostStackError, NodeError, ParseError
from libraries.vpp.vppctl import (
    collect_diagnostics,
    listeners_on_port,
    parse_show_session_verbose,
    require_listener,
    run_vppctl,
    vppctl_command,
)

# seed 000 (loopback ssl proxy): nginx server and reverse proxy listening in VPP
SEED_000_SESSIONS = """\
Connection                                                  State          Rx-f      Tx-f
[0:0][T] 172.16.2.1:8089->0.0.0.0:0                         LISTEN         0         0
[0:1][T] 172.16.1.1:8445->0.0.0.0:0                         LISTEN         0         0
Thread 0: active sessions 2
"""
# seed 000 (ethernet): the proxy on the default namespace; the seed's line ends with a space
SEED_000_ETHERNET_SESSIONS = (
    "Connection                                                  State          Rx-f      Tx-f\n"
    "[0:0][T] 0.0.0.0:8089->0.0.0.0:0                         LISTEN         0         0\n"
    "Thread 0: active sessions 1 \n")
# seed 001: iperf3 server
SEED_001_SESSIONS = """\
Connection                                                  State          Rx-f      Tx-f
[0:0][T] 172.16.1.1:5201->0.0.0.0:0                         LISTEN         0         0
Thread 0: active sessions 1
"""


@dataclass
class Result:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float = 0.0


class ScriptedNode:
    """A Node whose commands answer from a table of outputs (or raise), recording each run."""

    name = "dut"
    workdir = "/tmp/run"

    def __init__(self, outputs: dict[str, str | Exception]) -> None:
        self.outputs = outputs
        self.runs: list[tuple[str, float, bool]] = []

    def run(self, command, timeout: float | None = None, sudo: bool = False,
            check: bool = True) -> Result:
        value = node_command(command, timeout)
        command, timeout = value.line(), value.timeout
        self.runs.append((command, timeout, sudo))
        for suffix, output in self.outputs.items():
            if command.endswith(suffix):
                if isinstance(output, Exception):
                    raise output
                return Result(command, 0, output, "")
        raise CommandError(self.name, command, 127, "", "no scripted output")


def test_vppctl_command_quotes_every_part():
    assert vppctl_command(["show", "session", "verbose"]).quoted() == \
        "vppctl -s /run/vpp/cli.sock show session verbose"
    assert vppctl_command(["show", "int"], socket="/tmp/my run/cli.sock",
                          vppctl="/opt/vpp/bin/vppctl").quoted() == \
        "/opt/vpp/bin/vppctl -s '/tmp/my run/cli.sock' show int"
    assert vppctl_command(["show", "x; rm -rf /"]).quoted().endswith("show 'x; rm -rf /'")
    assert vppctl_command(["show", "int"], timeout=3).rendered().startswith(
        "timeout -k 2 3 sh -c 'vppctl -s /run/vpp/cli.sock show int'")
    with pytest.raises(ValueError, match="no words"):
        vppctl_command([])


def test_run_vppctl_runs_on_the_node_with_sudo_and_timeout():
    node = ScriptedNode({"show session verbose": SEED_000_SESSIONS})
    output = run_vppctl(node, "show session verbose", socket="/run/vpp/cli-dut.sock",
                        timeout=7.5)
    assert output == SEED_000_SESSIONS
    assert node.runs == [("vppctl -s /run/vpp/cli-dut.sock show session verbose", 7.5, True)]


def test_run_vppctl_rejected_command_is_an_error():
    node = ScriptedNode({"show sesion": "show: unknown input `sesion'\n"})
    with pytest.raises(NodeError, match=r"dut: VPP rejected .*show sesion.*unknown input"):
        run_vppctl(node, "show sesion")


def test_collect_diagnostics_never_raises_and_keeps_each_output():
    node = ScriptedNode({
        "show session verbose": SEED_001_SESSIONS,
        "show app": "Index     Name                Namespace\n",
        "show errors": CommandError("dut", "vppctl ... show errors", 1, "",
                                    "clib_socket_init: connect (fd 3, '/run/vpp/cli.sock')"),
    })
    outputs = collect_diagnostics(node, commands=("show session verbose", "show app",
                                                  "show errors", "show hardware"))
    assert outputs["show session verbose"] == SEED_001_SESSIONS
    assert outputs["show app"].startswith("Index")
    assert outputs["show errors"].startswith("(failed: dut: command")
    assert "clib_socket_init" in outputs["show errors"]
    assert outputs["show hardware"].startswith("(failed:")


def test_parse_seed_000_listeners():
    sessions = parse_show_session_verbose(SEED_000_SESSIONS)
    assert [(s.thread, s.index, s.transport, s.local_ip, s.local_port, s.remote_ip,
             s.remote_port, s.state, s.rx_fifo, s.tx_fifo) for s in sessions] == [
        (0, 0, "T", "172.16.2.1", 8089, "0.0.0.0", 0, "LISTEN", 0, 0),
        (0, 1, "T", "172.16.1.1", 8445, "0.0.0.0", 0, "LISTEN", 0, 0)]
    assert sessions[0].text.startswith("[0:0][T] 172.16.2.1:8089->0.0.0.0:0")


def test_parse_seed_000_ethernet_and_seed_001():
    (proxy,) = parse_show_session_verbose(SEED_000_ETHERNET_SESSIONS)
    assert (proxy.local_ip, proxy.local_port, proxy.state) == ("0.0.0.0", 8089, "LISTEN")
    (iperf,) = parse_show_session_verbose(SEED_001_SESSIONS)
    assert (iperf.local_ip, iperf.local_port) == ("172.16.1.1", 5201)


def test_parse_established_cut_through_ipv6_and_two_threads():
    text = (
        "Connection                                          State          Rx-f      Tx-f\n"
        "[0:0][T] 172.16.1.1:5201->0.0.0.0:0                 LISTEN         0         0\n"
        "[0:1][CT:T] 172.16.1.1:5201->172.16.2.1:43757       ESTABLISHED    0         3994312\n"
        "[0:2][T] fd00::1:443->fd00::2:50000                 ESTABLISHED    12        0\n"
        "Thread 0: active sessions 3\n"
        "Thread 1: no sessions\n")
    listen, cut, six = parse_show_session_verbose(text)
    assert (cut.transport, cut.remote_ip, cut.remote_port, cut.tx_fifo) == \
        ("CT:T", "172.16.2.1", 43757, 3994312)
    assert (six.local_ip, six.local_port, six.remote_ip, six.rx_fifo) == \
        ("fd00::1", 443, "fd00::2", 12)
    assert listeners_on_port([listen, cut, six], 5201) == [listen]


def test_parse_row_without_endpoints_keeps_the_text():
    text = "[0:3][TLS] app_wrk 1 index 0 engine 1 tcp 0:2\nThread 0: active sessions 1\n"
    (tls,) = parse_show_session_verbose(text)
    assert (tls.transport, tls.local_port, tls.state) == ("TLS", None, None)
    assert tls.text == "[0:3][TLS] app_wrk 1 index 0 engine 1 tcp 0:2"


@pytest.mark.parametrize("text", [
    "Connection    State    Rx-f    Tx-f\nThread 0: active sessions 0\n",
    "Thread 0: no sessions\n",
    "Thread 0: no sessions\nThread 1: active sessions 0 closed 0\n",
])
def test_parse_empty_session_tables(text: str):
    assert parse_show_session_verbose(text) == []


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no 'Thread N: active sessions' line"),
    ("clib_socket_init: connect (fd 3, '/run/vpp/cli.sock'): No such file or directory\n",
     "unexpected line"),
    ("[0:0][T] 172.16.1.1:5201->0.0.0.0:0  LISTEN  0  0\n", "no 'Thread N"),
    ("[0:0][T] 172.16.1.1:5201->0.0.0.0:0  LISTEN  0  0\nsession layer is disabled\n"
     "Thread 0: active sessions 1\n", "unexpected line 'session layer is disabled'"),
    ("Thread 0: 2 sessions\n", "unexpected line"),  # not the verbose form
])
def test_parse_garbage_raises_parse_error_quoting_the_text(text: str, problem: str):
    with pytest.raises(ParseError, match=problem) as caught:
        parse_show_session_verbose(text)
    assert caught.value.text == text
    assert repr(text[:20])[1:-1] in str(caught.value) or text == ""


def test_require_listener_proves_the_app_is_on_vpp():
    sessions = parse_show_session_verbose(SEED_000_SESSIONS)
    assert [s.local_ip for s in require_listener(sessions, 8445, "nginx server")] == \
        ["172.16.1.1"]
    with pytest.raises(HostStackError) as caught:
        require_listener(sessions, 5201, "iperf3 server")
    message = str(caught.value)
    assert message.startswith("iperf3 server: the application is not on VPP's host stack: "
                              "no LISTEN session on port 5201")
    assert "[0:0][T] 172.16.2.1:8089->0.0.0.0:0" in message


def test_require_listener_on_an_empty_table():
    with pytest.raises(HostStackError, match=r"not on VPP's host stack.*VPP has: no sessions"):
        require_listener(parse_show_session_verbose("Thread 0: no sessions\n"), 80, "nginx")
