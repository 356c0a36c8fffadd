"""Bisection: from "this got slower" to the build that did it, with the A/B engine.

``python -m libraries.bisect`` (:mod:`libraries.bisect.cli`) takes a topology, one test and an
ordered list of builds (:mod:`libraries.bisect.builds`: comparison sides, or a template over
revisions with an optional build command), compares the ends, and divides the range wherever
its ends differ, until every stretch holds a culprit, is proven clear or is reported
undecided (:mod:`libraries.bisect.search`, plain Python; what one comparison proves:
:mod:`libraries.bisect.outcome`), each comparison one Robot A/B run of the test
(:mod:`libraries.bisect.runner`). The culprits, the undecided ranges, the skipped builds, the
chain of comparisons and the ratio at each build go to ``bisect.json``, ``bisect.html``
(:mod:`libraries.bisect.report`), ``summary.md`` (:mod:`libraries.bisect.summary`) and the exit
code.
"""
