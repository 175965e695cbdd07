"""The pairwise comparisons: the declared pairs on both metrics as one family (statistics.Family,
Bonferroni on e-values, the family `--bench-fill decide` judges), the paired trials in the order the
report could first see them, statistics.decide's verdict for these tasks, the evidence over tasks,
and each verdict's sentence."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ... import statistics as stats
from ..model import (
    SCOPE_TASKS_LIKE_THESE,
    SCOPE_THESE_TASKS,
    CellSummary,
    Comparison,
    PairComparison,
    WithinTasks,
    p_text,
    plural,
)
from ..reading import Trial
from ..verdict_text import a_minus_b, better_arm, claim, margin_text, sign_statement
from .context import _Context


@dataclass(frozen=True)
class _MetricSpec:
    key: str
    decided_as: str  # the metric statistics.decide judges: "success" or "tokens"
    unit: str
    better: str
    values: Callable[[CellSummary], float | None]  # the cell's mean
    show: Callable[[float], str]  # a magnitude, e.g. "1,234 tokens" or "5.0 pp"


_COMPARED_METRICS = (
    _MetricSpec(
        "cost_equivalent", stats.TOKENS, "cost-equivalent tokens per trial", "lower",
        lambda c: c.cost_equivalent.mean, lambda v: f"{v:,.0f} tokens",
    ),
    _MetricSpec(
        "success", stats.SUCCESS, "success rate", "higher",
        lambda c: c.success.successes / c.scored if c.scored else None, lambda v: f"{100 * v:.1f} pp",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class _Evidence:
    """Everything one (metric, pair) contributes: the verdict for these tasks and the figures over tasks."""

    spec: _MetricSpec
    a: str
    b: str
    verdict: stats.Verdict
    over_tasks: stats.PairedDifference
    mde: float | None
    mean_a: float | None
    mean_b: float | None


def family_pairs(context_arms: Sequence[str], declared: Sequence[tuple[str, str]] | None) -> tuple[list[tuple[str, str]], int]:
    """The pairs the report shows (the declared ones among its arms, else every pair of them) and the
    number of pairs in the family (every declared pair, whichever arms are shown: as the plan counts)."""
    every = [(a, b) for i, a in enumerate(context_arms) for b in context_arms[i + 1 :]]
    if declared is None:
        return every, len(every)
    return [(a, b) for a, b in declared if a in context_arms and b in context_arms], len(declared)


def _comparisons(context: _Context) -> list[Comparison]:
    """The declared pairs on both metrics, as one family (Bonferroni on e-values, as the plan judges them)."""
    pairs, declared = family_pairs(context.arms, context.settings.comparisons)
    if not pairs:
        return []
    family = stats.Family.of(declared, 1.0 - context.settings.confidence, context.settings.horizon_pairs)
    out = []
    for spec in _COMPARED_METRICS:
        margin = stats.margin_of(spec.decided_as, context.settings.smallest_effect)
        found = [_evidence(context, spec, a, b, family, margin) for a, b in pairs]
        shown_margin = None if margin is None else margin if spec.decided_as == stats.SUCCESS else math.exp(margin)
        out.append(Comparison(
            spec.key, spec.unit, spec.better, family.size, stats.BONFERRONI, shown_margin,
            [_pair(evidence, family) for evidence in found],
        ))  # fmt: skip
    return out


def _evidence(
    context: _Context, spec: _MetricSpec, a: str, b: str, family: stats.Family, margin: float | None
) -> _Evidence:  # fmt: skip
    shared = [t for t in context.scored_tasks() if context.covered(a, t) and context.covered(b, t)]
    key = (a, b, tuple(shared))
    if key not in context.paired:  # the same order serves both metrics
        trials = {(arm, t): context.trials.get((arm, t), []) for arm in (a, b) for t in shared}
        context.paired[key] = paired_in_time_order(trials, a, b, shared, context.settings.floor)
    outcomes = [((trial_a[1], trial_a[2]), (trial_b[1], trial_b[2])) for trial_a, trial_b in context.paired[key]]
    verdict = stats.decide(outcomes, metric=spec.decided_as, family=family, margin=margin, tasks=len(shared))
    per_a = {t: [v] for t in shared if (v := spec.values(context.cells[(a, t)])) is not None}
    per_b = {t: [v] for t in shared if (v := spec.values(context.cells[(b, t)])) is not None}
    over_tasks = stats.paired_difference(
        per_a, per_b, resamples=context.settings.resamples, seed=context.seed("compare", spec.key, a, b),
        confidence=context.settings.confidence,
    )  # fmt: skip
    tasks = over_tasks.tasks
    mde = None
    if spec.key == "success" and tasks:
        pairs_per_task = [min(len(context.trials.get((a, t), [])), len(context.trials.get((b, t), []))) for t in tasks]
        base = [(per_a[t][0] + per_b[t][0]) / 2.0 for t in tasks]
        mde = stats.success_mde(base, pairs_per_task, family.claim_e)
    mean_a = stats.mean(per_a[t][0] for t in tasks) if tasks else None
    mean_b = stats.mean(per_b[t][0] for t in tasks) if tasks else None
    return _Evidence(spec, a, b, verdict, over_tasks, mde, mean_a, mean_b)


def paired_in_time_order(
    trials: Mapping[tuple[str, str], Sequence[Trial]], a: str, b: str, tasks: Sequence[str], floor: int
) -> list[tuple[Trial, Trial]]:
    """The paired trials (a, b), in the order the report could first have seen each pair.

    Within a task, trials of one sitting pair first (paired_within_task), so a drift between sittings
    (the model's or the gateway's mood, shared by every trial of a sitting) cancels in each pair. A pair
    counts from the later of its two start times, but never before its task had both arms at the floor
    (the moment the task joined the comparison). So a reading after some sittings only appends pairs
    to the sequence a reading after fewer saw, and an e-process over it is one test martingale however
    often it is read.
    """
    keyed = []
    for task in tasks:
        cell_a, cell_b = trials[(a, task)], trials[(b, task)]
        joined = max(cell_a[floor - 1][0], cell_b[floor - 1][0])
        for trial_a, trial_b in paired_within_task(cell_a, cell_b):
            completed = max(trial_a[0], trial_b[0])
            keyed.append((max(joined, completed), completed, task, trial_a[0], trial_b[0], trial_a, trial_b))
    keyed.sort(key=lambda item: item[:5])
    return [(item[5], item[6]) for item in keyed]


def paired_within_task(cell_a: Sequence[Trial], cell_b: Sequence[Trial]) -> list[tuple[Trial, Trial]]:
    """One task's pairs from its two cells' trials in start order: the k-th trial of a in a sitting with
    the k-th of b in the same sitting; the trials left over in their sittings (a sitting that ran one
    arm more often, or only one arm: one cell per sitting) then pair across sittings, the k-th left over
    of a with the k-th left over of b, as the only pairs such a store has. Every sitting already read
    keeps its pairs and its leftovers when later sittings are stored, so pairs are only added.
    """
    of_b: dict[str, list[Trial]] = {}
    for trial in cell_b:
        of_b.setdefault(_sitting(trial), []).append(trial)
    taken = dict.fromkeys(of_b, 0)
    pairs, left_a = [], []
    for trial in cell_a:
        sitting = _sitting(trial)
        same = of_b.get(sitting, ())
        if taken.get(sitting, 0) < len(same):
            pairs.append((trial, same[taken[sitting]]))
            taken[sitting] += 1
        else:
            left_a.append(trial)
    left_b = sorted((t for sitting, same in of_b.items() for t in same[taken[sitting] :]), key=lambda t: t[:2])
    return pairs + list(zip(left_a, left_b))


def _sitting(trial: Sequence[object]) -> str:
    """The trial's sitting; trials with none recorded (older samples, callers that keep no sittings)
    share one, so they pair k-th with k-th as before sittings were kept."""
    return str(trial[3]) if len(trial) > 3 else ""


def _pair(evidence: _Evidence, family: stats.Family) -> PairComparison:
    result, verdict = evidence.over_tasks, evidence.verdict
    claimed = verdict.decision == stats.DIFFERS
    over_p = None if result.p_value is None else min(1.0, family.size * result.p_value)
    towards = -verdict.direction  # the claim's sign of a - b (b higher: a - b below 0)
    generalizes = (
        claimed and over_p is not None and over_p < family.alpha and result.low is not None
        and result.high is not None and (result.low > 0 if towards > 0 else result.high < 0)
    )  # fmt: skip
    scope = SCOPE_TASKS_LIKE_THESE if generalizes else SCOPE_THESE_TASKS if claimed else None
    estimate, interval = a_minus_b(verdict)
    ratio = evidence.spec.decided_as == stats.TOKENS
    shown = (lambda v: math.exp(v)) if ratio else (lambda v: v)
    anytime_p = min(1.0, 1.0 / verdict.e_value)
    return PairComparison(
        arm_a=evidence.a, arm_b=evidence.b, n_tasks=verdict.tasks, tasks=list(result.tasks),
        mean_a=evidence.mean_a, mean_b=evidence.mean_b, estimate=result.estimate, low=result.low, high=result.high,
        relative=result.estimate / evidence.mean_b if result.estimate is not None and evidence.mean_b else None,
        p_value=result.p_value, p_adjusted=over_p,
        within_tasks=WithinTasks(
            pairs=verdict.pairs, nonzero=verdict.nonzero, positives=verdict.nonzero - verdict.positives,
            e_value=verdict.e_now, e_max=verdict.e_value, anytime_p=anytime_p,
            p_adjusted=min(1.0, family.size * anytime_p), claim_e_value=family.claim_e,
            method=_method(verdict), scale="ratio" if ratio else "difference",
            estimate=None if estimate is None else shown(estimate),
            low=None if interval is None else shown(interval[0]), high=None if interval is None else shown(interval[1]),
            statement=sign_statement(verdict, evidence.a, evidence.b),
        ),
        minimum_detectable_effect=evidence.mde, decision=verdict.decision, claim=claim(verdict, evidence.a, evidence.b),
        distinguishable=claimed, scope=scope, verdict=_verdict(evidence, scope, over_p, family.alpha),
    )  # fmt: skip


SIGN_METHOD = "sign e-process"
BETTING_METHOD = "betting e-process on clipped log-ratios mixed with the sign e-process"
SEQUENTIAL_SIGN_METHOD = "group-sequential exact sign test (O'Brien-Fleming-type spending to the horizon)"
SEQUENTIAL_T_METHOD = "group-sequential t test on clipped log-ratios (O'Brien-Fleming-type spending to the horizon)"


def _method(verdict: stats.Verdict) -> str:
    """The test behind the verdict: the anytime e-process, or under a horizon the group-sequential test."""
    if verdict.horizon is not None:
        return SEQUENTIAL_SIGN_METHOD if verdict.metric == stats.SUCCESS else SEQUENTIAL_T_METHOD
    return SIGN_METHOD if verdict.metric == stats.SUCCESS else BETTING_METHOD


def _ratio_text(a: str, b: str, verdict: stats.Verdict) -> str:
    """"a/b = 1.20x": the geometric mean ratio of the paired trials' tokens (clipped log-ratios). When
    pairs were clipped the ratio understates the gap, so the text says how many were counted at the clip."""
    estimate, _ = a_minus_b(verdict)
    if estimate is None:
        return f"{a}/{b} unknown"
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    clipped = verdict.clipped
    note = f" (counting {plural(clipped, 'paired trial')} more than {limit:g}x apart as {limit:g}x)" if clipped else ""
    return f"{a}/{b} = {math.exp(estimate):.2f}x{note}"


def _interval_text(verdict: stats.Verdict) -> str:
    """The anytime interval, a - b (tokens: of the clipped ratio a/b, where an end at the clip means
    "that far or farther"); withheld below 3 shared tasks."""
    _, interval = a_minus_b(verdict)
    if interval is None:
        return f"no interval below {stats.MIN_TASKS_FOR_INTERVAL} shared tasks"
    if verdict.metric == stats.SUCCESS:
        return f"anytime interval {100 * interval[0]:+.1f} to {100 * interval[1]:+.1f} pp"
    low, high = math.exp(interval[0]), math.exp(interval[1])
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    low_text = f"{low:.2f}x or less" if low <= 1.0 / limit * (1 + 1e-9) else f"{low:.2f}x"
    high_text = f"{high:.2f}x or more" if high >= limit * (1 - 1e-9) else f"{high:.2f}x"
    return f"anytime interval {low_text} to {high_text}"


def _these_tasks(evidence: _Evidence) -> str:
    """The paired trials' own figure: "a − b = +12.5 pp over 24 paired trials" or the ratio a/b."""
    verdict, a, b = evidence.verdict, evidence.a, evidence.b
    if verdict.metric == stats.SUCCESS:
        estimate, _ = a_minus_b(verdict)
        figure = f"{a} \u2212 {b} = {100 * (estimate or 0.0):+.1f} pp"
    else:
        figure = _ratio_text(a, b, verdict)
    return f"{figure} over {plural(verdict.pairs, 'paired trial')}"


