"""CPU telemetry parsers and the usage computation, on real /proc captures of this machine
(``utest/fixtures/telemetry/README.md``) and on the live /proc through a local shell."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from libraries.testbed.command import Ledger, NodeCommand
from libraries.testbed.errors import ParseError
from libraries.tools.cpu.proc_stat import (
    parse_pid_stat,
    parse_proc_stat,
    parse_schedstat,
    parse_snapshot,
    parse_times,
)
from libraries.tools.cpu.telemetry import (
    CORE_COLUMNS,
    TelemetryError,
    cpu_usage,
    snapshot_script,
    take_snapshot,
)
from utest.localnode import LocalNode

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "telemetry"
NAMES = {384: "wrk", 30987: "iperf3-server", 30988: "nginx-server", 30989: "odd"}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def pair(prefix: str = "snapshot"):
    return (parse_snapshot(fixture(f"{prefix}_before.txt"), "before"),
            parse_snapshot(fixture(f"{prefix}_after.txt"), "after"))


def test_proc_stat_keeps_the_cpu_lines_in_ticks():
    cores = parse_proc_stat(fixture("proc_stat.txt"))
    assert sorted(cores) == ["0", "1", "all"]
    assert cores["all"].user == cores["0"].user + cores["1"].user
    assert cores["all"].steal == cores["0"].steal + cores["1"].steal


@pytest.mark.parametrize("text", [
    "", "intr 1 2 3\nctxt 4\n", "cpu  1 2 3\ncpu0 1 2 3\n",
    "cpu  1 2 3 4 5 6 7 x\ncpu0 1 2 3 4 5 6 7 8\n", "cpuX 1 2 3 4 5 6 7 8\n",
    "cpu  1 2 3 4 5 6 7 8\n",
])
def test_proc_stat_garbage_raises_quoting_it(text):
    with pytest.raises(ParseError) as error:
        parse_proc_stat(text)
    assert repr(text)[:40] in str(error.value)


def test_pid_stat_with_spaces_and_parentheses_in_the_name():
    stat = parse_pid_stat(fixture("pid_stat_odd_comm.txt"))
    assert (stat.pid, stat.comm, stat.state, stat.pgid) == (30989, "my (odd) name", "S", 30989)
    assert stat.starttime == 91620


def test_pid_stat_of_nginx_worker_and_wrk_thread():
    worker = parse_pid_stat(fixture("pid_stat_nginx_worker.txt"))
    assert worker.comm == "nginx" and worker.ppid == worker.pgid != worker.pid
    thread = parse_pid_stat(fixture("task_stat_wrk_thread.txt"))
    assert (thread.comm, thread.pgid, thread.num_threads) == ("wrk", 384, 3)
    assert thread.processor in (0, 1)


@pytest.mark.parametrize("line", [
    "", "garbage", "123 (nginx) S 1 2 3", "123 nginx S " + "0 " * 40,
    fixture("pid_stat_nginx_worker.txt").replace(" 20 0 1 0 ", " 20 zero 1 0 ", 1),
])
def test_pid_stat_garbage_raises_quoting_it(line):
    with pytest.raises(ParseError, match="output was"):
        parse_pid_stat(line)


def test_times_of_dash_and_bash():
    assert parse_times("0m0.000000s 0m0.010000s\n0m1.500000s 0m0.250000s\n") == \
        pytest.approx(1.76)
    assert parse_times("0m0.003s 0m0.000s\n1m0.000s 0m0.001s") == pytest.approx(60.004)
    with pytest.raises(ParseError):
        parse_times("0m0.003s 0m0.000s\n")


def test_snapshot_reads_groups_threads_titles_ledger_and_sampler():
    before, after = pair()
    assert (after.clk_tck, after.boot_id[:8]) == (100, "ab32ca3c")
    assert after.uptime - before.uptime == pytest.approx(2.18)
    assert sorted(after.processes) == [384, 30987, 30988, 30989, 30997]
    wrk = after.processes[384]
    assert len(wrk.threads) == 3 and wrk.stat.num_threads == 3
    assert after.processes[30997].cmdline == "nginx: worker process"
    assert after.processes[30989].stat.comm == "my (odd) name"
    assert [(name, stat.cstime) for name, stat in after.ledger] == [("iperf3-client", 36)]
    assert after.sampler_seconds == pytest.approx(0.01)


def test_usage_matches_the_tick_deltas_of_the_capture():
    before, after = pair()
    usage = cpu_usage(before, after, NAMES)
    assert usage.elapsed_s == pytest.approx(2.18)
    # cpu line deltas: user 85 nice 108 system 197 softirq 45 steal 1 (of 436 ticks)
    assert usage.cores["all"] == {"usr": 19.5, "nice": 24.77, "sys": 45.18, "iowait": 0.0,
                                  "irq": 0.0, "soft": 10.32, "steal": 0.23, "idle": 0.0}
    for row in usage.cores.values():
        assert list(row) == list(CORE_COLUMNS)
        assert sum(row.values()) == pytest.approx(100.0, abs=0.05)
    procs = usage.processes
    assert sorted(procs) == ["iperf3-client", "iperf3-server", "nginx-server master",
                             "nginx-server worker", "odd", "wrk"]
    # wrk: utime 2 -> 4, stime 18 -> 37 ticks over 2.18 s; its threads all say "wrk"
    assert (procs["wrk"].usr, procs["wrk"].sys, procs["wrk"].cpu) == (0.92, 8.72, 9.63)
    assert procs["wrk"].threads == {}
    assert procs["iperf3-client"].cpu == pytest.approx(100 * 0.36 / 2.18, abs=0.01)
    assert procs["nginx-server worker"].cpu > procs["nginx-server master"].cpu == 0.0
    assert usage.sampler_cpu_s == pytest.approx(0.02)
    record = usage.as_record()
    # cpu_s: the same 21 ticks in seconds (what a cost per request divides), unrounded
    assert record["processes"]["wrk"] == {"cpu": 9.63, "usr": 0.92, "sys": 8.72, "count": 1,
                                          "cpu_s": 0.21}


def test_named_threads_are_broken_down():
    before, after = pair("threads")
    pid = next(iter(after.processes))
    usage = cpu_usage(before, after, {pid: "spinner"})
    spinner = usage.processes["spinner"]
    assert set(spinner.threads) == {"main", "worker_0"}
    # the spinner had a busy 2-core VM to share: 54% of a core; the sleeper ~0
    assert spinner.threads["worker_0"] > 40.0 > 5.0 > spinner.threads["main"]
    assert spinner.cpu == pytest.approx(sum(spinner.threads.values()), abs=3.0)


def test_untracked_groups_are_left_out_and_exits_are_listed():
    before, after = pair()
    usage = cpu_usage(before, after, {30987: "iperf3-server"})
    assert sorted(usage.processes) == ["iperf3-client", "iperf3-server"]
    gone = dataclasses.replace(after, processes={p: s for p, s in after.processes.items()
                                                 if p != 384})
    assert cpu_usage(before, gone, NAMES).exited == ("wrk",)


def test_reused_pid_or_older_unseen_process_is_not_counted_from_zero():
    before, after = pair()
    unseen = dataclasses.replace(before, processes={p: s for p, s in before.processes.items()
                                                    if p != 384})
    assert "wrk" not in cpu_usage(unseen, after, NAMES).processes


def test_incomparable_snapshots_raise():
    before, after = pair()
    with pytest.raises(TelemetryError, match="rebooted"):
        cpu_usage(before, dataclasses.replace(after, boot_id="x" * 36), NAMES)
    with pytest.raises(TelemetryError, match="no time elapsed"):
        cpu_usage(after, after, NAMES)
    with pytest.raises(TelemetryError, match="no CPU time elapsed"):
        cpu_usage(before, dataclasses.replace(after, cores=before.cores), NAMES)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.97])
def test_truncated_snapshot_raises_quoting_it(cut):
    text = fixture("snapshot_after.txt")
    with pytest.raises(ParseError, match="output was"):
        parse_snapshot(text[:int(len(text) * cut)], "dut: telemetry snapshot")


@pytest.mark.parametrize("text", [
    "", "hello\n", "@telemetry 1\n@end\n",
    "@telemetry 1\n100\nnot-a-boot-id\n1.0 2.0\n@stat\ncpu 1\n@end\n0m0s 0m0s\n0m0s 0m0s\n",
])
def test_garbage_snapshot_raises(text):
    with pytest.raises(ParseError):
        parse_snapshot(text, "dut: telemetry snapshot")


def test_garbled_block_raises():
    text = fixture("snapshot_after.txt").replace("@cmdline 30988", "@cmdline 1", 1)
    with pytest.raises(ParseError, match="without its '@pid' block"):
        parse_snapshot(text, "dut")
    text = fixture("snapshot_after.txt").replace("@ledger", "@what", 1)
    with pytest.raises(ParseError, match="unknown block"):
        parse_snapshot(text, "dut")


def test_uptime_read_next_to_the_counters_is_the_window_edge():
    text = fixture("snapshot_before.txt").replace("@stat", "@uptime\n934.00 309.35\n@stat", 1)
    assert parse_snapshot(text, "dut").uptime == 934.0
    with pytest.raises(ParseError, match="bad '@uptime' block"):
        parse_snapshot(text.replace("934.00 309.35", "soon"), "dut")


def test_script_refuses_names_that_are_not_words():
    with pytest.raises(ValueError):
        snapshot_script([], sections={"a b": "true"})
    with pytest.raises(ValueError):
        NodeCommand.shell("true", 10, ledger=Ledger("/tmp", "x;rm")).line()


@pytest.mark.integration
def test_live_snapshots_and_ledger_through_a_local_shell(tmp_path: Path):
    """The script runs under the node's sh on the real /proc: a tracked sleeper, a
    foreground busy loop accounted in the ledger, and a section."""
    node = LocalNode(workdir=str(tmp_path))
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    ledger = str(tmp_path / "ledger")
    try:
        before = take_snapshot(node, [sleeper.pid], ledger=ledger, sections={"hi": "echo hi"},
                               counters_last=True)
        busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
        result = node.run(NodeCommand.shell(busy, 60, ledger=Ledger(ledger, "busy")))
        assert result.exit_code == 0
        fails = NodeCommand.shell("exit 3", 60, ledger=Ledger(ledger, "fails"))
        assert node.run(fails, check=False).exit_code == 3
        time.sleep(0.05)
        after = take_snapshot(node, [], ledger=ledger, pids=list(before.processes))
        # members known from an earlier read are trusted while alive, listed again otherwise
        trusted = take_snapshot(node, [sleeper.pid], pids=[sleeper.pid, os.getpid()])
        relisted = take_snapshot(node, [sleeper.pid], pids=[sleeper.pid, 2 ** 22 + 1])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert before.sections == {"hi": "hi"}
    assert sorted(trusted.processes) == sorted([sleeper.pid, os.getpid()])
    assert sorted(relisted.processes) == [sleeper.pid]
    end_read = node.history[3]
    assert "pgrep" not in end_read and "pgrep" in node.history[0]
    assert node.history[0].index("@stat") > node.history[0].index("@section hi")
    assert end_read.index("@stat") < end_read.index("@ledger")
    assert sleeper.pid in after.processes
    usage = cpu_usage(before, after, {sleeper.pid: "sleeper"})
    assert usage.processes["sleeper"].cpu < 5.0
    assert usage.processes["busy"].cpu > 10.0  # a shell loop counting to 200000
    assert usage.processes["fails"].count == 1
    assert set(usage.cores) == {"all", *(str(c) for c in range(os.cpu_count() or 1))}
    assert os.listdir(ledger) == []  # read and removed


# -- schedstat: each thread's time on a CPU in nanoseconds ------------------------------------

SPINNER = 14939
"""``sched_before.txt`` / ``sched_after.txt``: the script 1 s apart around a python process
(pgid 14939) whose main thread slept and whose second thread (14940) spun."""


def test_schedstat_line_is_the_on_cpu_nanoseconds():
    assert parse_schedstat("706048023 848282225 900", "/proc/1/task/1/schedstat") == 706048023


@pytest.mark.parametrize("line", ["", "706048023", "706048023 848282225", "7e8 1 2",
                                  "706048023 -1 900", "1 2 3 4"])
def test_schedstat_garbage_raises_naming_the_file_and_quoting_it(line):
    with pytest.raises(ParseError) as caught:
        parse_schedstat(line, "/proc/7/task/8/schedstat")
    assert str(caught.value).startswith("/proc/7/task/8/schedstat: ")
    assert repr(line) in str(caught.value)


def test_snapshot_keeps_each_threads_schedstat():
    before, after = pair("sched")
    assert before.processes[SPINNER].schedstat == {14939: 24173139, 14940: 240478142}
    assert after.processes[SPINNER].schedstat == {14939: 24173139, 14940: 706048023}
    # the fixtures of before schedstat have none: ticks count there
    assert pair()[1].processes[384].schedstat is None


def test_a_garbled_schedstat_line_names_its_file_and_quotes_it():
    text = fixture("sched_after.txt").replace("14940 706048023 848282225 900",
                                              "14940 706048023 soon", 1)
    with pytest.raises(ParseError, match=r"/proc/14939/task/14940/schedstat: .*"
                                         r"'706048023 soon'"):
        parse_snapshot(text, "dut: telemetry snapshot")
    text = fixture("sched_after.txt").replace("14940 706048023", "x 706048023", 1)
    with pytest.raises(ParseError, match=r"/proc/14939/task/x/schedstat: .*'x 706048023"):
        parse_snapshot(text, "dut: telemetry snapshot")
    text = fixture("sched_after.txt").replace("@sched 14939", "@sched 1", 1)
    with pytest.raises(ParseError, match=r"'@sched 1' without its '@pid' block"):
        parse_snapshot(text, "dut: telemetry snapshot")


def test_cpu_seconds_are_counted_in_nanoseconds_where_schedstat_was_read():
    before, after = pair("sched")
    usage = cpu_usage(before, after, {SPINNER: "spinner"})
    spinner = usage.processes["spinner"]
    # 706048023 - 240478142 ns; the ticks say 46 (utime 25 -> 70, stime 1 -> 2)
    assert (spinner.cpu_s, spinner.cpu_source) == (0.465570, "schedstat")
    assert spinner.cpu == pytest.approx(100 * 0.46 / usage.elapsed_s, abs=0.01)
    assert usage.as_record()["cpu_s_source"] == {"spinner": "schedstat"}


def _without_thread(snapshot, pid: int, tid: int):
    sample = snapshot.processes[pid]
    kept = {t: ns for t, ns in sample.schedstat.items() if t != tid}
    return dataclasses.replace(snapshot, processes={
        **snapshot.processes, pid: dataclasses.replace(sample, schedstat=kept)})


def test_ticks_count_where_schedstat_cannot_say_the_whole_time():
    """A thread gone by the end took its nanoseconds with it (stat's process line keeps
    them); a read without schedstat (an older kernel) has none: both count ticks."""
    before, after = pair("sched")
    for start, end in ((before, _without_thread(after, SPINNER, 14940)),
                       (dataclasses.replace(before, processes={
                           SPINNER: dataclasses.replace(before.processes[SPINNER],
                                                        schedstat=None)}), after)):
        spinner = cpu_usage(start, end, {SPINNER: "spinner"}).processes["spinner"]
        assert (spinner.cpu_s, spinner.cpu_source) == (0.46, "ticks")
    # a thread started inside the window counts from 0
    started = cpu_usage(_without_thread(before, SPINNER, 14940), after, {SPINNER: "spinner"})
    assert started.processes["spinner"].cpu_s == pytest.approx(0.706048023)
    # the foreground ledger has ticks only
    usage = cpu_usage(*pair(), NAMES)
    assert usage.as_record()["cpu_s_source"]["iperf3-client"] == "ticks"


def test_a_busy_process_is_read_in_nanoseconds_from_the_live_proc(tmp_path: Path):
    """A real python child with two spinning threads, read through the node's sh twice:
    the nanoseconds agree with the ticks of the same window to within their truncation
    (one tick per task and read), and are not whole ticks."""
    code = ("import threading, time\n"
            "def spin():\n    end = time.time() + 5\n    while time.time() < end: pass\n"
            "threading.Thread(target=spin).start()\nspin()\n")
    node = LocalNode(workdir=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        time.sleep(0.3)
        before = take_snapshot(node, [child.pid], counters_last=True)
        time.sleep(0.8)
        after = take_snapshot(node, [], pids=list(before.processes))
    finally:
        child.kill()
        child.wait()
    assert len(after.processes[child.pid].schedstat) == 2
    usage = cpu_usage(before, after, {child.pid: "busy"})
    busy = usage.processes["busy"]
    assert busy.cpu_source == "schedstat"
    ticks = (busy.cpu / 100) * usage.elapsed_s
    assert busy.cpu_s == pytest.approx(ticks, abs=0.03)
    assert busy.cpu_s > 0.1  # it ran (its threads share the GIL and a busy VM)
    assert round(busy.cpu_s * 1e6) % 10000 != 0  # not a whole number of 10 ms ticks
