"""The report against synthetic stores written with Store.append."""

from __future__ import annotations

import json
import math
import random
import re
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from sample_factory import cell_samples, make_sample, write_samples

from pytest_benchcell.report import (
    ReportError,
    ReportSettings,
    TaskInfo,
    build_report,
    render_html,
    render_json,
    render_markdown,
    render_terminal,
)
from pytest_benchcell import statistics as st
from pytest_benchcell.store import Store

SCHEMA = json.loads(resources.files("pytest_benchcell").joinpath("data/report.schema.json").read_text())
# cost-equivalent of the factory's default tokens (1000, 800, 4000, 300) at the default weights
DEFAULT_COST_EQ = 1000 + 1.25 * 800 + 0.1 * 4000 + 5 * 300  # 3900


def tokens(fresh: int) -> tuple[int, int, int, int]:
    return (fresh, 800, 4000, 300)


def cost_eq(fresh: int) -> float:
    return fresh + 1.25 * 800 + 0.1 * 4000 + 5 * 300


def all_outputs(report: object) -> dict[str, str]:
    return {
        "terminal": "\n".join(render_terminal(report)),  # type: ignore[arg-type]
        "markdown": render_markdown(report),  # type: ignore[arg-type]
        "json": render_json(report),  # type: ignore[arg-type]
    }


def validate(report: object) -> dict:
    document = json.loads(render_json(report))  # type: ignore[arg-type]
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return document


def comparison(report, metric: str, a: str, b: str):  # type: ignore[no-untyped-def]
    section = next(c for c in report.comparisons if c.metric == metric)
    return next(p for p in section.pairs if (p.arm_a, p.arm_b) == (a, b))


def balanced_store(root: Path, *, arms: dict[str, float], tasks: int, trials: int = 3) -> Store:
    """Every arm on every task; arm cost = base * factor, task base grows with the task, small spread."""
    samples = []
    for arm, factor in arms.items():
        for t in range(tasks):
            base = 10_000 + 1_000 * t
            spread = [int(base * factor) + d for d in (-40, 0, 40, 20, -20)[:trials]]
            samples += cell_samples(
                arm, f"task-{t:02d}", trials, tier="read" if t % 2 else "multi-step",
                tokens_by_trial=[tokens(v) for v in spread],
            )  # fmt: skip
    return write_samples(root, samples)


# -- coverage ---------------------------------------------------------------------------------------
def test_partial_coverage_says_what_is_missing(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 3, tokens=tokens(1000)),
            *cell_samples("cli", "t2", 3, tokens=tokens(5000)),
            *cell_samples("mcp", "t1", 3, tokens=tokens(2000)),
            *cell_samples("mcp", "t2", 1, tokens=tokens(2000)),
        ],
    )
    catalogue = {t: TaskInfo("read") for t in ("t1", "t2", "t3")}
    report = build_report(store, ReportSettings(tasks=catalogue))

    coverage = {row.arm: row for row in report.coverage}
    assert (coverage["cli"].covered, coverage["cli"].partial, coverage["cli"].missing) == (2, 0, 1)
    assert (coverage["mcp"].covered, coverage["mcp"].partial, coverage["mcp"].missing) == (1, 1, 1)
    assert coverage["mcp"].partial_tasks == ["t2"] and coverage["mcp"].missing_tasks == ["t3"]
    cells = {(c.arm, c.task): c.coverage for c in report.cells}
    assert cells[("mcp", "t2")] == "partial" and cells[("cli", "t3")] == "missing"

    notices = " ".join(report.notices)
    assert "2 missing and 1 partial" in notices
    text = all_outputs(report)
    assert re.search(r"t2\s+read\s+3\s+1 partial", text["terminal"])  # the per-cell matrix
    assert re.search(r"t3\s+read\s+missing\s+missing", text["terminal"])
    validate(report)


def test_headline_uses_only_tasks_every_arm_covers_and_says_which(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 3, tokens=tokens(1000)),
            *cell_samples("cli", "t2", 3, tokens=tokens(9000)),
            *cell_samples("mcp", "t1", 3, tokens=tokens(2000)),
            *cell_samples("mcp", "t2", 2, tokens=tokens(2000)),
        ],
    )
    report = build_report(store, ReportSettings())
    assert report.headline.tasks == ["t1"]
    rows = {row.arm: row for row in report.headline.rows}
    # cli's expensive t2 is left out of the headline: only t1 counts.
    assert rows["cli"].cost_equivalent.mean == cost_eq(1000)
    assert rows["cli"].cost_equivalent.n_tasks == 1 and rows["cli"].cost_equivalent.n_samples == 3
    assert "1 of 2 tasks" in report.headline.note
    assert any("Headline over 1 of 2 tasks" in n and "left out: t2" in n for n in report.notices)
    markdown = render_markdown(report)
    assert "Tasks used: t1." in markdown


