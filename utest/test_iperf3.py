"""Tests of libraries.tools.iperf3: command builders, JSON parser, runner (fakes and real iperf3).

Fixtures in utest/fixtures/iperf3/, all from Debian's iperf 3.12 on this machine over loopback:
forward, -R, -P 2 and -M 1400 -A 0,1 runs; the error reports for a closed port and for
``-M 20`` (iperf3 exits 0 and puts the error in the JSON); a report cut in half (truncated).
"""

from __future__ import annotations

import copy
import json
import shlex
import shutil
from pathlib import Path

import pytest

from libraries.testbed.command import NodeCommand, node_command
from libraries.testbed.errors import CommandError, ParseError
from libraries.testbed.node import CommandResult
from libraries.tools.iperf3 import (
    IperfClientOptions,
    IperfServerOptions,
    default_timeout,
    iperf3_client_command,
    iperf3_server_command,
    parse_iperf3_json,
    run_iperf3_client,
    start_iperf3_server,
)
from utest.localnode import LocalNode, free_port, wait_for_listener

FIXTURES = Path(__file__).parent / "fixtures" / "iperf3"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def fixture_json(name: str) -> dict:
    return json.loads(fixture(name))


class FakeNode:
    """Answers run() with one canned result; records run() and start() calls."""

    name = "client"
    workdir = "/tmp/fake"

    def __init__(self, stdout: str = "", stderr: str = "", exit_code: int = 0):
        self.stdout, self.stderr, self.exit_code = stdout, stderr, exit_code
        self.calls: list[dict[str, object]] = []

    def run(self, command, timeout: float | None = None, sudo: bool = False,
            check: bool = True) -> CommandResult:
        value = node_command(command, timeout)
        command, timeout = value.line(), value.timeout
        self.calls.append({"command": command, "timeout": timeout, "check": check})
        return CommandResult(command, self.exit_code, self.stdout, self.stderr, 0.1)

    def start(self, command, name, env=None, cpus=None):
        self.calls.append({"command": command, "name": name, "env": env, "cpus": cpus})
        return "handle"


# -- command lines ---------------------------------------------------------------------------

def test_client_command_with_every_option():
    options = IperfClientOptions(
        server="198.18.1.1", port=18201, duration=30, reverse=True, parallel=4, mss=1400,
        bind="198.18.1.2", affinity=1, server_affinity=2, omit=2, cpus=[3],
    )
    command = iperf3_client_command("/usr/bin/iperf3", options).tool_line()
    assert shlex.split(command) == [
        "taskset", "-c", "3", "/usr/bin/iperf3", "-c", "198.18.1.1", "-p", "18201", "-t", "30",
        "--json", "-R", "-P", "4", "-M", "1400", "-B", "198.18.1.2", "-A", "1,2", "-O", "2",
    ]


def test_client_command_minimal_always_json():
    command = iperf3_client_command("iperf3",
                                    IperfClientOptions(server="127.0.0.1")).tool_line()
    assert command == "iperf3 -c 127.0.0.1 -p 5201 -t 10 --json"


def test_server_commands():
    assert iperf3_server_command("iperf3", IperfServerOptions()).quoted() == "iperf3 -s -p 5201"
    options = IperfServerOptions(port=18202, bind="198.18.2.2", one_off=True, affinity=1,
                                 cpus=(0, 1))
    command = iperf3_server_command("iperf3", options, env={"VCL_CONFIG": "/c.conf"})
    assert command.background_line() == (
        "taskset -p -c 0,1 $$ >/dev/null; export VCL_CONFIG=/c.conf; "
        "exec iperf3 -s -p 18202 -B 198.18.2.2 -1 -A 1")


def test_env_goes_to_iperf3_not_taskset():
    options = IperfClientOptions(server="172.16.1.1", cpus=[3])
    command = iperf3_client_command(
        "iperf3", options, env={"LD_PRELOAD": "/x/libvcl_ldpreload.so", "VCL_CONFIG": "/c.conf"}
    ).tool_line()
    argv = shlex.split(command)
    assert argv[:5] == ["taskset", "-c", "3", "sh", "-c"]
    assert argv[5] == ("export LD_PRELOAD=/x/libvcl_ldpreload.so; export VCL_CONFIG=/c.conf; "
                       "exec iperf3 -c 172.16.1.1 -p 5201 -t 10 --json")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"server": ""}, "server: expected a host name"),
        ({"server": "-R"}, "server: expected a host name"),
        ({"server": "a b"}, "server: expected a host name"),
        ({"port": 0}, "port: expected an integer in 1..65535"),
        ({"port": 70000}, "port: expected an integer in 1..65535"),
        ({"duration": 0}, "duration: expected an integer in 1..86400"),
        ({"parallel": 0}, "parallel: expected an integer in 1..128"),
        ({"parallel": 129}, "parallel: expected an integer in 1..128"),
        ({"mss": 20}, "mss: expected an integer in 88..9216"),
        ({"affinity": -1}, "affinity: expected an integer"),
        ({"server_affinity": 1}, "server_affinity: needs affinity"),
        ({"cpus": []}, "cpus: expected a non-empty list"),
        ({"duration": True}, "duration: expected an integer"),
    ],
)
def test_invalid_client_options(changes, message):
    with pytest.raises(ValueError, match=message):
        IperfClientOptions(**{"server": "127.0.0.1", **changes})


