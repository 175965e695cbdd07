"""Trials on 4 remote gateways vs 1, and what one sample's trip back to the controller costs.

    .venv/bin/python benchmarks/remote_gateways.py [--gateways 4] [--trials 8] [--delay 4.0] [--repeat 1]

Writes a small bench (one arm, one read task whose scripted model answers after Delay(--delay) -- a
fixed model latency, so trials mostly wait, as real ones do) into a temporary project folder and a
second checkout of it (the far side, as on another machine). Then runs the same sitting of --trials
trials with `-d --tx popen//chdir=FAR` (1 gateway) and `--tx 4*popen//chdir=FAR`, each into a fresh
store, alternating --repeat times, and prints the wall-clock seconds (fastest run of each) and the
speed-up. Every sample of a sitting reaches the controller's store through xdist's report channel;
the script checks that the store holds every trial once and the far checkout's store stays empty.

The trip back, per sample, is then timed in-process on the samples of that sitting: what a worker
and the controller do beyond running the trial -- the sample's line (the bytes its spool append
already wrote) put on the call report, pytest's report serialization (pytest_report_to_serializable),
execnet's wire encoding both ways (what the channel carries), the report rebuilt and the sample
parsed on the controller -- and, apart, the controller's locked, fsynced append (Receiver.take),
which replaces the append a worker did before and so is not an added cost. The same for large
samples (460 KB: 60 clipped tool outputs and a 200 KB state). Target: the trip itself <= 5 ms per
sample (median).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness

TARGET_TRIP_MS = 5.0
SITTING_TIMEOUT_S = 300

BENCH = """
[bench]
name = "remote-gateways"
model = "claude-sonnet-4-5"
store = "results"
turn_cap = 4
wall_clock_ms = 120000
base_prompt = "Answer plainly."

[arms.plain]
tools = ["Bash"]

[tasks.say-hello]
tier = "read"
intent = "Say hello."
required_facts = ["hello"]
"""

CONFTEST = """
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, Delay

def pytest_benchcell_provision(trial):
    return Environment()

def pytest_benchcell_script(trial, environment):
    return [Delay({delay!r}, Answer("hello"))]
