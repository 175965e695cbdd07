"""A costly folder made once per test run, however many xdist workers ask for it.

A module-scoped fixture is made once per worker that runs one of its tests, and xdist's `load`
distribution spreads a module's tests over the workers: the example sweep (24 trials through the real
CLI) was made twice a run. This is xdist's documented way to make something once: the first worker
makes it under a lock in the run's shared temporary folder, the others wait for it and read it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name`, which `make` filled once in this run. A worker whose `make` failed leaves no
    mark of success, so the next worker to ask makes it afresh and fails in its own tests too."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    folder, made = base / name, base / f"{name}.made"
    with FileLock(str(base / f"{name}.lock")):
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            made.touch()
    return folder
