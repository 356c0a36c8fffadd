"""Tests of libraries.tools.wrk: command builder, flavour probe, parser, runner (fakes, real wrk).

Fixtures in utest/fixtures/wrk/:
- seed000_wrk2_*.txt, seed004_wrk_*.txt: the sample outputs printed in the seed documents.
- wrk41_*.txt: captured on this machine with Debian's wrk 4.1 against a local nginx 1.22
  (1 KiB file): HTTP and HTTPS with --latency, a 404 URL (non-2xx), a location answering
  ``return 444`` (read errors), a ``limit_rate`` location with ``--timeout 1s`` (timeouts), a Lua
  script cycling through good / missing / dropped paths, a closed port (stderr only), the usage
  text printed for ``--timeout 500ms`` and ``wrk --help``.
- wrk2_*_synthetic.txt: written by hand after wrk2's documented formats (wrk2 is not packaged
  here): its usage text, and a --latency report with the HdrHistogram summary and spectrum.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from libraries.testbed.command import node_command
from libraries.testbed.errors import CommandError, CommandTimeout, ParseError, ToolMissing
from libraries.testbed.node import CommandResult
from libraries.tools.wrk.output import WrkErrors, parse_wrk_output
from libraries.tools.wrk.run import (
    WrkOptions,
    choose_load_tool,
    default_timeout,
    detect_wrk_flavour,
    probe_wrk,
    run_wrk,
    wrk_command,
)
from utest.localnode import LocalNode, free_port, wait_for_port

FIXTURES = Path(__file__).parent / "fixtures" / "wrk"
KB = 1024
MB = 1024**2
GB = 1024**3


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class FakeNode:
    """Answers every run() with one canned CommandResult and records the call."""

    name = "tg"
    workdir = "/tmp/fake"

    def __init__(self, stdout: str = "", stderr: str = "", exit_code: int = 0):
        self.stdout, self.stderr, self.exit_code = stdout, stderr, exit_code
        self.calls: list[dict[str, object]] = []

    def run(self, command, timeout: float | None = None, sudo: bool = False,
            check: bool = True) -> CommandResult:
        value = node_command(command, timeout)
        command, timeout = value.line(), value.timeout
        self.calls.append({"command": command, "timeout": timeout, "check": check})
        if check and self.exit_code != 0:
            raise CommandError(self.name, command, self.exit_code, self.stdout, self.stderr)
        return CommandResult(command, self.exit_code, self.stdout, self.stderr, 0.1)


# -- options and command line ----------------------------------------------------------------

def test_command_for_plain_wrk_has_every_option_quoted():
    options = WrkOptions(
        url="https://198.18.1.1:8089/1kb", threads=2, connections=20, duration=5,
        latency=True, request_timeout=3, script="/tmp/run 1/mix.lua",
        headers=("Connection: close",),
    )
    command = wrk_command("/usr/bin/wrk", options, flavour="wrk").tool_line()
    assert shlex.split(command) == [
        "/usr/bin/wrk", "-t", "2", "-c", "20", "-d", "5s", "--latency", "--timeout", "3s",
        "-s", "/tmp/run 1/mix.lua", "-H", "Connection: close", "https://198.18.1.1:8089/1kb",
    ]


def test_command_for_wrk2_has_rate_and_taskset_prefix():
    options = WrkOptions(url="http://127.0.0.1:8080/", rate=100000000, cpus=[1, 3])
    command = wrk_command("/opt/wrk2/wrk", options, flavour="wrk2").tool_line()
    assert command.startswith("taskset -c 1,3 /opt/wrk2/wrk ")
    argv = shlex.split(command)
    assert argv[argv.index("-R") + 1] == "100000000"
    assert "--latency" not in argv
    assert argv[-1] == "http://127.0.0.1:8080/"


def test_env_is_exported_to_wrk_only_not_to_taskset():
    options = WrkOptions(url="http://127.0.0.1:8080/", cpus=[2])
    command = wrk_command(
        "wrk", options, env={"LD_PRELOAD": "/usr/lib/libvcl_ldpreload.so", "VCL_CONFIG": "/a b"}
    ).tool_line()
    argv = shlex.split(command)
    assert argv[:5] == ["taskset", "-c", "2", "sh", "-c"]
    inner = argv[5]
    assert inner.startswith("export LD_PRELOAD=/usr/lib/libvcl_ldpreload.so; ")
    assert "export VCL_CONFIG='/a b'; exec wrk -t 1" in inner
    with pytest.raises(ValueError, match="not a valid name"):
        wrk_command("wrk", options, env={"BAD NAME": "x"}).tool_line()


def test_wrk2_without_rate_and_wrk_with_rate_are_refused():
    with pytest.raises(ValueError, match="rate .* is required"):
        wrk_command("wrk", WrkOptions(url="http://h/"), flavour="wrk2")
    with pytest.raises(ValueError, match="no -R/--rate"):
        wrk_command("wrk", WrkOptions(url="http://h/", rate=1000), flavour="wrk")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"url": "ftp://h/x"}, "http:// or https:// URL"),
        ({"url": "http:///nohost"}, "with a host"),
        ({"threads": 4, "connections": 2}, "connections >= threads"),
        ({"threads": 0}, "threads: expected a positive integer"),
        ({"connections": -1}, "connections: expected a positive integer"),
        ({"duration": 0}, "duration: expected a positive integer"),
        ({"duration": 2.5}, "duration: expected a positive integer"),
        ({"rate": 0}, "rate: expected a positive integer"),
        ({"request_timeout": True}, "request_timeout: expected a positive integer"),
        ({"script": ""}, "script: expected a file path"),
        ({"headers": ("no colon",)}, "headers: expected 'Name: value'"),
        ({"cpus": []}, "cpus: expected a non-empty list"),
        ({"cpus": [0, -1]}, "cpus: expected a non-empty list"),
    ],
)
def test_invalid_options_raise_clear_value_errors(changes, message):
    arguments = {"url": "http://127.0.0.1:8080/1kb", **changes}
    with pytest.raises(ValueError, match=re.escape(message)):
        WrkOptions(**arguments)


def test_options_are_hashable_with_list_arguments():
    options = WrkOptions(url="http://h/", cpus=[0, 1], headers=["A: b"])
    assert options.cpus == (0, 1)
    assert hash(options) == hash(WrkOptions(url="http://h/", cpus=(0, 1), headers=("A: b",)))


# -- flavour ---------------------------------------------------------------------------------

def test_flavour_by_capability():
    assert detect_wrk_flavour(fixture("wrk41_help.txt")) == "wrk"
    assert detect_wrk_flavour(fixture("wrk2_help_synthetic.txt")) == "wrk2"


def test_flavour_of_text_that_is_not_wrk_usage_is_an_error():
    with pytest.raises(ParseError, match="not wrk's usage text.*command not found"):
        detect_wrk_flavour("sh: 1: wrk: command not found")


def test_probe_accepts_nonzero_exit_of_help():
    node = FakeNode(stdout=fixture("wrk2_help_synthetic.txt"), exit_code=1)
    assert probe_wrk(node, "/opt/wrk2/wrk") == "wrk2"
    assert node.calls[0]["check"] is False
    assert node.calls[0]["command"] == "/opt/wrk2/wrk --help"


def test_probe_of_missing_binary_raises_tool_missing():
    node = FakeNode(stderr="sh: 1: /opt/wrk2/wrk: not found", exit_code=127)
    with pytest.raises(ToolMissing, match="tg: wrk binary '/opt/wrk2/wrk' is missing"):
        probe_wrk(node, "/opt/wrk2/wrk")


class ByBinary(FakeNode):
    """Answers ``<binary> --help`` with that binary's usage text (a missing one: not found)."""

    def __init__(self, helps: dict[str, str]):
        super().__init__()
        self.helps = helps

    def run(self, command, timeout: float | None = None, sudo: bool = False,
            check: bool = True) -> CommandResult:
        value = node_command(command, timeout)
        command, timeout = value.line(), value.timeout
        self.calls.append({"command": command, "timeout": timeout, "check": check})
        text = self.helps.get(shlex.split(command)[0])
        if text is None:
            return CommandResult(command, 127, "", f"sh: 1: {command}: not found", 0.1)
        return CommandResult(command, 1, text, "", 0.1)


