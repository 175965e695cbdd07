"""The Dollars section: US dollars per trial and per verified success per arm, at the report's prices,
with the CLI's own estimate beside them, the prices used and what could not be priced."""

from __future__ import annotations

from ....prices import usd
from ....statistics import MIN_TASKS_FOR_INTERVAL
from ...model import ModelPrice, Report
from .blocks import DASH, Block, Bullets, Heading, Table, Text, _figure_text, _percent, _with_interval

UNKNOWN = "unknown"  # dollars without a price or usage: never shown as 0


def _dollars(value: float | None) -> str:
    return UNKNOWN if value is None else usd(value)


def _dollar_blocks(report: Report) -> list[Block]:
    table = report.dollars
    if table is None or not table.tasks:
        return []
    level = f"{100 * report.settings.confidence:g}%"
    rows = []
    for row in table.rows:
        if row.per_success is None:
            per_success = DASH if row.per_trial.mean is not None and not row.success_rate else UNKNOWN
        elif row.per_success_low is not None:
            high = _dollars(row.per_success_high) if row.per_success_high is not None else "unbounded"
            per_success = f"{_dollars(row.per_success)} [{_dollars(row.per_success_low)}\u2013{high}]"
        else:
            per_success = _with_interval(row.per_success, None, None, _dollars)
        per_trial = _figure_text(row.per_trial, _dollars) if row.per_trial.mean is not None else UNKNOWN
        rows.append([
            row.arm, per_trial, per_success, _percent(row.success_rate), _dollars(row.cli_estimate_per_trial)
            if row.cli_estimate_per_trial is not None else DASH, str(row.trials), str(row.unknown),
        ])  # fmt: skip
    blocks: list[Block] = [
        Heading("Dollars"),
        Text(
            "US dollars per trial and per verified success over the headline tasks, each trial priced from its own "
            "usage at the prices below when this report was made (a change of prices re-prices every trial). The "
            f"{level} interval per trial is about tasks like these; per success it is for these tasks (Fieller's "
            f"interval), from {MIN_TASKS_FOR_INTERVAL} tasks on. The CLI's own estimate is shown beside them; it "
            "follows the CLI's price list, which changes with its version."
        ),
        Table(
            ["arm", f"$ per trial [{level} CI]", f"$ per success [{level} CI]", "success", "CLI's estimate per trial",
             "trials priced", "unknown"],
            rows,
        ),  # fmt: skip
    ]
    notes = [_price_line(price) for price in table.prices]
    if table.unpriced:
        notes.append(
            f"dollars unknown for the trials of {', '.join(table.unpriced)}: no price; add a [prices.\"MODEL\"] table "
            "to bench.toml (docs/bench-toml.md)"
        )
    assumed = sum(row.default_lifetime for row in table.rows)
    if assumed:
        notes.append(
            f"{assumed} trial(s) recorded without the lifetime of their cache writes (stored before it was, or by "
            "an API that does not report it): priced at the 5-minute cache-write price, the default"
        )
    blocks.append(Bullets(notes))
    return blocks


def _price_line(price: ModelPrice) -> str:
    if price.input is None:
        return f"{price.model}: no price"
    long = f"; prompts over {price.long_context_above:,} tokens at long-context prices" if price.long_context_above else ""
    dated = f", as of {price.as_of}" if price.as_of else ""
    source = f", {price.source}" if price.source else ""
    notes = f" ({price.notes})" if price.notes else ""
    return (
        f"{price.model}: ${price.input:g} input, ${price.cache_write_5m:g} / ${price.cache_write_1h:g} cache writes "
        f"(5 minutes / 1 hour), ${price.cache_read:g} cache reads, ${price.output:g} output per million tokens"
        f"{long}; from {price.origin}{dated}{source}{notes}"
    )
