"""`pytest --bench-report` on synthetic stores (pytester): no trials, files written, honest output."""

from __future__ import annotations

import json
import re

import pytest
from benches import write_bench
from sample_factory import make_sample, of_bench

from pytest_benchcell.store import Store

# Imported here, before any in-process pytester run: pytester restores sys.modules after each run,
# and numpy (under matplotlib) cannot be imported a second time in one process.
pytest.importorskip("matplotlib.pyplot")


def sample_of(pytester: pytest.Pytester, arm: str, task: str, **fields) -> dict:
    """A sample of the current definitions of the bench in the pytester folder (reports use only those)."""
    return of_bench(make_sample(arm, task, **fields), pytester.path / "bench.toml")


def fill(pytester: pytest.Pytester, *, torn: bool = False) -> Store:
    store = Store(pytester.path / "results")
    for trial in range(1, 4):
        store.append(sample_of(pytester, "shell", "say-hello", trial=trial, tier="read", tokens=(1000, 0, 0, 100)))
        store.append(sample_of(pytester, "bare", "say-hello", trial=trial, tier="read", tokens=(1200, 0, 0, 120),
                                 outcome="pass" if trial < 3 else "incorrect"))  # fmt: skip
    store.append(sample_of(pytester, "shell", "make-file", trial=1, tier="single-mutation"))  # partial cell
    if torn:
        with store.samples_path(store.cells()[0]).open("ab") as handle:
            handle.write(b'{"schema":1,"id":"torn')
    return store


