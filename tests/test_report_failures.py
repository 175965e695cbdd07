"""The report names every trial that did not pass, with its reason and how to open its transcript
(stores written with Store.append, transcripts laid out as the plugin keeps them)."""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

import pytest
from sample_factory import cell_samples, make_sample, write_samples
from test_report import validate

from pytest_benchcell.report import ReportSettings, build_report, render_html, render_json, render_markdown
from pytest_benchcell.report import render_terminal
from pytest_benchcell.report.reading import FAILURES_PER_CELL
from pytest_benchcell.store import Store, StoreSet

pytest.importorskip("matplotlib")


def kept_transcript(root: Path, sample: dict) -> dict:
    """The sample with a transcript file beside the store, referenced as the plugin references it."""
    path = f"transcripts/{sample['model_kind']}/{sample['arm']}/{sample['task']}/{sample['id']}.jsonl.gz"
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(b"\x1f\x8b")
    sample["transcript"] = {"path": path, "bytes": 2}
    return sample


def failure_section(page: str) -> str:
    start = page.index("<h2>Trials that did not pass</h2>")
    return page[start : page.index("<h2>", start + 1)]


def rows_of(section: str) -> dict[str, list[str]]:
    """Trial number -> the cells of its row (tags stripped, entities decoded); the hrefs under "href"."""
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", section, flags=re.DOTALL):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        if cells:
            rows[cells[0]] = cells + [html.unescape(h) for h in re.findall(r'href="([^"]*)"', row)]
    return rows


@pytest.fixture
def mixed_store(tmp_path: Path) -> Store:
    """One cell with a pass and every way a trial can fail, each transcript in a different state."""
    root = tmp_path / "store"
    root.mkdir()
    passed = make_sample("cli", "close-bug", trial=1, minutes=1)
    incorrect = kept_transcript(root, make_sample("cli", "close-bug", trial=2, outcome="incorrect", minutes=2))
    incorrect["reason"] = "issue #17: state open != closed"
    confused = make_sample("cli", "close-bug", trial=3, outcome="confused", minutes=3)
    confused["reason"] = "the answer names no issue"
    confused["transcript"] = {"path": "transcripts/real/cli/close-bug/gone.jsonl.gz"}  # pruned since
    hung = make_sample("cli", "close-bug", trial=4, outcome="hung", minutes=4)
    hung["reason"] = "wall clock: 300 s"
    hung["transcript"] = None  # the trial ended before the agent started
    invalid = make_sample("cli", "close-bug", trial=5, status="invalid", minutes=5)
    invalid["reason"] = "curl ran (not an allowed tool)"  # an older sample: no transcript field at all
    error = kept_transcript(root, make_sample("cli", "close-bug", trial=6, status="error", minutes=6))
    error["reason"] = "RuntimeError: the readiness check broke"
    return write_samples(root, [passed, incorrect, confused, hung, invalid, error])


def test_every_trial_that_did_not_pass_is_named_with_its_reason_and_how_to_open_its_transcript(
    mixed_store: Store,
) -> None:
    report = build_report(mixed_store, ReportSettings())
    root = mixed_store.root.absolute()
    rows = rows_of(failure_section(render_html(report)))

    assert set(rows) == {"#2", "#3", "#4", "#5", "#6"}  # the pass is not listed
    cell = next(c for c in report.cells if c.task == "close-bug")
    ids = {f.trial: f.id for f in cell.failures}
    assert rows["#2"][1:3] == ["incorrect", "issue #17: state open != closed"]
    assert rows["#2"][3] == f"transcripts/real/cli/close-bug/{ids[2]}.jsonl.gz"
    assert rows["#2"][4] == (root / f"transcripts/real/cli/close-bug/{ids[2]}.jsonl.gz").as_uri()  # its link
    assert rows["#3"][1:] == ["confused", "the answer names no issue",
                              "transcripts/real/cli/close-bug/gone.jsonl.gz (pruned: the file is gone)"]  # fmt: skip
    assert rows["#4"][1:3] == ["hung", "wall clock: 300 s"] and rows["#4"][3].startswith("none kept")
    assert rows["#5"][1:] == ["invalid", "curl ran (not an allowed tool)",
                              "none (older sample): its tool calls are in the store"]  # fmt: skip
    assert rows["#6"][1:4] == ["error", "RuntimeError: the readiness check broke",
                               f"transcripts/real/cli/close-bug/{ids[6]}.jsonl.gz"]  # fmt: skip
    assert len(rows["#2"]) == len(rows["#6"]) == 5 and all(len(rows[t]) == 4 for t in ("#3", "#4", "#5"))

    # How to open them in Inspect's viewer: the cell's export, then the viewer, as one command line.
    section = failure_section(render_html(report))
    (command,) = [html.unescape(c) for c in re.findall(r"<pre><code>(.*?)</code></pre>", section)]
    export, view = command.split(" && ")
    assert shlex.split(export) == ["benchcell", "export", "inspect", "inspect-logs", "--store", str(root),
                                   "--arm", "cli", "--task", "close-bug"]  # fmt: skip
    assert view == "inspect view --log-dir inspect-logs"
    assert "<h3>cli \u00d7 close-bug: 5 of 6 trials</h3>" in section


