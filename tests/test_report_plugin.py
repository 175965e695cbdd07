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