"""


def samples_in(store: Path) -> list[dict]:
    path = store / "scripted" / "plain" / "say-hello.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sitting(project: Path, far: Path, trials: int, gateways: int) -> float:
    shutil.rmtree(project / "results", ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "--bench-arm", "plain", "--bench-task", "say-hello", "--bench-scripted",
               "--bench-trials", str(trials), "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
               "-d", "--tx", f"{gateways}*popen//chdir={far}"]  # fmt: skip
    done = harness.run_sitting(command, project, timeout_s=SITTING_TIMEOUT_S, merge_stderr=True)
    stored = samples_in(project / "results")
    if done.returncode != 0 or sorted(s["trial"] for s in stored) != list(range(1, trials + 1)):
        raise SystemExit(f"the sitting on {gateways} gateways did not store every trial once:\n{done.stdout[-3000:]}")
    if any(path.is_file() for path in (far / "results").rglob("*")):
        raise SystemExit("the far checkout's own store was written")
    return done.wall_s


def large_sample(sample: dict) -> dict:
    """A sample at the sizes a long trial reaches: 60 tool calls with 4,000-character outputs (the
    clip) and a 200,000-character state snapshot (under the 256 KiB limit)."""
    call = {"id": "toolu_x", "tool": "Bash", "input": {"command": "tracker list --all"}, "allowed": True,
            "reason": "", "is_error": False, "output": "issue 12 open: export fails\n" * 140}  # fmt: skip
    return {**sample, "tool_calls": [dict(call) for _ in range(60)],
            "state": {"before": {"rows": ["x" * 100] * 1000}, "after": {"rows": ["y" * 100] * 1000}}}  # fmt: skip


def trip_costs(samples: list[dict], bench_file: Path, store_root: Path) -> tuple[list[float], list[float]]:
    """(trip ms per sample, controller append ms per sample)."""
    import execnet
    from _pytest.reports import TestReport, _report_kwargs_from_json, _report_to_json

    from pytest_benchcell.config import load_bench
    from pytest_benchcell.remote import SAMPLE_ATTRIBUTE, Receiver, encode_sample
    from pytest_benchcell.store import Store

    bench = load_bench(bench_file)
    receiver = Receiver(Store(store_root), bench, samples[0]["sitting"], "scripted", turn_cap=4,
                        wall_clock_ms=120000, expected={(s["arm"], s["task"], s["trial"]) for s in samples})  # fmt: skip
    trips, appends = [], []
    lines = {sample["id"]: encode_sample(sample) for sample in samples}  # the spool's lines, made by its append
    for sample in samples * 5:  # each sample's trip five times (the append once: a sample is stored once)
        started = time.perf_counter()
        report = TestReport("bench.toml::plain-say-hello-t1", ("bench.toml", 0, "trial"), {}, "passed", None, "call",
                            user_properties=[("benchcell_sample", sample["id"])])  # fmt: skip
        setattr(report, SAMPLE_ATTRIBUTE, lines[sample["id"]])
        wire = execnet.dumps(("testreport", {"data": _report_to_json(report)}))  # the worker's end
        _, event = execnet.loads(wire)  # the controller's end
        arrived = TestReport(**_report_kwargs_from_json(event["data"]))
        json.loads(getattr(arrived, SAMPLE_ATTRIBUTE))
        trips.append((time.perf_counter() - started) * 1000)
        if sample["id"] not in receiver.received:
            started = time.perf_counter()
            receiver.take(getattr(arrived, SAMPLE_ATTRIBUTE))
            appends.append((time.perf_counter() - started) * 1000)
    return trips, appends


def main() -> int:
    args = harness.parser(
        __doc__, gateways=4, trials=8, delay=(4.0, "seconds the scripted model takes per trial"), repeat=1
    ).parse_args()

    folder = Path(tempfile.mkdtemp(prefix="benchcell-remote-"))
    try:
        project, far = folder / "project", folder / "far"
        for checkout in (project, far):
            checkout.mkdir()
            (checkout / "pytest.ini").write_text("[pytest]\n")  # pins each side's rootdir to its checkout
            (checkout / "bench.toml").write_text(BENCH)
            (checkout / "conftest.py").write_text(CONFTEST.format(delay=args.delay))
        runs: dict[int, list[float]] = {1: [], args.gateways: []}
        for _ in range(args.repeat):
            for gateways in runs:
                runs[gateways].append(sitting(project, far, args.trials, gateways))
        samples = samples_in(project / "results")
        trips, appends = trip_costs(samples, project / "bench.toml", folder / "trip-store")
        big = [large_sample(sample) for sample in samples]
        big_trips, big_appends = trip_costs(big, project / "bench.toml", folder / "trip-store-large")
        one, many = min(runs[1]), min(runs[args.gateways])
        size = statistics.median(len(json.dumps(s)) for s in samples)
        print(f"remote gateways: {args.trials} trials of one cell, scripted model Delay({args.delay:g}), "
              f"popen//chdir into a second checkout, {os.cpu_count()} CPUs, fastest of {args.repeat} run(s)")
        print(f"  1 gateway : {one:6.1f} s wall (runs: {', '.join(f'{r:.1f}' for r in runs[1])})")
        print(f"  {args.gateways} gateways: {many:6.1f} s wall (runs: {', '.join(f'{r:.1f}' for r in runs[args.gateways])})")
        print(f"  speed-up: {one / many:.2f}x")
        trip = statistics.median(trips)
        print(f"  trip back per sample ({size:,.0f}-character samples, {len(trips)} trips): median {trip:.2f} ms, "
              f"max {max(trips):.2f} ms (target <= {TARGET_TRIP_MS:g} ms: {'met' if trip <= TARGET_TRIP_MS else 'MISSED'})")
        print(f"  the controller's locked, fsynced append per sample (was the worker's): median "
              f"{statistics.median(appends):.2f} ms")
        big_size = statistics.median(len(json.dumps(s)) for s in big)
        print(f"  large samples ({big_size:,.0f} characters: 60 clipped tool outputs, a 200 KB state): trip median "
              f"{statistics.median(big_trips):.2f} ms, max {max(big_trips):.2f} ms; append median "
              f"{statistics.median(big_appends):.2f} ms")
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
