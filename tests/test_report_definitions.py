"""The report's Definitions section (docs/how-to.md, "Find out whether your change helped"): an arm's
definitions side by side, what changed between them named from the stored conditions, and the current
one compared with an earlier one, unpaired; in every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from sample_factory import cell_samples, write_samples

from pytest_benchcell.prices import Price, Rates, package_table
from pytest_benchcell.report import ReportSettings, build_report, render_json, render_markdown, render_terminal
from pytest_benchcell.report.figures import changes_between, in_counting_order
from pytest_benchcell.report.renderers.html import render_html
from pytest_benchcell.sample import Definition
from pytest_benchcell.store import Store

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "pytest_benchcell/data/report.schema.json").read_text())
TASKS = ("t1", "t2", "t3")
SONNET_INPUT = package_table().prices["claude-sonnet-4-5"].rates.input  # US dollars per million input tokens


def conditions(task: str, *, skill: str = "Use `tracker list`.", version: str = "tracker 1.0", model: str = "m-1") -> dict[str, Any]:
    """A cell's conditions as config.Bench.conditions stores them (the parts these tests change)."""
    return {
        "model": model, "base_prompt": "You manage the tracker.",
        "arm": {"tools": ["Bash"], "binaries": ["tracker"], "skill": skill,
                "identity": {"tracker": {"sha256": "abc" if version == "tracker 1.0" else "def", "version": version}}},
        "task": {"intent": f"do {task}", "tier": "read"},
        "bounds": {"turn_cap": 16, "wall_clock_ms": 120000},
    }  # fmt: skip


def definition_samples(
    store: Store, name: str, *, minutes: float, passes: int, tokens: int, trials: int = 4,
    priced_as: str = "claude-sonnet-4-5", **changed: str,
) -> None:  # fmt: skip
    """`trials` samples per task of one definition named `name` (its conditions fingerprint per task is
    name-task), in one sitting starting `minutes` after the epoch, with its definitions files written as
    a sitting writes them; `passes` of each task's trials pass; each trial's `tokens` (plus 37 a trial)
    are fresh input tokens of the model `priced_as`, the samples' recorded model."""
    for index, task in enumerate(TASKS):
        fingerprint = f"{name}-{task}"
        store.write_definitions(f"{fingerprint}-s", {"bench": {"name": "b"}, "conditions": conditions(task, **changed), "scoring": {}})
        for sample in cell_samples(
            "cli", task, trials, start_trial=int(minutes) + 1, minutes=minutes + 10 * index, tier="read",
            outcomes=["pass"] * passes + ["incorrect"] * (trials - passes),
            tokens_by_trial=[(tokens + 37 * trial, 0, 0, 0) for trial in range(trials)], model=priced_as,
        ):  # fmt: skip
            sample["sitting"] = f"sitting-{name}-{minutes}"
            sample["provenance"] = {**sample["provenance"], "fingerprint": fingerprint, "conditions": fingerprint, "scoring": "s"}
            store.append(sample)


@pytest.fixture
def two_skills(tmp_path: Path) -> Store:
    store = write_samples(tmp_path, [])
    definition_samples(store, "old", minutes=0, passes=2, tokens=4000)
    definition_samples(store, "new", minutes=100, passes=4, tokens=2000, skill="Use `tracker list --json`.\nThen count.")
    return store


