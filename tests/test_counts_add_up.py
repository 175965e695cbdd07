"""Every count adds up: each sentence that counts samples (the rescore summary, the sitting summary,
merge's line, a fill's listing, the report's notes) names every part, and the parts sum to what it
read. Each test reads the numbers back out of the sentence and checks the sum against the store, on a
store with a mix: pass, incorrect, hung, invalid, error, another definition, an older scoring and a
rescore record."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench
from sample_factory import make_sample, of_bench, write_samples

from pytest_benchcell.cli import main
from pytest_benchcell.sample import STATUS_RESCORE, STATUS_SCORED, effective_samples
from pytest_benchcell.sitting import CellTally, summary_lines
from pytest_benchcell.store import Store


def _sample(bench: Path, trial: int, *, answer: str = "hello there", conditions: str = "", scoring: str = "", **fields) -> dict:
    sample = of_bench(make_sample("bare", "say-hello", trial=trial, tier="read", model_kind="scripted", **fields), bench)
    sample["final_answer"] = answer
    if conditions:
        sample["provenance"]["conditions"] = sample["provenance"]["fingerprint"] = conditions
    if scoring:
        sample["provenance"]["scoring"] = scoring
    return sample


def mixed_store(bench: Path, root: Path) -> Store:
    """The cell bare x say-hello ("hello" is the required fact) with one sample of each kind."""
    samples = [
        _sample(bench, 1),  # pass, current: stays as it is
        _sample(bench, 2, answer="bye"),  # pass, current, but the checker now says incorrect
        _sample(bench, 3, scoring="an-older-scoring"),  # pass under an older scoring
        _sample(bench, 4, outcome="hung"),
        _sample(bench, 5, status="invalid"),
        _sample(bench, 6, status="error"),
        _sample(bench, 7, conditions="another-definition"),
        _sample(bench, 8, outcome="incorrect"),  # a rescore record below makes it a pass
    ]
    store = write_samples(root, samples)
    rescored = samples[-1]
    store.append({
        "schema": 2, "id": "f" * 32, "record": "rescore", "rescore_of": rescored["id"], "sitting": "earlier",
        "arm": "bare", "task": "say-hello", "tier": "read", "trial": 8, "model_kind": "scripted",
        "status": STATUS_RESCORE, "outcome": "pass", "reason": "", "score": {"differences": []},
        "previous": {"outcome": "incorrect", "reason": ""}, "rescored_at": "2026-12-02T12:30:00.000Z",
        "provenance": {**rescored["provenance"]},
    })  # fmt: skip
    return store


def trial_samples(root: Path) -> list[dict]:
    """The store's trial samples (rescore records applied, not counted), parsed here on their own."""
    lines = (root / "scripted" / "bare" / "say-hello.jsonl").read_text().splitlines()
    return effective_samples(json.loads(line) for line in lines if line.strip())


@pytest.fixture
def mixed(pytester: pytest.Pytester) -> pytest.Pytester:
    write_bench(pytester)
    mixed_store(pytester.path / "bench.toml", pytester.path / "results")
    return pytester


def numbers(pattern: str, text: str) -> list[int]:
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return [int(group) for group in match.groups()]


# -- rescore -----------------------------------------------------------------------------------------
RESCORE = (r"^re-scored (\d+) stored samples in 1 cell of .*: (\d+) verdicts changed, (\d+) kept their verdict under "
           r"the current scoring \(appended as rescore records\), (\d+) already current \(nothing appended\), (\d+) "
           r"skipped(.*)$")  # fmt: skip


def rescore_counts(result: pytest.RunResult) -> tuple[int, int, int, int, int, dict[str, int]]:
    match = re.search(RESCORE, result.stdout.str(), re.MULTILINE)
    assert match, result.stdout.str()
    read, changed, kept, current, skipped = (int(match.group(i)) for i in range(1, 6))
    reasons = {why: int(count) for count, why in re.findall(r"(\d+) ([^;()]+?)(?:;|\)$)", match.group(6))}
    return read, changed, kept, current, skipped, reasons