@pytest.mark.parametrize(("tools", "helps", "chosen"), [
    # both declared: wrk's closed loop (wrk2 at -R 1e8 starts its connections late)
    ({"wrk": "wrk", "wrk2": "/opt/wrk2/wrk"},
     {"wrk": "wrk41_help.txt", "/opt/wrk2/wrk": "wrk2_help_synthetic.txt"}, ("wrk", "wrk")),
    # wrk2 is what the node has: it runs, at its -R
    ({"wrk2": "/opt/wrk2/wrk"}, {"/opt/wrk2/wrk": "wrk2_help_synthetic.txt"},
     ("/opt/wrk2/wrk", "wrk2")),
    # wrk declared but missing: wrk2
    ({"wrk": "wrk", "wrk2": "/opt/wrk2/wrk"}, {"/opt/wrk2/wrk": "wrk2_help_synthetic.txt"},
     ("/opt/wrk2/wrk", "wrk2")),
    # a `wrk` entry that is wrk2's binary is probed as wrk2
    ({"wrk": "/opt/wrk2/wrk"}, {"/opt/wrk2/wrk": "wrk2_help_synthetic.txt"},
     ("/opt/wrk2/wrk", "wrk2")),
])
def test_the_closed_loop_tool_is_wrk_where_declared_else_wrk2(tools, helps, chosen):
    node = ByBinary({binary: fixture(name) for binary, name in helps.items()})
    assert choose_load_tool(node, tools) == chosen  # type: ignore[arg-type]


