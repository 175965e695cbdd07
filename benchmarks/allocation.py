"""`--bench-fill decide` against equal allocation, by simulation: level, error rates, tokens to decide.

    .venv/bin/python benchmarks/allocation.py [--histories 200] [--seed 17] [--quick] [--tasks 8] [--horizon-pairs 80]

A simulated bench of four arms (cli-skill, cli, mcp, raw-api) at 8 and 20 tasks, with the comparisons
a maintainer of cli-skill declares: cli-skill against each of the others, on success and tokens, with
[bench.smallest_effect] success = 0.15, tokens = 0.2 and the floor 3. Sittings repeat until every
comparison is decided or a horizon of sittings is reached:

* equal allocation: every sitting runs one trial of every cell (what `--bench-trials 1` does);
* decide: every sitting runs as many trials, placed by allocation.plan_decisions from the trials
  stored before it (what `--bench-fill decide --bench-trials <cells>` does).

Both judge with the same rule (allocation.judge: the report's pairing, statistics.compare_paired at
0.05 split over the comparisons). Worlds:

* identical arms (every arm the same as cli-skill): the share of histories in which any comparison
  is ever claimed to differ (goal <= 5%: the level under adaptive allocation);
* arms that differ: cli is cli-skill's twin (same success, same tokens), mcp solves 0.25 fewer tasks
  for 1.6 times the tokens, raw-api 0.20 fewer for 1.3 times the tokens. Wrong claims: a difference
  claimed for a twin metric (at any look), an equivalence claimed where the true difference is at
  least the smallest effect (mcp and raw-api, both metrics), a difference in the wrong direction. And
  the tokens spent until the last comparison is decided (or the horizon), adaptive against equal,
  with the share of histories where both reach the same decisions (goal: >= 30% fewer tokens at no
  higher error rate);
* one metric differs, the other equivalent: mcp 0.25 below cli-skill on success for the same tokens,
  raw-api as good for 1.6 times the tokens, cli the twin (goal: >= 45% fewer tokens, issue 27);
* an in-between effect: the same with raw-api only 0.10 below cli-skill on success, inside the
  smallest effect but close to it, so that comparison decides last (no goal: it shows where the
  saving shrinks).

Per-task success rates of cli-skill are Beta(2, 2) cut to [0.15, 0.95]; per-task mean tokens
lognormal (median 20,000, log-sd 1.0); trial tokens lognormal around the task mean (cv 0.3), a failed
trial's 1.5 times a passing one's, and every sitting's tokens multiplied by a common drift (log-sd 0.2).
It prints the table and exits 1 when a goal is missed.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import harness
from harness import Row, share

from pytest_benchcell.allocation import DIFFERS, EQUIVALENT, judge, plan_decisions

ARMS = ("cli-skill", "cli", "mcp", "raw-api")
PAIRS = (("cli-skill", "cli"), ("cli-skill", "mcp"), ("cli-skill", "raw-api"))
SMALLEST_EFFECT = {"success": 0.15, "tokens": 0.2}
FLOOR = 3
ALPHA = 0.05
# arm -> (success difference to cli-skill, token ratio to cli-skill), per world
DIFFERENT = {"cli-skill": (0.0, 1.0), "cli": (0.0, 1.0), "mcp": (-0.25, 1.6), "raw-api": (-0.20, 1.3)}
# raw-api 0.10 below cli-skill: inside the smallest effect of 0.15, but not by much, so neither claim
# comes soon; the comparison that decides last then holds cli-skill and raw-api in every sitting.
IN_BETWEEN = {**DIFFERENT, "raw-api": (-0.10, 1.3)}
IDENTICAL = dict.fromkeys(ARMS, (0.0, 1.0))
# One metric differs, the other is equivalent (issue 27): mcp solves 0.25 fewer tasks for the same
# tokens, raw-api solves as many for 1.6 times the tokens, cli is the twin.
SPLIT = {"cli-skill": (0.0, 1.0), "cli": (0.0, 1.0), "mcp": (-0.25, 1.0), "raw-api": (0.0, 1.6)}
WORLDS = (("identical arms", IDENTICAL, None), ("arms that differ", DIFFERENT, 0.30),
          ("one metric differs, the other equivalent", SPLIT, 0.45), ("an in-between effect", IN_BETWEEN, None))  # fmt: skip
# Every world: a failed trial spends FAILURE_TOKENS times the tokens of a passing one (failure and token
# use correlated), and every sitting's trials share one factor on their tokens, lognormal with log-sd
# DRIFT (the gateway's caching, the model's mood: a drift between sittings that pairs must not mistake
# for a difference).
FAILURE_TOKENS = 1.5
DRIFT = 0.2


@dataclass
class World:
    tasks: list[str]
    rates: dict[tuple[str, str], float]
    costs: dict[tuple[str, str], float]
    cv: float = 0.3

    @classmethod
    def draw(cls, rng: random.Random, tasks: int, effects: Mapping[str, tuple[float, float]]) -> World:
        names = [f"task-{t:02d}" for t in range(tasks)]
        rates, costs = {}, {}
        for task in names:
            base = min(0.95, max(0.15, rng.betavariate(2, 2)))
            mean = 20_000 * math.exp(rng.gauss(0.0, 1.0))
            for arm, (shift, ratio) in effects.items():
                rates[(arm, task)] = min(1.0, max(0.0, base + shift))
                costs[(arm, task)] = mean * ratio
        return cls(names, rates, costs)

    def trial(self, rng: random.Random, cell: tuple[str, str], drift: float = 1.0) -> tuple[bool, float]:
        sigma = math.sqrt(math.log1p(self.cv * self.cv))
        passed = rng.random() < self.rates[cell]
        factor = drift * (1.0 if passed else FAILURE_TOKENS)
        return passed, factor * self.costs[cell] * math.exp(rng.gauss(-sigma * sigma / 2, sigma))


@dataclass
class History:
    tokens_to_decide: float  # spent until every comparison was decided (or the horizon)
    sittings: int
    decisions: dict[tuple[str, str, str], tuple[str, int]]  # (a, b, metric) -> (decision, sign of estimate)
    ever_differs: set[tuple[str, str, str]]


def run(world: World, rng: random.Random, *, adaptive: bool, horizon: int, horizon_pairs: int | None = None) -> History:
    cells = [(arm, task) for arm in ARMS for task in world.tasks]
    trials: dict[tuple[str, str], list[tuple[str, bool, float | None, str]]] = {cell: [] for cell in cells}
    spent = 0.0
    ever: set[tuple[str, str, str]] = set()
    first: dict[tuple[str, str, str], tuple[str, int]] = {}  # each comparison's first decision
    sitting = 0
    for sitting in range(1, horizon + 2):
        if adaptive:  # the plan judges every comparison from the trials stored so far
            plan = plan_decisions(trials, PAIRS, world.tasks, floor=FLOOR, smallest_effect=SMALLEST_EFFECT,
                                  trial_limit=len(cells), compare=_compare, horizon=horizon_pairs)  # fmt: skip
            states, counts = plan.comparisons, plan.counts()
        else:  # a decided comparison is not judged again: a maintainer stops at its first decision
            open_pairs = [p for p in PAIRS if any((*p, m) not in first for m in ("success", "tokens"))]
            states = judge(trials, open_pairs, world.tasks, floor=FLOOR, smallest_effect=SMALLEST_EFFECT,
                           alpha=ALPHA, compare=_compare, family=len(PAIRS) * 2, horizon=horizon_pairs)  # fmt: skip
            counts = dict.fromkeys(cells, 1)
        for s in states:
            key = (s.arm_a, s.arm_b, s.metric)
            if s.decision == DIFFERS:
                ever.add(key)
            if s.decided and key not in first:
                first[key] = (s.decision, 0 if not s.estimate else (1 if s.estimate > 0 else -1))
            elif horizon_pairs is not None and s.pairs >= horizon_pairs and key not in first:
                first[key] = ("undecided", 0)  # frozen at the horizon: no more trials for it
        if len(first) == len(PAIRS) * 2 or sitting > horizon or not sum(counts.values()):
            break
        drift = math.exp(rng.gauss(0.0, DRIFT))
        for round_index in range(max(counts.values())):  # interleaved, as sitting.plan_trials orders them
            for position, cell in enumerate(cells):
                if round_index < counts[cell]:
                    passed, cost = world.trial(rng, cell, drift)
                    trials[cell].append((f"{sitting:05d}.{round_index:05d}.{position:04d}", passed, cost, str(sitting)))
                    spent += cost
    decisions = {(a, b, m): first.get((a, b, m), ("undecided", 0)) for a, b in PAIRS for m in ("success", "tokens")}
    return History(spent, sitting - 1, decisions, ever)


_CACHE: dict[tuple[object, ...], object] = {}


def _compare(differences: Sequence[float], **kwargs: object) -> object:
    """compare_paired, remembered: a comparison whose pairs did not grow is judged once."""
    from pytest_benchcell.statistics import compare_paired

    key = (tuple(differences), *sorted(kwargs.items()))
    if key not in _CACHE:
        if len(_CACHE) > 20_000:
            _CACHE.clear()
        _CACHE[key] = compare_paired(differences, **kwargs)  # type: ignore[arg-type]
    return _CACHE[key]


def truth(effects: Mapping[str, tuple[float, float]], a: str, b: str, metric: str, world: World | None = None) -> float:
    """The true b - a: success difference, or the mean log token ratio of a pair. Failed trials spend
    FAILURE_TOKENS times more, so an arm that fails more spends more: per task, log(ratio) plus
    (rate_a - rate_b) log(FAILURE_TOKENS), averaged over the world's tasks."""
    if metric == "success":
        return effects[b][0] - effects[a][0]
    base = math.log(effects[b][1] / effects[a][1])
    if world is None:
        return base
    failing = [world.rates[(a, t)] - world.rates[(b, t)] for t in world.tasks]
    return base + math.log(FAILURE_TOKENS) * sum(failing) / len(failing)