def test_each_definition_has_its_own_figures_and_the_change_is_named(two_skills: Store) -> None:
    report = build_report(two_skills, ReportSettings())
    [arm] = report.definitions
    assert arm.arm == "cli"
    old, new = arm.definitions
    assert (old.label, old.current, old.scored, old.passes, old.sittings) == ("v1", False, 12, 6, 1)
    assert (new.label, new.current, new.scored, new.passes) == ("v2", True, 12, 12)
    assert old.cost_equivalent_mean == pytest.approx(4000 + 37 * 1.5)
    assert new.model == "m-1" and new.tasks == list(TASKS)
    assert [(change.what, change.key) for change in new.changes] == [("the skill's text", "arm.skill")]
    # priced at the report's prices as the Dollars section prices them: fresh input at sonnet's input price
    assert new.dollars_per_trial == pytest.approx((2000 + 37 * 1.5) * SONNET_INPUT / 1e6)
    assert old.dollars_per_trial == pytest.approx((4000 + 37 * 1.5) * SONNET_INPUT / 1e6)
    assert (old.dollars_unknown, new.dollars_unknown) == (0, 0)
    # the rest of the report uses the newest definition only
    assert report.headline.rows[0].success.rate == 1.0


def test_the_current_definition_is_compared_unpaired_with_the_earlier_one(two_skills: Store) -> None:
    comparison = build_report(two_skills, ReportSettings()).definitions[0].comparison
    assert comparison is not None
    assert (comparison.earlier, comparison.current, comparison.tasks) == ("v1", "v2", list(TASKS))
    assert (comparison.success_earlier, comparison.success_current) == (0.5, 1.0)
    assert comparison.success_difference == pytest.approx(0.5)
    assert comparison.success_low < 0.5 < comparison.success_high
    assert comparison.tokens_ratio == pytest.approx(0.5, rel=0.05)
    assert comparison.tokens_low < comparison.tokens_ratio < comparison.tokens_high
    assert (comparison.success_trials_earlier, comparison.tokens_trials_earlier, comparison.tokens_trials_current) == (12, 9, 12)
    assert comparison.dollars_ratio == pytest.approx(0.5, rel=0.05)
    assert comparison.dollars_low < comparison.dollars_ratio < comparison.dollars_high
    assert (comparison.dollars_trials_earlier, comparison.dollars_trials_current) == (9, 12)
    # one arm compared: its three intervals (success, tokens, dollars) are the section's family
    assert "different sittings" in comparison.note and comparison.family_size == 3


def test_dollars_are_unknown_where_no_trial_could_be_priced_and_the_unknown_are_counted(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [])
    definition_samples(store, "old", minutes=0, passes=2, tokens=4000, priced_as="my-gateway-model")
    definition_samples(store, "new", minutes=100, passes=4, tokens=2000, skill="other")
    definition_samples(store, "new", minutes=200, passes=4, tokens=2000, skill="other", trials=1, priced_as="unpriced-2")
    report = build_report(store, ReportSettings())
    old, new = report.definitions[0].definitions
    assert (old.dollars_per_trial, old.dollars_unknown) == (None, 12)
    assert new.dollars_per_trial == pytest.approx((2000 + 37 * 1.5) * SONNET_INPUT / 1e6)
    assert new.dollars_unknown == 3
    comparison = report.definitions[0].comparison
    assert comparison is not None and comparison.tokens_ratio is not None
    assert (comparison.dollars_ratio, comparison.dollars_low, comparison.dollars_high) == (None, None, None)
    # no anchor priced on the earlier side: no trial of either side is used
    assert (comparison.dollars_trials_earlier, comparison.dollars_trials_current) == (0, 0)
    for text in ("\n".join(render_terminal(report)), render_markdown(report)):
        [old_row] = [line for line in text.splitlines() if line.lstrip(" |").startswith("v1 ")]
        assert old_row.rstrip(" |").endswith(" unknown")  # never $0
        assert "(3 unknown)" in text
        assert "dollars: no trial priced on both sides" in text
    jsonschema.validate(json.loads(render_json(report)), SCHEMA)


