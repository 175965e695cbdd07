"""How close to its limits does the sandbox stop a command, and what does the watch cost? Target: within 10%.

    .venv/bin/python benchmarks/limit_watch_cost.py [--runs 5] [--files 20001]

A command in the sandbox (a trial's prefix, bubblewrap in the trial's network namespace, as
tests/test_sandbox_limits.py runs it) creates --files empty files from Python as fast as it can,
with `sandbox_files = 10000`; another writes as many 4 KiB files with `sandbox_disk_mb = 32`; a third
creates 5,000 files within the limits (what an ordinary `npm install` or `git clone` does). Each
runs under the trial's LimitWatch as it is (inotify, `events`) and with the watch counting by
walking the folders every second only (`walks`, what it did before), alternating. Printed per
case, medians: how far the command got (files, MiB), its wall time, and the harness's CPU during
it (the watch's thread: RUSAGE_SELF of this process, which only waits otherwise).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import harness

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.file_events import FileEvents
from pytest_benchcell.isolation.limits import LimitWatch, Limits, usage

MANY = "for i in range({n}):\n    open(f'f{i}', 'w').close()"
SMALL = "for i in range({n}):\n    with open(f's{i}', 'wb') as out:\n        out.write(b'x' * 4096)"
CASES = {
    "files, limit 10000": (MANY, Limits(disk_mb=1024, files=10_000, processes=256)),
    "4 KiB files, limit 32 MiB": (SMALL, Limits(disk_mb=32, files=1_000_000, processes=256)),
    "5000 files within the limits": (MANY.replace("{n}", "5000"), Limits(disk_mb=1024, files=20_000, processes=256)),
}


def run(root: Path, tool: sandbox.SandboxTool, program: str, limits: Limits, events: bool) -> tuple[int, float, float, float]:
    """(files made, MiB, wall s, harness CPU s) of one command under the watch."""
    for name in ("cwd", "environment", "home"):
        (root / name).mkdir(parents=True)
    plan = sandbox.SandboxPlan(writable=(str(root / "cwd"), str(root / "environment")), readable=(sys.prefix,),
                               hidden=(), home=str(root / "home"), never=())  # fmt: skip
    network = sandbox.TrialNetwork(tool, root / "network", []).start()
    try:
        prefix = sandbox.write_prefix(root / "prefix", tool, plan, network, limits=limits)
        unavailable = mock.patch.object(FileEvents, "available", new=property(lambda self: False))
        with contextlib.nullcontext() if events else unavailable:
            before = resource.getrusage(resource.RUSAGE_SELF)
            watch = LimitWatch(limits, plan.writable, network.child_pid).start()
            started = time.perf_counter()
            subprocess.run([str(prefix), f"{sys.executable} -c {shlex.quote(program)}"], cwd=root / "cwd", capture_output=True, timeout=300)
            wall = time.perf_counter() - started
            watch.stop()
            after = resource.getrusage(resource.RUSAGE_SELF)
        size, files = usage([str(root / "cwd")])
        return files, size / 2**20, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finally:
        network.stop()


def main() -> int:
    args = harness.parser(__doc__, runs=5, files=20001).parse_args()
    tool = sandbox.find_sandbox()
    if not tool.available:
        print(f"the sandbox cannot run here: {tool.reason}")
        return 1
    print(f"load average {harness_load()}; {args.runs} runs per case and watch, alternating")
    for label, (program, limits) in CASES.items():
        figures: dict[bool, list[tuple[int, float, float, float]]] = {True: [], False: []}
        for index in range(args.runs):
            for events in ((True, False) if index % 2 else (False, True)):
                with tempfile.TemporaryDirectory(prefix="benchcell-limit-watch-") as folder:
                    figures[events].append(run(Path(folder), tool, program.replace("{n}", str(args.files)), limits, events))
        for events, rows in figures.items():
            files, mib, wall, cpu = (statistics.median(column) for column in zip(*rows))
            worst = max(row[0] for row in rows), max(row[1] for row in rows)
            print(f"{label}, {'events' if events else 'walks '}: files {files:.0f} (max {worst[0]}), {mib:.1f} MiB (max {worst[1]:.1f}), "
                  f"command {wall:.2f} s, harness CPU {cpu:.3f} s")  # fmt: skip
    print(f"load average {harness_load()}")
    return 0


def harness_load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
