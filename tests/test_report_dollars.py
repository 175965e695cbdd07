"""Reports in dollars: every trial priced from its own usage at the report's prices, per trial and per
verified success with their intervals, in every format; unknown without a price; re-priced when the
prices change."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

import re

import docs_text
import jsonschema
import pytest
from sample_factory import SMALL_BENCH, cell_samples, of_bench, write_samples

from pytest_benchcell.config import load_bench

from pytest_benchcell.prices import Price, Rates, package_table
from pytest_benchcell.report import ReportSettings, build_report, settings_for_bench, render_html, render_json, render_markdown, render_terminal

SCHEMA = json.loads(resources.files("pytest_benchcell").joinpath("data/report.schema.json").read_text())
SONNET = package_table().prices["claude-sonnet-4-5"].rates


def dollars_of(tokens: tuple[int, int, int, int], rates: Rates = SONNET) -> float:
    fresh, write, read, output = tokens
    return (fresh * rates.input + write * rates.cache_write_5m + read * rates.cache_read + output * rates.output) / 1e6


def store_of(root: Path, *, arms: dict[str, str], tasks: int = 3, with_requests: bool = True):  # type: ignore[no-untyped-def]
    """Each arm (-> its model) on `tasks` tasks, 3 trials each, the last of each cell failed; each trial's
    usage as one request written for an hour (with_requests) or, as older samples, without requests."""
    samples = []
    for arm, model in arms.items():
        for t in range(tasks):
            spread = [(1000 + 100 * t + d, 800, 4000, 300) for d in (0, 50, 100)]
            cell = cell_samples(arm, f"task-{t}", 3, tokens_by_trial=spread, model=model, outcomes=["pass", "pass", "incorrect"])
            for sample in cell:
                fresh, write, read, output = spread[sample["trial"] - 1]
                if with_requests:
                    sample["usage"]["requests"] = [[model, fresh, write, write, read, output]]
            samples += cell
    return write_samples(root, samples)


def validated(report: object) -> dict:
    document = json.loads(render_json(report))  # type: ignore[arg-type]
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return document


def test_dollars_per_trial_and_per_success_from_each_trials_own_usage(tmp_path: Path) -> None:
    report = build_report(store_of(tmp_path, arms={"cli": "claude-sonnet-4-5", "mcp": "claude-haiku-4-5"}))
    document = validated(report)["dollars"]
    assert document["tasks"] == ["task-0", "task-1", "task-2"]
    cli = next(row for row in document["rows"] if row["arm"] == "cli")
    # one-hour cache writes at the one-hour price
    per_task = [sum(dollars_of((1000 + 100 * t + d, 0, 4000, 300)) + 800 * SONNET.cache_write_1h / 1e6
                    for d in (0, 50, 100)) / 3 for t in range(3)]  # fmt: skip
    assert cli["per_trial"]["mean"] == pytest.approx(sum(per_task) / 3, rel=1e-5)
    assert cli["per_trial"]["low"] < cli["per_trial"]["mean"] < cli["per_trial"]["high"]
    assert cli["per_success"] == pytest.approx(cli["per_trial"]["mean"] / (2 / 3), rel=1e-5)
    assert cli["per_success_low"] < cli["per_success"] < cli["per_success_high"]
    assert (cli["trials"], cli["unknown"], cli["default_lifetime"]) == (9, 0, 0)
    assert cli["cli_estimate_per_trial"] == pytest.approx(0.0123)  # the CLI's own figure, kept beside
    mcp = next(row for row in document["rows"] if row["arm"] == "mcp")
    assert mcp["per_trial"]["mean"] < cli["per_trial"]["mean"] / 2  # priced at haiku's prices
    assert [price["model"] for price in document["prices"]] == ["claude-haiku-4-5", "claude-sonnet-4-5"]
    assert document["prices"][1]["source"].startswith("https://platform.claude.com/") and document["prices"][1]["as_of"]
    for kind, text in {"terminal": "\n".join(render_terminal(report)), "markdown": render_markdown(report),
                       "html": html.unescape(render_html(report))}.items():  # fmt: skip
        assert "Dollars" in text and "$ per success" in text and "CLI's estimate per trial" in text, kind


def test_changed_prices_reprice_every_trial_at_report_time(tmp_path: Path) -> None:
    store = store_of(tmp_path, arms={"cli": "claude-sonnet-4-5"})
    before = build_report(store).dollars
    doubled = Rates(*(2 * getattr(SONNET, key) for key in ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")))
    prices = package_table().with_overrides({"claude-sonnet-4-5": Price("claude-sonnet-4-5", doubled, origin="bench.toml")})
    after = build_report(store, ReportSettings(prices=prices)).dollars
    assert before is not None and after is not None
    assert after.rows[0].per_trial.mean == pytest.approx(2 * before.rows[0].per_trial.mean)
    assert after.prices[0].origin == '[prices."claude-sonnet-4-5"] in bench.toml'


def test_without_a_price_dollars_are_unknown_and_the_report_says_what_to_add(tmp_path: Path) -> None:
    report = build_report(store_of(tmp_path, arms={"cli": "my-gateway-model"}))
    document = validated(report)["dollars"]
    row = document["rows"][0]
    assert row["per_trial"]["mean"] is None and row["per_success"] is None and (row["trials"], row["unknown"]) == (0, 9)
    assert document["unpriced"] == ["my-gateway-model"]
    markdown = render_markdown(report)
    assert "| cli | unknown | unknown |" in markdown
    assert 'dollars unknown for the trials of my-gateway-model: no price; add a [prices."MODEL"] table' in markdown


def test_older_samples_are_priced_at_the_default_lifetime_and_the_report_says_so(tmp_path: Path) -> None:
    report = build_report(store_of(tmp_path, arms={"cli": "claude-sonnet-4-5"}, with_requests=False))
    row = validated(report)["dollars"]["rows"][0]
    per_task = [sum(dollars_of((1000 + 100 * t + d, 800, 4000, 300)) for d in (0, 50, 100)) / 3 for t in range(3)]
    assert row["per_trial"]["mean"] == pytest.approx(sum(per_task) / 3, rel=1e-5)
    assert row["default_lifetime"] == 9
    assert "9 trial(s) recorded without the lifetime of their cache writes" in "\n".join(render_terminal(report))


def test_the_how_tos_own_prices_reprice_the_stored_trials_at_the_next_report(tmp_path: Path) -> None:
    """docs/how-to.md, "Budget a first real run and turn tokens into dollars": its [prices] block."""
    (block,) = re.findall(r"```toml\n(.*?)```", docs_text.section("Budget a first real run and turn tokens into dollars"), re.S)
    bench_toml = tmp_path / "bench.toml"
    bench_toml.write_text(SMALL_BENCH)
    samples = [of_bench(sample, bench_toml) for sample in cell_samples("cli", "t1", 2, tier="read")]
    store = write_samples(tmp_path / "results", samples)
    before = build_report(store, settings_for_bench(load_bench(bench_toml))).dollars
    bench_toml.write_text(SMALL_BENCH + block)
    after = build_report(store, settings_for_bench(load_bench(bench_toml))).dollars
    assert before is not None and after is not None and before.rows[0].trials == after.rows[0].trials == 2
    own = Rates(2.7, 2.7 * 1.25, 2.7 * 2, 2.7 * 0.1, 13.5)  # cache prices follow the new input price
    assert after.rows[0].per_trial.mean == pytest.approx(dollars_of((1000, 800, 4000, 300), own))
    assert before.rows[0].per_trial.mean == pytest.approx(dollars_of((1000, 800, 4000, 300)))
