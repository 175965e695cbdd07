"""The comparisons at a glance: the HTML report's forest plot (one point per metric and pair, drawn by
its claim) and the compact table under it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from sample_factory import cell_samples, write_samples
from test_report import balanced_store, tokens

from pytest_benchcell.report import ReportSettings, build_report, render_html, render_markdown
from pytest_benchcell.report.model import Comparison

pytest.importorskip("matplotlib")

CLAIM_IDS = {"tasks like these": "tasks-like-these", "these tasks": "these-tasks", None: "none"}


def forest(page: str) -> str:
    match = re.search(r'<figure class="forest" id="forest-plot">(.*?)</figure>', page, flags=re.DOTALL)
    assert match, "no forest plot in the page"
    return match.group(1)


def plotted_rows(svg: str) -> list[tuple[str, int, str]]:
    """(metric, pair number, claim) of every point the forest plot drew, from the ids it gave them."""
    return [(m, int(i), claim) for m, i, claim in re.findall(r'<g id="forest-([A-Za-z0-9_]+)-(\d+)-([a-z-]+)"', svg)]


def expected_rows(report) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    return [
        (c.metric, i, "equivalent" if p.decision == "equivalent" else CLAIM_IDS[p.scope])
        for c in report.comparisons for i, p in enumerate(c.pairs) if p.within_tasks.estimate is not None
    ]


def test_one_point_per_pair_and_metric_drawn_by_its_claim(tmp_path: Path) -> None:
    # a and c cost the same; b costs 30% more on every one of 8 tasks: claimed for tasks like these.
    store = balanced_store(tmp_path, arms={"a": 1.0, "b": 1.3, "c": 1.0}, tasks=8)
    report = build_report(store, ReportSettings())
    scopes = {(c.metric, p.arm_a, p.arm_b): p.scope for c in report.comparisons for p in c.pairs}
    assert scopes[("cost_equivalent", "a", "b")] == scopes[("cost_equivalent", "b", "c")] == "tasks like these"
    assert scopes[("cost_equivalent", "a", "c")] is None and scopes[("success", "a", "b")] is None

    rows = plotted_rows(forest(render_html(report)))
    assert rows == expected_rows(report)
    assert len(rows) == 2 * 3  # two metrics x three pairs
    assert {claim for _, _, claim in rows} == {"tasks-like-these", "none"}


def test_a_claim_for_these_tasks_only_is_drawn_apart(tmp_path: Path) -> None:
    # A consistent gap on 4 tasks: claimed for these tasks; generalizing needs at least 6.
    samples = []
    for t in range(4):
        for arm, extra in (("cli", 4_015), ("mcp", 0)):
            samples += cell_samples(arm, f"task-{t}", 3, tokens_by_trial=[tokens(2_500 + 300 * t + extra + d) for d in (-60, 10, 50)])
    report = build_report(write_samples(tmp_path, samples), ReportSettings())
    assert plotted_rows(forest(render_html(report))) == [("cost_equivalent", 0, "these-tasks"), ("success", 0, "none")]
    table = [line for line in render_markdown(report).splitlines() if "| cli vs mcp |" in line]
    assert len(table) == 2  # the text stays, one table row per metric and pair
    assert "| cli vs mcp | mcp better for these tasks | 4 | +4,015 " in table[0]
    assert "| cli vs mcp | undecided | 4 | +0.0 pp " in table[1]


def test_a_new_metric_of_the_model_is_plotted_without_change(tmp_path: Path) -> None:
    report = build_report(balanced_store(tmp_path, arms={"a": 1.0, "b": 1.3}, tasks=8), ReportSettings())
    cost = next(c for c in report.comparisons if c.metric == "cost_equivalent")
    extra = Comparison("cost_per_success", "tokens per verified success", "lower", 3, cost.correction, None, cost.pairs)
    report = dataclasses.replace(report, comparisons=[*report.comparisons, extra])
    rows = plotted_rows(forest(render_html(report)))
    assert [row for row in rows if row[0] == "cost_per_success"] == [("cost_per_success", 0, "tasks-like-these")]
    assert "| Tokens per verified success (lower is better) | a vs b | a better for tasks like these |" in render_markdown(report)


def test_the_forest_plot_is_deterministic_and_absent_without_a_pair(tmp_path: Path) -> None:
    store = balanced_store(tmp_path / "two", arms={"a": 1.0, "b": 1.1}, tasks=3)
    first, second = (forest(render_html(build_report(store, ReportSettings()))) for _ in range(2))
    assert first == second and "<svg" in first
    lonely = render_html(build_report(balanced_store(tmp_path / "one", arms={"a": 1.0}, tasks=3), ReportSettings()))
    assert 'class="forest"' not in lonely and "Pairwise comparisons need at least two arms." in lonely


def test_an_equivalence_is_drawn_as_one_with_the_margin_band(tmp_path: Path) -> None:
    # a and b are twins (every trial passes for the same tokens) on 8 tasks x 10 trials: with a smallest
    # effect of 15 points and 20% the anytime intervals fit inside both margins.
    samples = []
    for t in range(8):
        samples += [*cell_samples("a", f"t{t}", 10, tokens=tokens(5_000 + t)), *cell_samples("b", f"t{t}", 10, tokens=tokens(5_000 + t))]
    store = write_samples(tmp_path, samples)
    settings = ReportSettings(smallest_effect={"success": 0.15, "tokens": 0.2})
    report = build_report(store, settings)
    assert {(c.metric, p.decision) for c in report.comparisons for p in c.pairs} == {
        ("cost_equivalent", "equivalent"), ("success", "equivalent")
    }
    svg = forest(render_html(report))
    assert plotted_rows(svg) == [("cost_equivalent", 0, "equivalent"), ("success", 0, "equivalent")]
    assert 'id="forest-margin-cost_equivalent"' in svg and 'id="forest-margin-success"' in svg
    assert "smallest effect (margin)" not in forest(render_html(build_report(store, ReportSettings())))
