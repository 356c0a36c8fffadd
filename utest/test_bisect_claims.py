"""What a bisection claims is what it proved (issue 60): a range clear only end to end is said so
and looked inside within a budget; builds that are the same files need no comparison; a range
is reported clear in plain words."""

from __future__ import annotations

import pytest

from libraries.bisect import bisect_command
from libraries.bisect.bisect_summary import bisect_summary
from libraries.bisect.bisection import CULPRIT, CULPRIT_AND_UNDECIDED, NO_CULPRIT, bisect
from libraries.bisect.outcome import SAME, Outcome, clear_words
from libraries.bisect.report import as_html, as_json, chained_ratios
from utest.test_bisect import _assert_covered, simulated

HIDDEN = [100.0, 100.0, 96.0, 96.0, 100.0, 100.0, 100.0, 92.0, 92.0]
"""-4 % at build 2, undone by +4 % at build 4, then -8 % at build 7: 0 -> 4 measures no change."""
NAMES = [f"b{i}" for i in range(9)]
META = {"title": "t", "topology": "3node", "test": "ssl_proxy/x", "metric": "rps",
        "margin_pct": 3.0}


def test_a_range_clear_only_end_to_end_is_said_so_not_every_build_checked():
    compare, _ = simulated(HIDDEN, margin=0.03)
    result = bisect(len(HIDDEN), compare, margin_pct=3.0, inside=0)
    assert [(c.good, c.bad) for c in result.culprits] == [(6, 7)]
    assert result.exit_code == CULPRIT
    assert [(a, b) for a, b, _ in result.end_to_end] == [(0, 4), (4, 6)]
    assert result.end_to_end[0][2] == "not looked inside: --inside 0"
    meaning = result.meaning(NAMES)
    assert "every other build checked" not in meaning
    assert ("2 clear only end to end (b0 .. b4, b4 .. b6: their ends shown clear, not every "
            "build inside; a -/+ pair of steps could hide there)") in meaning


def test_a_look_inside_finds_a_step_undone_inside_a_range_clear_end_to_end():
    compare, calls = simulated(HIDDEN, margin=0.03)
    result = bisect(len(HIDDEN), compare, margin_pct=3.0, inside=2)
    found = {(c.good, c.bad): c.outcome.verdict for c in result.culprits}
    assert found == {(1, 2): "regression", (3, 4): "progression", (6, 7): "regression"}
    assert (0, 2, 1) in calls and (2, 4, 1) in calls  # the two halves of 0 -> 4
    # the budget was spent on 0 -> 4 (the widest): 4 -> 6 is left, and said so
    assert result.end_to_end == [(4, 6, "not looked inside: the --inside budget of 2 "
                                  "comparisons was spent")]
    assert result.exit_code == CULPRIT and "b4 .. b6" in result.meaning(NAMES)
    _assert_covered(result, len(HIDDEN))


def test_with_budget_enough_every_build_is_checked_and_the_exit_says_so():
    compare, _ = simulated(HIDDEN, margin=0.03)
    result = bisect(len(HIDDEN), compare, margin_pct=3.0, inside=20)
    assert result.end_to_end == [] and result.exit_code == CULPRIT
    assert all(o.b - o.a == 1 for o in result.clear)
    assert result.meaning(NAMES).startswith("culprit found, and every other build checked")
    _assert_covered(result, len(HIDDEN))


def test_an_undecided_half_leaves_the_range_clear_end_to_end_with_the_half_named():
    levels = [100.0] * 7 + [92.0] * 2
    base, _ = simulated(levels, margin=0.03)

    def compare(a: int, b: int, attempt: int) -> Outcome:
        if (a, b) == (0, 2):
            return Outcome(a, b, "inconclusive", -1.0, -4.0, 2.0, rounds=60)
        return base(a, b, attempt)

    result = bisect(len(levels), compare, margin_pct=3.0, inside=2)
    assert result.exit_code == CULPRIT and not result.undecided  # nothing less was proven
    (low, high, note), *_ = result.end_to_end
    assert (low, high) == (0, 4)
    assert note == "looked inside: 0 -> 2 inconclusive -1.0 % [-4.0, +2.0]; 2 -> 4 clear"
    assert [(o.a, o.b) for o in result.clear][:1] == [(0, 4)]  # clear ranges do not overlap


def test_no_look_inside_while_a_range_stays_undecided():
    compare, calls = simulated(HIDDEN, margin=0.03, failed={(7, 8)})
    result = bisect(len(HIDDEN), compare, margin_pct=3.0, inside=10)
    assert result.exit_code == CULPRIT_AND_UNDECIDED
    assert (0, 2, 1) not in calls
    assert result.end_to_end[0][2] == "not looked inside: other ranges stayed undecided"
    assert "of the ranges proven clear, 2 clear only end to end" in result.meaning(NAMES)


COPIES = [100.0] * 5 + [76.0] * 3
"""Issue 60's case: five copies of one nginx, three with AES-NI off (-24 %)."""
CONTENT = [0] * 5 + [1] * 3


def _noisy_copies():
    """Comparisons whose equal builds never prove "no change" (+-3 % against a 1 % margin),
    as on the VM: -0.5 % [-3.4, +2.4]."""
    return simulated(COPIES, margin=0.01, noise=0.03)