def wrong(history: History, effects: Mapping[str, tuple[float, float]], world: World | None = None) -> bool:
    """A wrong claim anywhere: a difference where there is none (at any look), a difference in the wrong
    direction, or an equivalence where the true difference is at least the smallest effect."""
    for (a, b, metric), (decision, sign) in history.decisions.items():
        true = truth(effects, a, b, metric, world)
        margin = SMALLEST_EFFECT[metric] if metric == "success" else math.log1p(SMALLEST_EFFECT[metric])
        if decision == EQUIVALENT and abs(true) >= margin:
            return True
        if decision == DIFFERS and true != 0 and sign != (1 if true > 0 else -1):
            return True
    return any(truth(effects, a, b, metric, world) == 0 for a, b, metric in history.ever_differs)


def saving_se(spent: Sequence[tuple[float, float]]) -> float:
    """Standard error of 1 - sum(decide) / sum(equal) over histories (the delta method for a ratio)."""
    n = len(spent)
    if n < 2:
        return float("nan")
    ratio = sum(d for _, d in spent) / sum(e for e, _ in spent)
    mean_equal = sum(e for e, _ in spent) / n
    residuals = [d - ratio * e for e, d in spent]
    variance = sum(r * r for r in residuals) / (n - 1)
    return math.sqrt(variance / n) / mean_equal


