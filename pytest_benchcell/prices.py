"""Dollars: the price of every token component the API bills, per model, and a trial's usage priced.

The package ships a dated table (data/prices.toml, with its source); a bench overrides or extends it
with [prices."MODEL"] tables (config/price_overrides.py). A trial is priced from its own usage when a
report is made, never stored as dollars, so a change of prices re-prices every sample, as a rescore
re-judges it. Pure values only.

What a sample records for pricing (trial/measurements.py): `usage.by_model` (the CLI's per-model
totals) and `usage.requests`, one entry per streamed model request:
[model, fresh_input, cache_write, cache_write_1h, cache_read, output], cache_write_1h null where the
API did not split its cache writes by lifetime. Each request is priced at its own tier (a prompt over
a model's `long_context.above` pays the long-context prices); what the per-model totals hold beyond
the streamed requests (the CLI's own side requests), and every sample recorded before requests were,
is priced at the base tier with its cache writes at the 5-minute price, the default, and said so.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

RATE_KEYS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
# Anthropic's prompt-caching multipliers of the input price: a model added in bench.toml with only
# its input and output prices gets these (docs/bench-toml.md).
CACHE_MULTIPLIERS = {"cache_write_5m": 1.25, "cache_write_1h": 2.0, "cache_read": 0.1}
PER_TOKENS = 1_000_000  # prices are per million tokens
PACKAGE_ORIGIN = "the package's price table"
# A model id with a release date (claude-haiku-4-5-20251001) or the CLI's context suffix
# (claude-sonnet-4-5[1m]) is priced as the model it names.
_DATED = re.compile(r"-\d{8}$")
_SUFFIX = re.compile(r"\[[^\]]*\]$")


@dataclass(frozen=True)
class Rates:
    """US dollars per million tokens of each component."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


@dataclass(frozen=True)
class Price:
    model: str
    rates: Rates
    long_context_above: int | None = None  # prompt tokens past which `long_context` prices apply
    long_context: Rates | None = None
    as_of: str = ""
    source: str = ""
    notes: str = ""
    origin: str = PACKAGE_ORIGIN  # where the entry comes from: the package, or a bench.toml

    def rates_for(self, prompt_tokens: int) -> Rates:
        if self.long_context is not None and self.long_context_above is not None and prompt_tokens > self.long_context_above:
            return self.long_context
        return self.rates


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[str, Price]
    as_of: str = ""
    source: str = ""

    def find(self, model: str | None) -> Price | None:
        """The price of a model id: exactly, else without its date or context suffix."""
        if not model:
            return None
        for name in (model, _SUFFIX.sub("", model), same_model(model)):
            if name in self.prices:
                return self.prices[name]
        return None

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        return PriceTable({**self.prices, **overrides}, self.as_of, self.source)


def rates_from(table: Mapping[str, Any], base: Rates | None = None) -> Rates:
    """Rates from a table of numbers (already checked): missing cache prices from `base`, else from
    the input price by CACHE_MULTIPLIERS; input and output from `base` when it is given."""
    values: dict[str, float] = {}
    for key in RATE_KEYS:
        if key in table:
            values[key] = float(table[key])
        elif base is not None:
            values[key] = getattr(base, key)
        else:
            values[key] = float(table["input"]) * CACHE_MULTIPLIERS[key]
    return Rates(**values)


@cache
def package_table() -> PriceTable:
    """The table shipped with the package (data/prices.toml)."""
    document = tomllib.loads(resources.files("pytest_benchcell").joinpath("data/prices.toml").read_text("utf-8"))
    as_of, source = str(document["as_of"]), str(document["source"])
    prices = {}
    for model, entry in document["models"].items():
        long = entry.get("long_context")
        prices[model] = Price(
            model=model,
            rates=rates_from(entry),
            long_context_above=int(long["above"]) if long else None,
            long_context=rates_from(long) if long else None,
            as_of=str(entry.get("as_of", as_of)),
            source=str(entry.get("source", source)),
            notes=" ".join(str(entry.get("notes", "")).split()),
        )
    return PriceTable(prices, as_of, source)


@dataclass(frozen=True)
class Priced:
    """One trial in dollars. `dollars` None: unknown (its usage is unknown, or a model it used has no
    price: `unpriced` names them)."""

    dollars: float | None
    assumed_5m: bool = False  # some cache writes priced at the 5-minute price, their lifetime unrecorded
    unpriced: tuple[str, ...] = field(default_factory=tuple)


_COMPONENTS = ("fresh_input", "cache_write", "cache_read", "output")