def test_no_common_task_renders_and_says_so(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [*cell_samples("cli", "t1", 3), *cell_samples("mcp", "t2", 3)])
    report = build_report(store, ReportSettings())
    assert report.headline.tasks == []
    assert "no task has every arm" in report.headline.note
    assert all(row.cost_equivalent.mean is None for row in report.headline.rows)
    assert "\u2014" in "\n".join(render_terminal(report))  # absent figures are dashes, never 0
    validate(report)
    assert "<svg" not in render_html(report)  # nothing to plot yet, and no error either


def test_empty_store_renders(tmp_path: Path) -> None:
    report = build_report(Store(tmp_path), ReportSettings())
    assert report.arms == [] and report.cells == []
    assert any("no real-model samples" in n for n in report.notices)
    outputs = all_outputs(report)
    assert "Headline" in outputs["terminal"]
    validate(report)
    assert "<html" in render_html(report)


def test_catalogue_arm_without_samples_is_shown_missing(tmp_path: Path) -> None:
    store = write_samples(tmp_path, cell_samples("cli", "t1", 3))
    report = build_report(store, ReportSettings(arms=["mcp", "cli"], tasks={"t1": TaskInfo("read")}))
    assert report.arms == ["mcp", "cli"]  # display order as given
    assert any("Arm mcp has no scored samples (no sample yet) and is left out of the headline"
               in n for n in report.notices)  # fmt: skip
    assert report.headline.tasks == ["t1"]  # one arm without data does not empty the headline of the others
    assert "every arm but mcp (no scored sample)" in report.headline.note


# -- provenance ---------------------------------------------------------------------------------------
def test_mixed_fingerprints_use_newest_and_state_what_was_left_out(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 2, fingerprint="fp-old", tokens=tokens(50_000), minutes=0),
            *cell_samples("cli", "t1", 3, fingerprint="fp-new", tokens=tokens(1000), start_trial=3, minutes=60),
        ],
    )
    report = build_report(store, ReportSettings())
    cell = report.cells[0]
    assert cell.fingerprint == "fp-new" and cell.scored == 3 and cell.left_out_older == 2
    assert cell.cost_equivalent.mean == cost_eq(1000)  # the old, expensive samples are not pooled
    assert report.provenance.left_out_older == 2 and report.provenance.cells_with_older == 1
    assert any("Left out 2 samples of older fingerprints in 1 cell" in n for n in report.notices)
    assert "used fp-new (3 samples); left out 2 samples of 1 other fingerprint (fp-old)" in "\n".join(render_terminal(report))

    grouped = build_report(store, ReportSettings(fingerprint_policy="group"))
    markdown = render_markdown(grouped)
    assert "fp-old" in markdown and "fp-new" in markdown
    assert [g.fingerprint for g in grouped.cells[0].groups] == ["fp-new", "fp-old"]
    assert grouped.cells[0].cost_equivalent == cell.cost_equivalent  # grouping shows, never pools
    validate(grouped)


def test_model_kinds_are_never_pooled(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 3, tokens=tokens(1000)),
            *cell_samples("cli", "t1", 3, model_kind="scripted", tokens=tokens(9000)),
        ],
    )
    real = build_report(store, ReportSettings())
    assert real.cells[0].cost_equivalent.mean == cost_eq(1000)
    assert any("1 scripted-model cell" in n for n in real.notices)
    scripted = build_report(store, ReportSettings(model_kind="scripted"))
    assert scripted.cells[0].cost_equivalent.mean == cost_eq(9000)
    assert "scripted model" in render_markdown(scripted)


def test_several_models_are_stated(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path, [*cell_samples("cli", "t1", 3, model="model-a"), *cell_samples("cli", "t2", 3, model="model-b")]
    )
    report = build_report(store, ReportSettings())
    assert report.provenance.models == {"model-a": 3, "model-b": 3}
    assert any("more than one model" in n for n in report.notices)


