"""The nightly layer: running the suites every night and publishing what they found.

Owns the nightly runner (``nightly_run``: ``python -m libraries.nightly --topology 3node``: one run
id and directory per night, ``robot`` or ``pabot`` per topology, outputs merged with ``rebot``,
the run stored in the history, the run report and the trend dashboard rebuilt, one exit status
for the job, and the night's ``summary.md``: ``night_summary``) and the pool of labs several pabot
processes share (``lab_pool``: pre-flight of each lab, pabot's value sets, what ran where). Its
Robot side (taking a lab from the pool in a suite setup) is ``libraries.keywords.pool``. It
composes the layers below (``history``, ``trend``, ``report``, ``results``, ``testbed``) and
holds none of their logic.
"""
