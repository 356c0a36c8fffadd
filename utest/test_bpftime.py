"""Unit tests of the bpftime helpers: command lines, environment, detection, the state checks
that prove a run left nothing behind, and the nginx config copy the traced instance runs."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from libraries.testbed.errors import ToolMissing
from libraries.tools.bpftime import (
    LIBRARIES,
    RUNTIME_LOG,
    SHM_DIR,
    BpftimeSetup,
    BpftimeState,
    bpftime_leftovers,
    bpftime_state,
    cleanup_command,
    detect_bpftime,
    interrupt_command,
    load_command,
    run_env,
    start_command,
)
from libraries.tools.nginx.config import HttpsServerParams, NginxInstance
from libraries.tools.sslsniff.seed import SeedSslsniff
from libraries.tools.sslsniff.userspace import traced_config
from utest.localnode import LocalNode

FIXTURES = Path(__file__).parent / "fixtures" / "sslsniff"


def test_bpftime_commands_use_the_form_that_works():
    setup = BpftimeSetup(sslsniff="/opt/bpftime/example/sslsniff",
                         env={"BPFTIME_VM_NAME": "ubpf"})
    assert load_command(setup) == '"$HOME"/.bpftime/bpftime load /opt/bpftime/example/sslsniff'
    program = SeedSslsniff(binary=setup.sslsniff)
    assert load_command(setup, program.args) == (
        '"$HOME"/.bpftime/bpftime load /opt/bpftime/example/sslsniff --no-openssl --no-gnutls '
        "--no-nss --extra-lib openssl:/usr/lib/x86_64-linux-gnu/libssl.so.3")
    start = start_command(setup, "/usr/sbin/nginx", "/tmp/run/n.conf", "/tmp/run/n")
    assert start == (
        '"$HOME"/.bpftime/bpftime start /usr/sbin/nginx -c /tmp/run/n.conf -p /tmp/run/n')
    assert " -- " not in start
    assert interrupt_command(1234) == "kill -s INT -- -1234"
    assert interrupt_command(1234, "TERM") == "kill -s TERM -- -1234"


def test_bpftime_paths_with_spaces_are_quoted():
    setup = BpftimeSetup(binary="/opt/bpf time/bpftime", sslsniff="~/ex amples/sslsniff")
    assert load_command(setup, ["-p", "a b"]) == (
        "'/opt/bpf time/bpftime' load \"$HOME\"/'ex amples/sslsniff' -p 'a b'")


def test_both_processes_get_the_topology_env_a_run_log_and_the_run_shared_memory():
    setup = BpftimeSetup(sslsniff="/s", env={"BPFTIME_VM_NAME": "ubpf"})
    assert run_env(setup, "/tmp/run/bpftime.log", "hoststack_bpftime_42") == {
        "BPFTIME_VM_NAME": "ubpf", "BPFTIME_LOG_OUTPUT": "/tmp/run/bpftime.log",
        "BPFTIME_GLOBAL_SHM_NAME": "hoststack_bpftime_42"}
    assert setup.env == {"BPFTIME_VM_NAME": "ubpf"}  # not changed
    assert cleanup_command("hoststack_bpftime_42") == "rm -f /dev/shm/hoststack_bpftime_42"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: BpftimeSetup(sslsniff="sslsniff"), "sslsniff: expected an absolute"),
        (lambda: BpftimeSetup(sslsniff="/s", env={"BAD-NAME": "1"}), "NAME=string"),
        (lambda: BpftimeSetup(sslsniff="/s", env={"A": 1}), "NAME=string"),
        (lambda: start_command(BpftimeSetup(sslsniff="/s"), "nginx", "/c", "/p"),
         "absolute nginx binary"),
        (lambda: interrupt_command(1), "PID > 1"),
        (lambda: interrupt_command(7, "KILL"), "INT or TERM"),
        (lambda: run_env(BpftimeSetup(sslsniff="/s"), "log", "x"), "absolute path"),
        (lambda: run_env(BpftimeSetup(sslsniff="/s"), "/l", "../x y"), "shared memory name"),
        (lambda: cleanup_command("a/../b"), "shared memory name"),
    ],
)
def test_bpftime_builders_refuse_bad_values(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_bpftime_absent_is_reported_as_tool_missing(tmp_path):
    node = LocalNode(workdir=str(tmp_path))
    with pytest.raises(ToolMissing, match=r"bpftime not installed on local: "
                       r"/nonexistent/bpftime missing"):
        detect_bpftime(node, BpftimeSetup(binary="/nonexistent/bpftime", sslsniff="/x"))


def test_bpftime_version_is_its_answer_plus_the_binary_digest(tmp_path):
    binary = tmp_path / "bpftime"  # answers as the real CLI does: argparse's default "1.0"
    answer = (FIXTURES / "bpftime_version.txt").read_text()
    assert answer == "1.0\n"
    binary.write_text(f"#!/bin/sh\nprintf '%s' '{answer}'\n")
    binary.chmod(0o755)
    node = LocalNode(workdir=str(tmp_path))
    missing = BpftimeSetup(binary=str(binary), sslsniff=str(tmp_path / "sslsniff"))
    with pytest.raises(ToolMissing, match="bpftime sslsniff program missing on local"):
        detect_bpftime(node, missing)
    (tmp_path / "sslsniff").write_text("#!/bin/sh\n")
    (tmp_path / "sslsniff").chmod(0o755)
    digest = subprocess.run(["sha256sum", str(binary)], capture_output=True, text=True,
                            check=True).stdout[:16]
    for library in LIBRARIES:
        (tmp_path / library).write_bytes(b"")
    assert detect_bpftime(node, missing).version == f"1.0 sha256:{digest}"


def _fake_bpftime(root: Path) -> Path:
    """A bpftime CLI that behaves as the real one about its install folder: it preloads
    ``<-i DIR, default ~/.bpftime>/libbpftime-syscall-server.so`` for ``load``, and refuses
    with the real message when that library is not there (the issue's failure)."""
    binary = root / "bin" / "bpftime"
    binary.parent.mkdir(parents=True)
    binary.write_text(
        '#!/bin/sh\ndir="$HOME/.bpftime"\n'
        'if [ "$1" = -i ]; then dir=$2; shift 2; fi\n'
        'case "$1" in --version) echo 1.0; exit 0;; esac\n'
        'lib="$dir/libbpftime-syscall-server.so"\n'
        '[ -f "$lib" ] || { echo "Library not found for syscall-server: $lib" >&2; exit 1; }\n'
        'echo "preload $lib"\n')
    binary.chmod(0o755)
    return binary


@pytest.mark.parametrize("layout", ["beside", "lib", "named"])
def test_bpftime_installed_anywhere_runs_with_its_libraries(tmp_path, monkeypatch, layout):
    """bpftime installed outside ~/.bpftime failed: `bpftime load` looked for its libraries in
    ~/.bpftime. The folder is now found beside the binary (or in ../lib), or named by the
    topology, and given as `bpftime -i DIR`."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    binary = _fake_bpftime(tmp_path / "opt")
    folder = {"beside": tmp_path / "opt" / "bin", "lib": tmp_path / "opt" / "lib",
              "named": tmp_path / "elsewhere"}[layout]
    folder.mkdir(exist_ok=True)
    for library in LIBRARIES:
        (folder / library).write_bytes(b"")
    sslsniff = tmp_path / "sslsniff"
    sslsniff.write_text("#!/bin/sh\n")
    sslsniff.chmod(0o755)
    node = LocalNode(workdir=str(tmp_path))
    setup = BpftimeSetup(binary=str(binary), sslsniff=str(sslsniff),
                         install_dir=str(folder) if layout == "named" else None)
    without = node.run(load_command(setup), check=False)
    if layout != "named":  # what the old code ran
        assert "Library not found for syscall-server: " in without.stderr
    found = detect_bpftime(node, setup).setup
    assert found.install_dir == str(folder.resolve())
    ran = node.run(load_command(found))
    assert ran.stdout.strip() == f"preload {folder.resolve()}/libbpftime-syscall-server.so"
    assert start_command(found, "/usr/sbin/nginx", "/c", "/p").startswith(
        f"{binary} -i {folder.resolve()} start ")


def test_bpftime_without_its_libraries_is_missing_naming_the_folders(tmp_path):
    binary = _fake_bpftime(tmp_path / "opt")
    sslsniff = tmp_path / "sslsniff"
    sslsniff.write_text("#!/bin/sh\n")
    sslsniff.chmod(0o755)
    node = LocalNode(workdir=str(tmp_path))
    with pytest.raises(ToolMissing, match=r"bpftime's libraries not found on local: "
                       r"libbpftime-agent.so and libbpftime-syscall-server.so are in none of "
                       rf"{binary.parent}, {binary.parent}/../lib .*tool_dirs: \{{bpftime: DIR"):
        detect_bpftime(node, BpftimeSetup(binary=str(binary), sslsniff=str(sslsniff)))


# ---------------------------------------------------------------------------- leftovers
def test_state_sees_the_run_shared_memory_and_the_runtime_log(tmp_path, monkeypatch):
    name = f"hoststack_utest_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("HOME", str(tmp_path))
    node = LocalNode(workdir=str(tmp_path))
    clean = bpftime_state(node, name)
    assert clean.shm is False and clean.runtime_log_bytes is None
    shm = Path(SHM_DIR) / name
    shm.write_text("maps")
    log = tmp_path / RUNTIME_LOG
    log.parent.mkdir()
    log.write_text("12345")
    try:
        dirty = bpftime_state(node, name)
        subprocess.run(["sh", "-c", cleanup_command(name)], check=True, timeout=10)
        assert not shm.exists()
    finally:
        shm.unlink(missing_ok=True)
    assert dirty.shm is True and dirty.runtime_log_bytes == 5
    assert bpftime_leftovers(clean, dirty, name) == [
        f"/dev/shm/{name} still exists",
        "~/.bpftime/runtime.log grew by 5 bytes (BPFTIME_LOG_OUTPUT not honoured)"]
    assert os.environ["HOME"] == str(tmp_path)


def test_leftovers_name_growth_injection_and_accept_an_untouched_old_log():
    before = BpftimeState(shm=False, runtime_log_bytes=100, injected=("7 sshd",))
    same = BpftimeState(shm=False, runtime_log_bytes=100, injected=("7 sshd",))
    assert bpftime_leftovers(before, same) == []
    after = BpftimeState(shm=False, runtime_log_bytes=180, injected=("7 sshd", "42 nginx"))
    assert bpftime_leftovers(before, after) == [
        "~/.bpftime/runtime.log grew by 80 bytes (BPFTIME_LOG_OUTPUT not honoured)",
        "bpftime still injected in pid 42 nginx"]


# ---------------------------------------------------------------------------- traced copy
def server_config(status: bool) -> str:
    return HttpsServerParams(
        instance=NginxInstance(prefix="/tmp/run/dut/nginx-server", user="root"),
        cert_path="/tmp/run/dut/certs/server.crt", key_path="/tmp/run/dut/certs/server.key",
        root_dir="/tmp/run/dut/www", listen_port=8445, status_port=8446 if status else None,
    ).render()


def test_traced_copy_moves_ports_and_prefix_and_keeps_certificates_and_content():
    copy = traced_config(server_config(True), "/tmp/run/dut/nginx-server",
                         "/tmp/run/dut/nginx-server-bpftime", (8445, 8446), 8447)
    assert "listen 8447 ssl;" in copy and "listen 8445" not in copy
    assert "listen 127.0.0.1:8448;" in copy and "8446" not in copy
    assert "pid /tmp/run/dut/nginx-server-bpftime/" in copy
    assert "ssl_certificate /tmp/run/dut/certs/server.crt;" in copy
    assert "root /tmp/run/dut/www;" in copy


def test_traced_copy_refuses_a_config_it_cannot_move():
    config = server_config(False)
    with pytest.raises(ValueError, match="no '127.0.0.1:8446' in it"):
        traced_config(config, "/tmp/run/dut/nginx-server", "/x", (8445, 8446), 8447)
    with pytest.raises(ValueError, match="no 'listen 9999 ssl' in it"):
        traced_config(config, "/tmp/run/dut/nginx-server", "/x", (9999,), 8447)
