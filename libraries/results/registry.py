"""Every ``-v`` setting the project reads, in one table: its default as a user writes it, what
it accepts, what it means and where it is checked (:data:`SETTINGS`). The documentation's
settings reference is drawn from it (:func:`markdown_table`), and ``utest/test_registry.py``
fails when code, a resource or a suite reads a setting missing here, or when an entry here is
read by nobody. Pure data: nothing is parsed here (that is :mod:`libraries.results.settings`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One Robot variable a run is given as ``-v NAME:value``."""

    name: str
    """The Robot variable, e.g. ``TRIALS`` (``-v TRIALS:5``)."""
    default: str
    """As a user writes it: ``5``, ``(none)``, ``2 x TRIALS, at least 5``."""
    accepted: str
    """What a value may be: ``an integer >= 1``, ``yes/no``, ``p99<=10ms[,p50<=2ms]``."""
    meaning: str
    """One or two sentences."""
    checked: str
    """Where it is checked, and when."""
    area: str
    """``testbed``, ``trials``, ``judging``, ``run``, ``A/B``, ``profiles``, ``capacity``."""


_MEASURE = "suite set-up (Check Measurement Settings): libraries.results.settings"
_AB = ("suite set-up (Check Measurement Settings, then Set Up A/B Comparison), A/B runs "
       "only: libraries.ab.settings.ab_settings_from_variables")
_CAPACITY = ("suite set-up (Check Measurement Settings), suites with capacity tests: "
             "libraries.capacity.settings.capacity_settings_from_variables")
_PROFILE = ("suite set-up (Check Measurement Settings): "
            "libraries.cases.profile_settings.profile_settings_from_variables")
_SWITCH = "yes/no (also true/false, on/off, 1/0; any case)"

