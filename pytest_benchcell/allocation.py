"""`--bench-fill decide`: where a sitting's trials decide something. A pure core (no pytest).

A comparison is one pair of arms on one metric (success, tokens). It is *decided* when the paired
evidence claims a difference, or claims that no difference is larger than the bench's smallest effect
of interest ([bench.smallest_effect]); statistics.decide judges both, anytime-valid, in the family of
the bench's declared comparisons (statistics.Family): the same verdict the report prints.

Why the guarantees survive adaptive allocation: the plan is computed once, before the sitting, from
the samples already stored, read and paired exactly as the report reads and pairs them (report.reading,
and figures' pairing: per task, trials of one sitting first, in the order the report could first see
each pair). Which
trials run next is therefore a function of the past only, and a test martingale stays one under
such a (predictable) choice; a decided comparison simply stops receiving trials (optional stopping).
Within an undecided comparison every task gets the same number of new pairs (a round), fewest-paired
tasks first when a round does not fit whole, so the comparison keeps weighing its tasks alike
rather than drifting towards tasks whose past outcomes looked promising.

Where the trials go: rounds. A round gives an undecided comparison's pair of arms one more paired
trial per shared task; the pair whose next round does the largest share of its remaining work
(pairs_to_decide) per expected token goes first (a cell already given the trial in this sitting, for
another pair, costs nothing; pairs form within a sitting, so trials stored before it do not count),
and no pair gets more than OVERSHOOT times the rounds it is expected to need; a round that
does not fit the sitting's trial count or token budget is cut task by task. Expected tokens per trial come from the stored samples:
the cell's mean, else the arm's, else the bench's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sample import TOKEN_COMPONENTS
from .statistics.decisions import DIFFERS, EQUIVALENT, METRICS, UNDECIDED

DECIDED = (DIFFERS, EQUIVALENT)
# The most rounds one plan gives a pair: far beyond any budget; keeps a plan with free trials finite.
MAX_ROUNDS = 10_000

Cell = tuple[str, str]  # (arm, task)
Trial = tuple[str, bool, "float | None", str]  # report.reading.Trial: started_at, passed, cost-equivalent tokens, sitting


@dataclass(frozen=True)
class ComparisonState:
    """One comparison as the stored samples leave it before the sitting: its statistics.Verdict (the
    one the report prints for the same store) and what the plan needs of it."""

    arm_a: str
    arm_b: str
    metric: str
    decision: str  # differs | equivalent | undecided
    pairs: int  # paired trials so far (tasks at the floor in both arms; tokens: both usages known)
    tasks: tuple[str, ...]  # the tasks the pair shares in this selection
    estimate: float | None = None  # b - a (success), log(b / a) (tokens)
    interval: tuple[float, float] | None = None  # None: no pair, or withheld below 3 shared tasks
    e_value: float | None = None
    margin: float | None = None  # the smallest effect of interest on the estimate's scale; None: not declared
    claim_e: float | None = None  # the e-value a difference claim needs (the family's size / alpha)
    verdict: Any = None  # statistics.Verdict; None: no paired trial yet

    @property
    def decided(self) -> bool:
        return self.decision in DECIDED

    @property
    def name(self) -> str:
        return f"{self.arm_a} vs {self.arm_b} on {self.metric}"

    def describe(self) -> str:
        """'cli vs mcp on tokens: mcp better (12 paired trials on 4 tasks, e 136 (a difference needs 120), cli/mcp 1.21x [...])'."""
        from .report.verdict_text import claim, reading

        if self.verdict is None:
            return f"{self.name}: undecided (no paired trial yet: both arms need the floor on a shared task)"
        what = claim(self.verdict, self.arm_a, self.arm_b)
        if self.decision == UNDECIDED and self.margin is None and self.verdict.pairs:
            what = "undecided (no [bench.smallest_effect] for it: only a difference can decide it)"
        if self.verdict.pairs == 0:
            return f"{self.name}: undecided (no paired trial with known usage yet)"
        return f"{self.name}: {what} ({reading(self.verdict, self.arm_a, self.arm_b)})"


@dataclass(frozen=True)
class CellPlan:
    arm: str
    task: str
    trials: int
    expected_tokens: float | None  # per trial, from the stored samples (None: nothing stored to go by)
    reason: str


@dataclass
class DecidePlan:
    """The sitting's plan: new trials per cell, why, and the comparisons it serves."""

    cells: dict[Cell, CellPlan]
    comparisons: list[ComparisonState]
    limit: str  # what bounded the plan, in words
    expected_tokens: float | None  # of the whole plan (None: no stored token figure to go by)
    nothing_left: str | None = None  # why the sitting runs nothing, when it runs nothing
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[Cell, int]:
        return {cell: plan.trials for cell, plan in self.cells.items()}

    @property
    def total(self) -> int:
        return sum(plan.trials for plan in self.cells.values())

    def headline(self) -> str:
        """One line for the sitting's header (the plan itself is printed with the summary)."""
        undecided = sum(not c.decided for c in self.comparisons)
        return (f"benchcell: --bench-fill decide: {self.total} trials for {undecided} of {len(self.comparisons)} "
                f"comparisons still undecided (the plan and its reasons follow the sitting)")  # fmt: skip

    def lines(self) -> list[str]:
        """What --collect-only and the sitting print: each comparison's state, each cell's plan and why."""
        out = [f"comparisons ({sum(not c.decided for c in self.comparisons)} of {len(self.comparisons)} undecided):"]
        out += [f"    {state.describe()}" for state in self.comparisons]
        spend = f", ~{self.expected_tokens:,.0f} cost-equivalent tokens expected" if self.expected_tokens else ""
        out.append(f"plan: {self.total} trials{spend} ({self.limit})")
        for plan in self.cells.values():
            per_trial = f", ~{plan.expected_tokens:,.0f} tokens each" if plan.trials and plan.expected_tokens else ""
            out.append(f"    {plan.arm} x {plan.task}: {plan.trials} trial{'' if plan.trials == 1 else 's'}{per_trial}: {plan.reason}")
        out += self.notes
        if self.nothing_left:
            out.append(self.nothing_left)
        return out


