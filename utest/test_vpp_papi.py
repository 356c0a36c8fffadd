"""PapiConnection against the protocol-level fake VPP; fetch_api_definitions with a local node."""

from __future__ import annotations

import collections
import logging
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from libraries.testbed.errors import CommandError, PapiError
from libraries.vpp.papi import PapiConnection, fetch_api_definitions, format_call
from utest.fake_vpp import FIXTURE_API_DIR, FakeVpp, serve


@pytest.fixture
def fake():
    with serve() as server:
        yield server


@pytest.fixture
def papi(fake: FakeVpp):
    conn = PapiConnection(fake.socket_path, FIXTURE_API_DIR, read_timeout=2.0)
    conn.connect("utest")
    yield conn
    conn.disconnect()


@pytest.fixture
def short_dir():
    directory = tempfile.mkdtemp(prefix="papi-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_connect_handshake_and_disconnect_are_seen_by_vpp(fake: FakeVpp):
    conn = PapiConnection(fake.socket_path, FIXTURE_API_DIR)
    assert not conn.connected
    conn.connect("robot-dut")
    assert conn.connected
    conn.disconnect()
    assert not conn.connected
    names = [call.name for call in fake.calls]
    assert names == ["sockclnt_create", "sockclnt_delete"]
    assert fake.calls[0].fields["name"] == "robot-dut"
    conn.disconnect()  # a second disconnect is harmless


def test_context_manager_connects_and_disconnects(fake: FakeVpp):
    with PapiConnection(fake.socket_path, FIXTURE_API_DIR) as conn:
        version = conn.call("show_version")
        assert version.version == "26.10-rc0~fake"
    assert not conn.connected
    assert [call.name for call in fake.calls] == ["sockclnt_create", "show_version",
                                                  "sockclnt_delete"]


def test_call_returns_reply_fields_and_dumps_return_lists(papi: PapiConnection, fake: FakeVpp):
    reply = papi.call("create_loopback")
    assert reply.retval == 0
    assert reply.sw_if_index == 1
    details = papi.call("sw_interface_dump", sw_if_index=0xFFFFFFFF)
    assert isinstance(details, list)
    assert [d.interface_name for d in details] == ["local0", "loop0"]
    # a dump is followed by vpp_papi's control_ping that marks its end
    assert [c.name for c in fake.calls][-2:] == ["sw_interface_dump", "control_ping"]


def test_nonzero_retval_raises_with_message_arguments_and_retval(papi: PapiConnection,
                                                                 fake: FakeVpp):
    fake.fail_next("app_namespace_add_del_v4", -2)
    with pytest.raises(PapiError) as caught:
        papi.call("app_namespace_add_del_v4", namespace_id="server", secret=1234, sw_if_index=1)
    assert str(caught.value) == ("VPP PAPI app_namespace_add_del_v4(namespace_id='server', "
                                 "secret=1234, sw_if_index=1) -> retval -2")
    # only the next call fails; the request itself did reach VPP with those fields
    assert fake.api_calls()[-1].fields["namespace_id"] == "server"
    assert papi.call("app_namespace_add_del_v4", namespace_id="server", secret=1234,
                     sw_if_index=0).retval == 0


def test_retval_of_every_dump_element_is_checked():
    detail = collections.namedtuple("some_details", ["context", "retval", "value"])

    class Api:
        @staticmethod
        def some_dump(**fields):
            return [detail(1, 0, "a"), detail(1, -7, "b")]

    class Client:
        api = Api()

    conn = PapiConnection("/nonexistent.sock", FIXTURE_API_DIR)
    conn._client = Client()
    with pytest.raises(PapiError, match=r"^VPP PAPI some_dump\(x=1\) -> retval -7$"):
        conn.call("some_dump", x=1)


def test_socket_missing(short_dir: str):
    path = os.path.join(short_dir, "api.sock")
    conn = PapiConnection(path, FIXTURE_API_DIR)
    with pytest.raises(PapiError) as caught:
        conn.connect()
    assert str(caught.value) == f"VPP API socket {path} does not exist: is VPP running?"


def test_stale_socket_nobody_listening_is_reported_as_vpp_not_running(short_dir: str):
    path = os.path.join(short_dir, "api.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays, as after VPP was killed
    with pytest.raises(PapiError, match="refuses connections: is VPP running"):
        PapiConnection(path, FIXTURE_API_DIR).connect()


def test_socket_path_that_is_a_regular_file(short_dir: str):
    path = os.path.join(short_dir, "api.sock")
    Path(path).write_text("not a socket")
    with pytest.raises(PapiError, match="is not a unix socket"):
        PapiConnection(path, FIXTURE_API_DIR).connect()


def test_definitions_dir_missing(fake: FakeVpp, short_dir: str):
    missing = os.path.join(short_dir, "api")
    with pytest.raises(PapiError) as caught:
        PapiConnection(fake.socket_path, missing).connect()
    assert str(caught.value) == f"VPP API definitions directory {missing} does not exist"


def test_definitions_dir_without_api_files(fake: FakeVpp, short_dir: str):
    Path(short_dir, "core").mkdir()
    Path(short_dir, "core", "README").write_text("no definitions here")
    with pytest.raises(PapiError, match=r"contains no \*\.api\.json files"):
        PapiConnection(fake.socket_path, short_dir).connect()


def test_definitions_without_the_transport_messages(fake: FakeVpp, short_dir: str):
    shutil.copytree(Path(FIXTURE_API_DIR, "plugins"), Path(short_dir, "plugins"))
    with pytest.raises(PapiError, match=r"lack \['sockclnt_create', 'control_ping'\]"):
        PapiConnection(fake.socket_path, short_dir).connect()


def test_socket_that_accepts_but_never_answers(short_dir: str):
    path = os.path.join(short_dir, "api.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(path)
        silent.listen(1)  # connections queue up; nobody reads or answers
        conn = PapiConnection(path, FIXTURE_API_DIR, read_timeout=0.5)
        with pytest.raises(PapiError, match=r"did not complete the API handshake within 0.5 s"):
            conn.connect()
        assert not conn.connected


def test_message_unknown_to_the_definitions(papi: PapiConnection):
    with pytest.raises(PapiError) as caught:
        papi.call("foo")
    assert str(caught.value) == (f"message 'foo' is not defined by the VPP API definitions "
                                 f"in {FIXTURE_API_DIR}")


def test_message_defined_but_not_offered_by_this_vpp():
    with (serve(omit={"af_packet_create_v3"}) as fake,
          PapiConnection(fake.socket_path, FIXTURE_API_DIR) as conn):
        assert not conn.has_message("af_packet_create_v3")
        assert conn.has_message("create_loopback")
        with pytest.raises(PapiError, match=r"'af_packet_create_v3' \(crc 0xb3a809d4\) is "
                                            r"defined .* but not offered by the VPP"):
            conn.call("af_packet_create_v3", host_if_name="eth1")


def test_invalid_field_name_is_a_papi_error(papi: PapiConnection):
    with pytest.raises(PapiError, match=r"create_loopback\(colour='red'\): invalid arguments"):
        papi.call("create_loopback", colour="red")


def test_vpp_dying_mid_call_is_reported(papi: PapiConnection, fake: FakeVpp):
    fake.die_on("show_version")
    with pytest.raises(PapiError, match=r"show_version\(\): no reply from VPP"):
        papi.call("show_version")


def test_call_without_connect(fake: FakeVpp):
    with pytest.raises(PapiError, match="not connected"):
        PapiConnection(fake.socket_path, FIXTURE_API_DIR).call("show_version")


def test_calls_and_replies_are_logged_at_debug(papi: PapiConnection,
                                               caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.DEBUG, logger="libraries.vpp.papi"):
        papi.call("sw_interface_set_flags", sw_if_index=0, flags=1)
    messages = [record.getMessage() for record in caplog.records]
    assert "PAPI call sw_interface_set_flags(flags=1, sw_if_index=0)" in messages
    assert any(m.startswith("PAPI reply sw_interface_set_flags: sw_interface_set_flags_reply(")
               for m in messages)


def test_format_call_sorts_fields():
    assert format_call("x", {"b": 2, "a": "s"}) == "x(a='s', b=2)"


@dataclass
class Result:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float = 0.0


class LocalNode:
    """A Node that runs commands on this machine with bash (as the real one does over SSH)."""

    name = "dut"
    workdir = "/tmp"

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, timeout: float = 60.0, sudo: bool = False,
            check: bool = True) -> Result:
        self.commands.append(command)
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise CommandError(self.name, command, done.returncode, done.stdout, done.stderr)
        return Result(command, done.returncode, done.stdout, done.stderr)


def test_fetch_api_definitions_copies_the_tree_and_is_usable(tmp_path: Path, fake: FakeVpp):
    remote = tmp_path / "remote api"  # a space, to prove the quoting
    shutil.copytree(FIXTURE_API_DIR, remote)
    (remote / "core" / "notes.txt").write_text("not a definition")
    node = LocalNode()
    fetched = fetch_api_definitions(node, str(remote), str(tmp_path / "local"))
    expected = sorted(p.relative_to(FIXTURE_API_DIR) for p in Path(FIXTURE_API_DIR).rglob("*.json"))
    local = tmp_path / "local"
    got = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert got == expected  # notes.txt was left behind
    assert fetched.files == len(expected) == 7
    for relative in expected:
        assert (tmp_path / "local" / relative).read_bytes() == \
            (Path(FIXTURE_API_DIR) / relative).read_bytes()
    assert len(node.commands) == 1
    with PapiConnection(fake.socket_path, fetched.local_dir) as conn:
        assert conn.call("show_version").program == "vpe"


def test_fetch_api_definitions_missing_remote_dir(tmp_path: Path):
    with pytest.raises(PapiError, match=r"^dut: cannot read VPP API definitions from "
                                        r"/nonexistent/api \(exit 3\): no such directory"):
        fetch_api_definitions(LocalNode(), "/nonexistent/api", str(tmp_path / "local"))


def test_fetch_api_definitions_dir_without_definitions(tmp_path: Path):
    (tmp_path / "remote").mkdir()
    (tmp_path / "remote" / "x.txt").write_text("x")
    with pytest.raises(PapiError, match=r"holds no \*\.api\.json files"):
        fetch_api_definitions(LocalNode(), str(tmp_path / "remote"), str(tmp_path / "local"))


def test_fetch_api_definitions_garbage_output(tmp_path: Path):
    class Garbage(LocalNode):
        def run(self, command: str, timeout: float = 60.0, sudo: bool = False,
                check: bool = True) -> Result:
            return Result(command, 0, "Welcome to the DUT!\n", "")

    with pytest.raises(PapiError, match="could not be unpacked"):
        fetch_api_definitions(Garbage(), "/usr/share/vpp/api", str(tmp_path / "local"))
