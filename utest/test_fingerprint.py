"""Series keyed by what runs (issue 60, item 2): a side's key holds the shared libraries its
binaries load on their node (real ``ldd`` through a local node), so a library changed under a
byte-identical binary starts a new series, and the dashboard names the library."""

from __future__ import annotations

import html
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from libraries.ab.comparison import load_comparison
from libraries.ab.fingerprint import (
    SideFiles,
    hash_command,
    parse_ldd,
    parse_node_files,
    side_files,
)
from libraries.history.ab_series import files_digest
from libraries.history.load import load_records
from libraries.report.dashboard import comparison_changes
from libraries.report.trend_command import main as report_main
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology_file import load_topology
from libraries.trend.analysis import analyse
from utest.localnode import LocalNode
from utest.test_nightly_reference import night

REPO = Path(__file__).resolve().parent.parent
GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc not installed: no gcc in PATH")
NGINX = shutil.which("nginx")
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx not installed: no nginx in PATH")


def gcc(*args: str) -> None:
    subprocess.run([GCC or "gcc", *args], check=True, capture_output=True, timeout=60)


def build_library(folder: Path, value: int) -> None:
    """``folder/lib/libfp.so``, whose ``fp()`` returns ``value`` (another value: another
    build of the library)."""
    (folder / "lib").mkdir(exist_ok=True)
    source = folder / "fp.c"
    source.write_text(f"int fp(void) {{ return {value}; }}\n")
    gcc("-shared", "-fPIC", "-o", str(folder / "lib" / "libfp.so"), str(source))


def build_binary(folder: Path, name: str, rpath: str | None) -> Path:
    """``folder/<name>``, linked against ``lib/libfp.so`` (found through ``rpath`` or, without
    one, only through ``LD_LIBRARY_PATH``)."""
    source = folder / "main.c"
    source.write_text("int fp(void);\nint main(void) { return fp() == 0; }\n")
    binary = folder / name
    gcc(str(source), f"-L{folder / 'lib'}", "-lfp", "-o", str(binary),
        *([f"-Wl,-rpath,{rpath}"] if rpath else []))
    return binary


def local_testbed(tmp_path: Path) -> SimpleNamespace:
    """The 3node topology with its ``dut`` node this machine (real commands, real ``ldd``)."""
    return SimpleNamespace(nodes={"dut": LocalNode(workdir=str(tmp_path), name="dut")},
                           topology=load_topology(REPO / "topologies" / "3node.yaml"))


def hashed(testbed: SimpleNamespace, tmp_path: Path, side: str) -> SideFiles:
    path = tmp_path / "c.yaml"
    path.write_text(f"a: {side}\nb: {{name: today}}\n")
    found = side_files(testbed, load_comparison(str(path), testbed.topology))
    assert found["b"] == SideFiles()  # today's side names nothing: not keyed
    return found["a"]


@needs_gcc
def test_a_library_changed_under_a_byte_identical_binary_starts_a_new_series(
        tmp_path: Path) -> None:
    """The reference's binary stays byte for byte while the library it loads is rebuilt:
    the side's files differ in the library alone, the record's series key changes, and
    trend.md and the dashboard name the library and the binary that loads it."""
    build = tmp_path / "ref"
    build.mkdir()
    build_library(build, 1)
    binary = build_binary(build, "nginx", "$ORIGIN/lib")
    testbed = local_testbed(tmp_path)
    side = f"{{name: nginx-ref, tools: {{dut: {{nginx: {binary}}}}}}}"
    before = hashed(testbed, tmp_path, side)
    library = f"dut:{os.path.realpath(build / 'lib')}/libfp.so"
    assert before.loaded_by[library] == [f"dut:{binary}"]
    assert f"dut:{binary}" in before.files and f"dut:{binary}" not in before.loaded_by
    libc = [key for key in before.loaded_by if key.rsplit("/", 1)[-1] == "libc.so.6"]
    assert len(libc) == 1 and before.files[libc[0]] != before.files[library]
    build_library(build, 2)  # the library rebuilt; the binary untouched
    after = hashed(testbed, tmp_path, side)
    assert after.loaded_by == before.loaded_by
    assert {k for k in after.files if after.files[k] != before.files[k]} == {library}
    sides = [{"a": {"name": "nginx-ref", **files.record()}, "b": {"name": "today"}}
             for files in (before, after)]
    assert files_digest(sides[0]) != files_digest(sides[1])

    results = tmp_path / "results"
    rng = np.random.default_rng(6)
    for day in range(6):
        night(results, day, list(np.exp(rng.normal(0.0, 0.01, 30))),
              extra={"ab_sides": sides[day >= 3]})
    frame = load_records([results])
    keys = sorted(frame[frame["metric"] == "ab_rps_ratio"]["test_key"].unique())
    assert len(keys) == 2 and all(" files:" in key for key in keys)
    (note,) = set(comparison_changes(analyse(frame)).values())
    old, new = before.files[library][:8], after.files[library][:8]
    assert note == (f"files changed since 2026-01-04 02:00 UTC: a libfp.so ({library}, a "
                    f"library loaded by dut:{binary}) {old} -> {new}")
    markdown, page = tmp_path / "trend.md", tmp_path / "trend.html"
    assert report_main([str(results), "--store", str(tmp_path / "history"), "--markdown",
                        str(markdown), "--html", str(page)]) == 0
    assert note in markdown.read_text() and html.escape(note) in page.read_text()