Compare = Callable[..., Any]  # statistics.compare_paired(differences, *, metric, alpha, margin)


def read_trials(
    store: Any, model_kind: str, cells: Sequence[Cell], weights: Mapping[str, float],
    definitions: Mapping[Cell, Any] | None,
) -> dict[Cell, list[Trial]]:  # fmt: skip
    """Each cell's scored trials as the report reads them (its current conditions with the bench known)."""
    from .report.reading import newest, read_cell
    from .store import Cell as StoreCell

    weight_list = [float(weights[name]) for name in TOKEN_COMPONENTS]
    found: dict[Cell, list[Trial]] = {}
    for arm, task in cells:
        groups = read_cell(store, StoreCell(model_kind, arm, task), weight_list, [], definitions)
        definition = (definitions or {}).get((arm, task))
        used = groups.get(definition.conditions) if definition is not None else newest(groups)
        found[(arm, task)] = list(used.trials) if used is not None else []
    return found


def judge(
    trials: Mapping[Cell, Sequence[Trial]], pairs_of_arms: Sequence[tuple[str, str]], tasks: Sequence[str],
    *, floor: int, smallest_effect: Mapping[str, float], alpha: float, compare: Compare | None = None,
    family: int | None = None, horizon: int | None = None,
) -> list[ComparisonState]:  # fmt: skip
    """Every comparison's state from the stored trials, paired as the report pairs them, judged by
    statistics.decide in the family the report uses: `family` comparisons (the bench's declared
    pairs x metrics, whatever arms are selected), else pairs_of_arms x metrics. `compare` is
    compare_paired unless a benchmark passes a remembering wrapper of it."""
    from .report.figures import paired_in_time_order  # the report's own pairing: the evidence must match
    from .statistics import Family, compare_paired, decide, margin_of

    group = Family(family, alpha, horizon) if family else Family.of(len(pairs_of_arms), alpha, horizon)
    states = []
    for a, b in pairs_of_arms:
        shared = tuple(t for t in tasks if (a, t) in trials and (b, t) in trials)
        covered = [t for t in shared if len(trials[(a, t)]) >= floor and len(trials[(b, t)]) >= floor]
        paired = paired_in_time_order({key: trials[key] for key in trials}, a, b, covered, floor) if covered else []
        outcomes = [((trial_a[1], trial_a[2]), (trial_b[1], trial_b[2])) for trial_a, trial_b in paired]
        for metric in METRICS:
            margin = margin_of(metric, smallest_effect)
            if not paired:
                states.append(ComparisonState(a, b, metric, UNDECIDED, 0, shared, margin=margin, claim_e=group.claim_e))
                continue
            verdict = decide(outcomes, metric=metric, family=group, margin=margin, tasks=len(covered),
                             compare=compare or compare_paired)  # fmt: skip
            states.append(ComparisonState(
                a, b, metric, verdict.decision, verdict.pairs, shared, verdict.estimate, verdict.interval,
                verdict.e_value, margin, group.claim_e, verdict,
            ))  # fmt: skip
    return states