def test_no_answering_load_tool_names_what_was_declared_and_tried():
    with pytest.raises(ToolMissing, match=r"tg: no HTTP load tool answers \(declared: \['wrk', "
                       r"'wrk2'\]\): .*'wrk' is missing.*'/opt/wrk2/wrk' is missing"):
        choose_load_tool(ByBinary({}), {"wrk2": "/opt/wrk2/wrk", "wrk": "wrk"})


# -- parser: seed samples ----------------------------------------------------------------------

def test_seed000_wrk2_loopback_sample():
    result = parse_wrk_output(fixture("seed000_wrk2_loopback.txt"))
    assert result.requests_per_second == pytest.approx(75065.43)
    assert result.transfer_bytes_per_second == pytest.approx(91.49 * MB)
    assert result.total_requests == 750658
    assert result.total_bytes == pytest.approx(0.89 * GB)
    assert result.duration_s == pytest.approx(10.0)
    # wrk2 at "maximum" rate: the latency is its coordinated-omission artefact, parsed as printed
    assert result.latency_avg_s == pytest.approx(5.00)
    assert result.latency_stdev_s == pytest.approx(2.87)
    assert result.latency_max_s == pytest.approx(9.99)
    assert result.thread_req_per_sec is None  # 'nan' on a short wrk2 run is not an error
    assert result.percentiles == {}
    assert result.errors == WrkErrors()
    assert result.non_2xx_3xx == 0
    assert (result.threads, result.connections) == (1, 10)
    assert result.url == "https://172.16.2.1:8089/1kb"
    assert result.flavour == "wrk2"


def test_seed000_wrk2_ethernet_sample():
    result = parse_wrk_output(fixture("seed000_wrk2_ethernet.txt"))
    assert result.requests_per_second == pytest.approx(42406.22)
    assert result.total_bytes == pytest.approx(516.87 * MB)
    assert result.transfer_bytes_per_second == pytest.approx(51.68 * MB)
    assert result.total_requests == 424079


