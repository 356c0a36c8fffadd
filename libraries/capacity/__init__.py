"""Capacity under latency goals: the constant rate at which a path misses a goal such as
``p99 <= 10 ms`` in at most a stated share of its 30 s windows, with its interval, from the
knee FD.io CSIT's MLRsearch finds.

Owns what a search is made of and what it found (``trials``: one constant-rate trial's counts
and its loss as MLRsearch sees it, each goal's result, each path's searches); one adapter per
constant-rate generator (vegeta, oha, wrk2), each turning its tool's run into the same trial
behind one small interface: find the node's generator, run one trial at a rate, the latency
pass, search a set of paths (``generators``); the MLRsearch controller, one search per path
and latency limit, their trials interleaved and shared (``search``), whose knee the windows
start from; the windows of the reported length and the miss curve fitted over them
(``confirm``, ``misscurve``): the figure is a rate at which a window misses the goal with
probability at most a stated share at a stated confidence, the safe end of the interval of the
curve's crossing; whether the machine drifted while the windows ran (``drift``); the checks of
the curve's crossing (``sanity``: the closed-loop maximum, the latency pass, far below the
maximum, the generator's limit), with more windows where evidence disagrees; the figures that
stand and the ratio (``limits``); a path whose windows gave no figure (``floor``); and a
console line as each search and each window ends (``news``).

The goals and the searches' ``-v`` settings (``LATENCY_SLO``, ``CAPACITY_*``) are parsed in
``search_settings``. Imports only ``libraries.testbed``, ``libraries.tools`` and
``libraries.results``; no Robot Framework (the keyword layer adapts it: a skip, the log, the
A/B case).
"""