@needs_gcc
def test_a_library_is_resolved_as_the_side_runs_it_and_one_not_found_is_an_error(
        tmp_path: Path) -> None:
    """A binary without an rpath finds its library through the LD_LIBRARY_PATH the side gives
    the tool (and a VPP plugin folder's libraries count as the folder's); without it ``ldd``
    says "not found", and the side cannot run."""
    build = tmp_path / "ref"
    build.mkdir()
    build_library(build, 1)
    binary = build_binary(build, "nginx", None)
    plugins = build / "plugins"
    plugins.mkdir()
    plugin = build / "plugin.c"
    plugin.write_text("int fp(void);\nint fp_plugin(void) { return fp(); }\n")
    gcc("-shared", "-fPIC", "-o", str(plugins / "fp_plugin.so"), str(plugin),
        f"-L{build / 'lib'}", "-lfp", "-Wl,-rpath,$ORIGIN/../lib")
    testbed = local_testbed(tmp_path)
    found = hashed(testbed, tmp_path, (
        f"{{name: ref, tools: {{dut: {{nginx: {binary}}}}}, env: {{nginx: {{LD_LIBRARY_PATH: "
        f"{build / 'lib'}}}}}, vpp: {{dut: {{plugins: {plugins}}}}}}}"))
    library = f"dut:{os.path.realpath(build / 'lib')}/libfp.so"
    assert found.loaded_by[library] == [f"dut:{binary}", f"dut:{plugins}"]
    with pytest.raises(HostStackError, match=r"c\.yaml: a: hashing on dut: ldd .*nginx: "
                                             r"library libfp\.so not found"):
        hashed(testbed, tmp_path, f"{{name: ref, tools: {{dut: {{nginx: {binary}}}}}}}")


@needs_nginx
def test_the_real_nginx_is_keyed_by_the_libssl_and_libcrypto_it_loads(tmp_path: Path) -> None:
    nginx = os.path.realpath(NGINX or "")
    testbed = local_testbed(tmp_path)
    found = hashed(testbed, tmp_path, f"{{name: ref, tools: {{dut: {{nginx: {nginx}}}}}}}")
    listed = subprocess.run(["ldd", nginx], capture_output=True, text=True, check=True,
                            timeout=30).stdout
    names = {key.rsplit("/", 1)[-1]: key for key in found.loaded_by}
    for name in ("libssl.so.3", "libcrypto.so.3", "libc.so.6"):
        if name in listed:
            path = next(line.split()[2] for line in listed.splitlines()
                        if line.split()[:1] == [name])
            key = f"dut:{os.path.realpath(os.path.dirname(path))}/{name}"
            assert names[name] == key and found.loaded_by[key] == [f"dut:{nginx}"]
            assert found.files[key] == subprocess.run(
                ["sha256sum", path], capture_output=True, text=True, check=True,
                timeout=30).stdout.split()[0]
    # every library ldd lists (and the loader) is keyed; the vDSO is no file
    assert len(found.loaded_by) == sum("=> /" in line or line.strip().startswith("/")
                                       for line in listed.splitlines())