@pytest.mark.parametrize(
    ("name", "rps", "total", "duration", "avg", "max_", "thread_rps"),
    [
        ("seed004_wrk_baseline.txt", 21516.79, 216076, 10.04, 6.30e-3, 152.76e-3, 10970.0),
        ("seed004_wrk_kernel_sslsniff.txt", 6502.37, 65106, 10.01, 20.94e-3, 289.79e-3, 3370.0),
    ],
)
def test_seed004_wrk_samples(name, rps, total, duration, avg, max_, thread_rps):
    result = parse_wrk_output(fixture(name))
    assert result.requests_per_second == pytest.approx(rps)
    assert result.total_requests == total
    assert result.duration_s == pytest.approx(duration)
    assert result.latency_avg_s == pytest.approx(avg)
    assert result.latency_max_s == pytest.approx(max_)
    assert result.thread_req_per_sec == pytest.approx(thread_rps)
    assert (result.threads, result.connections) == (2, 100)
    assert result.flavour is None  # nothing in a plain summary tells wrk from wrk2
    assert result.total_requests / result.duration_s == pytest.approx(rps, rel=0.01)


# -- parser: outputs captured here -----------------------------------------------------------

def test_captured_wrk41_latency_percentiles():
    result = parse_wrk_output(fixture("wrk41_http_latency.txt"))
    assert result.percentiles == pytest.approx(
        {50.0: 151e-6, 75.0: 229e-6, 90.0: 267e-6, 99.0: 395e-6}
    )
    assert result.latency_avg_s == pytest.approx(188.99e-6)
    assert result.latency_max_s == pytest.approx(2.72e-3)
    assert result.thread_req_per_sec == pytest.approx(54860.0)
    assert result.total_bytes == pytest.approx(139.12 * MB)
    assert result.flavour == "wrk"
    assert result.total_requests / result.duration_s == pytest.approx(
        result.requests_per_second, rel=0.02
    )


def test_captured_https_percentile_in_milliseconds():
    result = parse_wrk_output(fixture("wrk41_https_latency.txt"))
    assert result.percentiles[99.0] == pytest.approx(1.35e-3)
    assert result.requests_per_second == pytest.approx(29968.73)


def test_captured_non_2xx_responses():
    result = parse_wrk_output(fixture("wrk41_non2xx_404.txt"))
    assert result.non_2xx_3xx == 128533 == result.total_requests
    assert result.errors.total == 0
    assert result.total_errors == 128533


def test_captured_read_errors_with_zero_requests_and_nan_spread():
    result = parse_wrk_output(fixture("wrk41_socket_read_errors.txt"))
    assert result.errors == WrkErrors(connect=0, read=33822, write=0, timeout=0)
    assert result.total_requests == 0
    assert result.requests_per_second == 0.0
    assert result.transfer_bytes_per_second == 0.0
    assert result.latency_avg_s == 0.0  # wrk printed 0.00us, not nan


def test_captured_timeouts():
    result = parse_wrk_output(fixture("wrk41_socket_timeouts.txt"))
    assert result.errors.timeout == 8
    assert result.total_requests == 8
    assert result.total_bytes == pytest.approx(12.33 * KB)
    assert (result.threads, result.connections) == (2, 4)


def test_captured_script_run_with_read_errors_and_404s():
    result = parse_wrk_output(fixture("wrk41_script_mixed_errors.txt"))
    assert result.errors.read == 25681
    assert result.non_2xx_3xx == 25681
    assert result.total_errors == 2 * 25681
    assert result.url == "http://127.0.0.1:18431/"


# -- parser: wrk2 --latency (synthetic) --------------------------------------------------------

def test_wrk2_hdrhistogram_summary_only_not_the_spectrum():
    result = parse_wrk_output(fixture("wrk2_latency_synthetic.txt"))
    assert result.percentiles == pytest.approx({
        50.0: 1.33e-3, 75.0: 1.76e-3, 90.0: 2.27e-3, 99.0: 3.53e-3,
        99.9: 4.84e-3, 99.99: 6.26e-3, 99.999: 8.19e-3, 100.0: 9.87e-3,
    })
    assert result.flavour == "wrk2"
    assert result.latency_stdev_s == pytest.approx(631.27e-6)
    assert result.thread_req_per_sec == pytest.approx(1050.0)
    assert result.requests_per_second == pytest.approx(1999.34)
    assert result.duration_s == pytest.approx(30.0)


