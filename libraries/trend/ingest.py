"""Alias: ``python -m libraries.trend.ingest`` is the old spelling of
``python -m libraries.history.ingest``.

It runs that command by its module name (no import: the trend layer does not depend on the
layers above it); the import graph of ``utest/test_layers.py`` has no arrow from here."""

import runpy

if __name__ == "__main__":
    runpy.run_module("libraries.history.ingest", run_name="__main__", alter_sys=True)