def test_invalid_server_options():
    with pytest.raises(ValueError, match="port: expected an integer in 1..65535"):
        IperfServerOptions(port=-5)
    with pytest.raises(ValueError, match="bind: expected a host name"):
        IperfServerOptions(bind="")


# -- parser on captured reports ------------------------------------------------------------

def test_forward_run():
    document = fixture_json("iperf312_forward.json")
    result = parse_iperf3_json(fixture("iperf312_forward.json"))
    assert result.receiver_bps == document["end"]["sum_received"]["bits_per_second"]
    assert result.throughput_bps == result.receiver_bps
    assert result.sender_bps == pytest.approx(29660581618.7517)
    assert result.receiver_bytes == result.sender_bytes == 7416053760
    assert result.duration_s == pytest.approx(2.00029)
    assert result.gbps == pytest.approx(29.6599, abs=1e-3)
    assert result.retransmits == 0
    assert result.max_snd_cwnd == 1047728
    assert (result.reverse, result.streams, result.protocol) == (False, 1, "TCP")


def test_reverse_run_client_is_receiver_and_has_no_cwnd():
    result = parse_iperf3_json(fixture("iperf312_reverse.json"))
    assert result.reverse is True
    assert result.throughput_bps == pytest.approx(31505041920.371193)
    assert result.sender_bytes == 7877427200
    assert result.receiver_bytes == 7876378624
    assert result.retransmits == 0  # the server's sender reported it
    assert result.max_snd_cwnd is None  # iperf3 prints 0 here: this client did not send


def test_parallel_streams_sum_and_cwnd_maximum():
    document = fixture_json("iperf312_parallel2.json")
    result = parse_iperf3_json(fixture("iperf312_parallel2.json"))
    assert result.streams == 2
    per_stream = [s["receiver"]["bytes"] for s in document["end"]["streams"]]
    assert len(per_stream) == 2
    assert result.receiver_bytes == sum(per_stream)
    assert result.max_snd_cwnd == 916762
    assert result.gbps == pytest.approx(37.6954, abs=1e-3)


def test_mss_and_affinity_run():
    result = parse_iperf3_json(fixture("iperf312_mss1400_affinity.json"))
    assert result.gbps == pytest.approx(15.5299, abs=1e-3)
    assert result.streams == 1


def test_stack_without_tcp_info_marks_retransmits_and_cwnd_unavailable():
    # As over VPP's host stack (seed 001): the values are present but meaningless.
    document = fixture_json("iperf312_forward.json")
    document["end"]["sum_sent"]["retransmits"] = 4294901761
    document["end"]["streams"][0]["sender"]["max_snd_cwnd"] = 0
    result = parse_iperf3_json(json.dumps(document), stack_reports_tcp_info=False)
    assert result.retransmits is None
    assert result.max_snd_cwnd is None
    assert result.gbps == pytest.approx(29.6599, abs=1e-3)


def test_missing_retransmits_key_is_unavailable_not_zero():
    document = fixture_json("iperf312_forward.json")
    del document["end"]["sum_sent"]["retransmits"]
    del document["end"]["streams"][0]["sender"]["max_snd_cwnd"]
    result = parse_iperf3_json(json.dumps(document))
    assert result.retransmits is None
    assert result.max_snd_cwnd is None


def test_raw_kept_out_of_repr_and_comparison():
    text = fixture("iperf312_forward.json")
    result = parse_iperf3_json(text)
    assert result.raw == text
    assert "raw=" not in repr(result)
    assert parse_iperf3_json(text + "\n") == result


# -- parser errors ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("iperf312_conn_refused.json",
         "iperf3 reported an error: 'unable to connect to server: Connection refused'"),
        ("iperf312_error_mss20.json",
         "iperf3 reported an error: 'unable to set TCP/SCTP MSS: Invalid argument'"),
        ("iperf312_truncated.json", "not valid JSON"),
    ],
)
def test_error_reports_and_truncation_raise(name, message):
    with pytest.raises(ParseError) as caught:
        parse_iperf3_json(fixture(name))
    assert message in str(caught.value)
    assert "output was: '{" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not valid JSON"),
        ("iperf3: error - unable to connect to server", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"start": {}, "intervals": []}', "missing or invalid .end"),
    ],
)
def test_garbage_raises(text, message):
    with pytest.raises(ParseError, match=message):
        parse_iperf3_json(text)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["end"].pop("sum_received"), "end.sum_received"),
        (lambda d: d["end"].pop("sum_sent"), "end.sum_sent"),
        (lambda d: d["end"]["sum_received"].update(bits_per_second="fast"),
         "end.sum_received.bits_per_second is 'fast'"),
        (lambda d: d["end"]["sum_sent"].update(bytes=-1), "end.sum_sent.bytes is -1"),
        (lambda d: d["end"]["sum_sent"].update(retransmits=1.5),
         "end.sum_sent.retransmits is 1.5"),
        (lambda d: d["start"].pop("test_start"), "start.test_start"),
    ],
)
def test_incomplete_or_wrong_typed_reports_raise(mutate, message):
    document = copy.deepcopy(fixture_json("iperf312_forward.json"))
    mutate(document)
    with pytest.raises(ParseError, match=message):
        parse_iperf3_json(json.dumps(document), source="client: iperf3")


