"""Dollars: the package's price table, a trial's usage priced from it, bench.toml's [prices."MODEL"]
overrides, and what the stream's usage events record per request."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from test_config import MINIMAL  # the smallest bench the loader accepts

from pytest_benchcell.agent_result import AgentResult, note_stream_usage
from pytest_benchcell.config import BenchConfigError, load_bench
from pytest_benchcell.prices import RATE_KEYS, package_table, price_usage, pricing_text, usage_from_text

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(MINIMAL + extra)
    return path


# -- the package's table --------------------------------------------------------------------------


def test_the_package_table_is_dated_sourced_and_prices_every_billed_component() -> None:
    table = package_table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.as_of)
    assert table.source.startswith("https://platform.claude.com/docs/en/about-claude/pricing")
    for price in table.prices.values():
        assert all(getattr(price.rates, key) > 0 for key in RATE_KEYS), price.model
        assert price.rates.cache_read < price.rates.input < price.rates.cache_write_5m < price.rates.cache_write_1h
        assert price.source.startswith("https://platform.claude.com/") and price.as_of
    # the example bench's model, and the usual opus, sonnet and haiku ids
    example = tomllib.loads((ROOT / "bench.toml").read_text())["bench"]["model"]
    for model in (example, "claude-opus-5-5", "claude-opus-4-6", "claude-sonnet-5-5", "claude-sonnet-4-5", "claude-haiku-4-5"):
        assert table.find(model) is not None, model
    # a model id with its release date or the CLI's context suffix is priced as the model it names
    assert table.find("claude-haiku-4-5-20251001") is table.find("claude-haiku-4-5")
    assert table.find("claude-sonnet-4-5[1m]") is table.find("claude-sonnet-4-5")
    assert table.find("claude-unknown-9") is None
    sonnet = table.find("claude-sonnet-4-5")
    assert sonnet is not None and sonnet.long_context_above == 200_000 and sonnet.long_context is not None


# -- a trial's usage priced -----------------------------------------------------------------------

TOTAL = {"fresh_input": 665, "cache_write": 3882, "cache_read": 8758, "output": 84}
REQUESTS = [["claude-sonnet-4-5", 506, 3803, 0, 0, 32], ["claude-sonnet-4-5", 98, 41, 0, 4309, 30],
            ["claude-sonnet-4-5", 61, 38, 0, 4449, 22]]  # fmt: skip


def test_a_trial_is_priced_component_by_component_at_the_table_prices() -> None:
    # A scripted trial of the example as the CLI 2.1.332 recorded it; its own estimate was $0.0204399.
    usage = {"total": TOTAL, "by_model": {"claude-sonnet-4-5": TOTAL}, "requests": REQUESTS}
    priced = price_usage(usage, "claude-sonnet-4-5", package_table())
    assert priced.dollars == pytest.approx((665 * 3 + 3882 * 3.75 + 8758 * 0.3 + 84 * 15) / 1e6)
    assert priced.dollars == pytest.approx(0.0204399)
    assert not priced.assumed_5m and not priced.unpriced


def test_one_hour_cache_writes_and_long_prompts_pay_their_own_prices() -> None:
    table = package_table()
    one_hour = {"total": {"fresh_input": 0, "cache_write": 1000, "cache_read": 0, "output": 0},
                "requests": [["claude-sonnet-4-5", 0, 1000, 1000, 0, 0]]}  # fmt: skip
    assert price_usage(one_hour, "claude-sonnet-4-5", table).dollars == pytest.approx(1000 * 6 / 1e6)
    long = {"total": {"fresh_input": 10, "cache_write": 0, "cache_read": 250_000, "output": 100},
            "requests": [["claude-sonnet-4-5", 10, 0, 0, 250_000, 100]]}  # fmt: skip
    assert price_usage(long, "claude-sonnet-4-5", table).dollars == pytest.approx((10 * 6 + 250_000 * 0.6 + 100 * 22.5) / 1e6)


def test_older_samples_and_unstreamed_usage_are_priced_at_the_default_and_say_so() -> None:
    table = package_table()
    older = {"total": TOTAL, "by_model": {"claude-sonnet-4-5": TOTAL}}  # no requests: before they were recorded
    priced = price_usage(older, "claude-sonnet-4-5", table)
    assert priced.dollars == pytest.approx(0.0204399) and priced.assumed_5m
    # the CLI's side requests (in its per-model totals, never streamed) count at the base tier
    side = {"fresh_input": 100, "cache_write": 0, "cache_read": 0, "output": 10}
    with_side = {"total": TOTAL, "requests": REQUESTS,
                 "by_model": {"claude-sonnet-4-5": TOTAL, "claude-haiku-4-5-20251001": side}}  # fmt: skip
    assert price_usage(with_side, "claude-sonnet-4-5", table).dollars == pytest.approx(0.0204399 + (100 * 1 + 10 * 5) / 1e6)


def test_requests_named_by_the_dated_model_are_not_priced_twice() -> None:
    # The API names the dated model in each response; the CLI's per-model totals the id it was given.
    dated = [["claude-sonnet-4-5-20250929", *request[1:]] for request in REQUESTS]
    usage = {"total": TOTAL, "by_model": {"claude-sonnet-4-5": TOTAL}, "requests": dated}
    priced = price_usage(usage, "claude-sonnet-4-5", package_table())
    assert priced.dollars == pytest.approx(0.0204399) and not priced.assumed_5m


def test_unknown_usage_and_an_unpriced_model_are_no_dollars() -> None:
    table = package_table()
    assert price_usage({"total": None, "by_model": {}}, "claude-sonnet-4-5", table).dollars is None
    unpriced = price_usage({"total": TOTAL, "by_model": {"my-gateway-model": TOTAL}}, "my-gateway-model", table)
    assert unpriced.dollars is None and unpriced.unpriced == ("my-gateway-model",)


def test_an_index_row_keeps_what_pricing_needs() -> None:
    usage = {"total": TOTAL, "by_model": {"claude-sonnet-4-5": TOTAL}, "requests": REQUESTS}
    text = pricing_text(usage)
    assert "\t" not in text and "\n" not in text
    again = usage_from_text(TOTAL, text)
    assert price_usage(again, None, package_table()) == price_usage(usage, None, package_table())
    assert pricing_text({"total": None}) == ""


# -- the stream's usage, per request --------------------------------------------------------------


def test_each_request_is_recorded_from_its_stream_events_with_its_cache_write_split() -> None:
    result = AgentResult()
    start = {"input_tokens": 12, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 40, "output_tokens": 1,
             "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 800}}  # fmt: skip
    note_stream_usage(result, {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": start}})
    assert result.requests == []  # not before its stream ended
    note_stream_usage(result, {"type": "message_delta", "usage": {"output_tokens": 77}})
    # an API without the split: the lifetime is unknown (null), priced at the 5-minute default
    note_stream_usage(result, {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 3}}})
    note_stream_usage(result, {"type": "message_delta", "usage": {"output_tokens": 5, "cache_creation_input_tokens": 9}})
    note_stream_usage(result, {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 3}}})  # cut off
    assert result.requests == [["claude-sonnet-4-5", 12, 900, 800, 40, 77], ["m", 3, 9, None, 0, 5]]


# -- bench.toml: [prices."MODEL"] -----------------------------------------------------------------


def test_a_bench_overrides_a_models_prices_and_adds_a_model(tmp_path: Path) -> None:
    bench = load_bench(write(tmp_path, """