def test_minutes_in_run_duration():
    text = fixture("seed004_wrk_baseline.txt").replace("in 10.04s,", "in 1.00m,")
    assert parse_wrk_output(text).duration_s == pytest.approx(60.0)


def test_raw_output_kept_but_not_compared_or_shown():
    text = fixture("wrk41_http_latency.txt")
    result = parse_wrk_output(text)
    assert result.raw == text
    assert "raw=" not in repr(result)
    assert dataclasses.replace(result, raw="other") == result


# -- parser: errors, usage, truncation, garbage --------------------------------------------------

def test_connection_refused_message_is_quoted():
    with pytest.raises(ParseError) as caught:
        parse_wrk_output(fixture("wrk41_conn_refused.txt"))
    message = str(caught.value)
    assert "wrk reported an error" in message
    assert "unable to connect to 127.0.0.1:18439 Connection refused" in message


def test_usage_text_is_an_error():
    with pytest.raises(ParseError, match="usage text"):
        parse_wrk_output(fixture("wrk41_usage_bad_timeout.txt"))


def _truncations() -> list[str]:
    text = fixture("wrk41_http_latency.txt")
    return [
        "",
        text[: text.index("Requests/sec:")],
        text[: text.index("Transfer/sec:")],
        text[: text.index("Transfer/sec:") + len("Transfer/sec:     66.2")],
        text[text.index("  114143 requests"):],  # head lost: no threads/latency lines
    ]


@pytest.mark.parametrize("text", _truncations(), ids=["empty", "no-rps", "no-transfer",
                                                     "cut-in-number", "no-head"])
def test_truncated_output_raises(text):
    with pytest.raises(ParseError, match="output was"):
        parse_wrk_output(text)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("54366.42", "54x66.42", "Requests/sec '54x66.42' is not a number"),
        ("139.12MB", "139.12XB", "bytes read '139.12XB'"),
        ("188.99us", "188.99uz", "latency average '188.99uz'"),
        ("54.86k", "54.86q", "Req/Sec average '54.86q'"),
        ("  99%  395.00us", "  99%  fast", "latency percentile 99%"),
        ("in 2.10s", "in 0.00s", "duration '0.00s' is not positive"),
    ],
)
def test_garbage_numbers_raise_and_quote_the_output(old, new, problem):
    text = fixture("wrk41_http_latency.txt").replace(old, new)
    assert text != fixture("wrk41_http_latency.txt")
    with pytest.raises(ParseError) as caught:
        parse_wrk_output(text, source="tg: wrk")
    message = str(caught.value)
    assert message.startswith("tg: wrk: ")
    assert problem in message
    assert "Requests/sec:" in message  # the output is quoted


def test_malformed_socket_errors_line_raises():
    text = fixture("wrk41_socket_timeouts.txt").replace("timeout 8", "timeout many")
    with pytest.raises(ParseError, match="malformed 'Socket errors:' line"):
        parse_wrk_output(text)


def test_not_wrk_output_at_all():
    with pytest.raises(ParseError, match="no 'Requests/sec:' line"):
        parse_wrk_output("Connecting to host 127.0.0.1, port 5201\n")


# -- runner with a fake node -----------------------------------------------------------------------

def test_run_wrk_builds_runs_with_hard_timeout_and_parses():
    node = FakeNode(stdout=fixture("wrk41_http_latency.txt"))
    options = WrkOptions(url="http://127.0.0.1:18431/1kb", duration=2, latency=True, cpus=[1])
    result = run_wrk(node, "wrk", options)
    assert result.requests_per_second == pytest.approx(54366.42)
    call = node.calls[0]
    assert call["command"] == wrk_command("wrk", options).tool_line()
    assert call["timeout"] == default_timeout(options)
    assert 2 < default_timeout(options) < 30


