"""US dollars per trial and per verified success, per arm over the headline tasks: every scored trial
priced from its own usage at the report's prices (prices.py), so a change of prices re-prices every
sample; the CLI's own estimate beside it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import statistics as stats
from ...prices import PACKAGE_ORIGIN, Priced, PriceTable, package_table, price_usage, usage_from_text
from ...sample import TOKEN_COMPONENTS
from ..model import SCOPE_TASKS_LIKE_THESE, SCOPE_THESE_TASKS, DollarsRow, DollarsTable, Figure, ModelPrice, ReportSettings
from ..reading import TrialUsage
from .context import _Context
from .headline import NO_INTERVAL, _interval_over_tasks

DOLLARS_METHOD = (
    "each scored trial priced from its own usage (each model request at its own prices: cache writes by lifetime, "
    "long prompts at long-context prices) at the report's price table; per trial: mean over the headline tasks of "
    "the per-task means, interval about tasks like these; per verified success: dollars per trial / pass rate, "
    "Fieller interval for these tasks"
)
_Trial = tuple[float, bool, bool, "float | None"]  # dollars, passed, cache writes at the default lifetime, CLI's estimate


def report_prices(settings: ReportSettings) -> PriceTable:
    """The table a report prices its trials at: the bench's (the package's with its [prices] over it), else the package's."""
    return settings.prices or package_table()


def usage_of(trial: TrialUsage) -> dict[str, Any]:
    """A scored trial's usage as pricing reads it (prices.price_usage)."""
    _, tokens, pricing, _, _ = trial
    return usage_from_text(None if tokens is None else dict(zip(TOKEN_COMPONENTS, tokens)), pricing)


def trial_dollars(trial: TrialUsage, table: PriceTable) -> Priced:
    """One scored trial priced from its own usage at `table`, as every dollars figure of a report is."""
    return price_usage(usage_of(trial), trial[3], table)


def dollars_table(context: _Context, tasks: list[str], priced: Mapping[tuple[str, str], Sequence[TrialUsage]]) -> DollarsTable:
    table = report_prices(context.settings)
    models: dict[str, None] = {}
    unpriced: dict[str, None] = {}
    rows = []
    for arm in context.arms:
        cells: list[list[_Trial]] = []
        unknown = 0
        for task in tasks:
            cell = []
            for one in priced.get((arm, task), ()):
                passed, _, _, model, cli_estimate = one
                usage = usage_of(one)
                for name in usage.get("by_model") or ({str(model)} if model else ()):
                    models.setdefault(str(name), None)
                trial = price_usage(usage, model, table)  # as trial_dollars, the usage read once
                unpriced.update(dict.fromkeys(trial.unpriced))
                if trial.dollars is None:
                    unknown += 1
                    continue
                estimate = float(cli_estimate) if type(cli_estimate) in (int, float) else None
                cell.append((trial.dollars, passed, trial.assumed_5m, estimate))
            cells.append(cell)
        rows.append(_row(context, arm, cells, unknown))
    return DollarsTable(
        scope=f"per trial: {SCOPE_TASKS_LIKE_THESE}; per verified success: {SCOPE_THESE_TASKS}",
        tasks=list(tasks),
        method=DOLLARS_METHOD,
        rows=rows,
        prices=[_model_price(model, table) for model in sorted(models)],
        unpriced=sorted(unpriced),
    )


def _row(context: _Context, arm: str, cells: list[list[_Trial]], unknown: int) -> DollarsRow:
    trials = sum(map(len, cells))
    assumed = sum(default for cell in cells for _, _, default, _ in cell)
    if not cells or not all(cells):  # a task without a priced trial: no figure over these tasks
        empty = Figure(None, None, None, None, 0, 0, NO_INTERVAL)
        return DollarsRow(arm, empty, None, None, None, None, None, trials, unknown, assumed)
    means = [stats.mean(d for d, *_ in cell) for cell in cells]
    low, high, method = _interval_over_tasks(context, means, context.seed("dollars", arm))
    medians = [stats.median(d for d, *_ in cell) for cell in cells]
    per_trial = Figure(stats.mean(means), low, high, stats.mean(medians), len(cells), trials, method)
    rate = stats.mean(stats.mean(1.0 if passed else 0.0 for _, passed, *_ in cell) for cell in cells)
    per_success: float | None = per_trial.mean / rate if rate and per_trial.mean is not None else None
    success_low = success_high = None
    if all(len(cell) >= 2 for cell in cells) and len(cells) >= stats.MIN_TASKS_FOR_INTERVAL:
        figure = stats.cost_per_success([[(d, passed) for d, passed, *_ in cell] for cell in cells],
                                        confidence=context.settings.confidence)  # fmt: skip
        per_success, success_low, success_high = figure.estimate, figure.low, figure.high
    estimates = [[e for *_, e in cell if e is not None] for cell in cells]
    cli = stats.mean(stats.mean(cell) for cell in estimates) if all(estimates) else None
    return DollarsRow(arm, per_trial, per_success, success_low, success_high, rate, cli, trials, unknown, assumed)


def _model_price(model: str, table: PriceTable) -> ModelPrice:
    price = table.find(model)
    if price is None:
        return ModelPrice(model, "", "", "", None, None, None, None, None, None, "no price: its trials' dollars are unknown")
    rates = price.rates
    return ModelPrice(
        model=model,
        origin=price.origin if price.origin == PACKAGE_ORIGIN else f"[prices.\"{price.model}\"] in {price.origin}",
        as_of=price.as_of,
        source=price.source,
        input=rates.input,
        cache_write_5m=rates.cache_write_5m,
        cache_write_1h=rates.cache_write_1h,
        cache_read=rates.cache_read,
        output=rates.output,
        long_context_above=price.long_context_above,
        notes=price.notes,
    )
