"""--bench-budget-usd: a sitting's budget in dollars at the bench's prices (scripted sittings, in-process)."""

from __future__ import annotations

import json

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench

from pytest_benchcell.dollar_budget import DollarSpend, parse_usd
from pytest_benchcell.prices import package_table, price_usage, usd
from pytest_benchcell.sitting import SittingStop

SITTING = ("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted")


def stored(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "results" / "scripted" / "bare" / "say-hello.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_no_trial_starts_that_would_take_the_spend_past_the_budget(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.runpytest(*SITTING, "--bench-trials", "1").assert_outcomes(passed=1)
    (first,) = stored(pytester)
    # The trial's dollars at the package's prices for claude-sonnet-4-5 ($ per million tokens).
    tokens = first["usage"]["total"]
    dollars = (tokens["fresh_input"] * 3 + tokens["cache_write"] * 3.75 + tokens["cache_read"] * 0.3 + tokens["output"] * 15) / 1e6
    assert first["usage"]["requests"] and all(request[3] is not None for request in first["usage"]["requests"])
    # One and a half trials' worth: the first trial fits (0 + expected 1), the second would not (1 + 1 > 1.5),
    # though the spend (1) is still below the budget.
    budget = f"{1.5 * dollars:.6f}"
    result = pytester.runpytest(*SITTING, "--bench-trials", "3", "--bench-budget-usd", budget, "-rs", "-v")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([
        f"    bare-say-hello-t2: pass, 1 turns, * cost-eq tokens, {usd(dollars)}, *",
        f"spent: $* this sitting at the bench's prices of a budget of {usd(float(budget))}",
        "SKIPPED [[]2[]] *budget of $* reached: $* spent this sitting, and a trial of bare x say-hello is expected to cost $*",
    ])  # fmt: skip
    assert len(stored(pytester)) == 2


def test_under_xdist_the_workers_keep_the_sitting_within_the_budget(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.runpytest(*SITTING, "--bench-trials", "1").assert_outcomes(passed=1)
    (first,) = stored(pytester)
    dollars = price_usage(first["usage"], first["model"], package_table()).dollars
    assert dollars is not None
    # Each worker counts the trial the other may be running: a start needs spend + 2 x expected <= budget.
    result = pytester.runpytest(*SITTING, "--bench-trials", "8", "--bench-budget-usd", f"{3.5 * dollars:.6f}", "-n", "2")
    spent = sum(price_usage(s["usage"], s["model"], package_table()).dollars or 0 for s in stored(pytester)[1:])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 2 and outcomes["passed"] + outcomes["skipped"] == 8, outcomes
    assert spent <= 3.5 * dollars


def test_a_model_without_a_price_refuses_the_sitting(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_TOML.replace('model = "claude-sonnet-4-5"', 'model = "my-gateway-model"'))
    result = pytester.runpytest(*SITTING, "--bench-budget-usd", "2.50")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: *bench.toml: --bench-budget-usd: model 'my-gateway-model' has no price in the package's price table "
        "(as of *) nor in *bench.toml; add a [[]prices.\"my-gateway-model\"[]] table there with its input and output prices*",
    ])  # fmt: skip
    assert not stored(pytester)
    # Its price added in bench.toml, the same sitting runs.
    write_bench(pytester, BENCH_TOML.replace('model = "claude-sonnet-4-5"', 'model = "my-gateway-model"')
                + '\n[prices."my-gateway-model"]\ninput = 3.0\noutput = 15.0\n')  # fmt: skip
    pytester.runpytest(*SITTING, "--bench-budget-usd", "2.50", "--bench-trials", "1").assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "two", ""])
def test_a_bad_amount_is_refused_naming_it(pytester: pytest.Pytester, value: str) -> None:
    write_bench(pytester)
    result = pytester.runpytest(*SITTING, f"--bench-budget-usd={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument --bench-budget-usd: {value!r} is not an amount*allowed: an amount of US dollars > 0*"])


def test_replies_without_usage_stop_a_sitting_under_a_dollar_budget(pytester: pytest.Pytester) -> None:
    conftest = CONFTEST.replace('"say-hello": [Answer("hello from the agent")]', '"say-hello": [NoUsage(Answer("hello"))]')
    write_bench(pytester, conftest="from pytest_benchcell.scripted import NoUsage\n" + conftest)
    result = pytester.runpytest(*SITTING, "--bench-trials", "3", "--bench-budget-usd", "2.50")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "the sitting stopped: the model API reported no usage for the replies of bare-say-hello-t1: --bench-budget-usd "
        "cannot be kept unmetered *",
        "spent: $0.00 this sitting at the bench's prices of a budget of $2.50, not counting 1 trial(s) with no price or no usage",
    ])  # fmt: skip


def test_the_spend_and_the_expected_cost_decide_together() -> None:
    spend = DollarSpend(spent=1.0, by_cell={("a", "t"): [0.4, 0.6]})
    assert spend.refuses(("a", "t"), 1.5) is None  # 1.0 + 0.5 fits exactly
    assert spend.refuses(("a", "t"), 1.49) is not None
    assert spend.refuses(("a", "new"), 1.0) is None  # nothing to expect yet: it starts
    # under xdist, the trials the other workers may be running count at the same expected cost
    assert spend.refuses(("a", "t"), 1.9, running=2) is not None and spend.refuses(("a", "t"), 2.0, running=2) is None
    assert parse_usd("$2.50") == 2.5
    assert (usd(2.5), usd(0.0204399), usd(1234.5), usd(0)) == ("$2.50", "$0.02044", "$1,234.50", "$0.00")
    stop = SittingStop(budget=True, budget_option="--bench-budget-usd")
    assert stop.record("t1", "scored", None, unmetered=True) is not None
    assert "--bench-budget-usd cannot be kept unmetered" in str(stop.reason)
