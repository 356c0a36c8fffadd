"""Bisection: from "this got slower" to the build that did it, with the A/B engine.

``python -m libraries.bisect`` (:mod:`libraries.bisect.bisect_command`) takes a topology, one test
and an ordered list of builds (:mod:`libraries.bisect.builds`: comparison sides, or a template over
revisions with an optional build command), compares the ends, and divides the range wherever
its ends differ, until every stretch holds a culprit, is proven clear or is reported
undecided, then looks inside ranges proven clear only end to end (:mod:`libraries.bisect.
bisection`, plain Python; what one comparison proves: :mod:`libraries.bisect.outcome`; what the
search found and what its exit means: :mod:`libraries.bisect.result`), each comparison one
Robot A/B run of the test (:mod:`libraries.bisect.comparison_run`); builds that are the same files
(:mod:`libraries.bisect.identity`) are not compared. The culprits, the undecided ranges, the
ranges proven clear (and how), the skipped builds, the chain of comparisons and the ratio at
each build go to ``bisect.json``, ``bisect.html`` (:mod:`libraries.bisect.report`),
``summary.md`` (:mod:`libraries.bisect.bisect_summary`) and the exit code.
"""