def test_torn_line_is_reported_not_fatal(tmp_path: Path) -> None:
    store = write_samples(tmp_path, cell_samples("cli", "t1", 3))
    path = tmp_path / "real" / "cli" / "t1.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"schema": 1, "id": "torn')
    report = build_report(store, ReportSettings())
    assert report.cells[0].scored == 3
    assert len(report.store.problems) == 1
    assert report.store.problems[0].startswith("real/cli/t1.jsonl:4: torn last line")
    assert any("Skipped 1 unreadable line" in n for n in report.notices)
    assert "Problems" in "\n".join(render_terminal(report))
    validate(report)


# -- sample semantics ---------------------------------------------------------------------------------
def test_hung_counts_with_its_usage(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            make_sample("cli", "t1", trial=1, tokens=tokens(1000)),
            make_sample("cli", "t1", trial=2, tokens=tokens(1000)),
            make_sample("cli", "t1", trial=3, outcome="hung", tokens=tokens(40_000), duration_ms=300_000),
        ],
    )
    cell = build_report(store, ReportSettings()).cells[0]
    assert cell.scored == 3 and cell.outcomes["hung"] == 1 and cell.success.successes == 2
    assert cell.cost_equivalent.mean == pytest.approx((2 * cost_eq(1000) + cost_eq(40_000)) / 3)
    assert cell.duration_s.mean == pytest.approx((7 + 7 + 300) / 3)


def test_invalid_and_error_are_counted_apart(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 3, tokens=tokens(1000)),
            make_sample("cli", "t1", trial=4, status="invalid", tokens=tokens(90_000)),
            make_sample("cli", "t1", trial=5, status="error", tokens=tokens(0)),
        ],
    )
    report = build_report(store, ReportSettings())
    cell = report.cells[0]
    assert (cell.samples, cell.scored, cell.invalid, cell.error) == (5, 3, 1, 1)
    assert cell.cost_equivalent.mean == cost_eq(1000)  # the invalid trial's tokens are not scored
    assert cell.success.n_samples == 3
    outcome = report.outcomes[0]
    assert (outcome.samples, outcome.scored, outcome.passed, outcome.invalid, outcome.error) == (5, 3, 3, 1, 1)
    assert re.search(r"cli\s+5\s+3\s+3\s+0\s+0\s+0\s+1\s+1", "\n".join(render_terminal(report)))


def test_failure_tags_are_counted(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path, cell_samples("cli", "t1", 4, outcomes=["pass", "incorrect", "confused", "hung"])
    )
    outcome = build_report(store, ReportSettings()).outcomes[0]
    assert (outcome.passed, outcome.incorrect, outcome.confused, outcome.hung) == (1, 1, 1, 1)


def test_bonus_tasks_are_reported_apart(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 3, tokens=tokens(1000)),
            *cell_samples("cli", "extra", 3, bonus=True, tokens=tokens(70_000)),
        ],
    )
    report = build_report(store, ReportSettings())
    assert report.headline.tasks == ["t1"]
    assert [c.task for c in report.cells] == ["t1"]
    assert report.bonus.tasks == ["extra"] and report.bonus.cells[0].scored == 3
    assert report.headline.rows[0].cost_equivalent.mean == cost_eq(1000)
    assert report.outcomes[0].samples == 3  # bonus samples stay out of the scored counts
    markdown = render_markdown(report)
    bonus_part = markdown.split("## Bonus tasks", 1)[1]
    assert "| extra | cli |" in bonus_part


def test_weights_change_at_report_time(tmp_path: Path) -> None:
    store = write_samples(tmp_path, cell_samples("cli", "t1", 3))
    weights = {"fresh_input": 1.0, "cache_write": 2.0, "cache_read": 0.0, "output": 10.0}
    report = build_report(store, ReportSettings(weights=weights))
    assert report.cells[0].cost_equivalent.mean == 1000 + 2 * 800 + 0 + 10 * 300
    assert report.cells[0].raw_tokens.mean == 6100
    assert "10 \u00d7 output" in render_markdown(report)


def test_settings_are_validated() -> None:
    with pytest.raises(ReportError, match="floor"):
        ReportSettings(floor=0).validate()
    with pytest.raises(ReportError, match="unknown: outputs"):
        weights = {"fresh_input": 1.0, "cache_write": 1.0, "cache_read": 1.0, "output": 1.0, "outputs": 2.0}
        ReportSettings(weights=weights).validate()
    with pytest.raises(ReportError, match="model kind"):
        ReportSettings(model_kind="fake").validate()
    with pytest.raises(ReportError, match="fingerprint policy"):
        ReportSettings(fingerprint_policy="oldest").validate()