def test_identical_builds_measured_without_knowing_they_are_stay_undecided():
    compare, calls = _noisy_copies()
    result = bisect(8, compare, margin_pct=3.0)
    assert [(c.good, c.bad) for c in result.culprits] == [(4, 5)]
    assert result.exit_code == CULPRIT_AND_UNDECIDED and len(calls) == 9  # as on the VM: 10


def test_builds_hashed_the_same_need_one_comparison_and_end_exit_3():
    compare, calls = _noisy_copies()
    result = bisect(8, compare, margin_pct=3.0, same=lambda a, b: CONTENT[a] == CONTENT[b])
    assert calls == [(0, 7, 1)]  # the culprit pair holds the ends' files: their comparison
    (culprit,) = result.culprits
    assert (culprit.good, culprit.bad, culprit.outcome.verdict) == (4, 5, "regression")
    assert culprit.outcome.detail.startswith("not measured: the files of 0 -> 7, compared there")
    assert result.exit_code == CULPRIT and result.end_to_end == []
    assert {o.verdict for o in result.clear} == {SAME}
    assert result.minutes == pytest.approx(2.0)  # one comparison's
    _assert_covered(result, 8)


def test_builds_learned_the_same_from_a_record_need_no_second_attempt():
    compare, calls = _noisy_copies()
    ran: set[int] = set()

    def recorded(a: int, b: int, attempt: int) -> Outcome:
        ran.update((a, b))  # the record names both sides' files
        return compare(a, b, attempt)

    result = bisect(8, recorded, margin_pct=3.0, inside=0,
                    same=lambda a, b: a in ran and b in ran and CONTENT[a] == CONTENT[b])
    assert result.exit_code == CULPRIT and not result.undecided
    assert all(attempt == 1 for *_, attempt in calls), calls
    assert len(calls) == 4  # the ends, 0 -> 3, 3 -> 5, 3 -> 4; 4 -> 5 takes 0 -> 7's
    # builds 1, 2 and 6 were never run: their ranges are clear only end to end, said so
    assert [(a, b) for a, b, _ in result.end_to_end] == [(0, 3), (5, 7)]


def test_ends_that_are_the_same_files_are_no_culprit_without_measuring():
    compare, calls = simulated([100.0, 90.0, 100.0])
    result = bisect(3, compare, same=lambda a, b: {a, b} == {0, 2})
    assert calls == [] and result.exit_code == NO_CULPRIT
    assert result.ends is not None and result.ends.verdict == SAME


def test_a_range_is_reported_clear_in_plain_words():
    assert clear_words(Outcome(0, 3, SAME, 0.0, 0.0, 0.0), 3.0) == \
        "the same files (not measured)"
    assert clear_words(Outcome(0, 3, "no change", -0.4, -2.1, 1.5), 3.0) == \
        "measured the same: -0.4 % [-2.1, +1.5], within +-3 %"
    assert clear_words(Outcome(0, 3, "inconclusive", 2.0, -2.5, 7.0), 3.0) == \
        "no regression beyond 3 %: +2.0 % [-2.5, +7.0] (above -3 %; it may be faster)"


def test_the_summary_page_and_json_say_how_each_range_is_clear():
    compare, _ = simulated(HIDDEN, margin=0.03)
    result = bisect(len(HIDDEN), compare, margin_pct=3.0, inside=0)
    doc = as_json(result, NAMES, META)
    first = doc["clear"][0]
    assert (first["from"], first["to"], first["checked"]) == ("b0", "b4", False)
    assert first["how"] == "measured the same: +0.0 % [-0.5, +0.5], within +-3 %"
    assert doc["exit_meaning"] == result.meaning(NAMES)
    text = bisect_summary(doc)
    assert ("- `b0` .. `b4`: measured the same: +0.0 % [-0.5, +0.5], within +-3 %; clear end "
            "to end only: its ends shown clear, not every build inside (a -/+ pair of steps "
            "could hide there) (not looked inside: --inside 0)") in text
    assert "- `b6` .. `b7`" not in text  # the culprit, not a clear range
    assert "- `b7` .. `b8`: measured the same" in text and "every build checked" in text
    assert "clear: b0 .. b4: measured the same" in as_html(doc)


def test_the_chain_of_ratios_crosses_ranges_of_the_same_files():
    compare, _ = _noisy_copies()
    result = bisect(8, compare, margin_pct=3.0, same=lambda a, b: CONTENT[a] == CONTENT[b])
    chain = chained_ratios(result, 8)
    assert set(chain) == set(range(8))  # every build, through the same files' ratio 1
    assert chain[4][0] == 1.0 and chain[6][0] == pytest.approx(0.76)


def test_the_command_refuses_a_negative_inside_budget_and_its_help_names_it(tmp_path, capsys):
    builds = tmp_path / "builds.yaml"
    builds.write_text('builds:\n  - {name: r1}\n  - {name: r2, nginx: {proxy: {server: '
                      '["access_log /dev/null combined;"]}}}\n')
    code = bisect_command.main(["--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                                "--builds", str(builds), "--results",
                                str(tmp_path / "out"), "--inside", "-1"])
    assert code == 252 and "--inside not negative" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        bisect_command.main(["--help"])
    assert "--inside N" in capsys.readouterr().out
