"""Imports that must happen once, before any in-process pytester run.

pytester's in-process runs restore sys.modules afterwards, so a module first imported during such a
run (matplotlib for an HTML report, pandas in a README block) is dropped again. numpy's C extension
cannot be loaded a second time in one process, so the next import anywhere then fails, and with
pytest-randomly the failing test depends on the order. Importing them here keeps them loaded.

The SDK and the plugin's own modules are kept loaded for speed: every in-process sitting would
otherwise import them anew (the SDK alone takes about 0.5 s), which was a large share of the suite's
time. Runs that must see a fresh interpreter (import cost, what a run without bench options loads)
start a subprocess of their own.
"""

import importlib
import pkgutil

for _name in ("numpy", "matplotlib.pyplot", "pandas"):
    try:
        importlib.import_module(_name)
    except ImportError:  # the base install: the tests that need them skip
        pass

import claude_agent_sdk  # noqa: E402,F401
import pytest_benchcell  # noqa: E402

for _module in pkgutil.walk_packages(pytest_benchcell.__path__, "pytest_benchcell."):
    try:
        importlib.import_module(_module.name)
    except ImportError:  # a module of an extra that is not installed (matplotlib for HTML)
        pass