# -- statistics in the report ---------------------------------------------------------------------------
def noisy_store(root: Path, *, arms: dict[str, float], tasks: int, trials: int, spread: int, seed: int = 0) -> Store:
    """Every arm on every task, each trial's cost drawn around base * factor with +-spread noise."""
    rng = random.Random(seed)
    samples = []
    for arm, factor in arms.items():
        for t in range(tasks):
            base = 10_000 + 1_000 * t
            costs = [int(base * factor) + rng.randint(-spread, spread) for _ in range(trials)]
            samples += cell_samples(arm, f"task-{t:02d}", trials, tokens_by_trial=[tokens(c) for c in costs])
    return write_samples(root, samples)


def test_close_arms_are_not_distinguishable(tmp_path: Path) -> None:
    # 1% apart over 3 tasks with trial noise ten times the gap: the upstream claim this report must never print.
    store = noisy_store(tmp_path, arms={"axi": 1.0, "raw": 0.99}, tasks=3, trials=3, spread=1_000)
    report = build_report(store, ReportSettings())
    pair = comparison(report, "cost_equivalent", "axi", "raw")
    assert not pair.distinguishable and pair.scope is None
    assert pair.verdict.startswith("not distinguishable at this sample size")
    assert "not distinguishable at this sample size" in render_markdown(report)


def test_a_consistent_gap_on_few_tasks_is_claimed_for_these_tasks_only(tmp_path: Path) -> None:
    # The example bench's case: cli-skill - mcp = +4,015 tokens, the same sign in every trial, 4 tasks x 3
    # trials, three arms. The trials agree, so the difference is claimable for these tasks; 4 tasks cannot
    # show that it generalizes (the sign-flip test over tasks needs 6).
    samples = []
    for t in range(4):
        for arm, extra in (("cli-skill", 4_015), ("mcp", 0), ("cli-bare", 2_000)):
            costs = [2_500 + 300 * t + extra + d for d in (-60, 10, 50)]
            samples += cell_samples(arm, f"task-{t}", 3, tokens_by_trial=[tokens(c) for c in costs])
    report = build_report(write_samples(tmp_path, samples), ReportSettings(arms=["cli-skill", "cli-bare", "mcp"]))
    section = next(c for c in report.comparisons if c.metric == "cost_equivalent")
    assert section.family_size == 6  # three pairs x two metrics, adjusted together
    pair = comparison(report, "cost_equivalent", "cli-skill", "mcp")
    assert pair.estimate == pytest.approx(4_015)
    assert pair.within_tasks.pairs == 12 and pair.within_tasks.positives == 12
    # The token e-process: 0.1 x the sign e-process (2^12 / 13 = 315) + 0.9 x the adaptive bet on the gaps.
    assert pair.within_tasks.method == "betting e-process on clipped log-ratios mixed with the sign e-process"
    assert pair.within_tasks.e_max >= st.TOKEN_SIGN_WEIGHT * 2**12 / 13 and pair.within_tasks.e_max >= 120
    assert pair.within_tasks.scale == "ratio" and 1.5 < pair.within_tasks.estimate < 2.7
    assert pair.distinguishable and pair.scope == "these tasks"
    assert pair.verdict.startswith(
        "distinguishable for these tasks: mcp is better (cli-skill/mcp = 1.69x over 12 paired trials; "
        "over tasks cli-skill is higher than mcp by 4,015 tokens)"
    )
    assert "whether it generalizes to tasks like these needs at least 6 shared tasks" in pair.verdict
    (row,) = [line for line in render_markdown(report).splitlines() if "| cli-skill vs mcp | mcp better for these tasks |" in line]
    assert "| 4 | +4,015 (+68.6%) | 1.69x [1.26x, 2.26x], e = 495 over 12 paired trials |" in row  # the row of this claim
    validate(report)