def test_ldd_output_is_parsed_strictly() -> None:
    lines = ["\tlinux-vdso.so.1 (0x00007ffd1c5f2000)",
             "\tlibssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f0a1b200000)",
             "\tlinux-gate.so.1 =>  (0xb7f0e000)",
             "\t/lib64/ld-linux-x86-64.so.2 (0x00007f0a1b6c4000)"]
    assert parse_ldd(lines, "dut") == ["/lib/x86_64-linux-gnu/libssl.so.3",
                                       "/lib64/ld-linux-x86-64.so.2"]
    assert parse_ldd(["\tstatically linked"], "dut") == []
    with pytest.raises(HostStackError, match="dut: library libfoo.so.1 not found"):
        parse_ldd(["\tlibfoo.so.1 => not found"], "dut")
    with pytest.raises(HostStackError, match="dut: unexpected line 'Segmentation fault'"):
        parse_ldd([*lines, "Segmentation fault"], "dut")


def test_garbage_from_the_hashing_command_names_the_node_and_quotes_it() -> None:
    where = "c.yaml: a: hashing on dut"
    sha = "1" * 64
    good = (f"#fp hash /opt/ref/nginx\n{sha}  -\n#fp ldd /opt/ref/nginx\n"
            "\tlibz.so.1 => /lib/libz.so.1 (0x00007f0a1b200000)\n#fp exit 0\n"
            f"#fp lib /lib/libz.so.1\n/usr/lib\n{'2' * 64}  -\n")
    found = parse_node_files(good, ["/opt/ref/nginx"], where)
    assert found.libraries == {"/usr/lib/libz.so.1": "2" * 64}
    assert found.loaded_by == {"/usr/lib/libz.so.1": ["/opt/ref/nginx"]}
    # a script is no dynamic executable: ldd exits 1, and it loads nothing
    script = f"#fp hash /s\n{sha}  -\n#fp ldd /s\n\tnot a dynamic executable\n#fp exit 1\n"
    assert parse_node_files(script, ["/s"], where).libraries == {}
    for garbage, expected in (
            ("Permission denied\n", "unexpected line 'Permission denied' before the first"),
            (good.replace("#fp exit 0", "#fp exit 2"), "ldd /opt/ref/nginx: exit 2"),
            (good.replace(f"/usr/lib\n{'2' * 64}  -\n", ""), "unexpected lib section"),
            (good.split("#fp lib", maxsplit=1)[0], "one hash per library listed"),
            (good.replace("#fp ldd /opt/ref/nginx", "#fp ldd /etc/passwd"), "no named path"),
            (f"#fp hash /opt/ref/nginx\n{sha}  -\n", "missing ['/opt/ref/nginx']"),
            (good.replace("#fp hash", "#fp what"), "unexpected line '#fp what")):
        with pytest.raises(HostStackError, match=f"^{where}: .*") as error:
            parse_node_files(garbage, ["/opt/ref/nginx"], where)
        assert expected in str(error.value)
    # the real command on paths that are not there: an error naming the path, not a key
    paths = ["/nonexistent/nginx"]
    out = subprocess.run(["sh", "-c", hash_command(paths)], capture_output=True, text=True,
                         timeout=30).stdout
    with pytest.raises(HostStackError, match=r"unexpected hash section for /nonexistent/nginx"):
        parse_node_files(out, paths, where)


def test_a_record_from_before_libraries_were_keyed_gets_one_note_for_them(
        tmp_path: Path) -> None:
    """The first night whose record keys libraries starts a new series; its note says so in
    one line instead of listing every library as new."""
    rng = np.random.default_rng(3)
    nginx, sha = "dut:/opt/ref/nginx", "1" * 64
    libs = {f"dut:/usr/lib/{name}": str(i) * 64 for i, name in
            enumerate(("libc.so.6", "libssl.so.3", "libcrypto.so.3"), start=2)}
    old = {"a": {"name": "nginx-ref", "files": {nginx: sha}}, "b": {"name": "today"}}
    new = {"a": {"name": "nginx-ref", "files": {nginx: sha, **libs},
                 "loaded_by": {lib: [nginx] for lib in libs}}, "b": {"name": "today"}}
    for day in range(4):
        night(tmp_path, day, list(np.exp(rng.normal(0.0, 0.01, 30))),
              extra={"ab_sides": new if day >= 2 else old})
    (note,) = set(comparison_changes(analyse(load_records([tmp_path]))).values())
    assert note == ("files changed since 2026-01-03 02:00 UTC: a: now also keyed by the 3 "
                    "libraries its files load")
