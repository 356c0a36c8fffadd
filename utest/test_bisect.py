"""Bisection: the search over a simulated range (steps at known builds, comparisons that
decide only above a margin, inconclusive and failed runs, builds that cannot be made), the
builds file, reading a comparison's verdict from its record, the page and the command's bad
input (exit 252 before anything is measured)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from libraries.ab.comparison import Side
from libraries.bisect import bisect_command, comparison_run
from libraries.bisect.bisection import (
    CULPRIT,
    CULPRIT_AND_UNDECIDED,
    EXIT_CODES,
    NO_CULPRIT,
    UNDECIDABLE,
    Bisection,
    Outcome,
    bisect,
)
from libraries.bisect.builds import (
    Builds,
    build_command,
    check_builds,
    load_builds,
    local_problems,
    make_build,
)
from libraries.bisect.comparison_run import REPO, RobotComparisons, find_test, read_outcome
from libraries.bisect.report import as_html, as_json, chained_ratios
from libraries.testbed.errors import TopologyError
from libraries.testbed.teardown import pid_alive
from libraries.testbed.topology_file import load_topology


def simulated(levels: list[float], margin: float = 0.01, noise: float = 0.005,
              inconclusive: set[tuple[int, int]] | None = None,
              failed: set[tuple[int, int]] | None = None, broken: set[int] | None = None):
    """A comparison of builds whose metric is ``levels[i]`` (higher is better): a change
    beyond the margin plus noise is decided, one within the margin is "no change"; pairs in
    ``inconclusive`` stay so on the first attempt only; pairs in ``failed``, and every pair
    with a build in ``broken`` (it does not start), fail."""
    calls: list[tuple[int, int, int]] = []

    def compare(a: int, b: int, attempt: int) -> Outcome:
        calls.append((a, b, attempt))
        change = (levels[b] / levels[a] - 1) * 100
        low, high = change - noise * 100, change + noise * 100
        if (failed and (a, b) in failed) or (broken and {a, b} & broken):
            return Outcome(a, b, "failed", attempt=attempt, detail="nginx did not start")
        if inconclusive and (a, b) in inconclusive and attempt == 1:
            verdict = "inconclusive"
        elif high < -margin * 100:
            verdict = "regression"
        elif low > margin * 100:
            verdict = "progression"
        elif low > -margin * 100 and high < margin * 100:
            verdict = "no change"
        else:
            verdict = "inconclusive"
        return Outcome(a, b, verdict, change, low, high, rounds=10 * attempt, minutes=2.0,
                       attempt=attempt)

    return compare, calls


def test_one_step_is_found_with_its_direct_comparison():
    levels = [100.0] * 6 + [95.0] * 10  # build 6 is 5 % slower
    compare, calls = simulated(levels)
    result = bisect(len(levels), compare)
    assert [(c.good, c.bad) for c in result.culprits] == [(5, 6)]
    culprit = result.culprits[0].outcome
    assert (culprit.a, culprit.b, culprit.verdict) == (5, 6, "regression")
    assert culprit.change_pct == pytest.approx(-5.0)
    assert (5, 6, 1) in calls  # the size comes from an A/B of the adjacent pair itself
    assert result.exit_code == CULPRIT and not result.undecided


@pytest.mark.parametrize("count", [2, 3, 5, 8, 13, 16])
def test_one_step_anywhere_costs_at_most_log2_n_plus_4_comparisons(count):
    # the ends, the halvings, the adjacent pair, and two comparisons proving the builds after
    # the culprit clear (where they were not already): the proof and its confirmation
    for step in range(1, count):
        levels = [100.0] * step + [95.0] * (count - step)
        compare, calls = simulated(levels)
        result = bisect(count, compare, inside=0)  # the search itself, no look inside
        assert [(c.good, c.bad) for c in result.culprits] == [(step - 1, step)], step
        assert (step - 1, step, 1) in calls  # sized by a direct A/B of the pair
        assert len(calls) <= math.ceil(math.log2(count)) + 4, (step, calls)
        assert result.exit_code == CULPRIT and not result.undecided
        _assert_covered(result, count)


def _assert_covered(result: Bisection, count: int) -> None:
    """Every neighbouring pair of builds is in a culprit, a stretch proven clear or an
    undecided range."""
    pairs = {unit for a, b, _ in result.coverage() for unit in range(a, b)}
    assert pairs == set(range(count - 1)), result.coverage()


def test_two_separate_steps_in_one_range_are_both_found():
    levels = [100.0] * 3 + [96.0] * 6 + [90.0] * 7  # steps at builds 3 and 9
    compare, _ = simulated(levels)
    result = bisect(len(levels), compare)
    assert sorted((c.good, c.bad) for c in result.culprits) == [(2, 3), (8, 9)]
    assert {c.outcome.verdict for c in result.culprits} == {"regression"}


def test_a_progression_inside_a_regressing_range_is_named_as_such():
    levels = [100.0, 100.0, 106.0, 106.0, 90.0, 90.0]
    compare, _ = simulated(levels)
    result = bisect(len(levels), compare)
    found = {(c.good, c.bad): c.outcome.verdict for c in result.culprits}
    assert found == {(1, 2): "progression", (3, 4): "regression"}
    assert result.exit_code == CULPRIT


def test_no_regression_between_the_ends_stops_after_one_comparison():
    compare, calls = simulated([100.0, 100.0, 99.9, 100.2, 100.0])
    result = bisect(5, compare)
    assert calls == [(0, 4, 1)] and result.culprits == [] and result.exit_code == NO_CULPRIT
    compare, calls = simulated([100.0, 104.0, 108.0])  # faster: not what a bisection is for
    assert bisect(3, compare).exit_code == NO_CULPRIT and calls == [(0, 2, 1)]


def test_an_inconclusive_comparison_gets_a_second_attempt_then_decides():
    levels = [100.0] * 4 + [94.0] * 4
    compare, calls = simulated(levels, inconclusive={(0, 7), (3, 5)})
    result = bisect(len(levels), compare)
    assert calls[:2] == [(0, 7, 1), (0, 7, 2)] and (3, 5, 2) in calls
    assert [(c.good, c.bad) for c in result.culprits] == [(3, 4)]


@pytest.mark.parametrize("count", [8, 16])
def test_an_undecided_first_half_that_cannot_hold_the_step_sends_the_search_on(count):
    # noise 3 %, margin 1 %: equal builds never prove "no change", a 10 % step is plain
    for step in range(1, count):
        levels = [100.0] * step + [90.0] * (count - step)
        compare, calls = simulated(levels, margin=0.01, noise=0.03)
        result = bisect(count, compare)
        assert [(c.good, c.bad) for c in result.culprits] == [(step - 1, step)], step
        _assert_covered(result, count)
        if step > 1 or count - step > 1:  # equal builds beside the culprit: not proven clear
            assert result.undecided and result.exit_code == CULPRIT_AND_UNDECIDED, step
        # with the bisection's margin at 4 %, their +-3 % intervals clear them at once
        compare, calls = simulated(levels, margin=0.01, noise=0.03)
        result = bisect(count, compare, margin_pct=4.0, inside=0)
        assert [(c.good, c.bad) for c in result.culprits] == [(step - 1, step)], step
        assert not result.undecided and result.exit_code == CULPRIT
        assert all(attempt == 1 for *_, attempt in calls), calls  # no second attempts
        assert len(calls) <= math.ceil(math.log2(count)) + 4, (step, calls)


def test_a_first_half_that_may_hold_a_smaller_step_is_not_ruled_out():
    levels = [100.0] * 2 + [95.0] * 2 + [90.0] * 4  # 0 -> 3: -5 % [-9.5, -0.5], not 0
    compare, calls = simulated(levels, margin=0.01, noise=0.045)
    result = bisect(len(levels), compare)
    assert (0, 3, 1) in calls and (0, 3, 2) in calls  # a second attempt, as before
    assert result.undecided[0] == (0, 3, "inconclusive -5.0 % [-9.5, -0.5]")
    assert result.exit_code == UNDECIDABLE


def test_a_half_clear_of_a_regression_beyond_the_margin_needs_no_second_attempt():
    """The two-step bisection on the VM (12 builds, first bad r03 and r08): r09-r12 (copies
    of one build) measured +2.7 % [-1.5, +6.8] after 60 rounds, -0.3 % [-4.9, +4.3] after 120,
    reported undecided: 14 of 32 minutes. An interval above minus the margin excludes the
    regression looked for; only a progression could hide there. Here the builds after the
    second culprit (7..11) measure so."""
    levels = [100.0] * 2 + [90.0] * 5 + [80.0] * 5

    def compare_with(margin_pct: float | None):
        base, calls = simulated(levels, margin=0.03, noise=0.02)

        def compare(a: int, b: int, attempt: int) -> Outcome:
            if (a, b) == (7, 11) and attempt == 1:
                calls.append((a, b, attempt))
                return Outcome(a, b, "inconclusive", 2.7, -1.5, 6.8, rounds=60, minutes=4.7)
            return base(a, b, attempt)
        return compare, calls

    compare, calls = compare_with(3.0)
    result = bisect(len(levels), compare, margin_pct=3.0, inside=0)
    assert sorted((c.good, c.bad) for c in result.culprits) == [(1, 2), (6, 7)]
    assert (7, 11, 1) in calls and (7, 11, 2) not in calls and result.undecided == []
    assert (7, 11, "clear") in result.coverage() and result.exit_code == CULPRIT
    _assert_covered(result, len(levels))
    compare, calls = compare_with(None)  # without the margin: a second attempt, as before
    bisect(len(levels), compare)
    assert (7, 11, 2) in calls


def test_ends_clear_of_a_regression_beyond_the_margin_are_no_culprit():
    def compare(a: int, b: int, attempt: int) -> Outcome:
        return Outcome(a, b, "inconclusive", 0.5, -2.2, 3.2, rounds=60, minutes=4.6)

    assert bisect(8, compare, margin_pct=3.0).exit_code == NO_CULPRIT
    assert bisect(8, compare).exit_code == UNDECIDABLE  # without a margin, as before
    slower = Outcome(0, 7, "inconclusive", -1.0, -3.5, 1.5, rounds=60, minutes=4.6)
    assert bisect(8, lambda a, b, attempt: slower, margin_pct=3.0).exit_code == UNDECIDABLE
    measured = Outcome(0, 7, "inconclusive", 0.5, -2.6, 4.0, rounds=60, minutes=4.6)
    assert bisect(8, lambda a, b, attempt: measured, margin_pct=3.0).exit_code == NO_CULPRIT


def test_a_range_that_stays_undecided_beside_a_culprit_is_reported_and_the_exit_says_so():
    levels = [100.0] * 4 + [94.0] * 4
    compare, _ = simulated(levels, failed={(4, 7)}, margin=0.01)  # both builds ran before
    result = bisect(len(levels), compare)
    assert [(c.good, c.bad) for c in result.culprits] == [(3, 4)]
    assert result.undecided == [(4, 7, "not proven clear: failed: nginx did not start")]
    assert result.exit_code == CULPRIT_AND_UNDECIDED  # a culprit never hides an undecided range
    assert not result.skipped  # 4 and 7 ran in other comparisons: not the builds' fault
    compare, _ = simulated([100.0, 100.0, 99.0, 99.0], noise=0.02)  # a 1 % step in 2 % noise
    result = bisect(4, compare)
    assert result.exit_code == UNDECIDABLE and result.undecided[0][:2] == (0, 3)


def test_a_step_spread_over_the_range_is_not_pinned_on_one_build():
    levels = [100.0, 99.4, 98.8, 98.2, 97.6]  # 0.6 % per build, 2.4 % over the range
    compare, _ = simulated(levels, margin=0.01, noise=0.001)
    result = bisect(len(levels), compare)
    assert result.culprits == [] and result.exit_code == UNDECIDABLE
    assert "spread over several builds" in result.undecided[0][2]


def test_builds_that_cannot_be_made_are_skipped_like_git_bisect_skip():
    levels = [100.0] * 5 + [95.0] * 3
    compare, calls = simulated(levels)
    broken = {4, 3}
    result = bisect(len(levels), compare, available=lambda i: i not in broken)
    assert [(c.good, c.bad, c.skipped) for c in result.culprits] == [(2, 5, (3, 4))]
    assert sorted(result.unbuildable) == [3, 4]
    assert all(3 not in call[:2] and 4 not in call[:2] for call in calls)
    with pytest.raises(ValueError, match="build 0 .* could not be made"):
        bisect(3, compare, available=lambda i: i != 0)
    with pytest.raises(ValueError, match="at least two builds"):
        bisect(1, compare)


def test_a_build_that_does_not_run_is_skipped_and_the_search_goes_on_around_it():
    levels = [100.0] * 4 + [94.0] * 4
    compare, calls = simulated(levels, broken={3})
    result = bisect(len(levels), compare)
    # build 3 is good but does not start: the step is somewhere in 2..4, as git bisect skip
    assert [(c.good, c.bad, c.skipped) for c in result.culprits] == [(2, 4, (3,))]
    assert result.skipped == {3: "did not run: failed: nginx did not start"}
    assert result.exit_code == CULPRIT and not result.undecided
    _assert_covered(result, len(levels))
    compare, calls = simulated(levels, broken={4})  # the first bad build itself
    result = bisect(len(levels), compare)
    assert [(c.good, c.bad, c.skipped) for c in result.culprits] == [(3, 5, (4,))]
    assert list(result.skipped) == [4] and result.exit_code == CULPRIT
    assert sum(4 in call[:2] for call in calls) == 1  # tried once, then left alone
    for broken in range(1, 15):  # anywhere in a longer range: the culprit is still named
        levels = [100.0] * 9 + [92.0] * 7
        compare, calls = simulated(levels, broken={broken}, margin=0.03)
        result = bisect(len(levels), compare, margin_pct=3.0)
        (culprit,) = result.culprits
        assert culprit.good < 9 <= culprit.bad and set(culprit.skipped) <= {broken}, broken
        assert result.exit_code == CULPRIT, broken


@pytest.mark.parametrize("first, second", [(2, 5), (3, 9), (6, 13), (12, 14), (1, 15)])
@pytest.mark.parametrize("sizes", [(92.0, 88.32), (88.0, 84.48)])  # -8 then -4, -12 then -4
def test_a_second_step_is_found_or_its_range_reported_never_passed_over(first, second, sizes):
    levels = [100.0] * first + [sizes[0]] * (second - first) + [sizes[1]] * (16 - second)
    compare, _ = simulated(levels, margin=0.03, noise=0.005)
    result = bisect(16, compare, margin_pct=3.0)
    assert sorted((c.good, c.bad) for c in result.culprits) == [(first - 1, first),
                                                                (second - 1, second)]
    assert result.exit_code == CULPRIT
    _assert_covered(result, 16)
    # with wide intervals (+-4.5 %), the -4 % step cannot be decided: its range is named
    compare, _ = simulated(levels, margin=0.03, noise=0.045)
    result = bisect(16, compare, margin_pct=3.0)
    _assert_covered(result, 16)
    assert any(c.good < first <= c.bad for c in result.culprits)
    assert any(a < second <= b for a, b, _ in result.undecided), result.undecided
    assert result.exit_code == CULPRIT_AND_UNDECIDED


def test_two_attempts_that_disagree_leave_a_range_undecided_not_clear():
    levels = [100.0] * 4 + [92.0] * 4
    base, calls = simulated(levels, margin=0.03, noise=0.005)

    def compare(a: int, b: int, attempt: int) -> Outcome:
        if (a, b) == (4, 7):  # the stretch after the culprit: slower, then "no change"
            calls.append((a, b, attempt))
            return (Outcome(a, b, "inconclusive", -3.3, -5.6, -1.3, rounds=60) if attempt == 1
                    else Outcome(a, b, "no change", 0.4, -2.4, 2.9, rounds=30, attempt=2))
        return base(a, b, attempt)

    result = bisect(len(levels), compare, margin_pct=3.0)
    assert [(c.good, c.bad) for c in result.culprits] == [(3, 4)]
    assert result.undecided == [(4, 7, "not proven clear: the attempts disagree: the first "
                                 "showed b slower (inconclusive -3.3 % [-5.6, -1.3]), the "
                                 "second no change +0.4 % [-2.4, +2.9]")]
    assert (4, 7, "clear") not in result.coverage()
    assert result.exit_code == CULPRIT_AND_UNDECIDED


def test_a_stretch_proven_clear_beside_a_culprit_is_confirmed_by_a_second_look():
    """Search 358 of the simulation (steps at 9 and 16): the stretch 9 -> 16, which holds a
    -4 % step, measured "no change" -0.4 % [-2.9, +2.3] after 20 rounds."""
    levels = [100.0] * 9 + [88.0] * 7 + [84.5]
    base, calls = simulated(levels, margin=0.03, noise=0.005)
    seen: list[int] = []

    def compare(a: int, b: int, attempt: int) -> Outcome:
        if (a, b) == (9, 16) and not seen:
            seen.append(1)
            calls.append((a, b, attempt))
            return Outcome(a, b, "no change", -0.4, -2.9, 2.3, rounds=20)
        return base(a, b, attempt)

    result = bisect(len(levels), compare, margin_pct=3.0)
    assert calls.count((9, 16, 1)) == 2  # the look, and its confirmation
    assert sorted((c.good, c.bad) for c in result.culprits) == [(8, 9), (15, 16)]
    assert result.exit_code == CULPRIT and (9, 16, "clear") not in result.coverage()
    _assert_covered(result, len(levels))

    looks: list[int] = []

    def undecided_second(a: int, b: int, attempt: int) -> Outcome:
        if (a, b) != (9, 16):
            return base(a, b, attempt)
        looks.append(attempt)
        if len(looks) == 1:
            return Outcome(a, b, "no change", -0.4, -2.9, 2.3, rounds=20)
        return Outcome(a, b, "inconclusive", -2.0, -4.4, 0.5, rounds=60 * attempt,
                       attempt=attempt)

    result = bisect(len(levels), undecided_second, margin_pct=3.0)
    assert looks == [1, 1, 2]  # the look; the confirmation and its second attempt
    assert (9, 16, "not proven clear: the confirmation did not clear it (inconclusive -2.0 % "
            "[-4.4, +0.5]) where the first comparison did (no change -0.4 % [-2.9, +2.3])") \
        in result.undecided
    assert result.exit_code == CULPRIT_AND_UNDECIDED


def test_ends_whose_attempts_disagree_are_undecided_not_no_culprit():
    def compare(a: int, b: int, attempt: int) -> Outcome:
        return (Outcome(a, b, "inconclusive", -3.3, -5.6, -1.3, rounds=60) if attempt == 1
                else Outcome(a, b, "no change", 0.4, -2.4, 2.9, rounds=30, attempt=2))

    result = bisect(8, compare, margin_pct=3.0)
    assert result.exit_code == UNDECIDABLE
    assert result.undecided[0][2].startswith("the ends: the attempts disagree: ")


def test_culprits_that_do_not_account_for_the_ends_leave_the_range_undecided():
    # a -4 % step at build 6 that the stretch 4 -> 7 wrongly measured "no change"
    levels = [100.0] * 4 + [88.0] * 2 + [84.5] * 2
    base, _ = simulated(levels, margin=0.03, noise=0.005)

    def compare(a: int, b: int, attempt: int) -> Outcome:
        if (a, b) == (4, 7):
            return Outcome(a, b, "no change", -0.5, -2.9, 1.9, rounds=20)
        return base(a, b, attempt)

    result = bisect(len(levels), compare, margin_pct=3.0, inside=0)
    assert [(c.good, c.bad) for c in result.culprits] == [(3, 4)]  # -12.0 % [-12.5, -11.5]
    assert result.undecided == [(0, 7, "the culprits found (-12.0 % [-12.5, -11.5] together) "
                                 "do not account for the ends' -15.5 % [-16.0, -15.0]: "
                                 "another step may be in a stretch judged clear")]
    assert result.exit_code == CULPRIT_AND_UNDECIDED


def test_a_change_no_part_of_a_range_shows_leaves_that_whole_range_undecided():
    levels = [100.0] * 3 + [97.5] * 3 + [95.0] * 3  # two 2.5 % steps: each within 3 %
    compare, _ = simulated(levels, margin=0.03, noise=0.002)
    result = bisect(len(levels), compare, margin_pct=3.0)
    assert result.culprits == [] and result.exit_code == UNDECIDABLE
    (low, high, why), = result.undecided
    assert (low, high) == (0, 8)  # the range that changed, not the last pair looked at
    assert why.startswith("0 -> 8 changed (-5.0 % [-5.2, -4.8]), but no part of it shows the "
                          "change")


def test_the_chain_of_ratios_follows_the_comparisons_from_the_first_build():
    levels = [100.0] * 2 + [90.0] * 2
    compare, _ = simulated(levels, noise=0.0)
    result = bisect(4, compare)
    chain = chained_ratios(result, 4)
    assert chain[0] == (1.0, 1.0, 1.0)
    assert chain[3][0] == pytest.approx(0.9) and chain[1][0] == pytest.approx(1.0)
    doc = as_json(result, ["r0", "r1", "r2", "r3"], {"title": "t", "topology": "3node",
                                                     "test": "ssl_proxy/x", "metric": "rps"})
    assert doc["status"] == "culprit found" and doc["exit_code"] == CULPRIT
    assert doc["culprits"][0] | {"rounds": 0} == {
        "last_good": "r1", "first_bad": "r2", "direction": "regression",
        "change_pct": pytest.approx(-10.0), "low_pct": pytest.approx(-10.0),
        "high_pct": pytest.approx(-10.0), "rounds": 0, "skipped_between": []}
    again = Bisection(comparisons=[Outcome(0, 1, "inconclusive", 0.1, -3.9, 4.9, 30),
                                   Outcome(0, 1, "no change", 0.1, -2.3, 2.6, 60, attempt=2)])
    assert chained_ratios(again, 2)[1][1:] == pytest.approx((0.977, 1.026))  # the last attempt
    page = as_html(doc)
    assert "last good <code>r1</code> and first bad <code>r2</code>" in page
    assert page.count("<tr>") == 1 + len(result.comparisons)


# -- the builds file ----------------------------------------------------------------------------


@pytest.fixture
def topology():
    return load_topology("3node")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "builds.yaml"
    path.write_text(text)
    return path


def test_a_template_over_revisions_makes_one_side_per_revision(tmp_path, topology):
    builds = load_builds(_write(tmp_path, """
