"""A node command as one value (``libraries.testbed.command``): each part of the rendered line
from the inside out, and wrk's and iperf3's values as their runners build them."""

from __future__ import annotations

import pytest

from libraries.testbed.command import (
    Ledger,
    NodeCommand,
    background_command,
    hard_timeout,
    node_command,
)
from libraries.testbed.node import Node
from libraries.testbed.ssh import SshTarget
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


def test_a_script_value_renders_as_it_is_and_refuses_cpus_or_env_in_the_foreground():
    script = NodeCommand.shell("a & p=$!; wait $p", 5, ledger=Ledger("/w", "x"))
    assert script.tool_line() == "a & p=$!; wait $p"
    assert script.rendered() == hard_timeout(
        "mkdir -p /w; (a & p=$!; wait $p); rc=$?; cat /proc/$$/stat > /w/x.$$.stat; exit $rc",
        5)
    with pytest.raises(ValueError, match="pin and export inside the script"):
        NodeCommand.shell("a", 5, cpus=(1,)).line()
    with pytest.raises(ValueError, match="an argv or a script"):
        NodeCommand(("a",), 5, script="b")


def test_a_foreground_command_needs_its_timeout_and_holds_it_alone():
    with pytest.raises(ValueError, match="needs a timeout"):
        NodeCommand(("wrk",)).rendered()
    assert node_command("uname -r", 10) == NodeCommand.shell("uname -r", 10)
    assert node_command("uname -r").timeout == 60
    with pytest.raises(ValueError, match="holds its timeout"):
        node_command(NodeCommand(("wrk",), 19), 60)


def test_a_background_process_pins_itself_and_exports_to_the_tool_alone():
    value = NodeCommand(("nginx", "-c", "/w/a b.conf"), cpus=(0, 2), env=(("K", "v w"),))
    assert value.background_line() == (
        "taskset -p -c 0,2 $$ >/dev/null; export K='v w'; exec nginx -c '/w/a b.conf'")
    assert background_command("sleep 9", {"K": "v"}, [1]) == NodeCommand.shell(
        "sleep 9", cpus=(1,), env=(("K", "v"),))
    with pytest.raises(ValueError, match="env and cpus belong in the command value"):
        background_command(value, cpus=[1])
    with pytest.raises(ValueError, match="no timeout, ledger or times"):
        NodeCommand(("wrk",), 19).background_line()


def test_a_node_sends_the_values_rendering_behind_sudo_only_where_root_is_needed():
    value = NodeCommand(("perf", "record"), 20)
    as_user = Node("dut", SshTarget("h", user="u", sudo=True), "/w")
    assert as_user._wrap(value, sudo=True) == f"sudo -n {value.rendered()}"
    assert as_user._wrap(value, sudo=False) == value.rendered()
    assert Node("dut", SshTarget("h"), "/w")._wrap(value, sudo=True) == value.rendered()