def test_rescore_names_what_became_of_every_sample_it_read(mixed: pytest.Pytester) -> None:
    read, changed, kept, current, skipped, reasons = rescore_counts(mixed.runpytest("--bench-rescore", "--bench-scripted"))
    assert read == len(trial_samples(mixed.path / "results")) == 8
    assert changed + kept + current + skipped == read
    assert sum(reasons.values()) == skipped
    assert (changed, kept, current) == (1, 1, 3)  # t2 flips; t3 brought up to date; t1, t7 and t8 (rescored) as they are
    assert reasons == {"invalid: never scored": 1, "error: never scored": 1, "confused or hung: a bound, not a checker verdict": 1}

    again = rescore_counts(mixed.runpytest("--bench-rescore", "--bench-scripted"))
    assert again[:5] == (8, 0, 0, 5, 3)  # nothing left to append, still every sample named

    no_state = of_bench(make_sample("shell", "make-file", model_kind="scripted"), mixed.path / "bench.toml")
    Store(mixed.path / "results").append(no_state)  # a check_state task's sample stored without its snapshot
    result = mixed.runpytest("--bench-rescore", "--bench-scripted", "--bench-arm", "shell", "--bench-task", "make-file")
    assert rescore_counts(result) == (1, 0, 0, 0, 1, {"without a stored state snapshot": 1})
    result.stdout.fnmatch_lines(["    skipped shell-make-file-t1: no stored state snapshot to re-score the end state against"])


# -- the sitting summary -----------------------------------------------------------------------------------
SCRIPTS_BY_TRIAL = CONFTEST + '''
ANSWERS = {9: "hello from the agent", 10: "no idea"}

def pytest_benchcell_provision(trial):
    if trial.trial == 11:
        raise RuntimeError("a provisioning failure for the count")
    return Environment(values={"marker": "m1"}, data=trial.agent_cwd)

def pytest_benchcell_script(trial, environment):
    return [Answer(ANSWERS[trial.trial])]
'''

RECORDED = r"^bare x say-hello: (\d+) recorded this sitting \((\d+) passed, (\d+) failed, (\d+) invalid, (\d+) errors\)$"
CURRENT = r"^    scored samples of the current definition: (\d+) -> (\d+) \("


def test_the_sitting_summary_adds_up_to_what_it_recorded_and_what_the_cell_holds(mixed: pytest.Pytester) -> None:
    write_bench(mixed, conftest=SCRIPTS_BY_TRIAL)
    result = mixed.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "3",
                             "-p", "no:randomly")  # fmt: skip
    text = result.stdout.str()
    recorded, passed, failed, invalid, errors = numbers(RECORDED, text)
    assert recorded == passed + failed + invalid + errors == 3
    assert (passed, failed, errors) == (1, 1, 1)
    before, after = numbers(CURRENT, text)
    assert before + passed + failed == after
    (stale,) = numbers(r"^    (\d+) more scored under an older scoring definition", text)
    (other,) = numbers(r"^    (\d+) more scored under other conditions", text)
    stored_scored = [s for s in trial_samples(mixed.path / "results") if s["status"] == STATUS_SCORED]
    assert after + stale + other == len(stored_scored)  # every scored sample of the cell is in one of the lines


def test_the_summary_names_growth_it_did_not_record_itself() -> None:
    tally = CellTally("bare", "say-hello", scored_before=2)
    for status, outcome in [("scored", "pass"), ("scored", "incorrect"), ("scored", "hung"), ("scored", "confused"),
                            ("invalid", None), ("error", None)]:  # fmt: skip
        tally.count(status, outcome)
    tally.scored_after = 7  # four of this sitting, one another sitting recorded meanwhile
    lines = "\n".join(summary_lines([tally], "store", 3))
    recorded, passed, failed, invalid, errors = numbers(RECORDED, lines)
    assert recorded == passed + failed + invalid + errors == 6
    before, after = numbers(CURRENT, lines)
    mine, others = numbers(r"\(\+(\d+) this sitting, \+(\d+) from other sittings meanwhile; ", lines)
    assert (before, mine, others, after) == (2, 4, 1, 7) and before + mine + others == after


