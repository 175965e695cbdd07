"""What does a big store add to collecting a sweep? Target: under 0.5 s for 100,000 samples.

    .venv/bin/python benchmarks/collection_speed.py [--arms 10] [--tasks 20] [--depth 500] [--runs 5]
                                                    [--keep DIR]

Builds, in a temporary folder, a bench of --arms x --tasks cells (bench.toml: arms with
tools = ["Bash"], binaries = []; read tasks with required_facts = ["x"]) and two stores for it:

- full:  --depth samples per cell (default 10 x 20 x 500 = 100,000 samples in 200 cells), written
         straight into the store's layout (<root>/scripted/<arm>/<task>.jsonl, one compact JSON line
         per sample as Store.append writes them, about 2 KB each with tool calls and a final
         answer, 90 % scored) plus the <task>.trials reservation files (one line per sitting of 5);
- empty: an existing, empty store folder.

Then it times, via subprocess, in that folder

    python -m pytest --bench-arm all --bench-task all --bench-scripted --collect-only -q -p no:cacheprovider

with `store` in bench.toml pointing at the full store, then at the empty one, alternating, --runs
times each, and prints the medians and their difference (what the store adds). The collection
output is checked: every cell's next trial numbers must continue past the stored ones.

It also times, in this process, the store calls a collect-only sitting makes per selected cell
(Store.count_current when planning, Store.preview_trials), so the report says where the time goes.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness

from pytest_benchcell.config import load_bench
from pytest_benchcell.sample import Definition
from pytest_benchcell.store import INDEX_SUFFIX, Cell, Store
from pytest_benchcell.store.index import index_rows_for
from pytest_benchcell.store.lines import json_line

TARGET_SECONDS = 0.5
SITTING_SIZE = 5
COMMAND = [sys.executable, "-m", "pytest", "--bench-arm", "all", "--bench-task", "all", "--bench-scripted",
           "--collect-only", "-q", "-p", "no:cacheprovider"]  # fmt: skip
ANSWERS = (
    "There are 5 open issues: #1 Fix the login page, #2 Add CSV export option, #3 Crash on empty project "
    "list, #5 Document the REST API and #8 Slow search on large projects.",
    "I closed issue #2 ('Add CSV export option') with a comment; no other issue changed.",
    "The label 'bug' is now on #9; it already had 'ui', which I left alone.",
)


def bench_toml(arms: int, tasks: int, store: Path) -> str:
    lines = [
        "[bench]",
        'name = "collection-speed"',
        'model = "claude-sonnet-4-5"',
        f"store = {json.dumps(str(store))}",
        "trials = 5",
        "",
    ]
    for a in range(arms):
        lines += [f"[arms.arm{a:02d}]", 'tools = ["Bash"]', "binaries = []", ""]
    for t in range(tasks):
        lines += [f"[tasks.task{t:02d}]", 'tier = "read"', f'intent = "Answer question {t}."',
                  'required_facts = ["x"]', ""]  # fmt: skip
    return "\n".join(lines)


def make_sample(rng: random.Random, arm: str, task: str, trial: int, definition: Definition) -> dict:
    roll = rng.random()
    if roll < 0.90:
        status, outcome, reason = "scored", ("pass" if roll < 0.7 else "incorrect"), ""
    elif roll < 0.95:
        status, outcome, reason = "invalid", None, "foreign tool call ran: curl"
    else:
        status, outcome, reason = "error", None, "model API error 529: Overloaded"
    fresh, write, read, out = rng.randint(100, 900), rng.randint(2000, 9000), rng.randint(5000, 40000), rng.randint(80, 900)
    tokens = {"fresh_input": fresh, "cache_write": write, "cache_read": read, "output": out}
    calls = [
        {
            "id": f"toolu_{trial:08d}{n:08d}",
            "tool": "Bash",
            "input": {"command": rng.choice(("tracker list --state open", "tracker show 42", "tracker close 2"))},
            "allowed": True,
            "reason": "",
            "is_error": False,
            "output": "#1  open  Fix the login page  bug\n#2  open  Add CSV export option  feature\n" * rng.randint(1, 4),
        }
        for n in range(rng.randint(1, 4))
    ]
    return {
        "schema": 2,
        "id": f"{arm}-{task}-{trial}-{rng.getrandbits(48):012x}",
        "sitting": f"20251202T1200{trial // SITTING_SIZE:04d}Z-abcdef",
        "arm": arm,
        "task": task,
        "tier": "read",
        "bonus": False,
        "trial": trial,
        "started_at": "2025-12-02T12:00:00.000000+00:00",
        "ended_at": "2025-12-02T12:00:09.000000+00:00",
        "model": "claude-sonnet-4-5",
        "model_kind": "scripted",
        "usage": {"total": tokens, "by_model": {"claude-sonnet-4-5": dict(tokens)}},
        "turns": len(calls) + 1,
        "duration_ms": rng.randint(3000, 40000),
        "cost_usd": round(rng.uniform(0.005, 0.08), 4),
        "status": status,
        "outcome": outcome,
        "reason": reason,
        "result_subtype": "success",
        "final_answer": rng.choice(ANSWERS),
        "tool_calls": calls,
        "leaks": [],
        "score": {"differences": [] if outcome != "incorrect" else ["missing fact: x"]},
        "state": None,
        "probe": None,
        "bounds": {"turn_cap": 40, "wall_clock_ms": 300000},
        "provenance": {"plugin": "0.1.0", "sdk": "0.2.189", "cli": "2.0.0", "python": "3.11.7",
                       "fingerprint": definition.conditions, "conditions": definition.conditions,
                       "scoring": definition.scoring, "model_kind": "scripted"},  # fmt: skip
    }


def build_store(root: Path, arms: int, tasks: int, depth: int, definitions: dict) -> tuple[int, int, int]:
    """Write the samples, index and reservations files directly, byte for byte as Store.append and
    Store.reserve_trials would; return (samples, scored, bytes).

    Every sample carries its cell's current conditions and scoring fingerprints, as samples
    recorded with this very bench.toml do, so the plugin counts all scored ones as current."""
    rng = random.Random(20251202)
    samples = scored = size = 0
    for a in range(arms):
        arm_dir = root / "scripted" / f"arm{a:02d}"
        arm_dir.mkdir(parents=True)
        for t in range(tasks):
            arm, task = f"arm{a:02d}", f"task{t:02d}"
            pairs = []
            for trial in range(1, depth + 1):
                sample = make_sample(rng, arm, task, trial, definitions[(arm, task)])
                scored += sample["status"] == "scored"
                pairs.append((sample, json_line(sample)))
            payload = b"".join(line for _, line in pairs)
            (arm_dir / f"{task}.jsonl").write_bytes(payload)
            # the per-cell index Store.append keeps beside the samples, byte for byte
            index = arm_dir / f"{task}{INDEX_SUFFIX}"
            index.write_bytes(index_rows_for(arm_dir / f"{task}.jsonl", index, 0, pairs))
            reservations = [
                json_line({"trials": list(range(first, min(first + SITTING_SIZE, depth + 1))),
                            "sitting": f"20251202T1200{first // SITTING_SIZE:04d}Z-abcdef"})  # fmt: skip
                for first in range(1, depth + 1, SITTING_SIZE)
            ]
            (arm_dir / f"{task}.trials").write_bytes(b"".join(reservations))
            samples += depth
            size += len(payload)
    return samples, scored, size


def collect(folder: Path) -> tuple[float, str]:
    result = harness.run_sitting(COMMAND, folder, timeout_s=120)
    if result.returncode != 0:
        raise SystemExit(f"collection failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.wall_s, result.stdout


def set_store(folder: Path, arms: int, tasks: int, store: Path) -> None:
    (folder / "bench.toml").write_text(bench_toml(arms, tasks, store))


def main() -> int:
    args = harness.parser(
        __doc__, arms=10, tasks=20, depth=(500, "samples per cell"), runs=5, keep=(None, "build in this folder and keep it")
    ).parse_args()

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="benchcell-collect-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        folder, full, empty = base / "bench", base / "store-full", base / "store-empty"
        folder.mkdir()
        empty.mkdir()
        (folder / "pytest.ini").write_text("[pytest]\n")  # pins the rootdir to this folder
        set_store(folder, args.arms, args.tasks, full)
        bench = load_bench(folder / "bench.toml")
        definitions = {(arm, task): bench.definition(arm, task) for arm in bench.arms for task in bench.tasks}
        t0 = time.perf_counter()
        samples, scored, size = build_store(full, args.arms, args.tasks, args.depth, definitions)
        built = time.perf_counter() - t0
        cells = args.arms * args.tasks
        expected_items = cells * 5

        times: dict[str, list[float]] = {"full": [], "empty": []}
        outputs: dict[str, str] = {}
        set_store(folder, args.arms, args.tasks, empty)
        collect(folder)  # warm-up: the page cache and .pyc files, paid by neither side
        for _ in range(args.runs):
            for name, store in (("full", full), ("empty", empty)):
                set_store(folder, args.arms, args.tasks, store)
                elapsed, outputs[name] = collect(folder)
                times[name].append(elapsed)

        for name, first in (("full", args.depth + 1), ("empty", 1)):
            out = outputs[name]
            if f"{expected_items} tests collected" not in out or f"bench.toml::arm00-task00-t{first}" not in out:
                raise SystemExit(f"unexpected collection with the {name} store:\n{out[-2000:]}")

        full_s, empty_s = statistics.median(times["full"]), statistics.median(times["empty"])
        added = full_s - empty_s
        print(f"collection speed: {args.arms} arms x {args.tasks} tasks = {cells} cells, {expected_items} items "
              f"(--collect-only, scripted), median of {args.runs} runs each")
        print(f"  store: {samples:,} samples ({scored:,} scored, {size / 1e6:,.0f} MB) in {cells} cells, built in {built:.1f} s")
        print(f"  with the full store:  {full_s:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times['full'])})")
        print(f"  with an empty store:  {empty_s:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times['empty'])})")
        print(f"  the store adds {added:+.2f} s (target < {TARGET_SECONDS}: {'met' if added < TARGET_SECONDS else 'MISSED'})")
        breakdown(full, definitions)
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def breakdown(root: Path, definitions: dict) -> None:
    """Time the store calls a collect-only sitting makes for every selected cell (plugin.py:
    _plan_sitting counts the current scored samples and previews numbers)."""
    store = Store(root)
    cells = [Cell("scripted", arm, task) for arm, task in definitions]

    def timed(call) -> float:
        t0 = time.perf_counter()
        for cell in cells:
            call(cell)
        return time.perf_counter() - t0

    count = lambda cell: store.count_current(cell, definitions[(cell.arm, cell.task)])  # noqa: E731
    timed(count)  # warm the page cache
    count_s = timed(count)
    preview_s = timed(lambda cell: store.preview_trials(cell, 5))
    t0 = time.perf_counter()
    for cell in cells:
        with store.samples_path(cell).open("rb") as handle:
            for _ in handle:
                pass
    scan_s = time.perf_counter() - t0
    print("  where the time goes (the same store calls, timed in this process):")
    print(f"    Store.count_current over all {len(cells)} cells: {count_s:.2f} s, made once per collect-only sitting "
          f"(planning); it checks the index's last row against the index and the samples file, then reads "
          f"the rows instead of parsing JSON (reading every sample line alone takes {scan_s:.2f} s)")
    print(f"    Store.preview_trials over all cells: {preview_s:.2f} s (reads the small .trials files)")


if __name__ == "__main__":
    sys.exit(main())