def test_noisy_arms_give_the_minimum_detectable_effect(tmp_path: Path) -> None:
    rng = random.Random(4)
    samples = []
    for t in range(8):
        swing = 3000 if t % 2 else -3000  # a wins half the tasks, b the other half
        for arm, centre in (("a", 10_000 + swing), ("b", 10_000 - swing)):
            costs = [centre + rng.randint(-4_000, 4_000) for _ in range(3)]
            samples += cell_samples(arm, f"t{t}", 3, tokens_by_trial=[tokens(c) for c in costs])
    report = build_report(write_samples(tmp_path, samples), ReportSettings())
    pair = comparison(report, "cost_equivalent", "a", "b")
    assert pair.low is not None and pair.low < 0 < pair.high
    # Tokens: no "minimum detectable effect ~ 0 tokens" (issue 17): the interval of the ratio a / b the data support.
    assert pair.minimum_detectable_effect is None
    within = pair.within_tasks
    assert within.low is not None and within.high is not None and within.low < 1 < within.high
    assert pair.verdict == (
        f"not distinguishable at this sample size; for these tasks a/b = {within.estimate:.2f}x (counting 1 paired trial "
        f"more than 2.5x apart as 2.5x) over 24 paired trials, anytime interval {within.low:.2f}x to {within.high:.2f}x"
    )
    success = comparison(report, "success", "a", "b")  # every trial passed: no pair differs
    assert success.verdict.startswith("not distinguishable at this sample size")


def test_a_ratio_beyond_the_clip_is_said_to_be_counted_at_the_clip(tmp_path: Path) -> None:
    # Two tasks, 3 trials each: a spends about 5x b's tokens in every pair (beyond the 2.5x clip), and an
    # unclipped reading would be about 5x: the verdict must not present 2.50x as the ratio without saying so.
    samples = []
    for task in ("t0", "t1"):
        samples += cell_samples("a", task, 3, tokens_by_trial=[tokens(50_000)] * 3)
        samples += cell_samples("b", task, 3, tokens_by_trial=[tokens(10_000)] * 3)
    report = build_report(write_samples(tmp_path, samples), ReportSettings())
    pair = comparison(report, "cost_equivalent", "a", "b")
    assert not pair.distinguishable  # 6 pairs cannot reach the claim level
    assert pair.verdict == (
        "not distinguishable at this sample size; for these tasks a/b = 2.50x (counting 6 paired trials more than "
        "2.5x apart as 2.5x) over 6 paired trials, no interval below 3 shared tasks"
    )


def test_clear_difference_is_reported_as_one(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"cheap": 1.0, "dear": 1.5}, tasks=8)
    report = build_report(store, ReportSettings())
    pair = comparison(report, "cost_equivalent", "cheap", "dear")
    assert pair.distinguishable and pair.scope == "tasks like these"
    assert pair.high is not None and pair.high < 0
    assert pair.p_value == pytest.approx(2 / 2**8)
    assert pair.verdict.startswith("distinguishable for tasks like these: cheap is better")
    assert "not distinguishable" not in pair.verdict


def test_several_arms_are_one_bonferroni_family_across_pairs_and_metrics(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0, "b": 1.5, "c": 2.0}, tasks=8)
    report = build_report(store, ReportSettings())
    section = next(c for c in report.comparisons if c.metric == "cost_equivalent")
    assert section.correction == st.BONFERRONI and len(section.pairs) == 3 and section.family_size == 6
    for pair in section.pairs:
        assert pair.p_adjusted == pytest.approx(min(1.0, 6 * pair.p_value))
        assert pair.distinguishable and pair.decision == "differs"
    within = [p.within_tasks for c in report.comparisons for p in c.pairs]
    # The same bar for every comparison at every reading: no step-down lowers it as others are claimed.
    assert [w.p_adjusted for w in within] == pytest.approx([min(1.0, 6 * w.anytime_p) for w in within])
    assert {round(w.claim_e_value, 9) for w in within} == {120.0}


def test_an_exact_zero_difference_prints_p_equal_to_one(tmp_path: Path) -> None:
    # Per-task success differences 0.7 - 0.9, 0.3 - 0.1 and 0 sum to -8.3e-17, not 0: p must still be 1.
    outcomes = {"t1": (7, 9), "t2": (3, 1), "t3": (5, 5)}
    samples = []
    for task, (a_passes, b_passes) in outcomes.items():
        samples += cell_samples("a", task, 10, outcomes=["pass"] * a_passes + ["incorrect"] * (10 - a_passes))
        samples += cell_samples("b", task, 10, outcomes=["pass"] * b_passes + ["incorrect"] * (10 - b_passes))
    report = build_report(write_samples(tmp_path, samples), ReportSettings())
    pair = comparison(report, "success", "a", "b")
    assert pair.estimate == pytest.approx(0.0, abs=1e-12)
    assert pair.p_value == 1.0
    assert "p = 1.000" in render_markdown(report)


