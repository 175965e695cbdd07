"""`--bench-budget-usd`: a sitting's spend in dollars, at the prices of the bench's table (prices.py).

By the token budget's rules: the spend is read back from the store (so every xdist worker and the
controller see the same figure), no trial starts once the spend plus the trial's expected cost would
pass the budget, and a reply without usage stops the sitting (sitting.SittingStop: never blind). A
trial's expected cost is the mean of its cell's stored trials in dollars (prices.expected_dollars).
Pure values only."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .prices import PriceTable, expected_dollars, price_usage, usage_from_text, usd

USD_ALLOWED = "an amount of US dollars > 0, e.g. 2.50"


def parse_usd(text: str) -> float:
    """The option's value: a finite amount of dollars > 0 ("2.50", "$2.50"), else ValueError naming it."""
    cleaned = text.strip().removeprefix("$")
    try:
        value = float(cleaned)
    except ValueError:
        raise ValueError(f"{text!r} is not an amount; allowed: {USD_ALLOWED}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not an amount > 0; allowed: {USD_ALLOWED}")
    return value


def sample_dollars(sample: Mapping[str, Any], table: PriceTable) -> float | None:
    """A stored sample (or the store's summary of one) in dollars; None when unknown."""
    usage = sample.get("usage")
    if isinstance(usage, Mapping) and "pricing" in usage:  # a summary from the checked index
        usage = usage_from_text(usage.get("total"), str(usage.get("pricing") or ""))
    return price_usage(usage if isinstance(usage, Mapping) else None, sample.get("model"), table).dollars


@dataclass
class DollarSpend:
    """What this sitting spent, and each cell's trials in dollars (every sitting's: its expected cost)."""

    spent: float = 0.0
    by_cell: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def expected(self, cell: tuple[str, str]) -> float:
        return expected_dollars(self.by_cell.get(cell, []))

    def refuses(self, cell: tuple[str, str], budget: float, *, running: int = 1) -> str | None:
        """Why the cell's next trial must not start under this budget; None when it fits. `running`:
        the trials that may run at once (xdist's workers), each counted at this trial's expected cost,
        since the others' spend is not stored until they end."""
        expected = self.expected(cell)
        if self.spent + running * expected <= budget:
            return None
        others = f", as may {running - 1} running on other workers" if running > 1 else ""
        return (
            f"budget of {usd(budget)} reached: {usd(self.spent)} spent this sitting, and a trial of "
            f"{cell[0]} x {cell[1]} is expected to cost {usd(expected)}{others}"
        )


def dollar_spend(summaries: Iterable[Mapping[str, Any]], sitting_id: str, table: PriceTable) -> DollarSpend:
    """The spend of sitting `sitting_id` and every cell's trials in dollars, from the store's summaries."""
    spend = DollarSpend()
    for summary in summaries:
        dollars = sample_dollars(summary, table)
        if dollars is None:
            continue
        spend.by_cell.setdefault((str(summary["arm"]), str(summary["task"])), []).append(dollars)
        if summary.get("sitting") == sitting_id:
            spend.spent += dollars
    return spend


def spent_line(dollars: Sequence[float], budget: float | None, unknown: int) -> str:
    """The sitting summary's line on its spend in dollars."""
    limit = f" of a budget of {usd(budget)}" if budget is not None else ""
    left_out = f", not counting {unknown} trial(s) with no price or no usage" if unknown else ""
    return f"spent: {usd(sum(dollars))} this sitting at the bench's prices{limit}{left_out}"
