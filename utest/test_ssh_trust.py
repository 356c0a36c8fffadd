"""Which known_hosts files a node's SSH connection trusts (libraries.testbed.ssh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed import ssh
from libraries.testbed.errors import NodeError
from libraries.testbed.ssh import SshTarget


def test_a_lab_trusts_the_users_and_the_system_file_and_the_topologys(tmp_path, monkeypatch):
    user, system, lab = tmp_path / "user_kh", tmp_path / "ssh_known_hosts", tmp_path / "lab_kh"
    for path in (user, system, lab):
        path.write_text("")
    monkeypatch.setattr(ssh, "SYSTEM_KNOWN_HOSTS", (str(user), str(system),
                                                    str(tmp_path / "absent")))
    target = SshTarget(host="192.0.2.1", known_hosts=(str(lab),))
    assert ssh.trusted_known_hosts(target, "tg") == [str(user), str(system), str(lab)]
    built = SshTarget(host="192.0.2.1", known_hosts=(str(lab),), system_known_hosts=False)
    assert ssh.trusted_known_hosts(built, "tg") == [str(lab)]  # a testbed the library built


def test_a_named_file_that_does_not_exist_is_an_error_naming_it(tmp_path: Path):
    target = SshTarget(host="192.0.2.1", known_hosts=(str(tmp_path / "nope"),))
    with pytest.raises(NodeError, match=r"^tg: known_hosts file .*nope \(named by the topology\) "
                       r"does not exist"):
        ssh.trusted_known_hosts(target, "tg")