def test_report_renders_the_store_without_running_any_trial(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    fill(pytester)
    result = pytester.runpytest("--bench-report", "--bench-arm", "shell,bare", "--bench-task", "say-hello,make-file")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*benchcell report*", "Headline", "*Coverage*"])
    assert "missing" in result.stdout.str() and "partial" in result.stdout.str()
    assert not (pytester.path / "teardown.log").exists()  # no trial ran, no hook was called


def test_report_files_are_written_and_byte_identical_across_runs(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    fill(pytester)
    args = ["--bench-report-md", "out/r.md", "--bench-report-json", "out/r.json", "--bench-report-html", "out/r.html"]
    first = pytester.runpytest(*args)
    assert first.ret == pytest.ExitCode.OK
    contents = {name: (pytester.path / "out" / name).read_bytes() for name in ("r.md", "r.json", "r.html")}
    second = pytester.runpytest(*args)
    assert second.ret == pytest.ExitCode.OK
    for name, data in contents.items():
        assert (pytester.path / "out" / name).read_bytes() == data, name
    report = json.loads(contents["r.json"])
    assert isinstance(report, dict)
    assert b"<svg" in contents["r.html"]
    assert b"|" in contents["r.md"]


def test_a_torn_line_is_reported_not_fatal(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    fill(pytester, torn=True)
    result = pytester.runpytest("--bench-report")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*torn last line*"])


def test_rescored_verdicts_replace_the_originals_in_the_report(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    store = fill(pytester)
    before = pytester.runpytest("--bench-report", "--bench-arm", "bare", "--bench-task", "say-hello", "--bench-report-json", "a.json")
    assert before.ret == pytest.ExitCode.OK
    incorrect = next(s for s in store.read_cell(store.cells()[0]).samples if s.get("outcome") == "incorrect")
    store.append({"schema": 1, "id": "r1", "record": "rescore", "rescore_of": incorrect["id"], "arm": "bare",
                  "task": "say-hello", "trial": incorrect["trial"], "model_kind": "real", "status": "rescore",
                  "outcome": "pass", "reason": ""})  # fmt: skip
    after = pytester.runpytest("--bench-report", "--bench-arm", "bare", "--bench-task", "say-hello", "--bench-report-json", "b.json")
    assert after.ret == pytest.ExitCode.OK
    text_before = (pytester.path / "a.json").read_text()
    text_after = (pytester.path / "b.json").read_text()
    assert text_before != text_after
    assert '"incorrect": 1' in text_before.replace(" ", "").replace('"incorrect":1', '"incorrect": 1')
    assert '"incorrect":0' in text_after.replace(" ", "")


def test_bad_report_weights_are_a_usage_error(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-report", "--bench-weights", "cache_reed=0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-weights: unknown component 'cache_reed'; allowed: fresh_input*"])


def test_a_bonus_task_shows_not_applicable_for_arms_that_cannot_do_it(pytester: pytest.Pytester) -> None:
    from benches import BENCH_TOML

    bonus = '\n[tasks.shell-only]\ntier = "read"\nbonus = true\narms = ["shell"]\nintent = "x"\nrequired_facts = ["x"]\n'
    write_bench(pytester, BENCH_TOML + bonus)
    Store(pytester.path / "results").append(sample_of(pytester, "shell", "shell-only", tier="read", bonus=True))
    result = pytester.runpytest("--bench-report", "--bench-task", "shell-only")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*shell-only*shell*1*", "*shell-only*bare*n/a*not applicable to this arm*"])


def test_a_task_the_capability_probe_drops_is_not_counted_missing(pytester: pytest.Pytester) -> None:
    from benches import CONFTEST

    probe = '''
def pytest_benchcell_probe(bench):
    from pytest_benchcell import Probe
    return Probe(verdict={"self_assign": True}, drop=("make-file",))
'''
    write_bench(pytester, conftest=CONFTEST + probe)
    store = Store(pytester.path / "results")
    for arm in ("shell", "bare"):
        for trial in range(1, 4):
            store.append(sample_of(pytester, arm, "say-hello", trial=trial, tier="read"))
    result = pytester.runpytest("--bench-report", "--bench-task", "say-hello,make-file")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*shell*1*0*0*1*complete*",
        "*make-file: left out by the capability probe (self_assign: true)*",
    ])  # fmt: skip
    out = result.stdout.str()
    assert "missing and" not in out  # no "Of N cells, M missing" notice
    assert not re.search(r"make-file\s+single-mutation\s+missing", out)  # and no row in the per-cell matrix


def test_report_reads_further_stores_as_one(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    fill(pytester)
    other = Store(pytester.path / "other")
    for trial in range(4, 6):
        other.append(sample_of(pytester, "shell", "make-file", trial=trial, tier="single-mutation"))
    result = pytester.runpytest("--bench-report-json", "r.json", "--bench-report-store", "other")
    assert result.ret == pytest.ExitCode.OK
    document = json.loads((pytester.path / "r.json").read_text())
    cells = {(cell["arm"], cell["task"]): cell["scored"] for cell in document["cells"]}
    assert cells[("shell", "make-file")] == 3  # one from the bench's store, two from the other
    assert len(document["store"]["stores"]) == 2


def test_a_merged_store_of_another_model_never_replaces_the_current_samples(pytester: pytest.Pytester) -> None:
    from pytest_benchcell.cli import main

    write_bench(pytester)
    mine = Store(pytester.path / "results")
    for trial in (1, 2):
        mine.append(sample_of(pytester, "bare", "say-hello", trial=trial, tier="read", minutes=trial, tokens=(1000, 0, 0, 0)))
    theirs = Store(pytester.path / "theirs")
    theirs.append(make_sample("bare", "say-hello", tier="read", minutes=60, model="other-model", fingerprint="fp-other",
                              tokens=(9000, 0, 0, 0)))  # fmt: skip
    assert main(["merge", str(theirs.root), "--into", str(mine.root)]) == 2  # refused unless asked
    assert main(["merge", str(theirs.root), "--into", str(mine.root), "--allow-other-conditions"]) == 0
    result = pytester.runpytest("--bench-report-json", "r.json", "--bench-arm", "bare", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.OK
    document = json.loads((pytester.path / "r.json").read_text())
    (cell,) = document["cells"]
    assert (cell["scored"], cell["left_out_older"], cell["cost_equivalent"]["mean"]) == (2, 1, 1000.0)
    assert document["provenance"]["left_out_other_conditions"] == 1
    assert any("Left out 1 sample of other conditions in 1 cell (another model or bench, as merged from another store"
               in notice for notice in document["notices"])  # fmt: skip


def test_an_arm_without_scored_samples_leaves_the_headline_to_the_others(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    store = Store(pytester.path / "results")
    for trial in range(1, 4):
        store.append(sample_of(pytester, "shell", "say-hello", trial=trial, tier="read"))
        store.append(sample_of(pytester, "bare", "say-hello", trial=trial, tier="read", status="invalid"))
    result = pytester.runpytest("--bench-report-json", "r.json", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.OK
    document = json.loads((pytester.path / "r.json").read_text())
    assert document["headline"]["tasks"] == ["say-hello"]
    shell = next(row for row in document["headline"]["rows"] if row["arm"] == "shell")
    assert shell["success"]["rate"] == 1.0
    assert "Arm bare has no scored samples (3 invalid and 0 errored of its 3 samples) and is left out of the headline, " \
           "which is over the other arms." in document["notices"]
    result.stdout.fnmatch_lines(["*every arm but bare (no scored sample)*"])


def test_verdicts_of_an_older_scoring_name_the_rescore_command_and_count_truthfully(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    store = Store(pytester.path / "results")
    for trial in range(1, 4):
        made = sample_of(pytester, "bare", "say-hello", trial=trial, tier="read", model_kind="scripted")
        made["provenance"]["scoring"] = "an-older-scoring"
        store.append(made)
    result = pytester.runpytest("--bench-report", "--bench-scripted", "--bench-arm", "bare", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*Left out 3 samples in 1 cell judged under an older scoring definition (facts, changes or [[]checker[]]): "
        "`pytest --bench-rescore --bench-scripted` scores them again*",
        "*bare × say-hello: no sample used; left out 3 samples of 1 other fingerprint (stale-scoring:an-older-scoring)",
    ])  # fmt: skip
    assert "0 fingerprints" not in result.stdout.str() and "unrecorded (0 samples)" not in result.stdout.str()


def test_a_rescore_of_the_empty_model_kind_names_the_other_one(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    store = Store(pytester.path / "results")
    for trial in range(1, 3):
        store.append(sample_of(pytester, "bare", "say-hello", trial=trial, tier="read", model_kind="scripted"))
    result = pytester.runpytest("--bench-rescore")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "re-scored 0 stored samples in 0 cells of *results*real: *",
        "the scripted store *results*scripted has 2 samples in 1 of the selected cells: add --bench-scripted to re-score them",
    ])  # fmt: skip


@pytest.mark.parametrize("option", ["--bench-report-md", "--bench-report-json", "--bench-report-html"])
@pytest.mark.parametrize("where", ["folder", "below-a-file"])
def test_a_report_output_that_cannot_be_written_is_refused_before_any_work(
    pytester: pytest.Pytester, option: str, where: str
) -> None:
    write_bench(pytester)
    fill(pytester)
    (pytester.path / "afile").write_text("x")
    value = "results" if where == "folder" else "afile/r.out"
    result = pytester.runpytest(f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    why = "is a folder" if where == "folder" else f"cannot be created: {pytester.path / 'afile'} is a file, not a folder"
    result.stderr.fnmatch_lines([f"*{option} {value}: {pytester.path / value} {why}; allowed: a file path*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
