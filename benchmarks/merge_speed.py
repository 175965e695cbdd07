"""How long does merging two 50,000-sample stores take, and how much memory does it need?

    .venv/bin/python benchmarks/merge_speed.py [--arms 4] [--tasks 25] [--trials 500] [--shared 0.1] [--keep DIR]

Generates two stores of arms x tasks cells (default 4 x 25 = 100 cells, 500 trials each = 50,000
samples per store) with report_speed.py's realistic samples, both numbered from trial 1 (two
machines that each ran their own sittings), and with a --shared fraction of store B's samples copied
from store A (a hand-copied store or an earlier partial merge). Then it runs, in a child process,

    benchcell merge B --into A

and prints the wall time, the child's peak RSS, and checks the result: every sample id once, trial
numbers unique per cell, the counts what they must be. A second merge (nothing left to append)
is timed too: what re-running a merge costs.
"""

from __future__ import annotations

import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import harness  # noqa: E402
from report_speed import generate  # noqa: E402

from pytest_benchcell.store import Store  # noqa: E402


def share(source: Path, target: Path, fraction: float, seed: int = 1) -> int:
    """Append a fraction of source's sample lines to target's cells (same ids): overlap to skip."""
    rng = random.Random(seed)
    shared = 0
    for path in sorted(source.rglob("*.jsonl")):
        lines = path.read_bytes().splitlines(keepends=True)
        picked = [line for line in lines if rng.random() < fraction]
        with (target / path.relative_to(source)).open("ab") as handle:
            handle.write(b"".join(picked))
        shared += len(picked)
    return shared


def run_merge(source: Path, dest: Path) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest_benchcell.cli", "merge", str(source), "--into", str(dest)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024, done.stdout.strip()


def main() -> int:
    args = harness.parser(__doc__, arms=4, tasks=25, trials=500, shared=0.1, keep=None).parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="benchcell-merge-"))
    try:
        one, two = base / "A", base / "B"
        count_a, size_a = generate(one, args.arms, args.tasks, args.trials, seed=1)
        count_b, size_b = generate(two, args.arms, args.tasks, args.trials, seed=2)
        shared = share(one, two, args.shared)
        print(f"merge: store A {count_a:,} samples ({size_a / 1e6:.0f} MB), store B {count_b + shared:,} samples "
              f"({shared:,} of them also in A), {args.arms * args.tasks} cells, trial numbers overlapping")  # fmt: skip
        elapsed, peak_mb, output = run_merge(two, one)
        print(f"  benchcell merge B --into A: {elapsed:.1f} s, peak RSS {peak_mb:.0f} MB")
        print(f"    {output.splitlines()[0]}")
        again, again_mb, output = run_merge(two, one)
        print(f"  the same merge again (nothing to append): {again:.1f} s, peak RSS {again_mb:.0f} MB")
        print(f"    {output.splitlines()[0]}")

        store = Store(one)
        total = 0
        for cell in store.cells():
            contents = store.read_cell(cell)
            trials = [sample["trial"] for sample in contents.samples]
            assert len(trials) == len(set(trials)), f"{cell}: trial numbers repeat"
            assert not contents.problems, contents.problems[:3]
            total += len(trials)
        assert total == count_a + count_b, (total, count_a, count_b)
        print(f"  checked: {total:,} samples in A, each id once, trial numbers unique in every cell")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
