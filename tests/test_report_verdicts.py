"""The comparisons' verdicts in every report format (issue 27): equivalence with the interval that
proves it, the terminal's compact table, intervals withheld below 3 tasks."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from sample_factory import cell_samples, write_samples

from pytest_benchcell.report import ReportSettings, build_report, render_html, render_markdown, render_terminal
from pytest_benchcell.report.renderers.json import render_json
from pytest_benchcell.statistics import BONFERRONI

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "pytest_benchcell/data/report.schema.json").read_text())
EFFECTS = {"success": 0.15, "tokens": 0.2}


def tokens(fresh: int) -> tuple[int, int, int, int]:
    return (fresh, 0, 0, 0)


def twins_and_a_dear_arm(root: Path, tasks: int = 8, trials: int = 16):  # type: ignore[no-untyped-def]
    """a and b the same (every trial passes for the same tokens); c twice as dear and failing half its trials."""
    samples = []
    for t in range(tasks):
        cost = 5_000 + 100 * t
        samples += cell_samples("a", f"t{t}", trials, tokens=tokens(cost), minutes=50 * t)
        samples += cell_samples("b", f"t{t}", trials, tokens=tokens(cost), minutes=50 * t)
        samples += cell_samples("c", f"t{t}", trials, tokens=tokens(2 * cost), minutes=50 * t,
                                outcomes=["pass", "incorrect"] * (trials // 2))  # fmt: skip
    return write_samples(root, samples)


def pair_of(report, metric: str, a: str, b: str):  # type: ignore[no-untyped-def]
    comparison = next(c for c in report.comparisons if c.metric == metric)
    return comparison, next(p for p in comparison.pairs if (p.arm_a, p.arm_b) == (a, b))


def test_equivalence_is_a_verdict_with_its_interval_in_every_format(tmp_path: Path) -> None:
    report = build_report(twins_and_a_dear_arm(tmp_path), ReportSettings(smallest_effect=EFFECTS))
    tokens_section, same = pair_of(report, "cost_equivalent", "a", "b")
    assert (same.decision, same.claim, same.distinguishable) == ("equivalent", "equivalent (\u00b120%)", False)
    assert tokens_section.margin == pytest.approx(1.2) and tokens_section.correction == BONFERRONI
    assert 1 / 1.2 < same.within_tasks.low <= 1.0 <= same.within_tasks.high < 1.2  # the interval that proves it
    assert same.verdict == (
        "equivalent for these tasks: no difference larger than \u00b120% (a/b = 1.00x over 128 paired trials, "
        f"anytime interval {same.within_tasks.low:.2f}x to {same.within_tasks.high:.2f}x, inside the margin)"
    )
    _, success = pair_of(report, "success", "a", "b")
    assert success.decision == "equivalent" and -0.15 < success.within_tasks.low <= 0 <= success.within_tasks.high < 0.15
    _, dear = pair_of(report, "cost_equivalent", "a", "c")
    assert (dear.decision, dear.claim, dear.scope) == ("differs", "a better", "tasks like these")

    document = json.loads(render_json(report))
    jsonschema.validate(document, SCHEMA)
    entry = next(p for c in document["comparisons"] if c["metric"] == "cost_equivalent" for p in c["pairs"] if p["arm_b"] == "b")
    assert (entry["decision"], entry["claim"]) == ("equivalent", "equivalent (\u00b120%)")
    markdown = render_markdown(report)
    assert "| a vs b | equivalent (\u00b120%) |" in markdown and same.verdict in markdown
    assert "Equivalent: the whole anytime interval lies inside the smallest effect" in markdown
    page = render_html(report)
    assert "equivalent for these tasks: no difference larger than \u00b120%" in page
    terminal = "\n".join(render_terminal(report))
    assert "equivalent (\u00b120%)" in terminal and same.verdict not in terminal  # the sentence is for Markdown and HTML


def test_without_a_smallest_effect_nothing_is_equivalent(tmp_path: Path) -> None:
    report = build_report(twins_and_a_dear_arm(tmp_path), ReportSettings())
    _, same = pair_of(report, "cost_equivalent", "a", "b")
    assert (same.decision, same.claim) == ("undecided", "undecided")
    assert all(c.margin is None for c in report.comparisons)
    assert "No [bench.smallest_effect] is declared, so no equivalence is claimed." in render_markdown(report)


def test_the_terminal_compact_table_fits_in_100_columns(tmp_path: Path) -> None:
    report = build_report(twins_and_a_dear_arm(tmp_path), ReportSettings(smallest_effect=EFFECTS))
    lines = render_terminal(report)
    start = lines.index("Comparisons") + 3
    table = lines[start : lines.index("Coverage") - 1]
    assert table[0].split() == ["pair", "metric", "claim", "a", "\u2212", "b", "or", "a/b", "[anytime", "interval]", "tasks", "pairs"]
    assert max(map(len, table)) <= 100
    rows = table[2:]
    assert len(rows) == 3 * 2  # three pairs x two metrics, the pair named once
    assert rows[0].split()[:6] == ["a", "vs", "b", "tokens", "equivalent", "(\u00b120%)"]
    assert rows[1].split()[:3] == ["success", "equivalent", "(\u00b115"]
    assert "a better (generalizes)" in rows[2] and "0.50x [" in rows[2]  # a/c: a costs half of c


def test_the_family_is_the_declared_comparisons(tmp_path: Path) -> None:
    store = twins_and_a_dear_arm(tmp_path)
    declared = build_report(store, ReportSettings(comparisons=[("a", "c"), ("b", "c")], smallest_effect=EFFECTS))
    assert [(p.arm_a, p.arm_b) for p in declared.comparisons[0].pairs] == [("a", "c"), ("b", "c")]
    assert declared.comparisons[0].family_size == 4
    # Shown for fewer arms, a declared family keeps its size: the bar does not move with the selection.
    narrowed = build_report(store, ReportSettings(arms=["a", "c"], comparisons=[("a", "c"), ("b", "c")]))
    assert [(p.arm_a, p.arm_b) for p in narrowed.comparisons[0].pairs] == [("a", "c")]
    assert narrowed.comparisons[0].pairs[0].within_tasks.claim_e_value == pytest.approx(80.0)


def test_every_interval_is_withheld_below_three_tasks(tmp_path: Path) -> None:
    # Two tasks of identical trials: Fieller's interval would be "6,519 [6,519-6,519]" (issue 27).
    samples = []
    for t in range(2):
        for arm, cost in (("a", 6_519), ("b", 9_000)):
            samples += cell_samples(arm, f"t{t}", 6, tokens=tokens(cost), minutes=30 * t)
    report = build_report(write_samples(tmp_path, samples), ReportSettings(smallest_effect=EFFECTS))
    row = next(r for r in report.cost_per_success.rows if r.arm == "a")
    assert row.tokens_per_success == pytest.approx(6_519) and (row.low, row.high) == (None, None)
    assert all((p.low, p.high) == (None, None) and p.ratio is not None for p in report.cost_per_success.pairs)
    for comparison in report.comparisons:
        for pair in comparison.pairs:
            assert (pair.within_tasks.low, pair.within_tasks.high) == (None, None)
            assert pair.decision != "equivalent"  # no interval, no equivalence
    terminal = "\n".join(render_terminal(report))
    assert "6,519 [" not in terminal and "6,519" in terminal
    assert "a / b = 0.72x" in terminal and "a / b = 0.72x [" not in terminal
    assert "[" not in next(line for line in render_terminal(report) if line.strip().startswith("a vs b"))