def _verdict(evidence: _Evidence, scope: str | None, over_p: float | None, alpha: float) -> str:
    """The sentence a reader quotes (Markdown, HTML, JSON). Only a claimed difference gets a winner, and
    it names its scope; an equivalence names its margin and the interval that proves it."""
    spec, a, b, result, verdict = evidence.spec, evidence.a, evidence.b, evidence.over_tasks, evidence.verdict
    if verdict.tasks == 0:
        return "not compared: no task has both arms at the floor"
    if verdict.pairs == 0:
        return "not compared: no paired trial with known usage"
    if scope is not None:
        winner = better_arm(verdict, a, b)
        support = _these_tasks(evidence)
        if spec.key == "success":
            agreeing = verdict.positives if verdict.direction > 0 else verdict.nonzero - verdict.positives
            support = f"{agreeing} of {plural(verdict.nonzero, 'differing paired trial')} agree"
        head = f"distinguishable for {scope}: {winner} is better ({support}"
        if result.estimate is not None and result.estimate * -verdict.direction > 0:
            direction = "lower" if result.estimate < 0 else "higher"
            head += f"; over tasks {a} is {direction} than {b} by {spec.show(abs(result.estimate))}"
        head += ")"
        if scope == SCOPE_TASKS_LIKE_THESE:
            return head
        needed = stats.sign_flip_tasks_needed(alpha)
        if result.n_tasks < needed:
            return f"{head}; whether it generalizes to tasks like these needs at least {needed} shared tasks"
        return f"{head}; not shown to generalize to tasks like these (over tasks p {p_text(over_p or 1.0)})"
    if verdict.decision == stats.EQUIVALENT and verdict.margin is not None:
        return (
            f"equivalent for these tasks: no difference larger than {margin_text(verdict.metric, verdict.margin)} "
            f"({_these_tasks(evidence)}, {_interval_text(verdict)}, inside the margin)"
        )
    undecided = "not distinguishable at this sample size"
    if verdict.margin is not None:
        undecided += f", nor shown equivalent within {margin_text(verdict.metric, verdict.margin)}"
    if spec.key != "success":
        return f"{undecided}; for these tasks {_these_tasks(evidence)}, {_interval_text(verdict)}"
    mde = evidence.mde
    if mde is None:
        detail = "no difference is detectable with so few paired trials"
    elif mde == 0.0:
        detail = "trials within a cell do not vary, so any difference is detectable for these tasks"
    else:
        detail = f"minimum detectable effect for these tasks ~ {spec.show(mde)}"
    return f"{undecided}; {detail}"
