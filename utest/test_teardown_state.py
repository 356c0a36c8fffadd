"""A testbed's state file as another run's sweep reads it (libraries.testbed.teardown)."""

from __future__ import annotations

import json
import os
import time

from libraries.testbed import teardown


def _states(monkeypatch, tmp_path) -> dict[str, bool]:
    monkeypatch.setattr(teardown, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(teardown, "namespaces_with_prefix", lambda prefix: [])
    return {s["prefix"]: s["alive"] for s in teardown.list_testbeds()}


def test_a_state_file_read_mid_write_is_not_taken_for_a_dead_run_s(monkeypatch, tmp_path):
    """The CI failure of wave 6: a pool run's sweep read another testbed's state.json while it
    was being written, took it for a dead owner's and removed its bridge mid-build."""
    (tmp_path / "hnew123").mkdir()
    (tmp_path / "hnew123" / "state.json").write_text('{"prefix": "hnew1')  # half written
    assert _states(monkeypatch, tmp_path) == {"hnew123": True}


def test_an_unreadable_state_file_left_alone_for_long_is_a_dead_run_s(monkeypatch, tmp_path):
    (tmp_path / "hold123").mkdir()
    state = tmp_path / "hold123" / "state.json"
    state.write_text("")
    old = time.time() - teardown.UNREADABLE_GRACE - 5
    os.utime(state, (old, old))
    assert _states(monkeypatch, tmp_path) == {"hold123": False}


def test_a_readable_state_of_a_gone_owner_is_dead_at_once(monkeypatch, tmp_path):
    (tmp_path / "hgone12").mkdir()
    (tmp_path / "hgone12" / "state.json").write_text(json.dumps(
        {"prefix": "hgone12", "owner": "robot", "owner_pid": 2 ** 22 + 1}))
    assert _states(monkeypatch, tmp_path) == {"hgone12": False}
