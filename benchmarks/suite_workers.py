"""How long does the plugin's own test suite take with N xdist workers? Target: .ci/run under 6 minutes.

    .venv/bin/python benchmarks/suite_workers.py [--workers 2 3 4] [--dist load] [--timeout 1200]

Runs the whole suite (`pytest -n N --dist D -q -p no:cacheprovider`, in this checkout) once per
worker count, in the order given, and prints for each: the wall-clock seconds, the CPU seconds of the
whole process tree (workers, pytester's sittings, every Claude CLI; getrusage of reaped children), how
busy that kept the machine's cores, and pytest's closing line. A plugin loaded into the run records each
test's wall and CPU time, so it also prints the share of the workers' time spent waiting (trials cut at
their backstop, interrupts, a slow MCP server): the time one more worker than cores can fill.

One run per count: each takes minutes, and this machine's neighbours move a run by 10% or more, so
compare counts within one call of the script, and quote ranges over calls.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import harness

REPO = Path(__file__).resolve().parent.parent

# Loaded into the suite's run (and each xdist worker) with -p: each test's wall and CPU time.
RECORDER = '''
import json, os, resource, time
import pytest

_OUT = os.environ["BENCHCELL_SUITE_TIMES"]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, cpu = time.perf_counter(), _cpu()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(_OUT, f"{worker}.jsonl"), "a") as out:
        out.write(json.dumps({"wall": time.perf_counter() - wall, "cpu": _cpu() - cpu}) + "\\n")
'''


def measure(workers: int, dist: str, timeout_s: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="benchcell-suite-") as folder:
        (Path(folder) / "suite_times.py").write_text(RECORDER)
        env = {**os.environ, "BENCHCELL_SUITE_TIMES": folder, "PYTHONPATH": os.pathsep.join(filter(None, (folder, os.environ.get("PYTHONPATH"))))}
        command = [sys.executable, "-m", "pytest", "-n", str(workers), "--dist", dist, "-q", "-p", "no:cacheprovider", "-p", "suite_times"]
        finished = harness.run_sitting(command, REPO, timeout_s=timeout_s, merge_stderr=True, env=env)
        tests = [json.loads(line) for path in Path(folder).glob("gw*.jsonl") for line in path.read_text().splitlines()]
    busy = sum(test["wall"] for test in tests)
    waiting = sum(max(0.0, test["wall"] - test["cpu"]) for test in tests)
    return {"workers": workers, "wall": finished.wall_s, "cpu": finished.cpu_s, "cores": finished.cpu_s / finished.wall_s,
            "waiting": waiting / busy if busy else 0.0, "closing": finished.summary() or f"exit {finished.returncode}"}  # fmt: skip


def main() -> int:
    args = harness.parser(__doc__, workers=[2, 3, 4], dist=("load", "xdist's --dist mode"), timeout=1200.0).parse_args()
    print(f"the suite on {os.cpu_count()} cores, --dist {args.dist}, one run per worker count")
    print(f"{'workers':>7}  {'wall s':>7}  {'CPU s':>7}  {'cores busy':>10}  {'tests waiting':>13}  closing line")
    for workers in args.workers:
        row = measure(workers, args.dist, args.timeout)
        print(f"{row['workers']:>7}  {row['wall']:7.0f}  {row['cpu']:7.0f}  {row['cores']:10.2f}  {row['waiting']:12.0%}  {row['closing']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