# How many times the expected pairs to decide a comparison one plan gives it at most: an estimate from
# the pairs so far is rough, and a plan that gives too few costs a sitting, one that gives too many
# costs the trials run after the decision.
OVERSHOOT = 1.5
# Pairs assumed still needed by a comparison with no evidence to go by yet (no paired trial, or no trend).
UNKNOWN_PAIRS = 64.0


def pairs_to_decide(states: Sequence[ComparisonState]) -> float:
    """Expected paired trials before every undecided metric of one pair of arms is decided (the pair's
    arms run until the last one is): per metric, the fewer of the two routes, a difference (the e-value's
    log so far grows at its rate per pair until log claim_e) and an equivalence (the interval's half-width
    shrinks as 1 / sqrt(pairs) until it fits inside the margin beside the estimate)."""
    worst = 0.0
    for state in states:
        if state.decided:
            continue
        if not state.pairs:
            return UNKNOWN_PAIRS
        routes = [UNKNOWN_PAIRS * 16]
        if state.e_value and state.claim_e and state.e_value > 1.0:
            rate = math.log(state.e_value) / state.pairs
            routes.append(max(0.0, math.log(state.claim_e) - math.log(state.e_value)) / rate)
        if state.margin is not None and state.interval is not None and state.estimate is not None:
            half = (state.interval[1] - state.interval[0]) / 2.0
            room = state.margin - abs(state.estimate)
            if room > 0:
                routes.append(max(0.0, state.pairs * ((half / room) ** 2 - 1.0)))
        worst = max(worst, min(routes))
    return max(1.0, worst)


def expected_costs(trials: Mapping[Cell, Sequence[Trial]]) -> dict[Cell, float | None]:
    """Expected cost-equivalent tokens of one more trial per cell: the cell's mean, else its arm's mean
    over its cells' means, else the bench's; None when nothing stored has a usage."""
    cell_means = {}
    for cell, cell_trials in trials.items():
        costs = [t[2] for t in cell_trials if t[2] is not None]
        cell_means[cell] = sum(costs) / len(costs) if costs else None
    known = [m for m in cell_means.values() if m is not None]
    overall = sum(known) / len(known) if known else None
    out: dict[Cell, float | None] = {}
    for (arm, task), mean in cell_means.items():
        if mean is None:
            same_arm = [m for (other, _), m in cell_means.items() if other == arm and m is not None]
            mean = sum(same_arm) / len(same_arm) if same_arm else overall
        out[(arm, task)] = mean
    return out