# -- runner with a fake node -----------------------------------------------------------------

def test_run_client_uses_hard_timeout_and_parses():
    node = FakeNode(stdout=fixture("iperf312_reverse.json"))
    options = IperfClientOptions(server="127.0.0.1", duration=2, reverse=True)
    result = run_iperf3_client(node, "iperf3", options)
    assert result.reverse is True
    assert node.calls[0]["command"] == iperf3_client_command("iperf3", options).tool_line()
    assert node.calls[0]["timeout"] == default_timeout(options)
    assert node.calls[0]["check"] is False


def test_run_client_error_in_json_with_exit_0_raises_parse_error():
    node = FakeNode(stdout=fixture("iperf312_conn_refused.json"), exit_code=0)
    with pytest.raises(ParseError, match=r"^client: output of 'iperf3 .*Connection refused"):
        run_iperf3_client(node, "iperf3", IperfClientOptions(server="127.0.0.1"))


def test_run_client_without_output_raises_command_error():
    node = FakeNode(stderr="iperf3: unrecognized option '--bogus'", exit_code=1)
    with pytest.raises(CommandError, match="unrecognized option"):
        run_iperf3_client(node, "iperf3", IperfClientOptions(server="127.0.0.1"))


def test_start_server_pins_through_node_start():
    node = FakeNode()
    options = IperfServerOptions(port=18203, one_off=True, cpus=[1])
    assert start_iperf3_server(node, "iperf3", options) == "handle"
    assert node.calls[0] == {"command": NodeCommand(("iperf3", "-s", "-p", "18203", "-1"),
                                                    cpus=(1,)),
                             "name": "iperf3-server-18203", "env": None, "cpus": None}


# -- real iperf3 on loopback ---------------------------------------------------------------

@pytest.fixture
def local_node(tmp_path):
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed on this machine")
    node = LocalNode(workdir=str(tmp_path))
    started = []
    yield node, started
    for process in started:
        node.stop(process)


@pytest.mark.integration
@pytest.mark.parametrize(("reverse", "parallel"), [(False, 1), (True, 2)])
def test_real_iperf3_client_against_one_off_server(local_node, reverse, parallel):
    node, started = local_node
    port = free_port()
    server = start_iperf3_server(node, "iperf3", IperfServerOptions(port=port, one_off=True,
                                                                     bind="127.0.0.1"))
    started.append(server)
    wait_for_listener(port)
    options = IperfClientOptions(server="127.0.0.1", port=port, duration=2, reverse=reverse,
                                 parallel=parallel)
    result = run_iperf3_client(node, "iperf3", options)
    printed = json.loads(result.raw)["end"]["sum_received"]
    assert result.gbps > 0
    assert result.receiver_bps == printed["bits_per_second"]
    assert result.receiver_bytes == printed["bytes"]
    # bits/s agree with bytes over the receiver's own seconds
    assert result.receiver_bps == pytest.approx(8 * result.receiver_bytes / result.duration_s,
                                                rel=0.01)
    assert 1.9 < result.duration_s < 3.0
    assert (result.reverse, result.streams, result.protocol) == (reverse, parallel, "TCP")
    assert result.retransmits is not None
    assert (result.max_snd_cwnd is None) == reverse
    server.popen.wait(timeout=10)  # -1: the server exits after its one test
    assert server.popen.returncode == 0


@pytest.mark.integration
def test_real_iperf3_closed_port_is_a_parse_error(local_node):
    node, _ = local_node
    options = IperfClientOptions(server="127.0.0.1", port=free_port(), duration=1)
    with pytest.raises(ParseError, match="unable to connect to server"):
        run_iperf3_client(node, "iperf3", options)


def test_a_receiver_that_got_nothing_is_an_error_not_zero_throughput():
    """A stalled path (seen on VPP dpdk_vdev with -R) must fail the trial, not record 0."""
    document = json.loads(fixture("iperf312_reverse.json"))
    document["end"]["sum_received"]["bytes"] = 0
    document["end"]["sum_received"]["bits_per_second"] = 0.0
    with pytest.raises(ParseError, match=r"sum_received.bytes is 0: the receiver got no data"):
        parse_iperf3_json(json.dumps(document))
