"""The second-signal guard, called as the handler it is (no real signal sent)."""

import logging
import signal
import sys

from libraries.testbed.interrupt import InterruptGuard


class _Recorder(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_the_first_signal_goes_to_robot_and_the_second_runs_the_cleanups_once():
    forwarded = []
    guard = InterruptGuard({signal.SIGINT: lambda signum, frame: forwarded.append(signum)})
    removed = []
    guard.protect("testbed t1", lambda: removed.append("t1"))
    guard(signal.SIGINT, None)
    assert (forwarded, removed) == ([signal.SIGINT], [])
    guard(signal.SIGINT, None)
    assert (forwarded, removed) == ([signal.SIGINT], ["t1"])
    guard(signal.SIGINT, None)  # the third goes to Robot, which forces the exit
    assert (forwarded, removed) == ([signal.SIGINT, signal.SIGINT], ["t1"])


def test_a_cleanup_logs_to_stderr_and_never_into_robots_output(capsys, monkeypatch):
    root = logging.getLogger()
    robot = _Recorder()  # stands for Robot's handler, which writes output.xml
    monkeypatch.setattr(root, "handlers", [robot])
    log = logging.getLogger("libraries.testbed.teardown")

    def cleanup():
        log.warning("processes [42] survived SIGKILL")
        log.info("removed")

    guard = InterruptGuard({signal.SIGINT: lambda signum, frame: None})
    guard.protect("testbed t1", cleanup)
    monkeypatch.setattr("sys.__stderr__", sys.stderr)
    guard(signal.SIGINT, None)
    guard(signal.SIGINT, None)
    err = capsys.readouterr().err
    assert robot.messages == []
    assert "Second signal: removing testbed t1 now" in err
    assert "processes [42] survived SIGKILL" in err
    assert "removed\n" not in err  # info stays out of the console
    assert root.handlers == [robot]
    log.warning("after")
    assert robot.messages == ["after"]


def test_a_failing_cleanup_is_reported_and_the_others_still_run(capsys, monkeypatch):
    monkeypatch.setattr("sys.__stderr__", sys.stderr)
    guard = InterruptGuard({signal.SIGINT: lambda signum, frame: None})
    removed = []

    def broken():
        raise OSError("ip netns del: busy")

    guard.protect("testbed a", broken)
    guard.protect("testbed b", lambda: removed.append("b"))
    guard(signal.SIGINT, None)
    guard(signal.SIGINT, None)
    assert removed == ["b"]
    assert "removing testbed a after the signal failed: ip netns del: busy" in \
        capsys.readouterr().err
