"""What does having the plugin installed cost a pytest run that does not use it? Target: <= 10 ms.

    .venv/bin/python benchmarks/import_cost.py [--runs 15]

pytest imports every installed plugin's entry point (pytest_benchcell.plugin) in every run. This
times that import the way `python -X importtime` reports it: in a fresh interpreter that has already
imported pytest (as a pytest run has when it loads plugins), the cumulative import time of
pytest_benchcell (the package, its __init__ and the plugin module with everything they pull in that
pytest had not loaded yet). --runs fresh interpreters; prints the median and the range, the
modules the import loads, and, for scale, pytest's own import time.

Byte code: an installed package has its .pyc files (pip compiles them at install time); this script
compiles pytest_benchcell's first and unsets PYTHONDONTWRITEBYTECODE for the timed interpreters, so
the figure is the import, not the compilation of the source (which adds about 7 ms when no .pyc can
be written).
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
from pathlib import Path

import harness

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_benchcell"
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

CODE = "import pytest\nimport pytest_benchcell.plugin\n"


def one_run() -> tuple[float, float, list[str]]:
    """(plugin ms, pytest ms, modules imported for the plugin) from one -X importtime run."""
    command = [sys.executable, "-X", "importtime", "-c", CODE]
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=ENV).stderr
    plugin_us = pytest_us = 0
    modules: list[str] = []
    after_pytest = False
    for line in output.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, raw_name = line.split(":", 1)[1].split("|")  # "import time: self | cumulative | name"
        depth = len(raw_name) - len(raw_name.lstrip()) - 1  # importtime indents nested imports by two spaces
        name = raw_name.strip()
        if name == "pytest" and depth <= 1:
            pytest_us = int(cumulative)
            after_pytest = True
            continue
        if after_pytest:
            modules.append(name)
            if depth <= 1:  # a top-level import of the second statement
                plugin_us += int(cumulative)
    return plugin_us / 1000, pytest_us / 1000, modules


def main() -> None:
    args = harness.parser(__doc__, runs=15).parse_args()
    compileall.compile_dir(PACKAGE, quiet=1)
    results = [one_run() for _ in range(args.runs)]
    plugin = [r[0] for r in results]
    pytest_ms = [r[1] for r in results]
    print(f"import pytest_benchcell.plugin after pytest, {args.runs} fresh interpreters (python -X importtime):")
    print(f"  median {statistics.median(plugin):.1f} ms (range {min(plugin):.1f} to {max(plugin):.1f} ms); target <= 10 ms: "
          f"{'met' if statistics.median(plugin) <= 10 else 'missed'}")
    print(f"  for scale, pytest itself: median {statistics.median(pytest_ms):.0f} ms")
    print(f"  modules it loads: {', '.join(results[0][2])}")


if __name__ == "__main__":
    main()
