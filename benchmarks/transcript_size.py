"""What does keeping each trial's transcript cost on disk? Bytes per trial, compressed and raw.

    .venv/bin/python benchmarks/transcript_size.py [--trials 1] [--arm all] [--task all] [-n N]

Runs one sitting of the example bench at the repo root (bench.toml, its scripted model, every arm
and task by default, one trial per cell) into a temporary store (`--bench-store`), then reads every
sample's `transcript` reference: the gzip file's size (`bytes`), the JSON lines inside it
(`raw_bytes`) and the number of events, and, for scale, the sample's own line in the store. Prints
per arm and overall: median, mean, p90 and max of each, the compression ratio, and the total a
thousand trials would keep. Nothing is written to the repo's own store.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import harness

from pytest_benchcell.transcript import read_transcript

REPO = Path(__file__).resolve().parent.parent
SITTING_TIMEOUT_S = 1800


def sitting(store: Path, arm: str, task: str, trials: int, workers: int) -> float:
    command = [
        sys.executable, "-m", "pytest", "--bench-arm", arm, "--bench-task", task, "--bench-scripted",
        "--bench-trials", str(trials), "--bench-store", str(store), "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
    ]  # fmt: skip
    if workers > 1:
        command += ["-n", str(workers)]
    done = harness.run_sitting(command, REPO, timeout_s=SITTING_TIMEOUT_S)
    if done.returncode not in (0, 1):  # 1: some trial failed, which is a result here
        sys.exit(f"the sitting failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.wall_s


def measure(store: Path) -> list[dict[str, object]]:
    rows = []
    for path in sorted(store.glob("scripted/*/*.jsonl")):
        for line in path.read_bytes().splitlines():
            sample = json.loads(line)
            ref = sample.get("transcript")
            if not isinstance(ref, dict) or "path" not in ref:
                continue
            lines = read_transcript(store, sample)
            assert lines is not None, f"{ref['path']} does not read back"
            rows.append({"arm": sample["arm"], "bytes": ref["bytes"], "raw": ref["raw_bytes"], "events": ref["events"],
                         "sample": len(line) + 1, "outcome": sample.get("outcome") or sample["status"]})  # fmt: skip
    return rows


def summary(values: list[int]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(ordered):>8,.0f} {statistics.fmean(ordered):>8,.0f} {p90:>8,} {ordered[-1]:>8,}"


def main() -> None:
    parser = harness.parser(__doc__, trials=(1, "trials per cell (default 1)"), arm="all", task="all")
    parser.add_argument("-n", dest="workers", type=int, default=1, help="xdist workers (default: serial)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="transcript-size-") as folder:
        store = Path(folder) / "store"
        elapsed = sitting(store, args.arm, args.task, args.trials, args.workers)
        rows = measure(store)
    if not rows:
        sys.exit("no sample with a transcript was stored")
    by_arm: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_arm[str(row["arm"])].append(row)
    print(f"{len(rows)} trials with transcripts ({elapsed:.0f} s sitting); per trial: median, mean, p90, max")
    print(f"{'':<10} {'field':<22} {'median':>8} {'mean':>8} {'p90':>8} {'max':>8}")
    for arm, group in [*sorted(by_arm.items()), ("all", rows)]:
        for field, label in (("bytes", "transcript, gzip"), ("raw", "transcript, raw JSON"), ("events", "events"),
                             ("sample", "sample line (store)")):  # fmt: skip
            print(f"{arm:<10} {label:<22} {summary([int(row[field]) for row in group])}")
        ratio = sum(int(row["raw"]) for row in group) / sum(int(row["bytes"]) for row in group)
        print(f"{arm:<10} {'compression':<22} {ratio:>8.1f}x")
    total = statistics.fmean(int(row["bytes"]) for row in rows) * 1000
    print(f"1,000 such trials keep about {total / 1e6:.1f} MB of transcripts")


if __name__ == "__main__":
    main()