def _cost(rates: Rates, fresh: int, write: int, write_1h: int, read: int, output: int) -> float:
    return (
        fresh * rates.input + (write - write_1h) * rates.cache_write_5m + write_1h * rates.cache_write_1h
        + read * rates.cache_read + output * rates.output
    ) / PER_TOKENS  # fmt: skip


def price_usage(usage: Mapping[str, Any] | None, model: str | None, table: PriceTable) -> Priced:
    """A trial's dollars from its sample's `usage` (total, by_model, requests); `model` is the
    sample's model, for usage recorded without a per-model split."""
    if not isinstance(usage, Mapping):
        return Priced(None)
    total = usage.get("total")
    if not isinstance(total, Mapping):
        return Priced(None)
    by_model = given if isinstance(given := usage.get("by_model"), Mapping) else None
    if not by_model:
        by_model = {str(model or ""): total}
    requests = listed if isinstance(listed := usage.get("requests"), list) else []
    streamed: dict[str, list[int]] = {}
    dollars, assumed, unpriced = 0.0, False, []
    for request in requests:
        if not (isinstance(request, list) and len(request) == 6):
            continue
        name, fresh, write, write_1h, read, output = request
        numbers = [_whole(value) for value in (fresh, write, read, output)]
        sums = streamed.setdefault(same_model(str(name)), [0, 0, 0, 0])
        sums[:] = [a + b for a, b in zip(sums, numbers)]
        price = table.find(str(name))
        if price is None:
            unpriced.append(str(name))
            continue
        split_1h = _whole(write_1h) if write_1h is not None else 0
        assumed |= write_1h is None and numbers[1] > 0
        rates = price.rates_for(numbers[0] + numbers[1] + numbers[2])
        dollars += _cost(rates, numbers[0], numbers[1], min(split_1h, numbers[1]), numbers[2], numbers[3])
    for name, tokens in by_model.items():
        if not isinstance(tokens, Mapping):
            continue
        seen = streamed.get(same_model(str(name)), [0, 0, 0, 0])
        rest = [max(0, _whole(tokens.get(component)) - done) for component, done in zip(_COMPONENTS, seen)]
        if not any(rest):
            continue
        price = table.find(str(name))
        if price is None:
            unpriced.append(str(name))
            continue
        assumed |= rest[1] > 0
        dollars += _cost(price.rates, rest[0], rest[1], 0, rest[2], rest[3])
    if unpriced:
        return Priced(None, assumed, tuple(dict.fromkeys(unpriced)))
    return Priced(dollars, assumed)


def same_model(model: str) -> str:
    """A model id without its release date or context suffix: the API names the dated model in each
    response (claude-sonnet-4-5-20250929) while the CLI's per-model totals may use the id it was given."""
    return _DATED.sub("", _SUFFIX.sub("", model))


def _whole(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def pricing_text(usage: Mapping[str, Any] | None) -> str:
    """What pricing needs of a sample's usage beyond its total, as compact JSON for an index row
    ("" when there is nothing beyond it): its per-model totals and its requests."""
    if not isinstance(usage, Mapping) or not isinstance(usage.get("total"), Mapping):
        return ""
    kept = {key: usage[key] for key in ("by_model", "requests") if usage.get(key)}
    return json.dumps(kept, separators=(",", ":"), sort_keys=True) if kept else ""


def usage_from_text(total: Mapping[str, int] | None, text: str) -> dict[str, Any]:
    """A sample's usage as pricing reads it, from an index row's total and pricing text."""
    usage: dict[str, Any] = {"total": total}
    if text:
        try:
            usage.update(json.loads(text))
        except ValueError:
            pass  # a row that checks out but holds no JSON here: priced from its total
    return usage


def unpriced_message(model: str, where: str) -> str:
    """Why a sitting that asks for dollars cannot run on this model, and what to add."""
    return (
        f"--bench-budget-usd: model {model!r} has no price in {PACKAGE_ORIGIN} (as of {package_table().as_of}) "
        f"nor in {where}; add a [prices.\"{model}\"] table there with its input and output prices (US dollars "
        "per million tokens; docs/bench-toml.md), or drop --bench-budget-usd"
    )


def usd(amount: float) -> str:
    """An amount of dollars as a reader wants it: cents at least, and up to six decimals where a
    small trial needs them ($2.50, $0.02044)."""
    whole, _, cents = f"{amount:,.6f}".rstrip("0").partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def expected_dollars(past: Sequence[float]) -> float:
    """The expected cost of the next trial of a cell: the mean of its trials priced so far (0 when none
    is: the first trial then starts, and the budget is kept from the second on)."""
    return sum(past) / len(past) if past else 0.0