def measure(rng: random.Random, tasks: int, histories: int, horizon: int, horizon_pairs: int | None = None) -> list[Row]:
    rows = []
    for label, effects, saving_goal in WORLDS:
        false = {"equal": 0, "decide": 0}
        tokens = {"equal": 0.0, "decide": 0.0}
        sittings = {"equal": 0, "decide": 0}
        same = all_decided = 0
        spent: list[tuple[float, float]] = []  # (equal, decide) per history, for the saving's standard error
        for _ in range(histories):
            world = World.draw(rng, tasks, effects)
            seed = rng.randrange(2**32)
            equal = run(world, random.Random(seed), adaptive=False, horizon=horizon, horizon_pairs=horizon_pairs)
            decide = run(world, random.Random(seed), adaptive=True, horizon=horizon, horizon_pairs=horizon_pairs)
            for name, history in (("equal", equal), ("decide", decide)):
                false[name] += wrong(history, effects, world)
                tokens[name] += history.tokens_to_decide
                sittings[name] += history.sittings
            spent.append((equal.tokens_to_decide, decide.tokens_to_decide))
            same += {k: v[0] for k, v in equal.decisions.items()} == {k: v[0] for k, v in decide.decisions.items()}
            all_decided += all(d in (DIFFERS, EQUIVALENT) for d, _ in decide.decisions.values())
        level_goal = "<= 5%"
        for name in ("equal", "decide"):
            what = "equal allocation" if name == "equal" else "--bench-fill decide"
            rate = false[name] / histories
            rows.append(Row(f"{label}, {tasks} tasks, {what}: histories with a wrong claim at some look "
                            f"(SE {100 * math.sqrt(rate * (1 - rate) / histories):.1f})",
                            share(false[name], histories), level_goal, rate <= 0.05))  # fmt: skip
        saved = 1 - tokens["decide"] / tokens["equal"]
        rows.append(Row(
            f"  ... tokens until every comparison is decided (horizon {horizon} sittings): decide / equal "
            f"({sittings['decide'] / histories:.1f} vs {sittings['equal'] / histories:.1f} sittings)",
            f"{100 * saved:.1f}% fewer (SE {100 * saving_se(spent):.1f})", f">= {100 * saving_goal:.0f}% fewer" if saving_goal else "-",
            saved >= saving_goal if saving_goal else None,
        ))  # fmt: skip
        rows.append(Row("  ... histories where both reach the same decisions", share(same, histories), "-", None))
        rows.append(Row("  ... histories where decide decided every comparison", share(all_decided, histories), "-", None))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(
        __doc__, histories=(100, "histories per world and size (default 100)"), seed=17,
        quick=(False, "20 histories, for a first look"), tasks=[8, 20],
        horizon_pairs=(0, "[bench] horizon_pairs for every comparison (default 0: none, the anytime e-processes)"),
    ).parse_args(argv)  # fmt: skip
    histories = 20 if args.quick else args.histories
    rng = random.Random(args.seed)
    started = time.perf_counter()
    rows: list[Row] = []
    for tasks in args.tasks:
        declared = f", horizon_pairs = {args.horizon_pairs}" if args.horizon_pairs else ""
        rows.append(Row(f"-- {tasks} tasks x 4 arms, 3 comparisons x 2 metrics, one trial per cell per equal sitting{declared}", "", "", None))
        rows += measure(rng, tasks, histories, horizon=120 if tasks <= 8 else 60, horizon_pairs=args.horizon_pairs or None)
        print(f"  [{tasks} tasks: {time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)
    return harness.print_rows(rows, f"({histories} histories per world and size; seed {args.seed}; {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