# -- a fill's listing --------------------------------------------------------------------------------------
def test_a_fill_listing_adds_the_planned_trials_to_the_stored_ones(mixed: pytest.Pytester) -> None:
    result = mixed.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-fill", "6",
                             "--collect-only", "-q", "-p", "no:randomly")  # fmt: skip
    text = result.stdout.str()
    listed = [line for line in text.splitlines() if line.startswith("bench.toml::bare-say-hello-t")]
    before, after = numbers(CURRENT, text)
    planned, target = numbers(r"\(\+(\d+) planned to reach --bench-fill (\d+); ", text)
    assert before == after == 4  # t1, t2, t4 (hung) and t8 (rescored): the current definition's
    assert before + planned == target == 6 and len(listed) == planned
    full = mixed.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-fill", "3",
                           "--collect-only", "-q", "-p", "no:randomly")  # fmt: skip
    full.stdout.fnmatch_lines(["    scored samples of the current definition: 4 -> 4 (already at --bench-fill 3; *"])


# -- merge ------------------------------------------------------------------------------------------------
MERGED = (r"^merged into .*: (\d+) samples read from (\d+) stores?: (\d+) appended \((\d+) renumbered\), (\d+) already "
          r"there \(same id in DEST or an earlier SRC\), (\d+) refused")  # fmt: skip


def test_merge_names_what_became_of_every_sample_it_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench.toml"
    bench.write_text(textwrap.dedent(BENCH_TOML))
    source = mixed_store(bench, tmp_path / "source")
    refused = _sample(bench, 9)
    refused["status"] = "half-done"  # no place in any store: merge refuses it and says so
    with source.samples_path(Store(tmp_path / "source").cells()[0]).open("a") as samples:
        samples.write(json.dumps(refused) + "\n")
    dest = tmp_path / "dest"
    write_samples(dest, [json.loads(line) for line in source.samples_path(source.cells()[0]).read_text().splitlines()[:2]])
    assert main(["merge", str(tmp_path / "source"), "--into", str(dest), "--allow-other-conditions"]) == 0
    out = capsys.readouterr().out
    read, stores, appended, renumbered, already, refused_count = numbers(MERGED, out)
    lines = source.samples_path(source.cells()[0]).read_text().splitlines()
    assert read == len(lines) == 10 and stores == 1  # 9 samples and a rescore record
    assert appended + already + refused_count == read
    assert (appended, already, refused_count) == (7, 2, 1)
    assert "not merged: sample status 'half-done'" in out


# -- the report's notes -----------------------------------------------------------------------------------
NOTE = (r"Of the (\d+) samples read, (\d+) used and (\d+) left out: (\d+) judged under an older scoring definition and "
        r"(\d+) of other conditions \(below\)\.")  # fmt: skip


def test_the_report_notes_add_up_to_the_samples_read(mixed: pytest.Pytester) -> None:
    result = mixed.runpytest("--bench-report", "--bench-scripted", "--bench-report-json", "r.json")
    read, used, left_out, stale, other = numbers(NOTE, result.stdout.str())
    assert read == len(trial_samples(mixed.path / "results")) == 8
    assert used + left_out == read and stale + other == left_out == 2
    document = json.loads((mixed.path / "r.json").read_text())
    cell = next(c for c in document["cells"] if (c["arm"], c["task"]) == ("bare", "say-hello"))
    outcomes = cell["outcomes"]
    assert used == cell["scored"] + cell["invalid"] + cell["error"]
    assert cell["scored"] == sum(outcomes[o] for o in ("pass", "incorrect", "confused", "hung"))