template: {tools: {dut: {nginx: "/opt/nginx-{rev}/sbin/nginx"}}}
revisions: [a1, b2, c3]
build: "make PREFIX=/opt/nginx-{rev}"
"""), topology)
    assert builds.names == ["a1", "b2", "c3"] and builds.title == "a1..c3"
    assert builds.sides[1].tools == {"dut": {"nginx": "/opt/nginx-b2/sbin/nginx"}}
    assert builds.build == "make PREFIX=/opt/nginx-{rev}"


@pytest.mark.parametrize(("text", "expected"), [
    ("builds: [{name: a}]", "at least two builds"),
    ("builds: [{name: a, nginx: {proxy: {server: ['x 1;']}}}, {name: b, nginx: {proxy: "
     "{server: ['x 1;']}}}]", "builds a and b change the same things"),
    ("builds: [{name: a}, {name: a, sysctl: {dut: {net.core.rmem_max: 1}}}]",
     "build name 'a' is used twice"),
    ("builds: [{name: a}, {name: b, tools: {nowhere: {nginx: /x}}}]",
     "builds.1.tools.nowhere: no node 'nowhere'"),
    ("template: {tools: {dut: {nginx: '/x-{rev}'}}}", "needs revisions"),
    ("revisions: [a]", "either builds"),
    ("builds: [{name: a}, {name: b, colour: red}]", "colour"),
    ("- a\n- b", "expected a mapping"),
    ("template: {tools: {dut: {nginx: /x-{rev}/nginx}}}\nrevisions: [a]",
     'a string holding {rev} must be quoted: {nginx: "/opt/nginx-{rev}/sbin/nginx"}'),
])
def test_a_bad_builds_file_is_refused_naming_file_and_key(tmp_path, topology, text, expected):
    with pytest.raises(TopologyError, match="builds.yaml") as error:
        load_builds(_write(tmp_path, text), topology)
    assert expected in str(error.value)


def test_local_binaries_must_exist_and_answer_their_version_command(tmp_path, topology):
    silent = tmp_path / "nginx-silent"
    silent.write_text("#!/bin/sh\necho hello\n")
    silent.chmod(0o755)
    builds = load_builds(_write(tmp_path, f"""
