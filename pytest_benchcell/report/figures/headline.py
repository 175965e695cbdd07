"""The per-arm figures over a set of tasks (per-task means first, then the mean over tasks, with the
interval about tasks like these) and the tables made of them: headline, per component, per tier,
coverage, outcomes, pass^k."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ... import statistics as stats
from ...sample import OUTCOME_CONFUSED, OUTCOME_HUNG, OUTCOME_INCORRECT, OUTCOME_PASS, TOKEN_COMPONENTS
from ..model import (
    COVERED,
    MISSING,
    PARTIAL,
    ArmCoverage,
    CellFigure,
    CellSummary,
    ComponentRow,
    CoverageCount,
    Figure,
    Headline,
    HeadlineRow,
    OutcomeRow,
    PassHatK,
    PassK,
    Rate,
    TierRow,
    TierSection,
    plural,
)
from .context import _Context, _every_headline_arm

MIN_TASKS = stats.MIN_TASKS_FOR_INTERVAL
SUCCESS_METHOD = "t over task rates, widened to pooled Wilson"
LOGNORMAL_METHOD = "lognormal generalized interval over task means"
T_METHOD = "t over task means"
NO_INTERVAL = f"none: fewer than {MIN_TASKS} tasks"
_Pick = Callable[[CellSummary], CellFigure]


def _interval_over_tasks(context: _Context, values: Sequence[float], seed: int) -> tuple[float | None, float | None, str]:
    """The interval of a per-arm figure about tasks like these (docs/statistics.md, "How the figures are computed").

    Positive values (costs, tokens, turns, times: right-skewed over tasks) get the lognormal
    generalized interval; a figure with a zero task mean gets the t interval, cut at 0 (it cannot be
    negative). Fewer than MIN_TASKS tasks get no interval at all.
    """
    if len(values) < MIN_TASKS:
        return None, None, NO_INTERVAL
    confidence = context.settings.confidence
    if all(v > 0 for v in values):
        low, high = stats.lognormal_mean_interval(
            values, confidence=confidence, draws=context.settings.resamples, seed=seed
        )
        return low, high, LOGNORMAL_METHOD
    low, high = stats.t_interval(values, confidence=confidence)
    return max(0.0, low), high, T_METHOD


def _arm_figures(
    context: _Context, arm: str, tasks: Sequence[str], picks: Mapping[str, _Pick], *labels: str
) -> tuple[dict[str, Figure], Rate]:
    """One arm's figures over a set of tasks: per-task means first, then the mean over tasks."""
    cells = [context.cells[(arm, task)] for task in sorted(tasks)]
    figures = {}
    for name, pick in picks.items():
        chosen = [figure for figure in map(pick, cells) if figure.mean is not None]
        if not chosen:
            figures[name] = Figure(None, None, None, None, 0, 0, NO_INTERVAL)
            continue
        means = [f.mean for f in chosen if f.mean is not None]
        # One seed per arm and table: its figures share the Monte-Carlo draws (statistics.intervals._pivot_draws).
        low, high, method = _interval_over_tasks(context, means, context.seed(*labels, arm))
        medians = [f.median for f in chosen if f.median is not None]
        figures[name] = Figure(
            mean=stats.mean(means),
            low=low,
            high=high,
            median=stats.mean(medians) if medians else None,
            n_tasks=len(chosen),
            n_samples=sum(f.n for f in chosen),
            method=method,
        )
    return figures, _success_rate(context, [cell for cell in cells if cell.scored])


def _success_rate(context: _Context, cells: Sequence[CellSummary]) -> Rate:
    """Mean over tasks of per-task pass rates, with an interval that cannot collapse to a point.

    The t interval alone says [100%, 100%] when every task passed every trial, which is exactly the
    overconfidence this report exists to prevent; so the interval is widened to include the Wilson
    interval of the pooled counts (honest at 0/n and n/n), then cut to [0, 1].
    """
    if not cells:
        return Rate(None, None, None, 0, 0, 0, NO_INTERVAL)
    rates = [c.success.successes / c.scored for c in cells]
    successes = sum(c.success.successes for c in cells)
    n = sum(c.scored for c in cells)
    if len(cells) < MIN_TASKS:
        return Rate(stats.mean(rates), None, None, successes, n, len(cells), NO_INTERVAL)
    low, high = stats.wilson_interval(successes, n, context.z)
    t_low, t_high = stats.t_interval(rates, confidence=context.settings.confidence)
    low, high = max(0.0, min(low, t_low)), min(1.0, max(high, t_high))
    return Rate(stats.mean(rates), low, high, successes, n, len(cells), SUCCESS_METHOD)


_HEADLINE_PICKS: dict[str, _Pick] = {
    "cost_equivalent": lambda c: c.cost_equivalent,
    "raw_tokens": lambda c: c.raw_tokens,
    "turns": lambda c: c.turns,
    "duration_s": lambda c: c.duration_s,
    "imputed_cost_usd": lambda c: c.imputed_cost_usd,
    **{name: (lambda c, name=name: c.components[name]) for name in TOKEN_COMPONENTS},  # type: ignore[misc]
}
_TIER_PICKS: dict[str, _Pick] = {"cost_equivalent": _HEADLINE_PICKS["cost_equivalent"]}


