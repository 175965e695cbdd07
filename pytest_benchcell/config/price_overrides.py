"""bench.toml's [prices."MODEL"] tables: a model's prices overridden, or a model the package's table
(data/prices.toml) lacks added, in US dollars per million tokens. Never part of a cell's conditions:
prices change what a trial cost, not what it did."""

from __future__ import annotations

import math
from typing import Any

from ..prices import CACHE_MULTIPLIERS, RATE_KEYS, Price, PriceTable, Rates, rates_from
from .reader import _Reader

PRICE_KEYS = (*RATE_KEYS, "long_context", "as_of", "source", "notes")
LONG_CONTEXT_KEYS = ("above", *RATE_KEYS)
PRICE_ALLOWED = "a finite number >= 0 (US dollars per million tokens)"


def price_overrides(file: Any, document: dict[str, Any], package: PriceTable) -> dict[str, Price]:
    """Every [prices."MODEL"] table checked and merged over the package's entry for that model."""
    table = _Reader(file, "prices", document.get("prices", {}))
    found: dict[str, Price] = {}
    for model in table.table:
        entry = table.sub(model)
        entry.only(*PRICE_KEYS)
        base = package.prices.get(model)
        needed = () if base is not None else ("input", "output")
        rates = _rates(entry, needed, base.rates if base is not None else None)
        above, long = (base.long_context_above, base.long_context) if base is not None else (None, None)
        if "long_context" in entry.table:
            long_entry = entry.sub("long_context")
            long_entry.only(*LONG_CONTEXT_KEYS)
            value = long_entry.require("above") if above is None else long_entry.table.get("above", above)
            if not (type(value) is int and value > 0):
                long_entry.fail("above", value, "a whole number of prompt tokens > 0")
            above = value
            long = _rates(long_entry, () if long is not None else ("input", "output"), long)
        found[model] = Price(
            model=model,
            rates=rates,
            long_context_above=above,
            long_context=long,
            as_of=entry.string("as_of", ""),
            source=entry.string("source", ""),
            notes=entry.string("notes", ""),
            origin=str(file),
        )
    return found


def _rates(entry: _Reader, required: tuple[str, ...], base: Rates | None) -> Rates:
    for key in required:
        entry.require(key)
    numbers = {}
    for key in RATE_KEYS:
        if key not in entry.table:
            continue
        value = entry.table[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or math.isinf(value):
            entry.fail(key, value, PRICE_ALLOWED)
        numbers[key] = value
    if base is None:
        return rates_from(numbers)
    # A cache price not given follows a new input price by the multipliers, else stays the package's.
    if "input" in numbers:
        for key, factor in CACHE_MULTIPLIERS.items():
            numbers.setdefault(key, numbers["input"] * factor)
    return rates_from(numbers, base)