def test_the_text_formats_and_the_json_name_them_too(mixed_store: Store) -> None:
    report = build_report(mixed_store, ReportSettings())
    markdown = render_markdown(report)
    assert "| #2 | incorrect | issue #17: state open != closed | [transcripts/real/cli/close-bug/" in markdown
    assert "| #5 | invalid | curl ran (not an allowed tool) | none (older sample): its tool calls are in the store |" in markdown
    assert "```sh\nbenchcell export inspect inspect-logs --store " in markdown
    terminal = "\n".join(render_terminal(report))
    assert "5 trials did not pass" in terminal and "#2" not in terminal  # a pointer only: the list is long
    document = validate(report)
    (cell,) = [c for c in document["cells"] if c["task"] == "close-bug"]
    listed = {f["trial"]: (f["verdict"], f["transcript_status"]) for f in cell["failures"]}
    assert listed == {2: ("incorrect", "kept"), 3: ("confused", "pruned"), 4: ("hung", "not written"),
                      5: ("invalid", "older sample"), 6: ("error", "kept")}  # fmt: skip
    assert cell["failures_left_out"] == 0
    assert json.loads(render_json(report)) == document


def test_a_rescored_verdict_lists_the_rescore_s_reason(tmp_path: Path) -> None:
    first, second = make_sample("cli", "t", trial=1, outcome="incorrect"), make_sample("cli", "t", trial=2)
    first["reason"] = "the old checker's complaint"
    store = write_samples(tmp_path, [first, second, *cell_samples("cli", "t", 1, start_trial=3)])
    for original, outcome, reason in ((first, "pass", ""), (second, "incorrect", "the new checker's complaint")):
        store.append({"schema": 1, "id": f"rescore-{original['id']}", "record": "rescore", "rescore_of": original["id"],
                      "arm": "cli", "task": "t", "trial": original["trial"], "model_kind": "real", "status": "rescore",
                      "outcome": outcome, "reason": reason, "score": {"differences": [reason]},
                      "provenance": {"fingerprint": "fp-current"}})  # fmt: skip
    (cell,) = build_report(store, ReportSettings()).cells
    assert [(f.trial, f.verdict, f.reason) for f in cell.failures] == [(2, "incorrect", "the new checker's complaint")]


def test_a_long_list_keeps_the_newest_and_counts_the_rest(tmp_path: Path) -> None:
    assert FAILURES_PER_CELL == 10
    outcomes = ["incorrect"] * 13 + ["pass"] * 2
    store = write_samples(tmp_path, cell_samples("cli", "t", 15, outcomes=outcomes))
    report = build_report(store, ReportSettings())
    (cell,) = report.cells
    assert [f.trial for f in cell.failures] == list(range(4, 14)) and cell.failures_left_out == 3
    section = failure_section(render_html(report))
    assert "Listed: the newest 10; 3 older ones are in the viewer." in section
    assert "13 of 15 trials" in section and "#3<" not in section


def test_only_the_reported_samples_are_listed_and_hostile_text_stays_text(tmp_path: Path) -> None:
    old = make_sample("cli", "t", trial=1, outcome="incorrect", fingerprint="fp-old", minutes=-10)
    hostile = make_sample("cli", "t", trial=2, outcome="incorrect")
    hostile["reason"] = "<script>alert(1)</script>" + "x" * 2000
    hostile["transcript"] = {"path": "transcripts/../../../etc/passwd"}
    store = write_samples(tmp_path, [old, hostile])
    report = build_report(store, ReportSettings())
    (cell,) = report.cells
    (failure,) = cell.failures  # the older fingerprint's failure is not this cell's figures
    assert failure.transcript is None and failure.transcript_status == "not written"  # a path outside: no link
    assert failure.reason.startswith("<script>") and failure.reason.endswith("(1,525 more characters in the store)")
    page = render_html(report)
    assert "<script" not in page and "/etc/passwd" not in page and "&lt;script&gt;" in failure_section(page)


def test_several_stores_link_each_trial_to_its_own_store(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = kept_transcript(one, make_sample("cli", "t", trial=1, outcome="incorrect", model_kind="scripted"))
    second = kept_transcript(two, make_sample("cli", "t", trial=2, outcome="hung", model_kind="scripted"))
    write_samples(one, [first])
    write_samples(two, [second])
    report = build_report(StoreSet([one, two]), ReportSettings(model_kind="scripted"))
    (cell,) = report.cells
    assert [(f.store, f.transcript_status) for f in cell.failures] == [(str(one), "kept"), (str(two), "kept")]
    section = failure_section(render_html(report))
    rows = rows_of(section)
    assert rows["#1"][-1].startswith(one.as_uri() + "/transcripts/") and rows["#2"][-1].startswith(two.as_uri())
    (command,) = [html.unescape(c) for c in re.findall(r"<pre><code>(.*?)</code></pre>", section)]
    assert f"--store {one} --store {two} --model-kind scripted --arm cli --task t" in command


def test_a_report_without_failures_says_so(tmp_path: Path) -> None:
    report = build_report(write_samples(tmp_path, cell_samples("cli", "t", 3)), ReportSettings())
    assert "No reported trial failed, was invalid or errored." in failure_section(render_html(report))