def test_fewer_tasks_than_an_honest_interval_needs_print_no_range(tmp_path: Path) -> None:
    store = noisy_store(tmp_path, arms={"a": 1.0, "b": 1.2}, tasks=2, trials=3, spread=200)
    report = build_report(store, ReportSettings())
    row = report.headline.rows[0]
    assert (row.cost_equivalent.low, row.cost_equivalent.high, row.success.low) == (None, None, None)
    assert row.cost_equivalent.method == row.success.method == "none: fewer than 3 tasks"
    assert any("no interval can be honest" in n for n in report.notices)
    three = build_report(noisy_store(tmp_path / "3", arms={"a": 1.0}, tasks=3, trials=3, spread=200), ReportSettings())
    figure = three.headline.rows[0].cost_equivalent
    assert figure.low is not None and figure.low < figure.mean < figure.high
    assert figure.method == "lognormal generalized interval over task means"


def test_a_task_the_probe_left_out_is_not_missing(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [*cell_samples("cli", "t1", 3), *cell_samples("mcp", "t1", 3)])
    reason = "left out by the capability probe (self_assign: true)"
    catalogue = {"t1": TaskInfo("read"), "t1-variant": TaskInfo("read", excluded=reason)}
    report = build_report(store, ReportSettings(tasks=catalogue))
    assert [(row.covered, row.missing, row.total) for row in report.coverage] == [(1, 0, 1), (1, 0, 1)]
    assert not any("missing" in n for n in report.notices)
    terminal = "\n".join(render_terminal(report))
    assert re.search(r"cli\s+1\s+0\s+0\s+1\s+complete", terminal)
    assert f"t1-variant: {reason}" in terminal
    assert [c.task for c in report.cells] == ["t1", "t1"]
    validate(report)


def test_success_interval_never_collapses_when_everything_passes(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0}, tasks=4)
    success = build_report(store, ReportSettings()).headline.rows[0].success
    assert success.rate == 1.0 and success.high == 1.0
    assert success.low is not None and success.low < 0.8  # Wilson 12/12 lower bound is .757


def test_pass_hat_k_goes_to_the_smallest_cell(tmp_path: Path) -> None:
    store = write_samples(
        tmp_path,
        [
            *cell_samples("cli", "t1", 5, outcomes=["pass", "pass", "pass", "incorrect", "incorrect"]),
            *cell_samples("cli", "t2", 4),
        ],
    )
    entry = build_report(store, ReportSettings()).pass_hat_k[0]
    assert entry.k_max == 4
    values = {v.k: v.value for v in entry.values}
    assert values[1] == pytest.approx((0.6 + 1.0) / 2)
    assert values[2] == pytest.approx((0.3 + 1.0) / 2)  # C(3,2)/C(5,2) = .3


def test_task_means_come_first(tmp_path: Path) -> None:
    # t1 has 6 cheap trials, t2 has 3 dear ones: the mean over tasks weighs them equally.
    store = write_samples(
        tmp_path,
        [*cell_samples("cli", "t1", 6, tokens=tokens(1000)), *cell_samples("cli", "t2", 3, tokens=tokens(7000))],
    )
    row = build_report(store, ReportSettings()).headline.rows[0]
    assert row.cost_equivalent.mean == pytest.approx((cost_eq(1000) + cost_eq(7000)) / 2)
    assert row.cost_equivalent.n_samples == 9


# -- determinism and formats ----------------------------------------------------------------------------
def test_output_is_byte_identical_and_independent_of_append_order(tmp_path: Path) -> None:
    samples = []
    for arm, factor in (("a", 1.0), ("b", 1.2)):
        for t in range(7):
            spread = [tokens(int(1000 * factor * (t + 1) + d)) for d in (0, 50, 90)]
            samples += cell_samples(arm, f"t{t}", 3, tokens_by_trial=spread)
    samples += cell_samples("a", "t0", 2, fingerprint="fp-old", start_trial=4, minutes=-50)
    first = write_samples(tmp_path / "one", samples)
    second = write_samples(tmp_path / "two", list(reversed(samples)))
    settings = ReportSettings(seed=11)
    outputs = [all_outputs(build_report(first, settings)), all_outputs(build_report(first, settings))]
    outputs.append(all_outputs(build_report(second, settings)))
    assert outputs[0] == outputs[1] == outputs[2]
    assert render_html(build_report(first, settings)) == render_html(build_report(second, settings))


