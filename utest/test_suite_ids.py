"""The suites' test ids (``<topology>/<case>/<test>``) are the ids history was recorded under.

Trend history is keyed by test id: a suite moved, renamed or split into files must keep every
id that earlier runs recorded (wave 1's 19 tests below), or its history silently restarts.
"""

from __future__ import annotations

from pathlib import Path

from robot.api import TestSuiteBuilder as SuiteBuilder

from libraries.results.records import make_test_id

TESTS = Path(__file__).resolve().parent.parent / "tests"

RECORDED_IDS = {
    "3node/tcp_term/1s-kernel-tcp-term",
    "3node/tcp_term/1s-kernel-tcp-term-reverse",
    "3node/tcp_term/4s-kernel-tcp-term",
    "3node/tcp_term/1s-kernel-tcp-term-jumbo",
    "3node/tcp_term/1s-vpp-tcp-term",
    "3node/ssl_proxy/1kb-10c-kernel-ssl-proxy",
    "3node/ssl_proxy/1kb-100c-kernel-ssl-proxy",
    "3node/ssl_proxy/64kb-10c-kernel-ssl-proxy",
    "3node/ssl_proxy/1kb-10c-kernel-ssl-proxy-mtls",
    "3node/ssl_proxy/1kb-20c-vpp-ssl-proxy",
    "3node/ebpf_stream/reverse-unpinned-stream-proxy",
    "3node/ebpf_stream/reverse-unpinned-stream-proxy-ebpf",
    "3node/ebpf_stream/reverse-pinned-stream-proxy-ebpf",
    "3node/ebpf_stream/forward-unpinned-stream-proxy-ebpf",
    "3node/sslsniff/1kb-10c-kernel-sslsniff",
    "3node/sslsniff/1kb-10c-kernel-sslsniff-count",
    "3node/sslsniff/1kb-10c-bpftime-sslsniff",
}


def _suite_ids(topology: str) -> dict[str, str]:
    suite = SuiteBuilder().build(str(TESTS))
    ids: dict[str, str] = {}
    for test in suite.all_tests:
        test_id = make_test_id(topology, Path(test.source), test.name)
        assert test_id not in ids, f"{test_id} defined twice: {ids.get(test_id)} and {test.source}"
        ids[test_id] = str(test.source)
    return ids


def test_every_recorded_test_id_still_exists():
    missing = RECORDED_IDS - set(_suite_ids("3node"))
    assert missing == set()


def test_test_id_is_the_case_folder_not_the_file():
    source = TESTS / "ssl_proxy" / "kernel.robot"
    assert make_test_id("1node", source, "x") == "1node/ssl_proxy/x"


def test_no_suite_repeats_its_folder_name():
    doubled = [p for p in TESTS.rglob("*.robot") if p.stem == p.parent.name]
    assert doubled == []


# -- the default run: one row per seed configuration; extended rows need -v EXTENDED:yes ----------

SEED_ROWS = {  # every kernel seed case the README's main job measures without EXTENDED
    "1s-kernel-tcp-term", "1s-kernel-tcp-term-reverse", "1s-kernel-tcp-term-jumbo",  # 001
    "1kb-10c-kernel-ssl-proxy", "1kb-100c-kernel-ssl-proxy", "64kb-10c-kernel-ssl-proxy",
    "1kb-10c-kernel-ssl-proxy-mtls",  # 000, 002
    "reverse-unpinned-stream-proxy", "reverse-unpinned-stream-proxy-ebpf",  # 003
    "1kb-10c-kernel-sslsniff", "1kb-10c-kernel-sslsniff-libbpf", "1kb-10c-bpftime-sslsniff",
}


def _tests(suite):
    yield from suite.tests
    for child in suite.suites:
        yield from _tests(child)


def test_extended_rows_are_never_seed_rows_and_their_suites_skip_them_by_default():
    suite = SuiteBuilder().build(str(TESTS))
    tests = list(_tests(suite))
    extended = {t.name for t in tests if "EXTENDED" in t.tags}
    assert extended == {"1kb-20c-kernel-ssl-proxy", "64kb-20c-kernel-ssl-proxy",
                        "1kb-20c-kernel-ssl-proxy-mtls", "4s-kernel-tcp-term",
                        "1kb-10c-kernel-sslsniff-count", "1kb-10c-kernel-ssl-proxy-capacity"}
    assert {t.name for t in tests} - extended >= SEED_ROWS
    for test in tests:
        if "EXTENDED" in test.tags:
            assert test.setup.name == "Skip Extended Row Unless Asked", test.name