def plan_decisions(
    trials: Mapping[Cell, Sequence[Trial]],
    pairs_of_arms: Sequence[tuple[str, str]],
    tasks: Sequence[str],
    *,
    floor: int,
    smallest_effect: Mapping[str, float],
    trial_limit: int | None,
    budget: float | None = None,
    alpha: float = 0.05,
    compare: Compare | None = None,
    max_rounds: int = MAX_ROUNDS,
    fallback_trials: int = 0,
    family: int | None = None,
    horizon: int | None = None,
) -> DecidePlan:
    """The plan for one sitting from the trials stored before it (see the module docstring).

    `trials`: every selected cell (the compared tasks' cells; others get no trial), `tasks` in bench
    order, `trial_limit` the sitting's trial count and `budget` its expected cost-equivalent tokens
    (at least one of them; with a budget but no stored usage to estimate it, `fallback_trials` is the
    trial count, and the budget is enforced as trials run); `family` the comparisons judged together
    (default: pairs_of_arms x metrics); `horizon` ([bench] horizon_pairs) the most pairs a pair of arms
    gets: no trial is planned past it, and a comparison undecided there stays so (its verdict is frozen).
    Deterministic: the same stored trials give the same plan."""
    if trial_limit is None and budget is None:
        raise ValueError("plan_decisions needs a trial limit or a budget")
    states = judge(trials, pairs_of_arms, tasks, floor=floor, smallest_effect=smallest_effect, alpha=alpha,
                   compare=compare, family=family, horizon=horizon)  # fmt: skip
    left = _pairs_left(states, horizon)
    costs = expected_costs(trials)
    # A budget with nothing to estimate it by (no stored usage, or usage of zero tokens, which would
    # let a budget buy trials without end): a trial count instead, and the budget is enforced as trials run.
    unknown_cost = budget is not None and any(not costs[cell] for cell in trials)
    if unknown_cost and trial_limit is None:
        trial_limit = fallback_trials
    depth = {cell: len(cell_trials) for cell, cell_trials in trials.items()}
    target = dict(depth)
    undecided_pairs: list[tuple[str, str]] = []
    for state in states:
        if not state.decided and (state.arm_a, state.arm_b) not in undecided_pairs and state.tasks \
                and left[(state.arm_a, state.arm_b)] > 0:
            undecided_pairs.append((state.arm_a, state.arm_b))
    shared = {pair: next(s.tasks for s in states if (s.arm_a, s.arm_b) == pair) for pair in undecided_pairs}
    # Pairs form within a sitting (the report's pairing): a round gives both arms of a pair a new trial
    # in this sitting, whatever either cell holds already; a cell below the floor brings its partner
    # along to the floor in this sitting, so those trials pair too. `base`: the task's pairs so far.
    from .report.figures import paired_within_task

    base = {(pair, t): len(paired_within_task(trials[(pair[0], t)], trials[(pair[1], t)]))
            for pair in undecided_pairs for t in shared[pair]}  # fmt: skip
    spent_trials, spent_tokens = 0, 0.0

    def step_cost(pair: tuple[str, str], task: str, rounds: int) -> tuple[int, float, dict[Cell, int]]:
        cells_of_pair = ((pair[0], task), (pair[1], task))
        wanted = max(rounds, *(floor - depth[cell] for cell in cells_of_pair))  # new trials of each, this sitting
        new = {cell: max(0, wanted - (target[cell] - depth[cell])) for cell in cells_of_pair}
        tokens = sum(n * (costs[cell] or 0.0) for cell, n in new.items())
        return sum(new.values()), tokens, new

    def fits(count: int, tokens: float) -> bool:
        if trial_limit is not None and spent_trials + count > trial_limit:
            return False
        return budget is None or unknown_cost or spent_tokens + tokens <= budget

    rounds = dict.fromkeys(undecided_pairs, 0)  # whole rounds given; a cut round is retried next time
    given = dict.fromkeys(undecided_pairs, 0)  # new pairs planned, against the pairs left to the horizon
    needed = {pair: pairs_to_decide([s for s in states if (s.arm_a, s.arm_b) == pair]) for pair in undecided_pairs}
    while True:
        progressed = False

        def round_cost(pair: tuple[str, str]) -> float:
            return sum(step_cost(pair, t, rounds[pair] + 1)[1] for t in shared[pair])

        def progress_per_token(pair: tuple[str, str]) -> float:
            """The share of the pair's remaining work its next round is expected to do, per expected token."""
            left = max(float(len(shared[pair])), needed[pair] - rounds[pair] * len(shared[pair]))
            return (len(shared[pair]) / left) / max(round_cost(pair), 1e-9)

        for pair in sorted(undecided_pairs, key=lambda p: (-progress_per_token(p), undecided_pairs.index(p))):
            # Rounds beyond what the pair is expected to need (with room for a slow start) would be spent
            # after its decision: they wait for the next plan, which sees the outcome.
            expected_rounds = math.ceil(OVERSHOOT * needed[pair] / max(1, len(shared[pair])))
            if rounds[pair] >= max_rounds or rounds[pair] >= max(1, expected_rounds):
                continue
            whole = True
            for task in sorted(shared[pair], key=lambda t: (base[(pair, t)], tasks.index(t))):
                count, tokens, new = step_cost(pair, task, rounds[pair] + 1)
                if not fits(count, tokens) or (count and given[pair] >= left[pair]):
                    whole = False
                    continue
                given[pair] += count > 0
                for cell, n in new.items():
                    target[cell] += n
                spent_trials += count
                spent_tokens += tokens
                progressed |= count > 0
            if whole:
                rounds[pair] += 1
                progressed = True
        if not progressed:
            break
    plan = _describe(trials, states, pairs_of_arms, target, depth, costs, floor=floor, trial_limit=trial_limit,
                     budget=budget, unknown_cost=unknown_cost)  # fmt: skip
    return _at_horizon(plan, states, left, horizon)