SETTINGS: tuple[Setting, ...] = (
    # -- testbed ------------------------------------------------------------------------------
    Setting("TOPOLOGY", "3node", "a topology name (topologies/<name>.yaml) or a path to a "
            "topology file", "The testbed the suites run on: built on this machine "
            "(provision: netns) or reached over SSH (a real lab).",
            "suite set-up (Check Measurement Settings, Set Up Testbed): "
            "libraries.testbed.topology_file.load_topology", "testbed"),
    Setting("LAB_POOL", "(none)", "a pabot value-set tag (the nightly's --pool gives "
            "hoststack-lab)", "Take a free lab of a pool shared through pabot's value sets "
            "instead of TOPOLOGY; given by the nightly runner with --pool.",
            "suite set-up (Set Up Suite Testbed -> Set Up Testbed From Lab Pool): "
            "libraries.keywords.pool", "testbed"),
    Setting("POOL_LOG", "(none: not logged)", "a file path", "Where each suite's lab pool "
            "events (acquired, released, taken out) are appended as JSON lines; given by the "
            "nightly runner with --pool.", "when a suite acquires a lab: "
            "libraries.keywords.pool.PoolClient", "testbed"),
    # -- trials -------------------------------------------------------------------------------
    Setting("TRIALS", "5", "an integer >= 1", "Measured trials (rounds) per variant before "
            "the first judgement; 5 is the fewest whose interval decides at ALPHA 0.05.",
            f"{_MEASURE}.parse_settings", "trials"),
    Setting("DURATION", "2", "whole seconds >= 1 (1.5 is refused, not truncated)",
            "Length of each measured trial.", f"{_MEASURE}.parse_settings", "trials"),
    Setting("WARMUP", "1", "whole seconds >= 0", "Length of the warm-up trial each variant "
            "runs before the measured ones (never counted).", f"{_MEASURE}.parse_settings",
            "trials"),
    Setting("MAX_TRIALS", "the topology's budget.max_trials, else 2 x TRIALS (at least the "
            "trials a deciding interval needs at ALPHA)", "an integer >= TRIALS",
            "How many rounds a test may run in all while a criterion stays inconclusive.",
            f"{_MEASURE}.parse_settings", "trials"),
    Setting("MAX_SECONDS", "the topology's budget.max_seconds, else twice the planned "
            "trials' time (never less than MAX_TRIALS rounds at their pace, plus a quarter)",
            "seconds >= TRIALS x DURATION", "How long a test may measure in "
            "all while a criterion stays inconclusive.", f"{_MEASURE}.parse_settings",
            "trials"),
    Setting("ALPHA", "0.05", "a number in (0, 1)", "The intervals' confidence is 1 - ALPHA; "
            "also the A/B verdict's level unless AB_ALPHA is given.",
            f"{_MEASURE}.parse_settings", "trials"),
    # -- judging ------------------------------------------------------------------------------
    Setting("CRITERIA", "topologies/criteria.yaml", "a path to a criteria YAML file",
            "The pass criteria (floors per testbed, portable ratios, correctness checks).",
            "suite set-up (Check Measurement Settings): libraries.results.criteria."
            "load_criteria, against libraries.results.catalogue", "judging"),
    Setting("JUDGE", "all", "all or correctness", "correctness: only correctness criteria "
            "(every trial) and per-trial proofs fail a test; performance bounds and sanity "
            "findings are recorded, not failed on (CI's e2e job).",
            f"{_MEASURE}.parse_judge", "judging"),
    # -- run ----------------------------------------------------------------------------------
    Setting("EXTENDED", "no", _SWITCH, "Run the rows tagged EXTENDED too (kernel twins of "
            "VPP rows, more streams, a counting tracer); the nightly and CI's e2e job do.",
            f"{_MEASURE}.parse_switch; each row: Skip Extended Row Unless Asked", "run"),
    Setting("RUN_ID", "(none: the run names itself YYYYmmdd-HHMMSS-xxxx)", "a run id",
            "Records go straight into the output dir under this id, and the run is not "
            "stored in the history at its end (its caller does that: the nightly).",
            "first suite (the Results library's listener): libraries.keywords.results",
            "run"),
    Setting("TREND_STORE", "<output dir>/history", "a folder, or NONE (not stored)",
            "The history a run that named itself is stored in when it ends (a bisection's "
            "comparisons give NONE).",
            "run end (the Results library's listener): libraries.report.run_end.finish_run",
            "run"),
    # -- A/B ----------------------------------------------------------------------------------
    Setting("AB", "(none: not an A/B run)", "a path to a comparison file (YAML: sides a and "
            "b)", "Every measuring test becomes an A/B test of the file's two sides, in "
            "rounds of random order.", "suite set-up (Set Up A/B Comparison): "
            "libraries.ab.comparison, checked on the nodes by libraries.ab.session", "A/B"),
    Setting("AB_DUET", "(none; given by libraries.ab.duet_run)", "<side>:<fd>, side a or b",
            "This run is one side of a duet: both sides run at once on testbeds of their own, "
            "joined by the launcher's socket pair.", "suite set-up (Set Up A/B Comparison): "
            "libraries.ab.duet_link", "A/B"),
    Setting("AB_MARGIN", "1", "a percentage in [0, 100) (1 or 1%)", "The smallest change "
            "that is a finding: a regression or progression needs the whole interval beyond "
            "+-AB_MARGIN %, no change needs it wholly within.", _AB, "A/B"),
    Setting("AB_LOOK", "10", "whole rounds >= 1, enough for the first look to decide at "
            "ALPHA", "Rounds between looks: the verdict is judged after every AB_LOOK rounds "
            "(Bonferroni-corrected levels).", _AB, "A/B"),
    Setting("AB_MAX_ROUNDS", "60", "whole rounds >= AB_LOOK", "The most rounds an A/B test "
            "runs before it is inconclusive.", _AB, "A/B"),
    Setting("AB_BUDGET", "600", "seconds > 0, at least 2 x WARMUP + 2 x DURATION x AB_LOOK",
            "Seconds the whole A/B measurement of one test may take, switches included.",
            _AB + ".check_ab_plan", "A/B"),
    Setting("AB_INCONCLUSIVE", "skip", "skip, pass or fail", "What an A/B test that no look "
            "decided becomes.", _AB, "A/B"),
    Setting("AB_UNUSED", "skip", "skip or plain", "What a test that uses nothing the sides "
            "set differently does: skip with the reason, or measure it plainly.", _AB, "A/B"),
    Setting("AB_ALPHA", "ALPHA", "a number in (0, 1)", "The A/B verdict's level alone (the "
            "nightly gives each test its share of the night's family-wise level).", _AB,
            "A/B"),
    Setting("AB_SCATTER", "0", "a percentage in [0, 100)", "The night-to-night spread of the "
            "true ratio the verdict tolerates: the interval is widened by it (the nightly "
            "against a reference gives 1).", _AB, "A/B"),
    # -- profiles -----------------------------------------------------------------------------
    Setting("PROFILE", "auto", "auto, on or off (yes/no, true/false, 1/0)", "auto: a "
            "profiling trial per side in A/B runs, none in plain runs; on: every measuring "
            "test; off: none.", _PROFILE, "profiles"),
    Setting("PROFILE_SECONDS", "5", "whole seconds >= 1", "How long perf samples, under the "
            "test's own load, after the measured trials (never counted).",
            _PROFILE, "profiles"),
    # -- capacity -----------------------------------------------------------------------------
    Setting("LATENCY_SLO", "p99<=10ms", "p99<=10ms[,p50<=2ms]; a bare duration (10ms) is "
            "p99<=10ms; units us, ms, s", "The latency goals of a capacity search: the "
            "highest rate where each quantile stays within its limit; the first goal's limit "
            "is the latency pass's yardstick.", _CAPACITY + ", and the latency pass: "
            "libraries.keywords.ssl_proxy", "capacity"),
    Setting("CAPACITY_RANGE", "1000..1000000", "bottom..top in requests/s, positive, top "
            "above bottom", "The rates MLRsearch searches between.", _CAPACITY, "capacity"),
    Setting("CAPACITY_EXCEED_RATIO", "0.5", "a fraction in [0, 1)", "MLRsearch's exceed "
            "ratio: the share of trial time that may miss a goal at a rate still counted as a "
            "lower bound.", _CAPACITY, "capacity"),
    Setting("CAPACITY_TRIAL_DURATION", "0.5..1", "initial..final seconds (final >= initial),"
            " or one duration for both", "MLRsearch's trial durations: short trials first, "
            "the final duration decides.", _CAPACITY, "capacity"),
    Setting("CAPACITY_DURATION_SUM", "8", "seconds >= the final trial duration", "Seconds "
            "of final trials that decide a rate.", _CAPACITY, "capacity"),
    Setting("CAPACITY_WIDTH", "0.02", "a fraction in (0, 1)", "The relative width between "
            "the bounds at which a search stops.", _CAPACITY, "capacity"),
    Setting("CAPACITY_BUDGET", "60", "seconds > 0", "Each search's own time budget (its "
            "trials, overheads included).", _CAPACITY, "capacity"),
    Setting("CAPACITY_CONFIRM", "30", "0 (none) or seconds > 0", "Length of the windows "
            "placed from the knee to confirm the figure over all their requests (0: the knee "
            "is reported unconfirmed).", _CAPACITY, "capacity"),
    Setting("CAPACITY_VERIFY", "0", "0 (none) or seconds > 0", "One more window of this "
            "length at each figure, counted in its miss curve when as long as the others.",
            _CAPACITY, "capacity"),
    Setting("CAPACITY_MISS_SHARE", "0.1", "a fraction in (0, 0.5)", "The figure is the rate "
            "where a window misses a goal with at most this probability (from the windows' "
            "miss curve).", _CAPACITY, "capacity"),
    Setting("CAPACITY_WINDOWS", "12", "an integer >= 6", "Confirmation windows per path.",
            _CAPACITY, "capacity"),
    Setting("CAPACITY_HOLDOUT", "0", "an integer >= 0", "Extra windows at each recorded "
            "figure, never counted in its miss curve: how often a window there misses, "
            "against the curve's interval (a check for benchmarks).", _CAPACITY, "capacity"),
    Setting("CAPACITY_SHARED_CORES", "no", _SWITCH, "Search the capacity of a VPP row even "
            "where VPP's cores are shared with other processes (skipped otherwise), with a "
            "warning naming them.", "the capacity test, stack vpp, plain runs: "
            "libraries.cases.capacity (parse_switch)", "capacity"),
)
"""Every ``-v`` setting, grouped by area in reading order."""