builds:
  - {{name: good, tools: {{dut: {{nginx: {shutil.which('nginx') or '/usr/sbin/nginx'}}}}}}}
  - {{name: missing, tools: {{dut: {{nginx: {tmp_path}/none/nginx}}}}}}
  - {{name: silent, tools: {{dut: {{nginx: {silent}}}}}}}
"""), topology)
    problems, missing = check_builds(builds, topology)
    assert len(problems) == 2, problems
    assert missing == set()  # no build command: missing is a problem, not a build to make
    assert f"build missing: dut.nginx {tmp_path}/none/nginx: no such file" in problems[0]
    assert "build silent: dut.nginx" in problems[1] and "does not answer" in problems[1]
    assert "hello" in problems[1]


def test_a_build_command_makes_a_missing_build_and_a_failed_one_is_named(tmp_path, topology):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    builds = load_builds(_write(tmp_path, f"""
template: {{tools: {{dut: {{nginx: "{tmp_path}/{{rev}}/nginx"}}}}}}
revisions: [r1, r2, bad]
build: "test {{rev}} != bad && mkdir -p {tmp_path}/{{rev}} &&
        ln -s {nginx} {tmp_path}/{{rev}}/nginx"
"""), topology)
    assert check_builds(builds, topology) == ([], {0, 1, 2})  # missing, but can be made
    assert make_build(builds, 1, tmp_path / "logs" / "r2.log") is None
    assert local_problems(builds.sides[1]) == []
    why = make_build(builds, 2, tmp_path / "logs" / "bad.log")
    assert why is not None and why.startswith("build command exited 1 (log ")


def test_a_build_that_times_out_is_stopped_with_everything_it_started(tmp_path, topology):
    builds = load_builds(_write(tmp_path, f"""
