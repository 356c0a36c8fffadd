"""The scheduler's lists in ``utest/conftest.py`` hold every module that starts real processes,
so ``pytest -n 2`` never runs two users of the same loopback port or testbed module at once."""

from __future__ import annotations

from pathlib import Path

from utest.conftest import (
    E2E_MODULES,
    LOOPBACK_MODULES,
    UPROBE_MODULES,
    WHOLLY_INTEGRATION,
    scope_of,
)

UTEST = Path(__file__).resolve().parent


def _modules_saying(text: str) -> set[str]:
    return {p.stem for p in UTEST.glob("test_*.py")
            if p.name != "test_conftest.py" and text in p.read_text()}


def test_every_module_with_an_e2e_test_is_one_unit_of_its_own():
    assert _modules_saying("pytest.mark.e2e") == set(E2E_MODULES)


def test_every_other_module_starting_real_processes_is_in_the_loopback_unit():
    real = _modules_saying("pytest.mark.integration") | set(WHOLLY_INTEGRATION)
    assert real - set(E2E_MODULES) <= set(LOOPBACK_MODULES)
    assert set(LOOPBACK_MODULES) <= {p.stem for p in UTEST.glob("test_*.py")}


def test_every_module_touching_libssl_uprobes_or_bpf_sysctls_shares_one_unit():
    users = _modules_saying("bpftrace") | _modules_saying("bpf_stats_enabled") | \
        _modules_saying("tests/sslsniff") | _modules_saying('"tests/ebpf_stream"')
    real = (set(E2E_MODULES) | set(LOOPBACK_MODULES)) & users
    assert real <= set(UPROBE_MODULES)
    assert {scope_of(f"utest/{m}.py::t") for m in UPROBE_MODULES} == {"uprobes"}


def test_units():
    assert scope_of("utest/test_wrk.py::test_real_wrk_against_nginx_http") == "loopback"
    assert scope_of("utest/test_iperf3.py::test_parse[a@b]") == "loopback"
    assert scope_of("utest/test_lab_pool.py::test_x") == "e2e:test_lab_pool"
    assert scope_of("utest/test_stats.py::test_x[1]") == "utest/test_stats.py::test_x[1]"