def test_a_timed_run_reads_wrks_own_cpu_from_the_shells_times():
    text = (fixture("wrk41_http_latency.txt")
            + "@@hoststack-cpu\n0m0.001s 0m0.002s\n0m1.250s 0m0.500s\n")
    node = FakeNode(stdout=text)
    options = WrkOptions(url="http://127.0.0.1:18431/1kb", duration=2, latency=True, cpus=[1])
    result = run_wrk(node, "wrk", options, cpu_times=True)
    assert result.cpu_s == pytest.approx(1.75)  # the children's line: wrk's user + system
    assert result.requests_per_second == pytest.approx(54366.42)
    assert node.calls[0]["command"].endswith("; rc=$?; echo @@hoststack-cpu; times; exit $rc")
    assert run_wrk(FakeNode(stdout=fixture("wrk41_http_latency.txt")), "wrk", options).cpu_s \
        is None


def test_times_that_are_not_two_lines_of_times_are_an_error_quoting_them():
    text = fixture("wrk41_http_latency.txt") + "@@hoststack-cpu\nsegfault\n"
    with pytest.raises(ParseError, match=r"two lines of the shell's times after @@hoststack"):
        run_wrk(FakeNode(stdout=text), "wrk", WrkOptions(url="http://127.0.0.1:1/1kb",
                                                          duration=2), cpu_times=True)


def test_run_wrk_connection_refused_raises_parse_error_naming_the_node():
    node = FakeNode(stderr=fixture("wrk41_conn_refused.txt"), exit_code=1)
    with pytest.raises(ParseError, match=r"^tg: output of 'wrk .*exit 1.*unable to connect"):
        run_wrk(node, "wrk", WrkOptions(url="http://127.0.0.1:18439/1kb", duration=2))


def test_run_wrk_results_with_nonzero_exit_raise_command_error():
    node = FakeNode(stdout=fixture("wrk41_http_latency.txt"), stderr="boom", exit_code=2)
    with pytest.raises(CommandError, match="exited 2"):
        run_wrk(node, "wrk", WrkOptions(url="http://127.0.0.1:18431/1kb", duration=2))


# -- real wrk against a real nginx on loopback -----------------------------------------------------

NGINX_CONF = """\
worker_processes 1;
user root;  # the pytest tmp dir is private to root
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    sendfile on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{http};
        root {d}/www;
        location = /drop {{ return 444; }}
    }}
    server {{
        listen 127.0.0.1:{https} ssl;
        ssl_protocols TLSv1.3;
        ssl_certificate {d}/server.crt;
        ssl_certificate_key {d}/server.key;
        root {d}/www;
    }}
}}
"""