template: {{tools: {{dut: {{nginx: "{tmp_path}/{{rev}}/nginx"}}}}}}
revisions: [r1, r2]
build: "sh -c 'echo $$ > {tmp_path}/{{rev}}.make; exec sleep 60' & wait"
build_timeout: 1
"""), topology)
    why = make_build(builds, 0, tmp_path / "logs" / "r1.log")
    assert why is not None and why.startswith("build command timed out after 1 s")
    make = int((tmp_path / "r1.make").read_text())
    assert not pid_alive(make), "the build's child (its make) was left running"


HOSTILE = ["a;touch PWNED", "$(touch PWNED)", "two words", "`touch PWNED`", "x'y",
           "r1; $(touch PWNED) and spaces"]


@pytest.mark.parametrize("rev", HOSTILE)
def test_a_revision_with_shell_syntax_is_refused_before_anything_runs(tmp_path, topology, rev):
    text = (f'template: {{tools: {{dut: {{nginx: "{tmp_path}/{{rev}}/nginx"}}}}}}\n'
            f"revisions: [r1, {json.dumps(rev)}]\nbuild: \"echo {{rev}} > {tmp_path}/out\"\n")
    with pytest.raises(TopologyError, match="not shell syntax") as error:
        load_builds(_write(tmp_path, text), topology)
    assert repr(rev) in str(error.value)
    without_build = text.rsplit("build:", 1)[0]  # no command: the name is only a path part
    assert load_builds(_write(tmp_path, without_build), topology).names[1] == rev


@pytest.mark.parametrize("rev", HOSTILE)
def test_a_revision_reaches_the_build_command_as_one_quoted_word(tmp_path, rev):
    """Even a name the builds file would refuse runs as no shell syntax: one argument."""
    out = tmp_path / "argv"
    builds = Builds("b.yaml", "t", (Side(name="r1"), Side(name=rev)),
                    f"printf '%s\\n' {{rev}} > {out}", 60.0)
    assert build_command("make REV={rev}", "a1b2c3d") == "make REV=a1b2c3d"
    why = make_build(builds, 1, tmp_path / "logs" / "b.log")
    assert why is None or "build command exited" not in why, why
    assert out.read_text() == rev + "\n"  # one word, as given
    assert not list(tmp_path.glob("PWNED")) and not (REPO / "PWNED").exists()


# -- one comparison's record ------------------------------------------------------------------


def _record(folder: Path, name: str, metrics: dict, rounds: int = 20, invalid=None,
            profile=None) -> None:
    run = folder / "20261126-010000-abcd"
    run.mkdir(parents=True)
    record = json.loads((Path(__file__).parent / "fixtures" / "records" /
                         "ab_record.json").read_text())
    record.update(name=name)
    if profile:
        record.setdefault("evidence", {})["profile"] = profile
    record["ab"]["metrics"] = metrics
    record["ab"]["rounds"]["run"] = rounds
    if invalid:
        record["invalid"] = invalid
    (run / "records.jsonl").write_text(json.dumps(record) + "\n")


def test_the_followed_metrics_verdict_is_read_from_the_record(tmp_path):
    entry = {"direction": "higher_is_better", "ratios": [0.95, 0.96], "change": 0.955,
             "change_pct": -4.5, "low": 0.94, "high": 0.97, "level": 0.95,
             "verdict": "regression", "method": "Hodges-Lehmann"}
    _record(tmp_path, "1kb-10c-kernel-ssl-proxy",
            {"rps": entry, "proxy_direct_ratio": {**entry, "verdict": "no change"}})
    outcome = read_outcome(tmp_path, "1kb-10c-kernel-ssl-proxy", None, 2, 3, 1, 2.5, 0)
    assert (outcome.verdict, outcome.rounds, outcome.a, outcome.b) == ("regression", 20, 2, 3)
    assert outcome.change_pct == -4.5
    assert outcome.low_pct == pytest.approx(-6.0) and outcome.high_pct == pytest.approx(-3.0)
    other = read_outcome(tmp_path, "1kb-10c-kernel-ssl-proxy", "proxy_direct_ratio", 2, 3, 1,
                         2.5, 0)
    assert other.verdict == "no change"
    assert outcome.detail == f"rps (see {tmp_path})"  # no profile, nothing said of one
    missing = read_outcome(tmp_path, "1kb-10c-kernel-ssl-proxy", "latency", 2, 3, 1, 2.5, 0)
    assert missing.verdict == "failed" and "metric 'latency' not compared" in missing.detail


def test_metric_cost_follows_the_cost_the_test_judged_whatever_its_prefix(tmp_path):
    entry = {"direction": "higher_is_better", "ratios": [0.99, 1.0], "change": 0.995,
             "change_pct": -0.5, "low": 0.94, "high": 1.04, "level": 0.95,
             "verdict": "inconclusive", "method": "Hodges-Lehmann"}
    cost = {**entry, "direction": "lower_is_better", "change": 1.077, "change_pct": 7.7,
            "low": 1.051, "high": 1.102, "verdict": "regression", "cost": True}
    _record(tmp_path, "t", {"traced_rps": entry, "traced_cost": cost})
    outcome = read_outcome(tmp_path, "t", "cost", 0, 1, 1, 1.0, 0)
    assert (outcome.verdict, outcome.change_pct) == ("regression", 7.7)
    assert outcome.detail.startswith("traced_cost")
    assert read_outcome(tmp_path, "t", None, 0, 1, 1, 1.0, 0).verdict == "inconclusive"


def test_a_comparison_with_profiles_says_where_b_spends_more(tmp_path):
    entry = {"direction": "higher_is_better", "ratios": [0.91, 0.92], "change": 0.91,
             "change_pct": -9.0, "low": 0.88, "high": 0.94, "level": 0.95,
             "verdict": "regression", "method": "Hodges-Lehmann"}
    changes = [{"function": "ngx_http_parse_request_line", "a_pct": 0.0, "b_pct": 3.1,
                "points": 3.1},
               {"function": "aesni_gcm_encrypt", "a_pct": 20.0, "b_pct": 12.5, "points": -7.5},
               {"function": "ngx_palloc", "a_pct": 0.5, "b_pct": 5.3, "points": 4.8}]
    _record(tmp_path, "t", {"rps": entry},
            profile={"diff": {"changes": changes, "grown": changes[2]}})
    outcome = read_outcome(tmp_path, "t", None, 0, 1, 1, 1.0, 0)
    assert outcome.detail == ("rps; profile: b spends a larger share of the DUT's CPU in "
                              f"ngx_palloc (0.5 % -> 5.3 %) (see {tmp_path})")  # an old record
    hint = {"kind": "noise", "text": "no function changed beyond noise (2,490 and 2,505 "
            "samples, 45 frames)"}
    again = tmp_path / "new"
    _record(again, "t", {"rps": entry},
            profile={"diff": {"changes": changes, "grown": changes[2], "hint": hint}})
    outcome = read_outcome(again, "t", None, 0, 1, 1, 1.0, 0)
    assert outcome.detail == ("rps; profile: no function changed beyond noise (2,490 and "
                              f"2,505 samples, 45 frames) (see {again})")


def test_a_run_without_a_record_fails_the_comparison_with_the_tests_message(tmp_path):
    run = tmp_path / "20261126-010000-abcd"
    run.mkdir()
    (run / "tests.jsonl").write_text(json.dumps(
        {"name": "t", "status": "FAIL", "message": "A/B: b.tools.dut.nginx does not answer"})
        + "\n")
    outcome = read_outcome(tmp_path, "t", None, 0, 1, 1, 0.3, 1)
    assert outcome.verdict == "failed"
    assert "no A/B record (robot exit 1): FAIL: A/B: b.tools.dut.nginx does not answer" in \
        outcome.detail


def test_an_invalid_side_fails_the_comparison(tmp_path):
    entry = {"direction": "higher_is_better", "ratios": [1.0], "change": 1.0, "change_pct": 0.0,
             "low": 0.99, "high": 1.01, "level": 0.95, "verdict": "no change",
             "method": "Hodges-Lehmann"}
    _record(tmp_path, "t", {"rps": entry}, invalid=["b: wrk errors 12"])
    outcome = read_outcome(tmp_path, "t", None, 0, 1, 1, 1.0, 1)
    assert outcome.verdict == "failed"
    assert outcome.detail.startswith("a side's result is invalid: ['b: wrk errors 12']")


# -- the command --------------------------------------------------------------------------------


def test_a_test_is_found_by_name_case_and_name_or_test_id():
    by_name = find_test("1kb-10c-kernel-ssl-proxy")
    assert (by_name.case, by_name.source.name) == ("ssl_proxy", "kernel.robot")
    assert find_test("3node/tcp_term/1s-kernel-tcp-term").case == "tcp_term"
    with pytest.raises(ValueError, match="unknown test 'tcp_term/1kb-10c-kernel-ssl-proxy'"):
        find_test("tcp_term/1kb-10c-kernel-ssl-proxy")


@pytest.mark.parametrize(("args", "says"), [
    (["--test", "no-such-test"], "unknown test 'no-such-test'"),
    (["--topology", "nowhere"], "nowhere"),
    (["--builds", "/nonexistent/builds.yaml"], "cannot read the builds file"),
])
def test_bad_input_exits_2_before_anything_is_measured(tmp_path, capsys, args, says):
    builds = _write(tmp_path, f"builds: [{{name: a}}, {{name: b, tools: {{dut: {{nginx: "
                              f"{tmp_path}/missing}}}}}}]")
    base = {"--topology": "3node", "--test": "1kb-10c-kernel-ssl-proxy",
            "--builds": str(builds), "--results": str(tmp_path / "out")}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    code = bisect_command.main([item for pair in base.items() for item in pair])
    assert code == 252
    assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("extra", "says"), [
    (["--margin", "0"], "--margin a percentage in (0, 100)"),
    (["--", "-v", "AB_MARGIN:2"], "give the A/B margin with --margin, not -v AB_MARGIN"),
])
def test_the_margin_is_given_once_and_as_a_percentage(tmp_path, capsys, extra, says):
    builds = _write(tmp_path, 'builds:\n  - {name: r1}\n  - {name: r2, nginx: {proxy: {server: '
                              '["access_log /dev/null combined;"]}}}\n')
    code = bisect_command.main(["--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                                "--builds", str(builds), "--results",
                                str(tmp_path / "out"), *extra])
    assert code == 252 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("extra", "says"), [
    (["--max-rounds", "200"], "--max-rounds 200 --budget 600: the second attempt of a "
     "comparison (400 rounds, 1200 s) could not decide: -v AB_LOOK:10: the first look cannot "
     "decide"),
    (["--max-rounds", "200"], "give --max-rounds at most 125"),
    (["--max-rounds", "60", "--", "-v", "AB_LOOK:9"], "(120 rounds, 1200 s) could not decide: "
     "-v AB_LOOK:9: the first look cannot decide"),
    (["--max-rounds", "60", "--", "-v", "AB_LOOK:9"], "give --max-rounds at most 54"),
    (["--budget", "30", "--", "-v", "DURATION:2"], "the first attempt of a comparison (60 "
     "rounds, 30 s) could not decide: -v AB_BUDGET:30 with -v DURATION:2"),
])
def test_settings_whose_attempts_could_not_decide_are_refused_naming_the_option(
        tmp_path, capsys, extra, says):
    builds = _write(tmp_path, 'builds:\n  - {name: r1}\n  - {name: r2, nginx: {proxy: {server: '
                              '["access_log /dev/null combined;"]}}}\n')
    code = bisect_command.main(["--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                                "--builds", str(builds), "--results",
                                str(tmp_path / "out"), *extra])
    assert code == 252 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert bisect_command.attempts_problems(125, 600, 3, []) == []  # the limit itself is fine


def test_the_help_lists_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        bisect_command.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for code, meaning in EXIT_CODES.items():
        assert f"{code} {' '.join(meaning.split())}" in shown, code
    assert set(EXIT_CODES) == {0, 252, 3, 4, 5}
    assert all(f"    {code} " in bisect_command.__doc__ for code in EXIT_CODES)


def test_the_page_and_json_name_undecided_ranges_and_skipped_builds_with_why():
    levels = [100.0] * 4 + [94.0] * 4
    compare, _ = simulated(levels, failed={(4, 7)}, broken={3})
    result = bisect(len(levels), compare)
    doc = as_json(result, [f"r{i}" for i in range(8)], {"title": "t", "topology": "3node",
                                                         "test": "ssl_proxy/x", "metric": "rps"})
    assert (doc["exit_code"], doc["status"]) == (5, "culprit found, ranges undecided")
    assert doc["exit_meaning"].startswith("culprit found, but some ranges stayed undecided")
    assert doc["skipped"] == [{"build": "r3", "why": "did not run: failed: nginx did not start"}]
    assert doc["undecided"] == [{"from": "r4", "to": "r7",
                                 "why": "not proven clear: failed: nginx did not start"}]
    page = as_html(doc)
    assert "skipped build <code>r3</code>: did not run: failed: nginx did not start" in page
    assert "undecided between <code>r4</code> and <code>r7</code>" in page
    assert "exit code 5:\nculprit found, but some ranges stayed undecided" in page


def test_a_missing_binary_without_a_build_command_exits_252(tmp_path, capsys):
    builds = _write(tmp_path, f"builds: [{{name: a}}, {{name: b, tools: {{dut: {{nginx: "
                              f"{tmp_path}/missing}}}}}}]")
    code = bisect_command.main(["--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                                "--builds", str(builds), "--results", str(tmp_path / "out")])
    assert code == 252
    assert f"build b: dut.nginx {tmp_path}/missing: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


FAKE_ROBOT = r'''
import json, sys, pathlib, yaml
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-d") + 1])
given = dict(value.split(":", 1) for flag, value in zip(args, args[1:]) if flag == "-v")
comparison = yaml.safe_load(pathlib.Path(given["AB"]).read_text())
(out / "argv.json").write_text(json.dumps({"args": args, "comparison": comparison}))
record = json.loads(pathlib.Path(sys.argv[1]).read_text())
record["name"] = args[args.index("-t") + 1]
record["ab"]["rounds"]["run"] = int(given["AB_MAX_ROUNDS"])
(out / "20261126-010000-abcd").mkdir()
(out / "20261126-010000-abcd" / "records.jsonl").write_text(json.dumps(record) + "\n")
'''


def test_each_comparison_is_a_robot_ab_run_of_the_test_with_the_two_builds(tmp_path, topology):
    script = tmp_path / "robot.py"
    script.write_text(FAKE_ROBOT)
    builds = load_builds(_write(tmp_path, """