[prices."claude-sonnet-4-5"]
output = 16.0

[prices."my-gateway-model"]
input = 2.0
output = 8.0
long_context = { above = 1000, input = 4.0, output = 16.0 }
"""))
    sonnet = bench.price_table.find("claude-sonnet-4-5")
    assert sonnet is not None and sonnet.rates.output == 16.0 and sonnet.rates.input == 3.0
    assert sonnet.long_context == package_table().prices["claude-sonnet-4-5"].long_context
    added = bench.price_table.find("my-gateway-model")
    assert added is not None and str(added.origin) == str(tmp_path / "bench.toml")
    assert (added.rates.cache_write_5m, added.rates.cache_write_1h, added.rates.cache_read) == (2.5, 4.0, pytest.approx(0.2))
    assert added.long_context_above == 1000 and added.long_context is not None and added.long_context.cache_read == pytest.approx(0.4)
    # prices are never part of the conditions: changing them re-prices, it does not start a new definition
    plain = load_bench(write(tmp_path, ""))
    assert plain.definition("cli", "count") == load_bench(write(tmp_path, '[prices."claude-sonnet-4-5"]\noutput = 99.0\n')).definition("cli", "count")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('[prices."claude-sonnet-4-5"]\noutput = -1\n', "[prices.claude-sonnet-4-5] output has value -1; allowed: a finite number >= 0"),
        ('[prices."claude-sonnet-4-5"]\noutput = "15"\n', "[prices.claude-sonnet-4-5] output has value '15'"),
        ('[prices."claude-sonnet-4-5"]\noutput = inf\n', "output has value inf; allowed: a finite number >= 0"),
        ('[prices."claude-sonnet-4-5"]\noutptu = 1.0\n', "has unknown key 'outptu' (did you mean 'output'?)"),
        ('[prices."new-model"]\ninput = 1.0\n', "[prices.new-model] lacks the required key 'output'"),
        ('[prices."new-model"]\ninput = 1.0\noutput = 2.0\nlong_context = { input = 2.0, output = 4.0 }\n',
         "[prices.new-model.long_context] lacks the required key 'above'"),
        ('[prices."claude-sonnet-4-5"]\nlong_context = { above = 0 }\n', "above has value 0; allowed: a whole number"),
    ],
)
def test_bad_prices_are_refused_with_file_key_value_and_what_is_allowed(tmp_path: Path, extra: str, said: str) -> None:
    with pytest.raises(BenchConfigError) as refusal:
        load_bench(write(tmp_path, extra))
    assert str(refusal.value).startswith(str(tmp_path / "bench.toml"))
    assert said in str(refusal.value)
