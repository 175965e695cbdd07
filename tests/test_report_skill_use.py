"""The reports' Skill use: per arm and per cell, the share of scored trials that used the arm's skill,
in every format (JSON against its schema), and the note beside a declared comparison whose skill arm
rarely used its skill; the comparison's statistics are the same with or without the record."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from sample_factory import cell_samples, write_samples

from pytest_benchcell.report import ReportSettings, build_report, render_html, render_json, render_markdown, render_terminal

SCHEMA = json.loads(resources.files("pytest_benchcell").joinpath("data/report.schema.json").read_text())
TASKS = ("t1", "t2", "t3")


def use(delivery: str, used: bool) -> dict[str, Any]:
    return {"delivery": delivery, "name": "tracker", "used": used, "loaded": used and delivery == "native",
            "how": "skill_tool" if used and delivery == "native" else None, "turn": 1 if used else None,
            "files": [], "scripts": [], "tokens_before": None, "tokens_after": None}  # fmt: skip


def samples(native_loads: dict[str, list[bool]], *, record: bool = True) -> list[dict[str, Any]]:
    out = []
    for task in TASKS:
        for sample in cell_samples("skill-native", task, 3, tier="read"):
            out.append(sample)
        for sample in cell_samples("bare", task, 3, tier="read", tokens=(1500, 800, 4000, 300)):
            out.append(sample)
    if record:
        counters = {task: iter(native_loads[task]) for task in TASKS}
        for sample in out:
            if sample["arm"] == "skill-native":
                sample["skill_use"] = use("native", next(counters[sample["task"]]))
    return out


def report_of(tmp_path: Path, loads: dict[str, list[bool]], *, record: bool = True) -> Any:
    store = write_samples(tmp_path / "store", samples(loads, record=record))
    return build_report(store, ReportSettings(arms=["skill-native", "bare"], comparisons=[("skill-native", "bare")]))


RARELY = {"t1": [True, False, False], "t2": [False, False, False], "t3": [False, False, False]}


def test_the_share_of_trials_that_loaded_the_skill_is_in_every_format(tmp_path: Path) -> None:
    report = report_of(tmp_path, RARELY)
    cells = {cell.task: cell.skill for cell in report.cells if cell.arm == "skill-native"}
    assert [(cells[t].delivery, cells[t].used, cells[t].trials) for t in TASKS] == [("native", 1, 3), ("native", 0, 3), ("native", 0, 3)]
    assert all(cell.skill is None for cell in report.cells if cell.arm == "bare")  # no skill: no record
    document = json.loads(render_json(report))
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert [c["skill"] for c in document["cells"] if c["arm"] == "skill-native"][0] == {
        "delivery": "native", "trials": 3, "used": 1, "share": 0.333333,
    }  # fmt: skip
    terminal, markdown, html = "\n".join(render_terminal(report)), render_markdown(report), render_html(report)
    for text in (terminal, markdown, html):
        assert "Skill use" in text
    assert "| skill-native | t2 | 0/3 | 0% |" in markdown  # per cell where the format has room
    row = next(line for line in terminal.splitlines() if line.lstrip().startswith("skill-native") and "native" in line.split()[1:2])
    assert row.split() == ["skill-native", "native", "9", "1", "11%", "2"]


def test_a_comparison_whose_skill_arm_rarely_used_its_skill_says_so_and_keeps_its_statistics(tmp_path: Path) -> None:
    rarely = report_of(tmp_path / "a", RARELY)
    note = ("skill-native vs bare: skill-native's agent rarely used its skill (loaded in 1 of 9 trials (11%)), so the "
            "comparison says little about the skill itself; see Skill use.")  # fmt: skip
    assert note in rarely.notices
    for text in ("\n".join(render_terminal(rarely)), render_markdown(rarely), render_html(rarely)):
        assert "rarely used its skill" in text
    unrecorded = report_of(tmp_path / "b", RARELY, record=False)
    assert not any("rarely used" in notice for notice in unrecorded.notices)
    assert [c.pairs for c in rarely.comparisons] == [c.pairs for c in unrecorded.comparisons]  # the statistics themselves


def test_a_skill_used_in_most_trials_gets_no_note(tmp_path: Path) -> None:
    mostly = {task: [True, True, False] for task in TASKS}
    report = report_of(tmp_path, mostly)
    assert not any("rarely used" in notice for notice in report.notices)
    assert "rarely used its skill" not in render_markdown(report)
