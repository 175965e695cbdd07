"""What do the guards cost per trial, and what once per sitting? Sittings of 1 and 5 trials, guards on and off.

    .venv/bin/python benchmarks/guards_per_trial.py [--rounds 4] [--trials 1 5] [--first-sittings]

The example's sitting as benchmarks/guards_cost.py runs it (one worker, its copies of the bench as
shipped and with both guards off, its subreaper's whole-tree CPU, a cache folder of the run's own),
at two trial counts, alternating; the first round is not counted. From the medians: the CPU and wall
time per trial (the slope between the two counts) and once per sitting (what one trial's sitting costs
beyond its trial), guards on and off, and what the guards add to each. By default the pre-flight that
passed and the binary's probe are kept from the first round on (later sittings); `--first-sittings`
forgets both before each sitting.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import guards_cost
import harness


def main() -> int:
    args = harness.parser(__doc__, rounds=4, trials=[1, 5], first_sittings=False).parse_args()
    low, high = args.trials
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="benchcell-per-trial-") as name:
        folder = Path(name)
        os.environ["XDG_CACHE_HOME"] = str(folder / "cache")
        env = guards_cost.base_environment()
        benches = {variant: guards_cost.copy_bench(folder / variant, variant) for variant in ("on", "off")}
        for round_ in range(args.rounds + 1):
            for trials in (low, high):
                for variant in ("on", "off") if round_ % 2 else ("off", "on"):
                    if args.first_sittings:
                        guards_cost.forget_kept(folder / "cache")
                    command = guards_cost.sitting_command(sys.executable, "close-export", [], trials)
                    wall, user, system, _ = guards_cost.run_reaped(command, benches[variant], env)
                    print(f"  round {round_} {variant:3} x{trials}: wall {wall:.2f} s, CPU {user + system:.2f} s", flush=True)
                    if round_:
                        figures.setdefault((variant, trials), []).append((wall, user + system))
    load = os.getloadavg()[0]
    kind = "first sittings" if args.first_sittings else "later sittings"
    parts = {}
    for variant in ("on", "off"):
        (wall_low, cpu_low), (wall_high, cpu_high) = (
            tuple(statistics.median(column) for column in zip(*figures[(variant, trials)])) for trials in (low, high)
        )
        per_trial = ((wall_high - wall_low) / (high - low), (cpu_high - cpu_low) / (high - low))
        parts[variant] = (per_trial, (wall_low - per_trial[0] * low, cpu_low - per_trial[1] * low))
        print(f"guards {variant}, {kind}: per trial wall {per_trial[0]:.3f} s, CPU {per_trial[1]:.3f} s; once per sitting "
              f"wall {parts[variant][1][0]:.2f} s, CPU {parts[variant][1][1]:.2f} s")  # fmt: skip
    (on_trial, on_once), (off_trial, off_once) = parts["on"], parts["off"]
    print(f"the guards add, {kind}: per trial {1000 * (on_trial[0] - off_trial[0]):.0f} ms wall, {1000 * (on_trial[1] - off_trial[1]):.0f} ms CPU; "
          f"once per sitting {on_once[0] - off_once[0]:.2f} s wall, {on_once[1] - off_once[1]:.2f} s CPU (load average {load:.1f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
