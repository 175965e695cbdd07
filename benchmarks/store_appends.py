"""How fast can concurrent sittings append to one cell? Target: >= 500 appends/s, nothing lost.

    .venv/bin/python benchmarks/store_appends.py [--processes 8] [--appends 500] [--reserve sitting|trial]
                                                 [--dir DIR]

Starts --processes worker processes (spawned, like separate terminals or xdist workers) that all
deepen ONE cell of one store in a temporary folder. Each worker appends --appends realistic samples
of about 2 KB (the fields run_trial writes, a few tool calls, a final answer) with Store.append,
each carrying a trial number from Store.reserve_trials: with --reserve sitting (the default) one
reservation of the whole block per worker, as the plugin reserves a cell's trials once per
sitting; with --reserve trial a reservation of one number before every append, as
tests/test_store.py's concurrency test does (the worst case). Every reservation and every append
takes the store-wide filelock and fsyncs, exactly as in a real sitting: the store is used through
its public API, nothing is bypassed. Afterwards the same appends are timed from one process alone,
for comparison without contention.

The workers load and wait on a shared event before the clock starts, so interpreter start-up and
imports are not timed. appends/s = all appends / wall-clock seconds from the start signal to the
last worker finishing.

Then the cell is read back and checked: every appended sample present exactly once (zero loss),
no trial number handed out twice (zero duplicates), trial numbers exactly 1..N, no unreadable or
torn lines. Prints whether the target was met; exits 1 only if anything was lost, duplicated or
unreadable (a correctness failure), 0 otherwise.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import resource
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

from pytest_benchcell.store import Cell, Store

TARGET_APPENDS_PER_S = 500.0
CELL = Cell("scripted", "cli-skill", "close-export")


def realistic_sample(trial: int, worker: int, sitting: str) -> dict:
    """A sample shaped like what run_trial appends (about 2 KB of compact JSON)."""
    return {
        "schema": 1,
        "id": f"{sitting}-{trial:06d}-{os.urandom(4).hex()}",
        "sitting": sitting,
        "arm": CELL.arm,
        "task": CELL.task,
        "tier": "single-mutation",
        "bonus": False,
        "trial": trial,
        "started_at": "2025-12-02T12:00:00.000000+00:00",
        "ended_at": "2025-12-02T12:00:07.412000+00:00",
        "model": "claude-sonnet-4-5",
        "model_kind": CELL.model_kind,
        "usage": {
            "total": {"fresh_input": 412, "cache_write": 5120, "cache_read": 18022, "output": 311},
            "by_model": {
                "claude-sonnet-4-5": {"fresh_input": 412, "cache_write": 5120, "cache_read": 18022, "output": 311}
            },
        },
        "turns": 3,
        "duration_ms": 7412,
        "cost_usd": 0.0231,
        "status": "scored",
        "outcome": "pass",
        "reason": "",
        "result_subtype": "success",
        "final_answer": "I closed issue #2 ('Add CSV export option'). It is now in state closed; "
        "no other issue was touched. There are 4 open issues left.",
        "tool_calls": [
            {
                "id": "toolu_scripted0000000000000001",
                "tool": "Bash",
                "input": {"command": "tracker list --state open"},
                "allowed": True,
                "reason": "",
                "is_error": False,
                "output": "#1  open  Fix the login page            bug\n"
                "#2  open  Add CSV export option         feature\n"
                "#3  open  Crash on empty project list   bug\n"
                "#5  open  Document the REST API         docs\n"
                "#8  open  Slow search on large projects perf\n",
            },
            {
                "id": "toolu_scripted0000000000000002",
                "tool": "Bash",
                "input": {"command": "tracker close 2 --comment 'done as asked'"},
                "allowed": True,
                "reason": "",
                "is_error": False,
                "output": "closed #2 Add CSV export option\n",
            },
            {
                "id": "toolu_scripted0000000000000003",
                "tool": "Bash",
                "input": {"command": "curl -s http://127.0.0.1:9/"},
                "allowed": False,
                "reason": "curl is not one of this arm's programs (allowed: tracker and the common text "
                "utilities); use the tracker CLI instead",
                "is_error": True,
                "output": "",
            },
        ],
        "leaks": [],
        "score": {"differences": []},
        "state": {
            "before": {"issues": [{"number": n, "state": "open", "title": f"Issue {n}"} for n in (1, 2, 3)]},
            "after": {"issues": [{"number": n, "state": "closed" if n == 2 else "open", "title": f"Issue {n}"} for n in (1, 2, 3)]},
        },
        "probe": None,
        "bounds": {"turn_cap": 40, "wall_clock_ms": 300000},
        "provenance": {
            "plugin": "0.1.0",
            "sdk": "0.2.189",
            "cli": "2.0.0",
            "python": "3.11.0",
            "fingerprint": "0123456789abcdef",
            "model_kind": CELL.model_kind,
        },
        "worker": worker,
    }


def worker(root: str, rounds: int, index: int, ready, start, results, per_sitting: bool = False) -> None:
    store = Store(root)
    sitting = f"w{index}"
    ready.release()
    start.wait()
    latencies = []
    ids = []
    began = time.perf_counter()
    # per sitting: one reservation of the whole block, as the plugin does for a cell's sitting;
    # per trial: a reservation before every append (the worst case).
    block = iter(store.reserve_trials(CELL, rounds, sitting=sitting)) if per_sitting else None
    for _ in range(rounds):
        t0 = time.perf_counter()
        (trial,) = (next(block),) if block is not None else store.reserve_trials(CELL, 1, sitting=sitting)
        sample = realistic_sample(trial, index, sitting)
        store.append(sample)
        latencies.append(time.perf_counter() - t0)
        ids.append((sample["id"], trial, time.monotonic()))  # CLOCK_MONOTONIC: comparable across processes
    results.put((index, time.perf_counter() - began, latencies, ids))


def breakdown(root: Path, store: Store, rounds: int, wall: float, reservations: int) -> None:
    """Where one round's time goes, measured in this process on the same disk (a few seconds).

    Every append, and every reservation (one per round, or one per sitting), holds the store-wide
    lock and fsyncs once while holding it; reserve_trials also reads the tail of the reservations
    file. Nothing else can use the lock meanwhile, so these costs add up across processes.
    """
    import filelock

    scratch = root / "breakdown"
    scratch.mkdir()
    payload = b"x" * 2200 + b"\n"
    fd = os.open(scratch / "fsync-probe", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(100):
            os.write(fd, payload)
            os.fsync(fd)
        fsync_ms = (time.perf_counter() - t0) / 100 * 1000
    finally:
        os.close(fd)

    def timed(call, repeat: int) -> float:
        t0 = time.perf_counter()
        for _ in range(repeat):
            call()
        return (time.perf_counter() - t0) / repeat * 1000

    lines = sum(1 for line in store.reservations_path(CELL).read_bytes().split(b"\n") if line)
    read_full_ms = timed(lambda: store.highest_trial(CELL), 10)
    small = Store(scratch / "small")
    small.reserve_trials(CELL, 1, sitting="probe")
    read_one_ms = timed(lambda: small.highest_trial(CELL), 200)
    lock = filelock.FileLock(str(scratch / ".lock"))
    lock_ms = timed(lambda: (lock.acquire(), lock.release()), 500)
    per_round = 1 + reservations / rounds  # locked, fsynced operations per append
    busy_s = (rounds * (fsync_ms + lock_ms) + reservations * (fsync_ms + lock_ms + (read_one_ms + read_full_ms) / 2)) / 1000
    ceiling = 1000 / (per_round * fsync_ms)
    print("  where the time goes (measured here, same disk):")
    print(f"    write+fsync of 2 KB: {fsync_ms:.1f} ms; {per_round:.2f} fsyncs per append under the one store lock "
          f"-> at most {ceiling:,.0f} appends/s on this disk whatever the code does")
    print(f"    reserve_trials reads only the tail of the .trials file: highest_trial() takes "
          f"{read_one_ms:.2f} ms at 1 line, {read_full_ms:.2f} ms at {lines:,} lines")
    print(f"    uncontended lock acquire+release {lock_ms:.2f} ms; estimated lock-held time {busy_s:.1f} s of the "
          f"{wall:.1f} s wall clock ({busy_s / wall:.0%}); the rest is lock hand-off (1 ms polls) and scheduling")


def single_process_rate(root: Path, total: int, per_sitting: bool) -> float:
    """The same appends from one process, in this one (no lock contention at all)."""
    store = Store(root)
    started = time.perf_counter()
    block = iter(store.reserve_trials(CELL, total, sitting="alone")) if per_sitting else None
    for _ in range(total):
        trial = next(block) if block is not None else store.reserve_trials(CELL, 1, sitting="alone")[0]
        store.append(realistic_sample(trial, 0, "alone"))
    return total / (time.perf_counter() - started)


def filesystem_of(path: Path) -> str:
    try:
        out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True, check=True).stdout
        return out.splitlines()[1].split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def main() -> int:
    parser = harness.parser(
        __doc__, processes=8, appends=(500, "appends per process"),
        dir=(None, "parent of the temporary store (default: the system temp dir)"),
    )  # fmt: skip
    parser.add_argument("--reserve", choices=["sitting", "trial"], default="sitting",
                        help="reserve trial numbers once per sitting (as the plugin does; default) or before every append")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="benchcell-appends-", dir=args.dir))
    try:
        context = multiprocessing.get_context("spawn")
        ready, start, results = context.Semaphore(0), context.Event(), context.Queue()
        processes = [
            context.Process(target=worker, args=(str(root), args.appends, i, ready, start, results, args.reserve == "sitting"), daemon=True)
            for i in range(args.processes)
        ]
        for process in processes:
            process.start()
        for _ in processes:
            if not ready.acquire(timeout=60):
                raise SystemExit("a worker did not start within 60 s")
        started = time.perf_counter()
        start_mono = time.monotonic()
        start.set()
        try:
            reports = [results.get(timeout=170) for _ in processes]
        except queue.Empty:
            raise SystemExit("the workers did not finish within 170 s; stopped (daemon processes end with this one)") from None
        wall = time.perf_counter() - started
        for process in processes:
            process.join(timeout=30)
        exit_codes = [process.exitcode for process in processes]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the reaped workers, start-up included
        workers_cpu = usage.ru_utime + usage.ru_stime

        total = args.processes * args.appends
        latencies = sorted(lat for _, _, lats, _ in reports for lat in lats)
        appended = {sample_id: trial for _, _, _, ids in reports for sample_id, trial, _ in ids}
        finished = sorted(when for _, _, _, ids in reports for _, _, when in ids)
        quarter = max(1, total // 4)
        first_rate = quarter / (finished[quarter - 1] - start_mono)
        last_rate = quarter / (finished[-1] - finished[-quarter - 1])

        store = Store(root)
        contents = store.read_cell(CELL)
        stored_trials = [s["trial"] for s in contents.samples]
        stored_ids = [s["id"] for s in contents.samples]
        stored_id_set = set(stored_ids)
        lost = sum(1 for sample_id in appended if sample_id not in stored_id_set)
        duplicate_trials = len(stored_trials) - len(set(stored_trials))
        duplicate_ids = len(stored_ids) - len(set(stored_ids))
        mismatched = sum(1 for s in contents.samples if appended.get(s["id"]) != s["trial"])
        reserved = [n for line in store.reservations_path(CELL).read_text().splitlines() if line
                    for n in json.loads(line)["trials"]]
        numbering_ok = sorted(stored_trials) == list(range(1, total + 1)) and sorted(reserved) == list(range(1, total + 1))
        line_bytes = [len(line) for line in store.samples_path(CELL).read_bytes().split(b"\n") if line]

        rate = total / wall
        print(f"store appends: {args.processes} processes x {args.appends} = {total} appends (reserving trial numbers per {args.reserve}) "
              f"into one cell, fsync on ({filesystem_of(root)} at {root.parent})")
        print(f"  sample size: {statistics.mean(line_bytes):,.0f} bytes of compact JSON on average")
        print(f"  wall clock: {wall:.2f} s -> {rate:,.0f} appends/s (target >= {TARGET_APPENDS_PER_S:.0f}: "
              f"{'met' if rate >= TARGET_APPENDS_PER_S else 'MISSED'})")
        print(f"  throughput as the cell deepens: first {quarter:,} rounds {first_rate:,.0f}/s, "
              f"last {quarter:,} rounds {last_rate:,.0f}/s")
        print(f"  latency per round (reserve + append, incl. waiting for the lock): "
              f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, p95 {latencies[int(len(latencies) * 0.95)] * 1000:.1f} ms, "
              f"max {latencies[-1] * 1000:.1f} ms")
        print(f"  verification: {len(contents.samples)} of {total} samples stored, lost {lost}, "
              f"duplicate trial numbers {duplicate_trials}, duplicate ids {duplicate_ids}, "
              f"sample/trial mismatches {mismatched}, unreadable lines {len(contents.problems)}, "
              f"trial numbers exactly 1..{total}: {'yes' if numbering_ok else 'NO'}, worker exit codes {sorted(set(exit_codes))}")
        # The target is reported above, not enforced; a lost or duplicated sample is a failure.
        ok = (
            lost == 0
            and duplicate_trials == 0
            and duplicate_ids == 0
            and mismatched == 0
            and not contents.problems
            and numbering_ok
            and len(contents.samples) == total
            and exit_codes == [0] * args.processes
        )
        alone = single_process_rate(root / "alone", total, args.reserve == "sitting")
        print(f"  contention: the {args.processes} workers used {workers_cpu:.1f} CPU s (start-up included) for "
              f"{wall:.1f} s of wall clock; the same {total} appends from one process alone run at {alone:,.0f} appends/s")
        breakdown(root, store, total, wall, len([line for line in store.reservations_path(CELL).read_bytes().split(b"\n") if line]))
        return 0 if ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