def test_seed_changes_only_the_intervals(tmp_path: Path) -> None:
    fresh = [1013, 2291, 3557, 4801, 6133, 7919, 9001]  # irregular, so quantiles fall between grid points
    samples = [s for t, f in enumerate(fresh) for s in cell_samples("a", f"t{t}", 3, tokens=tokens(f))]
    store = write_samples(tmp_path, samples)
    one = build_report(store, ReportSettings(seed=1)).headline.rows[0].cost_equivalent
    two = build_report(store, ReportSettings(seed=2)).headline.rows[0].cost_equivalent
    assert one.mean == two.mean and (one.low, one.high) != (two.low, two.high)


def test_json_validates_against_the_schema(tmp_path: Path) -> None:
    samples = [
        *cell_samples("a", "t1", 3, tier="read"),
        *cell_samples("a", "t2", 3, tier="multi-step", cost_usd=None),
        *cell_samples("b", "t1", 2, tier="read"),
        make_sample("b", "t2", trial=1, status="invalid", tier="multi-step"),
        *cell_samples("a", "bonus", 1, bonus=True),
    ]
    report = build_report(write_samples(tmp_path, samples), ReportSettings(fingerprint_policy="group"))
    document = validate(report)
    assert document["report_schema"] == 6
    assert document["headline"]["tasks"] == []  # b covers nothing: no comparable task, nulls not zeros
    assert document["headline"]["rows"][0]["cost_equivalent"]["mean"] is None
    cells = {(c["arm"], c["task"]): c for c in document["cells"]}
    assert cells[("a", "t2")]["imputed_cost_usd"] == {"mean": None, "median": None, "n": 0}  # cost_usd null
    assert cells[("a", "t1")]["imputed_cost_usd"]["n"] == 3
    assert cells[("b", "t2")]["invalid"] == 1 and cells[("b", "t2")]["coverage"] == "missing"
    (failure,) = cells[("b", "t2")]["failures"]  # named even where no figure counts it
    assert (failure["trial"], failure["verdict"], failure["transcript_status"]) == (1, "invalid", "older sample")


def test_markdown_tables_are_well_formed(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0, "bc": 1.1}, tasks=3)
    # The store refuses such a name now (names.py); one written by hand, or by an older plugin, may hold it.
    folder = tmp_path / "real" / "bc"
    for path in folder.iterdir():
        path.write_text(path.read_text().replace('"arm": "bc"', '"arm": "b|c"').replace('"arm":"bc"', '"arm":"b|c"'))
    folder.rename(tmp_path / "real" / "b|c")
    markdown = render_markdown(build_report(store, ReportSettings()))
    tables = re.findall(r"(?:^\|.*\|\n)+", markdown, flags=re.MULTILINE)
    assert len(tables) >= 6
    for table in tables:
        lines = table.splitlines()
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) == 1, table  # every row has as many cells as the header
        assert re.fullmatch(r"\|( ---:? \|)+", lines[1]), lines[1]
    assert "b\\|c" in markdown  # a pipe in a name cannot break a table


def test_html_is_self_contained_with_plots(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0, "b": 1.3}, tasks=4)
    page = render_html(build_report(store, ReportSettings()))
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 3  # the headline's two plots and the comparisons' forest plot
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, flags=re.IGNORECASE)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:)?//""", page)  # only url(#clip-path) references
    assert "<?xml" not in page


def test_html_without_matplotlib_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0}, tasks=2)
    report = build_report(store, ReportSettings())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(ImportError, match=r"pip install pytest-benchcell\[html\]"):
        render_html(report)
    assert render_markdown(report)  # the other formats never need it


def test_terminal_lines_are_aligned(tmp_path: Path) -> None:
    store = balanced_store(tmp_path, arms={"a": 1.0, "bb": 1.1}, tasks=3)
    lines = render_terminal(build_report(store, ReportSettings()))
    assert all("\n" not in line and line == line.rstrip() for line in lines)
    start = lines.index("Headline") + 4
    header, rule = lines[start], lines[start + 1]
    assert header.lstrip().startswith("arm") and set(rule.strip()) <= {"-", " "}
    # Right-aligned number columns end where their rule segment ends.
    rows = lines[start + 2 : start + 4]
    assert len({len(row) for row in rows}) == 1


