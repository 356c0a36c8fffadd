"""A node command as one value (``libraries.testbed.command``): each part of the rendered line
from the inside out, and wrk's and iperf3's values as their runners build them."""

from __future__ import annotations

import pytest

from libraries.testbed.command import Ledger, NodeCommand, hard_timeout
from libraries.tools.iperf3 import IperfClientOptions, iperf3_client_command
from libraries.tools.wrk.run import WrkOptions, wrk_command


def test_a_command_renders_pinned_with_its_environment_timed_accounted_and_bounded():
    command = NodeCommand(("wrk", "-d", "2s", "https://h/x y"), 19, cpus=(1, 3),
                          env=(("LD_PRELOAD", "/l/vcl.so"), ("VCL_CONFIG", "/w/vcl.conf")),
                          ledger=Ledger("/w/cpu-ledger", "wrk"), times=True)
    tool = ("taskset -c 1,3 sh -c 'export LD_PRELOAD=/l/vcl.so; export "
            "VCL_CONFIG=/w/vcl.conf; exec wrk -d 2s '\"'\"'https://h/x y'\"'\"''")
    assert command.tool_line() == tool
    assert command.line() == (
        f"mkdir -p /w/cpu-ledger; (({tool}); rc=$?; echo @@hoststack-cpu; times; exit $rc); "
        "rc=$?; cat /proc/$$/stat > /w/cpu-ledger/wrk.$$.stat; exit $rc")
    assert command.rendered() == hard_timeout(command.line(), 19)
    assert hard_timeout("true", 2.5) == "timeout -k 2 2.5 sh -c true"


def test_a_bad_environment_name_or_ledger_name_is_refused_when_rendered():
    with pytest.raises(ValueError, match="'BAD NAME' is not a valid name"):
        NodeCommand(("wrk",), 1, env=(("BAD NAME", "x"),)).line()
    with pytest.raises(ValueError, match="ledger name 'x;rm': expected one word"):
        NodeCommand(("wrk",), 1, ledger=Ledger("/w", "x;rm")).line()


def test_wrk_builds_its_command_as_a_value_with_the_default_hard_timeout():
    options = WrkOptions(url="https://198.18.1.1:8089/1kb", threads=1, connections=10,
                         duration=2, cpus=[1])
    command = wrk_command("wrk", options, flavour="wrk", cpu_ledger="/w/cpu-ledger")
    assert command == NodeCommand(
        ("wrk", "-t", "1", "-c", "10", "-d", "2s", "https://198.18.1.1:8089/1kb"), 19.0,
        cpus=(1,), ledger=Ledger("/w/cpu-ledger", "wrk"))
    assert command.tool_line() == "taskset -c 1 wrk -t 1 -c 10 -d 2s https://198.18.1.1:8089/1kb"


def test_an_iperf3_client_builds_its_command_as_a_value():
    options = IperfClientOptions(server="198.18.1.1", port=5201, duration=2, cpus=[1])
    command = iperf3_client_command("iperf3", options, cpu_ledger="/w/cpu-ledger")
    assert command == NodeCommand(
        ("iperf3", "-c", "198.18.1.1", "-p", "5201", "-t", "2", "--json"), 17.0, cpus=(1,),
        ledger=Ledger("/w/cpu-ledger", "iperf3-client"))
    assert command.tool_line() == "taskset -c 1 iperf3 -c 198.18.1.1 -p 5201 -t 2 --json"
