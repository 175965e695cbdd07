"""The pairwise comparisons: every pair on every metric as one Holm family, the paired trials in the
order the report could first see them, the evidence within and over tasks, and each verdict's sentence."""

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
from .context import _Context


@dataclass(frozen=True)
class _MetricSpec:
    key: str
    unit: str
    better: str
    values: Callable[[CellSummary], float | None]  # the cell's mean
    trial_value: Callable[[Trial], float | None]  # one trial's value, for the pairs within tasks (None: unknown)
    show: Callable[[float], str]  # a magnitude, e.g. "1,234 tokens" or "5.0 pp"


_COMPARED_METRICS = (
    _MetricSpec(
        "cost_equivalent", "cost-equivalent tokens per trial", "lower",
        lambda c: c.cost_equivalent.mean, lambda trial: trial[2], lambda v: f"{v:,.0f} tokens",
    ),
    _MetricSpec(
        "success", "success rate", "higher",
        lambda c: c.success.successes / c.scored if c.scored else None, lambda trial: 1.0 if trial[1] else 0.0,
        lambda v: f"{100 * v:.1f} pp",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class _Evidence:
    """Everything one (metric, pair) contributes before the family's Holm adjustment."""

    spec: _MetricSpec
    a: str
    b: str
    over_tasks: stats.PairedDifference
    within: stats.SignEvidence | stats.BettingEvidence
    signs: tuple[int, int]  # (non-zero pairs, pairs with a - b > 0)
    these_tasks: tuple[float, float, float] | None  # (estimate, low, high) of the paired trials; None: no pair
    mde: float | None
    mean_a: float | None
    mean_b: float | None
    clipped: int = 0  # token pairs whose ratio was beyond the clip (counted at the clip)


def _comparisons(context: _Context) -> list[Comparison]:
    """Every pair on both metrics, as one family: Holm over all of them, in both scopes."""
    pairs = [(a, b) for i, a in enumerate(context.arms) for b in context.arms[i + 1 :]]
    if not pairs:
        return []
    alpha = 1.0 - context.settings.confidence
    family_size = len(pairs) * len(_COMPARED_METRICS)
    claim_e = family_size / alpha
    found = [_evidence(context, spec, a, b, claim_e, alpha / family_size) for spec in _COMPARED_METRICS for a, b in pairs]
    within_adjusted = stats.holm_adjust([e.within.anytime_p for e in found])
    over_tested = [e.over_tasks.p_value for e in found if e.over_tasks.p_value is not None]
    over_adjusted = iter(stats.holm_adjust(over_tested))
    out: dict[str, list[PairComparison]] = {spec.key: [] for spec in _COMPARED_METRICS}
    for evidence, within_p in zip(found, within_adjusted):
        over_p = next(over_adjusted) if evidence.over_tasks.p_value is not None else None
        out[evidence.spec.key].append(_pair(evidence, within_p, over_p, alpha, claim_e))
    return [
        Comparison(spec.key, spec.unit, spec.better, family_size > 1, family_size, out[spec.key])
        for spec in _COMPARED_METRICS
    ]


def _evidence(context: _Context, spec: _MetricSpec, a: str, b: str, claim_e: float, level: float) -> _Evidence:
    shared = [t for t in context.scored_tasks() if context.covered(a, t) and context.covered(b, t)]
    per_a = {t: [v] for t in shared if (v := spec.values(context.cells[(a, t)])) is not None}
    per_b = {t: [v] for t in shared if (v := spec.values(context.cells[(b, t)])) is not None}
    over_tasks = stats.paired_difference(
        per_a, per_b, resamples=context.settings.resamples, seed=context.seed("compare", spec.key, a, b),
        confidence=context.settings.confidence,
    )  # fmt: skip
    tasks = over_tasks.tasks
    trials = {(arm, t): context.trials.get((arm, t), []) for arm in (a, b) for t in tasks}
    key = (a, b, tasks)
    if key not in context.paired:  # the same order serves both metrics
        context.paired[key] = paired_in_time_order(trials, a, b, tasks, context.settings.floor)
    differences = [_difference(spec, trial_a, trial_b) for trial_a, trial_b in context.paired[key]]
    signs = (sum(d != 0 for d in differences), sum(d > 0 for d in differences))
    within: stats.SignEvidence | stats.BettingEvidence
    mde = None
    clipped = 0
    if spec.key == "success":
        within = stats.sign_e_process(differences)
        pairs_per_task = [min(len(trials[(a, t)]), len(trials[(b, t)])) for t in tasks]
        base = [(per_a[t][0] + per_b[t][0]) / 2.0 for t in tasks]
        mde = stats.success_mde(base, pairs_per_task, claim_e) if tasks else None
        bound, values = 1.0, differences
    else:
        # By how much, not only which: the betting e-process on the paired log-ratios log(a / b), clipped.
        bound = stats.TOKEN_LOG_RATIO_CLIP
        ratios = [
            stats.token_log_ratio(value_b, value_a)
            for trial_a, trial_b in context.paired[key]
            if (value_a := spec.trial_value(trial_a)) is not None and (value_b := spec.trial_value(trial_b)) is not None
        ]  # a pair with unknown usage carries no evidence and is left out
        clipped = sum(abs(value) > bound for value in ratios)
        values = [stats.clip(value, bound) for value in ratios]
        within = stats.token_e_process(values, bound=bound)
    these_tasks = None
    if values:
        low, high = stats.confidence_sequence(values, low=-bound, high=bound, alpha=level)[-1]
        these_tasks = (stats.mean(values), low, high)
        if spec.key != "success":
            these_tasks = (math.exp(these_tasks[0]), math.exp(low), math.exp(high))
    mean_a = stats.mean(per_a[t][0] for t in tasks) if tasks else None
    mean_b = stats.mean(per_b[t][0] for t in tasks) if tasks else None
    return _Evidence(spec, a, b, over_tasks, within, signs, these_tasks, mde, mean_a, mean_b, clipped)


def _difference(spec: _MetricSpec, trial_a: Trial, trial_b: Trial) -> float:
    """One pair's difference; a pair with an unknown value (usage never reported) is a tie: no evidence."""
    value_a, value_b = spec.trial_value(trial_a), spec.trial_value(trial_b)
    return 0.0 if value_a is None or value_b is None else value_a - value_b


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


def _sitting(trial: Sequence[object]) -> object:
    """The trial's sitting; trials with none recorded (older samples, callers that keep no sittings)
    share one, so they pair k-th with k-th as before sittings were kept."""
    return trial[3] if len(trial) > 3 else ""


def _pair(evidence: _Evidence, within_p: float, over_p: float | None, alpha: float, claim_e: float) -> PairComparison:
    result, within = evidence.over_tasks, evidence.within
    direction = 0 if not result.estimate else (1 if result.estimate > 0 else -1)
    # A claim needs the evidence within tasks (Holm-adjusted) and the mean difference to point the same way.
    claimed = within_p <= alpha and direction != 0 and within.direction == direction
    conflicting = within_p <= alpha and direction != 0 and within.direction == -direction
    generalizes = (
        claimed and over_p is not None and over_p < alpha and result.low is not None and result.high is not None
        and (result.low > 0 if direction > 0 else result.high < 0)
    )  # fmt: skip
    scope = SCOPE_TASKS_LIKE_THESE if generalizes else SCOPE_THESE_TASKS if claimed else None
    these = evidence.these_tasks
    e_max = within.max_up if within.direction >= 0 else within.max_down
    return PairComparison(
        arm_a=evidence.a, arm_b=evidence.b, n_tasks=result.n_tasks, tasks=list(result.tasks),
        mean_a=evidence.mean_a, mean_b=evidence.mean_b, estimate=result.estimate, low=result.low, high=result.high,
        relative=result.estimate / evidence.mean_b if result.estimate is not None and evidence.mean_b else None,
        p_value=result.p_value, p_adjusted=over_p,
        within_tasks=WithinTasks(
            pairs=within.pairs, nonzero=evidence.signs[0], positives=evidence.signs[1], e_value=within.e_value,
            e_max=e_max, anytime_p=within.anytime_p, p_adjusted=within_p, claim_e_value=claim_e,
            method=SIGN_METHOD if evidence.spec.key == "success" else BETTING_METHOD,
            scale="difference" if evidence.spec.key == "success" else "ratio",
            estimate=these[0] if these else None, low=these[1] if these else None, high=these[2] if these else None,
        ),
        minimum_detectable_effect=evidence.mde, distinguishable=claimed, scope=scope,
        verdict=_verdict(evidence, scope, over_p, alpha, conflicting),
    )  # fmt: skip


SIGN_METHOD = "sign e-process"
BETTING_METHOD = "betting e-process on clipped log-ratios mixed with the sign e-process"


def _ratio_text(a: str, b: str, these: tuple[float, float, float] | None, clipped: int = 0) -> str:
    """"a/b = 1.20x": the geometric mean ratio of the paired trials' tokens (clipped log-ratios). When
    pairs were clipped the ratio understates the gap, so the text says how many were counted at the clip."""
    if not these:
        return f"{a}/{b} unknown"
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    note = f" (counting {plural(clipped, 'paired trial')} more than {limit:g}x apart as {limit:g}x)" if clipped else ""
    return f"{a}/{b} = {these[0]:.2f}x{note}"


def _interval_text(low: float, high: float) -> str:
    """The anytime interval of the clipped ratio: an end at the clip means "that far or farther"."""
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    low_text = f"{low:.2f}x or less" if low <= 1.0 / limit * (1 + 1e-9) else f"{low:.2f}x"
    high_text = f"{high:.2f}x or more" if high >= limit * (1 - 1e-9) else f"{high:.2f}x"
    return f"{low_text} to {high_text}"


def _verdict(evidence: _Evidence, scope: str | None, over_p: float | None, alpha: float, conflicting: bool) -> str:
    """The sentence a reader quotes. Only a claimed difference gets a winner, and it names its scope."""
    spec, a, b, result, within = evidence.spec, evidence.a, evidence.b, evidence.over_tasks, evidence.within
    if result.n_tasks == 0 or result.estimate is None:
        return "not compared: no task has both arms at the floor"
    if scope is not None:
        direction = "lower" if result.estimate < 0 else "higher"
        winner = a if direction == spec.better else b
        nonzero, positives = evidence.signs
        if spec.key == "success":
            agreeing = positives if result.estimate > 0 else nonzero - positives
            support = f"{agreeing} of {plural(nonzero, 'differing paired trial')} agree"
        else:
            support = f"{_ratio_text(a, b, evidence.these_tasks, evidence.clipped)} over {plural(within.pairs, 'paired trial')}"
        head = (
            f"distinguishable for {scope}: {winner} is better ({a} is {direction} than {b} by "
            f"{spec.show(abs(result.estimate))}; {support})"
        )
        if scope == SCOPE_TASKS_LIKE_THESE:
            return head
        needed = stats.sign_flip_tasks_needed(alpha)
        if result.n_tasks < needed:
            return f"{head}; whether it generalizes to tasks like these needs at least {needed} shared tasks"
        return f"{head}; not shown to generalize to tasks like these (over tasks p {p_text(over_p or 1.0)})"
    if conflicting:
        return "not distinguishable at this sample size: most paired trials and the mean difference point opposite ways"
    mde = evidence.mde
    if spec.key != "success":
        if evidence.these_tasks is None:
            return "not distinguishable at this sample size: no paired trial with known usage"
        _, low, high = evidence.these_tasks
        return (
            f"not distinguishable at this sample size; for these tasks "
            f"{_ratio_text(a, b, evidence.these_tasks, evidence.clipped)} over {plural(within.pairs, 'paired trial')}, "
            f"anytime interval {_interval_text(low, high)}"
        )
    if mde is None:
        detail = "no difference is detectable with so few paired trials"
    elif mde == 0.0:
        detail = "trials within a cell do not vary, so any difference is detectable for these tasks"
    else:
        share = f" ({100 * mde / abs(evidence.mean_b):.0f}% of {b})" if evidence.mean_b and spec.key != "success" else ""
        detail = f"minimum detectable effect for these tasks ~ {spec.show(mde)}{share}"
    return f"not distinguishable at this sample size; {detail}"