def _pairs_left(states: Sequence[ComparisonState], horizon: int | None) -> dict[tuple[str, str], float]:
    """Per pair of arms, the paired trials it may still get before the horizon (without one: no end)."""
    most: dict[tuple[str, str], int] = {}
    for state in states:
        most[(state.arm_a, state.arm_b)] = max(most.get((state.arm_a, state.arm_b), 0), state.pairs)
    return {pair: math.inf if horizon is None else float(max(0, horizon - pairs)) for pair, pairs in most.items()}


def _at_horizon(plan: DecidePlan, states: Sequence[ComparisonState], left: Mapping[tuple[str, str], float],
                horizon: int | None) -> DecidePlan:  # fmt: skip
    """Say which undecided comparisons reached the horizon: their verdicts stand, no trial is planned for them."""
    frozen = [s for s in states if not s.decided and left[(s.arm_a, s.arm_b)] <= 0]
    if horizon is None or not frozen:
        return plan
    plan.notes.append(f"at the horizon of {horizon} paired trials ([bench] horizon_pairs), undecided and frozen: "
                      + "; ".join(s.name for s in frozen) + " (no trial past the horizon)")  # fmt: skip
    for cell, cell_plan in plan.cells.items():
        serves = [s for s in frozen if cell[1] in s.tasks and cell[0] in (s.arm_a, s.arm_b)]
        if not cell_plan.trials and serves and cell_plan.reason.startswith("no room left"):
            plan.cells[cell] = CellPlan(cell_plan.arm, cell_plan.task, 0, cell_plan.expected_tokens,
                                        f"its undecided comparisons reached the horizon of {horizon} paired trials")  # fmt: skip
    if plan.nothing_left and not plan.nothing_left.startswith("nothing left to decide"):
        if all(s.decided or s in frozen for s in states):
            plan.nothing_left = (f"nothing left to decide: every comparison is decided or reached the horizon of "
                                 f"{horizon} paired trials; no trial runs")  # fmt: skip
    return plan