MIX_LUA = """\
-- cycle through a good file, a missing file and a dropped connection
local paths = {"/1kb", "/missing", "/drop", "/1kb"}
local n = 0
request = function()
   n = n + 1
   return wrk.format(nil, paths[(n % #paths) + 1])
end
"""


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A real nginx on 127.0.0.1 (HTTP and HTTPS, self-signed cert, a 1 KiB file)."""
    for tool in ("nginx", "wrk", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed on this machine")
    workdir = tmp_path_factory.mktemp("nginx")
    (workdir / "www").mkdir()
    (workdir / "www" / "1kb").write_bytes(bytes(range(256)) * 4)
    subprocess.run(
        ["openssl", "req", "-x509", "-nodes", "-days", "1", "-newkey", "rsa:2048",
         "-keyout", str(workdir / "server.key"), "-out", str(workdir / "server.crt"),
         "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )
    http_port = free_port()
    https_port = free_port()
    while https_port == http_port:
        https_port = free_port()
    (workdir / "nginx.conf").write_text(
        NGINX_CONF.format(d=workdir, http=http_port, https=https_port)
    )
    node = LocalNode(workdir=str(workdir))
    process = node.start(f"nginx -c {workdir}/nginx.conf -p {workdir}", name="nginx")
    try:
        wait_for_port(http_port)
        wait_for_port(https_port)
        yield {"node": node, "http": http_port, "https": https_port, "dir": workdir}
    finally:
        node.stop(process)


def _printed_rps(raw: str) -> float:
    match = re.search(r"^Requests/sec:\s+([0-9.]+)\s*$", raw, re.MULTILINE)
    assert match, raw
    return float(match.group(1))


@pytest.mark.integration
def test_real_probe_finds_debian_wrk(nginx):
    assert probe_wrk(nginx["node"], "wrk") == "wrk"


@pytest.mark.integration
def test_real_wrk_against_nginx_http(nginx):
    options = WrkOptions(url=f"http://127.0.0.1:{nginx['http']}/1kb", threads=1,
                         connections=10, duration=2, latency=True)
    result = run_wrk(nginx["node"], "wrk", options, flavour="wrk")
    assert result.requests_per_second > 0
    assert result.requests_per_second == _printed_rps(result.raw)
    assert result.total_requests / result.duration_s == pytest.approx(
        result.requests_per_second, rel=0.02
    )
    assert 1.9 < result.duration_s < 3.0
    # every response carries the 1 KiB body plus headers
    assert result.total_bytes > 1024 * result.total_requests * 0.99
    assert sorted(result.percentiles) == [50.0, 75.0, 90.0, 99.0]
    assert 0 < result.percentiles[50.0] <= result.percentiles[99.0]
    assert result.errors.total == 0
    assert result.non_2xx_3xx == 0
    assert result.flavour == "wrk"


@pytest.mark.integration
def test_real_wrk_https_pinned_with_taskset(nginx):
    options = WrkOptions(url=f"https://127.0.0.1:{nginx['https']}/1kb", threads=1,
                         connections=10, duration=2, cpus=[0])
    result = run_wrk(nginx["node"], "wrk", options)
    assert nginx["node"].history[-1].startswith("taskset -c 0 wrk ")
    assert result.requests_per_second > 0
    assert result.requests_per_second == _printed_rps(result.raw)
    assert result.total_requests / result.duration_s == pytest.approx(
        result.requests_per_second, rel=0.02
    )


@pytest.mark.integration
def test_real_wrk_reports_its_own_cpu_time(nginx):
    """wrk is busy sending for 2 s: its CPU is more than nothing and at most its 2 s on its
    one pinned core (plus a margin for start-up)."""
    options = WrkOptions(url=f"https://127.0.0.1:{nginx['https']}/1kb", threads=1,
                         connections=4, duration=2, cpus=[1])
    result = run_wrk(nginx["node"], "wrk", options, cpu_times=True)
    assert result.total_requests > 0
    assert 0.0 < result.cpu_s <= 2.0 * 1.2


@pytest.mark.integration
def test_real_wrk_script_counts_404s_and_dropped_connections(nginx):
    script = nginx["dir"] / "mix.lua"
    script.write_text(MIX_LUA)
    options = WrkOptions(url=f"http://127.0.0.1:{nginx['http']}/", duration=2,
                         script=str(script))
    result = run_wrk(nginx["node"], "wrk", options)
    assert result.non_2xx_3xx > 0
    assert result.errors.read > 0
    assert result.non_2xx_3xx < result.total_requests


@pytest.mark.integration
def test_real_wrk_connection_refused(nginx):
    port = free_port()
    options = WrkOptions(url=f"http://127.0.0.1:{port}/1kb", duration=1)
    with pytest.raises(ParseError, match="unable to connect"):
        run_wrk(nginx["node"], "wrk", options)


@pytest.mark.integration
def test_real_wrk_is_stopped_at_the_hard_timeout(nginx):
    options = WrkOptions(url=f"http://127.0.0.1:{nginx['http']}/1kb", duration=5)
    with pytest.raises(CommandTimeout, match="timed out after 1 s"):
        run_wrk(nginx["node"], "wrk", options, timeout=1.0)