def test_every_format_says_it(two_skills: Store) -> None:
    report = build_report(two_skills, ReportSettings())
    terminal, markdown, page = "\n".join(render_terminal(report)), render_markdown(report), render_html(report)
    for text in (terminal, markdown):
        assert "Definitions" in text and "v2 (current)" in text
        assert "v1 \u2192 v2: the skill's text (" in text
        assert "v2 against v1, over 3 shared tasks" in text and "drift" not in text.split("Definitions")[0]
        assert "part of the difference" in text
        assert "; dollars \u00d70.50 [" in text and "the section's 3 intervals together" in text
    assert "<h2>Definitions</h2>" in page and "the skill&#x27;s text" in page and "dollars \u00d70.50 [" in page
    document = json.loads(render_json(report))
    jsonschema.validate(document, SCHEMA)
    assert document["definitions"][0]["comparison"]["success_difference"] == 0.5
    assert document["definitions"][0]["comparison"]["dollars_ratio"] == pytest.approx(0.5, rel=0.05)
    assert document["definitions"][0]["definitions"][1]["dollars_unknown"] == 0


def test_a_tool_version_and_a_second_model_are_named_and_never_pooled(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [])
    definition_samples(store, "one", minutes=0, passes=4, tokens=1000)
    definition_samples(store, "two", minutes=100, passes=4, tokens=1000, version="tracker 2.0")
    definition_samples(store, "three", minutes=200, passes=1, tokens=3000, version="tracker 2.0", model="m-2")
    report = build_report(store, ReportSettings())
    one, two, three = report.definitions[0].definitions
    assert {change.what for change in two.changes} == {"tracker's version", "tracker's binary (content hash)"}
    assert [(c.what, c.before, c.after) for c in three.changes] == [("the model", "m-1", "m-2")]
    assert (three.passes, three.scored, three.model) == (3, 12, "m-2")
    comparison = report.definitions[0].comparison
    assert (comparison.earlier, comparison.current) == ("v2", "v3")
    assert comparison.success_earlier == 1.0 and comparison.success_current == 0.25
    # the headline is the second model's alone
    assert report.headline.rows[0].success.rate == 0.25


def test_a_change_of_prices_reprices_both_definitions(two_skills: Store) -> None:
    """The bench's [prices] over the package's, as the Dollars section reads them: both definitions re-priced."""
    before = build_report(two_skills, ReportSettings()).definitions[0]
    doubled = Price("claude-sonnet-4-5", Rates(2 * SONNET_INPUT, 0.0, 0.0, 0.0, 0.0), origin="bench.toml")
    after = build_report(two_skills, ReportSettings(prices=package_table().with_overrides({"claude-sonnet-4-5": doubled})))
    for old, new in zip(before.definitions, after.definitions[0].definitions):
        assert new.dollars_per_trial == pytest.approx(2 * old.dollars_per_trial)
    assert after.dollars is not None and after.dollars.rows[0].per_trial.mean == pytest.approx(2 * (2000 + 55.5) * SONNET_INPUT / 1e6)


def test_with_the_bench_known_the_current_definition_is_the_benchs(two_skills: Store) -> None:
    """An older definition run again after the edit (here: the old skill restored) is the current one."""
    current = {("cli", task): Definition(f"old-{task}", "s") for task in TASKS}
    report = build_report(two_skills, ReportSettings(definitions=current))
    old, new = report.definitions[0].definitions
    assert old.current and not new.current
    comparison = report.definitions[0].comparison
    assert (comparison.earlier, comparison.current) == ("v2", "v1")
    assert comparison.success_difference == pytest.approx(-0.5)


def test_one_definition_gives_no_section(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [])
    definition_samples(store, "only", minutes=0, passes=3, tokens=1000)
    report = build_report(store, ReportSettings())
    assert report.definitions == []
    assert "Definitions" not in "\n".join(render_terminal(report))


def test_a_definition_without_its_stored_conditions_is_listed_but_its_change_not_named(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [])
    definition_samples(store, "old", minutes=0, passes=2, tokens=4000)
    definition_samples(store, "new", minutes=100, passes=4, tokens=2000, skill="other")
    for path in (tmp_path / "definitions").glob("old-*"):
        path.unlink()
    report = build_report(store, ReportSettings())
    labels = [(one.label, one.recorded) for one in report.definitions[0].definitions]
    assert labels == [("v1", False), ("v2", False), ("v3", False), ("v4", True)]  # one per task, then v4
    assert "not known" in "\n".join(render_terminal(report))


