"""What identifying an arm's tools adds to a process that computes cell definitions (a collection, a report).

    .venv/bin/python benchmarks/tool_identity_cost.py [--runs 5] [--bench bench.toml]

Each run is a fresh Python process (the identities are kept per process) that loads the bench and
computes every cell's definition twice: the first pass identifies every declared binary (hash of
its real file and the files a script names, its `--version` line, all binaries at once); the second
is what every later call costs (the same files, seen unchanged by their size and modification
time). Then the same first pass with the binaries identified one after another, and the same
definitions without identities (a Bench with no tool_identity) for the baseline. Last, the biggest
program on PATH that most benches could declare (node, about 100 MB) hashed, first and again.
Prints the medians and each run.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import harness

PROBE = r"""
import dataclasses, json, sys, time
from pytest_benchcell import tool_identity
from pytest_benchcell.config import load_bench
mode, path = sys.argv[1], sys.argv[2]
bench = load_bench(path)
if mode == "none":
    bench = dataclasses.replace(bench, tool_identity=None)
if mode == "one-by-one":
    tool_identity._warm = lambda *args: None
def every_cell():
    started = time.perf_counter()
    for arm in bench.arms:
        for task in bench.tasks:
            bench.definition(arm, task)
    return time.perf_counter() - started
first, again = every_cell(), every_cell()
out = {"first": first, "again": again, "cells": len(bench.arms) * len(bench.tasks)}
node = sys.argv[3] if len(sys.argv) > 3 else ""
if node:
    import os
    started = time.perf_counter(); tool_identity.binary_identity("node", os.environ["PATH"], bench.root)
    out["node_first"] = time.perf_counter() - started
    started = time.perf_counter(); tool_identity.binary_identity("node", os.environ["PATH"], bench.root)
    out["node_again"] = time.perf_counter() - started
print(json.dumps(out))
"""


def measure(mode: str, bench: Path, node: bool) -> dict[str, float]:
    args = [sys.executable, "-c", PROBE, mode, str(bench), *(["node"] if node else [])]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    args = harness.parser(__doc__, runs=5, bench="bench.toml").parse_args()
    bench = Path(args.bench).resolve()
    node = shutil.which("node") is not None
    modes = ("together", "one-by-one", "none")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for _ in range(args.runs):
        for mode in modes:  # alternating, so a change of load falls on all three
            runs[mode].append(measure(mode, bench, node and mode == "together"))
    cells = int(runs["together"][0]["cells"])
    print(f"tool identities: {bench} ({cells} cells), median of {args.runs} fresh processes each")
    for mode in modes:
        first = [run["first"] for run in runs[mode]]
        again = [run["again"] for run in runs[mode]]
        print(f"  {mode:>10}: every definition first {statistics.median(first) * 1000:7.1f} ms, again "
              f"{statistics.median(again) * 1000:6.1f} ms  (first: {', '.join(f'{v * 1000:.0f}' for v in first)})")  # fmt: skip
    if node:
        first = statistics.median(run["node_first"] for run in runs["together"])
        again = statistics.median(run["node_again"] for run in runs["together"])
        size = Path(shutil.which("node") or "").resolve().stat().st_size / 2**20
        print(f"  node ({size:.0f} MB): hashed and --version first {first * 1000:.0f} ms, again {again * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