def _describe(
    trials: Mapping[Cell, Sequence[Trial]], states: Sequence[ComparisonState], pairs_of_arms: Sequence[tuple[str, str]],
    target: Mapping[Cell, int], depth: Mapping[Cell, int], costs: Mapping[Cell, float | None], *, floor: int,
    trial_limit: int | None, budget: float | None, unknown_cost: bool,
) -> DecidePlan:  # fmt: skip
    cells: dict[Cell, CellPlan] = {}
    for cell in trials:
        arm, task = cell
        count = target[cell] - depth[cell]
        serves = [s for s in states if task in s.tasks and arm in (s.arm_a, s.arm_b)]
        open_ = [s for s in serves if not s.decided]
        if count:
            below = f"{depth[cell]} scored, the floor is {floor}; " if depth[cell] < floor else ""
            by_pair: dict[str, list[str]] = {}
            for s in open_:
                by_pair.setdefault(f"{s.arm_a} vs {s.arm_b}", []).append(s.metric)
            reason = below + "advances " + "; ".join(f"{pair} ({', '.join(metrics)} undecided)" for pair, metrics in by_pair.items())
        elif not serves:
            reason = "serves no comparison (a bonus task, or no compared arm shares it)"
        elif not open_:
            reason = "every comparison it serves is decided: " + "; ".join(f"{s.name} {s.decision}" for s in serves)
        else:
            reason = "no room left in the sitting's limit for its next paired trial"
        cells[cell] = CellPlan(arm, task, count, costs.get(cell), reason)
    limit_parts = []
    if trial_limit is not None:
        limit_parts.append(f"a sitting of at most {trial_limit} trials")
    if budget is not None:
        limit_parts.append(
            f"a budget of {budget:,.0f} cost-equivalent tokens"
            + (" (checked as trials run: a cell with no stored usage gives no estimate)" if unknown_cost else "")
        )
    known = [target[c] - depth[c] for c in trials]
    expected = None
    if any(costs[c] is not None for c in trials):
        expected = sum((target[c] - depth[c]) * (costs[c] or 0.0) for c in trials)
    plan = DecidePlan(cells, list(states), "; ".join(limit_parts), expected)
    if not sum(known):
        if not pairs_of_arms:
            plan.nothing_left = "nothing to decide: no comparison among the selected arms"
        elif all(s.decided for s in states):
            plan.nothing_left = "nothing left to decide: every comparison is decided; no trial runs"
        elif not any(s.tasks for s in states if not s.decided):
            plan.nothing_left = "nothing to run: the undecided comparisons share no selected task"
        else:
            plan.nothing_left = f"nothing fits: {plan.limit} leaves no room for one more trial; no trial runs"
    return plan


def plan_sitting(
    store: Any, bench: Any, *, model_kind: str, arms: Sequence[str], cells: Sequence[Cell],
    definitions: Mapping[Cell, Any], trials: int | None, budget: int | None,
) -> DecidePlan:  # fmt: skip
    """The plugin's entry: `--bench-fill decide` over the selected cells of a bench (config.Bench).

    The sitting's size: `--bench-trials N` when given; else the budget alone when stored usage can
    estimate it; else what an ordinary sitting of these cells would run ([bench] trials per cell)."""
    compared = [cell for cell in cells if not bench.tasks[cell[1]].bonus]
    ordinary = bench.trials * max(1, len(compared))
    trial_limit = trials if trials is not None else None if budget is not None else ordinary
    stored = read_trials(store, model_kind, cells, bench.weights, definitions)
    tasks = [task for task in bench.tasks if not bench.tasks[task].bonus]
    # The family is every declared comparison of the bench, whichever arms this sitting selects: the
    # level of a claim, here and in the report, never depends on the selection.
    return plan_decisions(
        stored, bench.compared_pairs(list(arms)), tasks, floor=bench.floor, smallest_effect=bench.smallest_effect,
        trial_limit=trial_limit, budget=budget, fallback_trials=ordinary, family=2 * len(bench.compared_pairs()),
        horizon=bench.horizon_pairs,
    )  # fmt: skip