def test_incomplete_samples_are_read_without_guessing(tmp_path: Path) -> None:
    # Only the store's required keys plus a usage block: no started_at, provenance, cost or duration.
    bare = [
        {"schema": 1, "id": f"bare{i}", "arm": "cli", "task": "t1", "trial": i, "status": "scored",
         "model_kind": "real", "outcome": "pass", "ended_at": f"2026-12-02T12:0{i}:00.000Z",
         "usage": {"total": {"fresh_input": 100, "cache_write": None, "output": 10}}}
        for i in range(1, 4)
    ]  # fmt: skip
    report = build_report(write_samples(tmp_path, bare), ReportSettings())
    cell = report.cells[0]
    assert cell.scored == 3 and cell.fingerprint == ""
    assert cell.cost_equivalent.mean == 100 + 5 * 10  # absent components are 0, never guessed
    assert cell.imputed_cost_usd.n == 0 and cell.duration_s.n == 0 and cell.turns.n == 0
    assert cell.groups[0].last_seen == "2026-12-02T12:03:00.000Z"  # ended_at stands in for started_at
    validate(report)


def test_a_pair_with_unknown_usage_is_no_token_evidence_but_counts_for_success(tmp_path: Path) -> None:
    # A trial hung before any reply stores usage null: its pair gives no sign for tokens (a tie), while
    # its outcome still takes part in the success comparison and the cell's counts.
    samples = []
    for t in range(4):
        for arm, extra in (("a", 4_000), ("b", 0)):
            samples += cell_samples(arm, f"task-{t}", 3, tokens_by_trial=[tokens(2_500 + extra + d) for d in (0, 10, 20)])
    unknown = next(s for s in samples if s["arm"] == "a" and s["task"] == "task-0")
    unknown["usage"] = {"total": None, "by_model": {}}
    report = build_report(write_samples(tmp_path, samples), ReportSettings(arms=["a", "b"]))
    assert report.store.usage_unknown == 1
    tokens_pair = comparison(report, "cost_equivalent", "a", "b")
    assert tokens_pair.within_tasks.pairs == 11 and tokens_pair.within_tasks.nonzero == 11  # that pair is left out
    assert tokens_pair.within_tasks.positives == 11
    success_pair = comparison(report, "success", "a", "b")
    assert success_pair.within_tasks.pairs == 12
    cell = next(c for c in report.cells if (c.arm, c.task) == ("a", "task-0"))
    assert cell.scored == 3 and cell.cost_equivalent.n == 2


def test_cost_per_verified_success_per_arm_and_pair(tmp_path: Path) -> None:
    samples = []
    for t in range(3):
        samples += cell_samples("cli", f"t{t}", 4, outcomes=["pass", "pass", "pass", "incorrect"],
                                tokens_by_trial=[tokens(30_000 + 1_000 * d) for d in range(4)])  # fmt: skip
        samples += cell_samples("mcp", f"t{t}", 4, outcomes=["pass", "incorrect", "pass", "incorrect"],
                                tokens_by_trial=[tokens(26_000 + 1_000 * d) for d in range(4)])  # fmt: skip
    report = build_report(write_samples(tmp_path, samples), ReportSettings())
    table = report.cost_per_success
    assert table.scope == "these tasks" and table.tasks == ["t0", "t1", "t2"]
    cli, mcp = table.rows
    # cost-equivalent per trial: fresh + 1.25 x 800 + 0.1 x 4,000 + 5 x 300 = fresh + 2,900; all tokens / all passes
    assert cli.tokens_per_success == pytest.approx(34_400 / 0.75) and cli.trials == 12
    assert mcp.tokens_per_success == pytest.approx(30_400 / 0.5)
    assert cli.low is not None and cli.low < cli.tokens_per_success < (cli.high or math.inf)
    pair = table.pairs[0]
    assert pair.ratio == pytest.approx(cli.tokens_per_success / mcp.tokens_per_success)
    assert pair.low is not None and pair.high is not None and pair.low < pair.ratio < pair.high
    markdown = "\n".join(render_markdown(report)) if isinstance(render_markdown(report), list) else render_markdown(report)
    assert "Cost per verified success" in markdown and "45,867" in markdown
    validate(report)
