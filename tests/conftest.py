"""Imports that must happen once, before any in-process pytester run.

pytester's in-process runs restore sys.modules afterwards, so a module first imported during such a
run (matplotlib for an HTML report, pandas in a README block) is dropped again. numpy's C extension
cannot be loaded a second time in one process, so the next import anywhere then fails, and with
pytest-randomly the failing test depends on the order. Importing them here keeps them loaded.
"""

import importlib

import pytest

for _name in ("numpy", "matplotlib.pyplot", "pandas"):
    try:
        importlib.import_module(_name)
    except ImportError:  # the base install: the tests that need them skip
        pass


@pytest.hookimpl(optionalhook=True)  # the first README command runs pytest here without xdist
def pytest_xdist_auto_num_workers(config):
    """`-n auto` for this suite: a worker a core, and one more. About a third of the workers' time is
    waiting (trials cut at their backstop, interrupts, an MCP server slower than the CLI's own 30 s
    wait), which one more worker fills; two more cost more CPU than they save on 2 cores
    (benchmarks/suite_workers.py, docs/benchmarks.md)."""
    import os

    return (os.cpu_count() or 1) + 1