def test_a_later_reading_only_appends_to_the_trials_an_earlier_one_counted(tmp_path: Path) -> None:
    store = write_samples(tmp_path, [])
    definition_samples(store, "old", minutes=0, passes=2, tokens=4000)
    definition_samples(store, "new", minutes=100, passes=4, tokens=2000, skill="other", trials=2)
    first = build_report(store, ReportSettings()).definitions[0].comparison
    definition_samples(store, "new", minutes=300, passes=1, tokens=2000, skill="other", trials=3)
    second = build_report(store, ReportSettings()).definitions[0].comparison
    assert (first.success_trials_current, second.success_trials_current) == (6, 15)
    assert second.success_trials_earlier == first.success_trials_earlier == 12


def test_counting_order_starts_a_task_when_both_definitions_have_it() -> None:
    class Found:
        def __init__(self, trials: dict[str, list[tuple[str, bool, float, str]]]) -> None:
            self._trials = trials

        def trials(self, task: str) -> list[tuple[str, bool, float, str]]:
            return self._trials.get(task, [])

    one = Found({"a": [("01", True, 1.0, "s1"), ("05", True, 1.0, "s2")], "b": [("02", False, 1.0, "s1")]})
    other = Found({"a": [("03", True, 1.0, "s3")], "b": [("07", True, 1.0, "s4")]})
    order = in_counting_order(one, other, ["a", "b"])  # type: ignore[arg-type]
    assert [(task, trial[0]) for task, trial in order] == [("a", "01"), ("a", "05"), ("b", "02")]


def test_changes_name_lists_and_long_texts_by_what_changed() -> None:
    before = {"arm": {"readable": ["bench/a"], "skill": "x\n" * 40}, "bounds": {"turn_cap": 16}}
    after = {"arm": {"readable": ["bench/a", "bench/b"], "skill": "x\n" * 41}, "bounds": {"turn_cap": 20}}
    found = {(c.what, c.before, c.after) for c in changes_between(before, after)}
    assert found == {
        ("the declared readable paths", "(none removed)", "bench/b"),
        ("the skill's text", "80 characters", "82 characters: 1 lines added, 0 removed"),
        ("the turn cap", "16", "20"),
    }


def test_an_edited_task_under_the_same_arm_definition_counts_its_newest_definition(tmp_path: Path) -> None:
    """The task's own part of the conditions is not the arm's: an edited intent is no new arm definition,
    and of the task's two definitions the newest counts, the other is said to be left out."""
    store = write_samples(tmp_path, [])
    definition_samples(store, "old", minutes=0, passes=2, tokens=4000)
    definition_samples(store, "new", minutes=100, passes=4, tokens=2000, skill="other")
    task_edited = conditions("t1", skill="other")
    task_edited["task"]["intent"] = "do t1, differently"
    store.write_definitions("edited-t1-s", {"bench": {"name": "b"}, "conditions": task_edited, "scoring": {}})
    for sample in cell_samples("cli", "t1", 2, start_trial=500, minutes=500, tier="read", outcome="incorrect"):
        sample["provenance"] = {**sample["provenance"], "fingerprint": "edited-t1", "conditions": "edited-t1", "scoring": "s"}
        store.append(sample)
    [arm] = build_report(store, ReportSettings()).definitions
    old, new = arm.definitions
    assert (new.scored, new.passes) == (2 + 4 + 4, 0 + 4 + 4)  # t1's newest definition: 2 trials, none passed
    assert arm.left_out_older_task_definitions == 4
    assert "earlier definition of a task itself" in "\n".join(render_terminal(build_report(store, ReportSettings())))