def _coverage_count(context: _Context, arm: str, tasks: Iterable[str]) -> CoverageCount:
    states = Counter(context.cells[(arm, task)].coverage for task in tasks)
    return CoverageCount(states[COVERED], states[PARTIAL], states[MISSING], sum(states.values()))


def _headline(context: _Context, tasks: list[str]) -> tuple[Headline, list[ComponentRow]]:
    """The headline rows and the per-component rows: both over the headline tasks, one set of draws per arm."""
    scored = context.scored_tasks()
    floor = context.settings.floor
    every_arm = _every_headline_arm(context)
    if not context.arms:
        note = "no arm has samples yet"
    elif not tasks:
        note = f"no task has {every_arm} at >= {floor} scored trials yet, so no figure can be compared"
    else:
        note = (
            f"means over {len(tasks)} of {plural(len(scored), 'task')}: those where {every_arm} has >= {floor} "
            "scored trials; per-task means first, each task weighs the same"
        )
    rows, components = [], []
    for arm in context.arms:
        figures, success = _arm_figures(context, arm, tasks, _HEADLINE_PICKS, "headline")
        rows.append(
            HeadlineRow(
                arm=arm,
                cost_equivalent=figures["cost_equivalent"],
                raw_tokens=figures["raw_tokens"],
                turns=figures["turns"],
                duration_s=figures["duration_s"],
                success=success,
                coverage=_coverage_count(context, arm, scored),
                imputed_cost_usd=figures["imputed_cost_usd"],
            )
        )
        components.append(ComponentRow(arm, *(figures[name] for name in TOKEN_COMPONENTS)))
    return Headline(tasks=tasks, note=note, rows=rows), components


def _arm_coverage(context: _Context, arm: str) -> ArmCoverage:
    by_state: dict[str, list[str]] = {COVERED: [], PARTIAL: [], MISSING: []}
    for task in context.scored_tasks():
        by_state[context.cells[(arm, task)].coverage].append(task)
    return ArmCoverage(
        arm=arm,
        covered=len(by_state[COVERED]),
        partial=len(by_state[PARTIAL]),
        missing=len(by_state[MISSING]),
        total=len(context.scored_tasks()),
        covered_tasks=by_state[COVERED],
        partial_tasks=by_state[PARTIAL],
        missing_tasks=by_state[MISSING],
    )


def _tier_order(context: _Context) -> list[str]:
    tiers: list[str] = []
    for task in context.scored_tasks():
        tier = context.catalogue[task].tier
        if tier not in tiers:
            tiers.append(tier)
    # With a bench catalogue its declaration order is meaningful; discovered tiers are sorted.
    return tiers if context.settings.tasks is not None else sorted(tiers)


def _tiers(context: _Context, headline_tasks: list[str]) -> list[TierSection]:
    sections = []
    for tier in _tier_order(context):
        tier_tasks = [t for t in context.scored_tasks() if context.catalogue[t].tier == tier]
        tasks = [t for t in headline_tasks if context.catalogue[t].tier == tier]
        rows = []
        for arm in context.arms:
            figures, success = _arm_figures(context, arm, tasks, _TIER_PICKS, "tier", tier)
            rows.append(TierRow(arm, figures["cost_equivalent"], success, _coverage_count(context, arm, tier_tasks)))
        sections.append(TierSection(tier=tier, tasks=tasks, catalogue_tasks=len(tier_tasks), rows=rows))
    return sections


def _outcomes(context: _Context, arm: str) -> OutcomeRow:
    """Counts over every non-bonus task of the catalogue (not only the headline tasks)."""
    cells = [context.cells[(arm, task)] for task in context.scored_tasks()]
    return OutcomeRow(
        arm=arm,
        samples=sum(c.samples for c in cells),
        scored=sum(c.scored for c in cells),
        passed=sum(c.outcomes[OUTCOME_PASS] for c in cells),
        incorrect=sum(c.outcomes[OUTCOME_INCORRECT] for c in cells),
        confused=sum(c.outcomes[OUTCOME_CONFUSED] for c in cells),
        hung=sum(c.outcomes[OUTCOME_HUNG] for c in cells),
        invalid=sum(c.invalid for c in cells),
        error=sum(c.error for c in cells),
    )


def _pass_hat_k(context: _Context, arm: str, tasks: list[str]) -> PassHatK:
    cells = [context.cells[(arm, task)] for task in tasks]
    if not cells:
        return PassHatK(arm, 0, 0, [])
    k_max = min(c.scored for c in cells)
    counts = [(c.success.successes, c.scored) for c in cells]
    curve = stats.pass_hat_k_curve(counts, k_max)
    return PassHatK(arm, len(cells), k_max, [PassK(k, value) for k, value in enumerate(curve, start=1)])
