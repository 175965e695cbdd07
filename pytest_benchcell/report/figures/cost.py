"""Cost per verified success: tokens per trial over pass rate, per arm and per pair (Fieller's interval)."""

from __future__ import annotations

from ... import statistics as stats
from ..model import SCOPE_THESE_TASKS, CostPerSuccessPair, CostPerSuccessRow, CostPerSuccessTable
from .context import _Context

COST_PER_SUCCESS_METHOD = (
    "mean cost-equivalent tokens per trial / mean pass rate, over the headline tasks (each task weighs the same); "
    "Fieller interval, the trials within each task the replicates"
)


def _cost_per_success(context: _Context, tasks: list[str]) -> CostPerSuccessTable:
    """Tokens per verified success per arm and per pair, about these tasks (trials with known usage).
    Below MIN_TASKS_FOR_INTERVAL tasks the figures stand without intervals, as every figure of the report."""
    confidence = context.settings.confidence
    with_interval = len(tasks) >= stats.MIN_TASKS_FOR_INTERVAL
    found: dict[str, stats.CostPerSuccess] = {}
    rows = []
    for arm in context.arms:
        cells = [
            [(cost, passed) for _, passed, cost, *_ in context.trials.get((arm, task), []) if cost is not None]
            for task in tasks
        ]
        if not cells or not all(cells):
            rows.append(CostPerSuccessRow(arm, None, None, None, None, None, sum(map(len, cells))))
            continue
        if all(len(cell) >= 2 for cell in cells):
            figure = found[arm] = stats.cost_per_success(cells, confidence=confidence)
            low, high = (figure.low, figure.high) if with_interval else (None, None)
            estimate, per_trial, rate = figure.estimate, figure.tokens_per_trial, figure.success_rate
        else:  # one trial in some task: the figure without an interval
            per_trial = stats.mean(stats.mean(cost for cost, _ in cell) for cell in cells)
            rate = stats.mean(stats.mean(1.0 if passed else 0.0 for _, passed in cell) for cell in cells)
            estimate, low, high = (per_trial / rate if rate else None), None, None
        rows.append(CostPerSuccessRow(arm, estimate, low, high, per_trial, rate, sum(map(len, cells))))
    pairs = []
    for i, a in enumerate(context.arms):
        for b in context.arms[i + 1 :]:
            ratio: tuple[float, float | None, float | None] | None = (
                stats.cost_per_success_ratio(found[a], found[b], confidence=confidence) if a in found and b in found else None
            )
            if ratio is not None and not with_interval:
                ratio = (ratio[0], None, None)
            pairs.append(CostPerSuccessPair(a, b, *(ratio or (None, None, None))))
    return CostPerSuccessTable(SCOPE_THESE_TASKS, list(tasks), COST_PER_SUCCESS_METHOD, rows, pairs)