def setting(name: str) -> Setting:
    """The setting called ``name`` (``KeyError`` naming the known ones otherwise)."""
    for entry in SETTINGS:
        if entry.name == name:
            return entry
    raise KeyError(f"no -v setting {name!r}; known: {', '.join(s.name for s in SETTINGS)}")


def areas() -> tuple[str, ...]:
    """The areas in the order :data:`SETTINGS` first names them."""
    return tuple(dict.fromkeys(s.area for s in SETTINGS))


def _cell(text: str) -> str:
    """Safe in a Markdown table cell: ``|`` escaped, ``<name>`` kept as text (not an HTML
    tag that a Markdown renderer would swallow)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def markdown_table(area: str | None = None) -> str:
    """A Markdown table (name, default, accepted, meaning, checked) of the settings of
    ``area`` (every setting when None); ``KeyError`` naming the areas for an unknown one."""
    if area is not None and area not in areas():
        raise KeyError(f"no settings area {area!r}; known: {', '.join(areas())}")
    rows = ["| setting | default | accepted | meaning | checked |", "|---|---|---|---|---|"]
    rows += [f"| `{s.name}` | {_cell(s.default)} | {_cell(s.accepted)} | {_cell(s.meaning)} "
             f"| {_cell(s.checked)} |" for s in SETTINGS if area is None or s.area == area]
    return "\n".join(rows) + "\n"