builds:
  - {name: r1}
  - {name: r2, nginx: {proxy: {server: ["access_log /dev/null combined;"]}}}
"""), topology)
    fixture = Path(__file__).parent / "fixtures" / "records" / "ab_record.json"
    runs = RobotComparisons(topology="3node", test=find_test("1kb-10c-kernel-ssl-proxy"),
                            builds=builds, out=tmp_path / "out", max_rounds=10, budget_s=120,
                            extra=("-v", "DURATION:2"),
                            robot=(sys.executable, str(script), str(fixture)))
    first, second = runs(0, 1, 1), runs(0, 1, 2)
    assert (first.verdict, first.rounds, second.rounds) == ("no change", 10, 20)
    assert first.change_pct == pytest.approx(-0.0869, abs=1e-3)  # the fixture's A/A figure
    seen = json.loads((runs.made[1] / "argv.json").read_text())
    args = seen["args"]
    assert args[args.index("-t") + 1] == "1kb-10c-kernel-ssl-proxy"
    assert args[-1].endswith("tests/ssl_proxy")
    for pair in ("AB_MAX_ROUNDS:20", "AB_BUDGET:240", "AB_MARGIN:3", "AB_INCONCLUSIVE:pass",
                 "TREND_STORE:NONE", "DURATION:2", "TOPOLOGY:3node"):
        assert pair in args
    assert seen["comparison"]["a"] == {"name": "r1"}
    assert seen["comparison"]["b"] == {
        "name": "r2", "nginx": {"proxy": {"server": ["access_log /dev/null combined;"]}}}
    assert [p.name for p in runs.made] == ["01-r1-vs-r2", "02-r1-vs-r2"]


STUBBORN = r'''
import signal, sys, time
seen = []
def handler(signum, frame):
    seen.append(signum)
    print(f"signal {len(seen)}", flush=True)
    if len(seen) == 2:
        sys.exit(253)
signal.signal(signal.SIGINT, handler)
print("running", flush=True)
while True:
    time.sleep(0.05)
'''


def test_a_run_past_its_time_gets_ctrl_c_twice_as_a_person_would(tmp_path, monkeypatch):
    monkeypatch.setattr(comparison_run, "STOP_GRACE_S", 0.5)
    script = tmp_path / "robot.py"
    script.write_text(STUBBORN)
    with (tmp_path / "console.log").open("w") as console:
        # 3 s: a Python that starts slowly on a busy machine has its handler in place first
        answer = comparison_run.run_robot([sys.executable, str(script)], console, timeout=3.0)
    assert answer == "timed out after 3 s and was stopped"
    assert (tmp_path / "console.log").read_text().split() == [
        "running", "signal", "1", "signal", "2"]


def test_each_comparison_is_said_as_it_starts_and_as_it_ends():
    """Issue 63: a bisection ran its comparisons for minutes with no line between its first
    and its result; each now says its builds, then its verdict, interval, rounds and time."""
    levels = [100.0] * 3 + [95.0] * 5
    compare, calls = simulated(levels)
    said: list[str] = []
    names = [f"r{i}" for i in range(len(levels))]
    result = bisect(len(levels), bisect_command.announced(compare, names, said.append))
    assert len(said) == 2 * len(calls) == 2 * len(result.comparisons)
    a, b, _attempt = calls[0]
    assert said[0] == f"comparison 1: r{a} vs r{b}: running"
    assert said[1].startswith(f"comparison 1: r{a} vs r{b}: regression -5.0 % [")
    assert said[1].endswith("] after 10 rounds, 2.0 min")
    culprit = result.culprits[0].outcome
    assert any(f": r{culprit.a} vs r{culprit.b}: regression" in line for line in said)
    failed = Outcome(0, 1, "failed", detail="robot exit 252: no record")
    assert failed.describe() == "failed, 0.0 min: robot exit 252: no record"
