"""The pytester matrix with the plugins users already have (pytest-rerunfailures, pytest-timeout,
pytest-randomly, pytest-xdist) and pytest's own cache and selection options: whatever is passed,
every trial number gets exactly one sample. Real CLI, scripted model."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench
from test_e2e import claude_children, samples

pytestmark = pytest.mark.e2e

FAILING = CONFTEST.replace('Answer("hello from the agent")', 'Answer("good morning")')
SLOW_HELLO = CONFTEST.replace('Answer("hello from the agent")', 'Delay(2, Answer("hello from the agent"))')


def sitting(pytester: pytest.Pytester, *args: str, arm: str = "bare", task: str = "say-hello") -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", "-rA", *args)


def trial_numbers(pytester: pytest.Pytester, arm: str = "bare", task: str = "say-hello") -> list[int]:
    return sorted(sample["trial"] for sample in samples(pytester, arm, task))


@pytest.mark.parametrize(
    "reruns",
    [["--reruns", "2"], ["--force-reruns", "2"], ["--reruns", "1", "--reruns-mode", "append"]],
    ids=["reruns", "force-reruns", "reruns-append"],
)
def test_rerun_requests_never_repeat_a_trial(pytester: pytest.Pytester, reruns: list[str]) -> None:
    write_bench(pytester, conftest=FAILING)
    result = sitting(pytester, "--bench-trials", "2", *reruns)
    result.assert_outcomes(failed=2)  # no "rerun" in the outcomes: each trial ran once
    assert "RERUN" not in result.stdout.str()
    assert trial_numbers(pytester) == [1, 2]


def test_reruns_under_xdist_keep_one_sample_per_trial_and_junit_gets_the_sample(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=FAILING)
    result = sitting(pytester, "--bench-trials", "2", "-n", "2", "--reruns", "2", "--junitxml", "junit.xml")
    result.assert_outcomes(failed=2)
    stored = samples(pytester, "bare", "say-hello")
    assert sorted(sample["trial"] for sample in stored) == [1, 2]
    # what CI users get: sample id, status and outcome as <property> elements of each testcase
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    properties = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert sorted(p["benchcell_sample"] for p in properties) == sorted(sample["id"] for sample in stored)
    assert {(p["benchcell_status"], p["benchcell_outcome"]) for p in properties} == {("scored", "incorrect")}


@pytest.mark.slow
def test_a_global_timeout_shorter_than_a_trial_does_not_cut_it(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=SLOW_HELLO)
    result = sitting(pytester, "--bench-trials", "2", "--timeout", "1")
    result.assert_outcomes(passed=2)
    assert [s["duration_ms"] > 1000 for s in samples(pytester, "bare", "say-hello")] == [True, True]


CUT_FIRST_STALL = CONFTEST + '''
import pytest

def pytest_collection_modifyitems(items):
    # A user who insists on cutting a trial (their own timeout marker over the plugin's own).
    for item in items:
        if "-stall-" in item.name:
            item.own_markers[:] = [mark for mark in item.own_markers if mark.name != "timeout"]
            item.add_marker(pytest.mark.timeout(4))
'''


@pytest.mark.slow
def test_a_trial_cut_by_pytest_timeout_is_recorded_and_the_next_trial_works(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=CUT_FIRST_STALL)
    result = sitting(pytester, "--bench-trials", "1", task="stall,say-hello")
    result.assert_outcomes(passed=1, errors=1)
    (cut,) = samples(pytester, "bare", "stall")
    assert cut["status"] == "error"
    assert cut["reason"] == "interrupted: Timeout (>4.0s) from pytest-timeout. (during the trial)"
    (after,) = samples(pytester, "bare", "say-hello")
    assert (after["status"], after["outcome"]) == ("scored", "pass")
    assert (pytester.path / "teardown.log").read_text().splitlines() == ["bare-stall-t1", "bare-say-hello-t1"]
    assert claude_children() == []
    result.stdout.fnmatch_lines(["bare x stall: 1 recorded this sitting (0 passed, 0 failed, 0 invalid, 1 errors)"])


def test_randomly_shuffling_keeps_every_trial_recorded_once(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "--bench-trials", "2", "-p", "randomly", "--randomly-seed", "7", arm="shell,bare")
    result.assert_outcomes(passed=4)
    assert trial_numbers(pytester, "shell") == [1, 2] and trial_numbers(pytester, "bare") == [1, 2]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["-x"], [1, 3]),  # stops after the first failure; trial 2 stays a gap, the next sitting goes on at 3
        (["--sw"], [1, 3]),
        (["--lf"], [1, 2, 3]),
        (["-p", "no:cacheprovider"], [1, 2, 3]),
    ],
    ids=["x", "sw", "lf", "no-cacheprovider"],
)
def test_selection_and_cache_options_keep_one_sample_per_trial(
    pytester: pytest.Pytester, options: list[str], expected: list[int]
) -> None:
    write_bench(pytester, conftest=FAILING)
    sitting(pytester, "--bench-trials", "2", *options)
    second = sitting(pytester, "--bench-trials", "1", *options)
    assert second.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)  # --sw stops as "interrupted"
    assert trial_numbers(pytester) == expected


def test_pytest_addopts_reach_a_sitting(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_bench(pytester, conftest=FAILING)
    monkeypatch.setenv("PYTEST_ADDOPTS", "--bench-trials 1 --reruns 3 -p no:randomly")
    result = sitting(pytester)
    result.assert_outcomes(failed=1)
    assert trial_numbers(pytester) == [1]


CHANGES_BENCH = BENCH_TOML + """
[tasks.close-99]
tier = "single-mutation"
intent = "Close issue 99."
changes = [{ op = "set", path = "issues[number=99].state", value = "closed" }]
"""

DICT_SNAPSHOT = CONFTEST.replace(
    "def pytest_benchcell_snapshot(trial, environment):\n",
    "def pytest_benchcell_snapshot(trial, environment):\n"
    "    if trial.task == 'close-99':\n"
    "        return {'issues': [{'number': 1, 'state': 'open'}, {'number': 2, 'state': 'open'}]}\n",
).replace(
    "def pytest_benchcell_script(trial, environment):\n",
    "def pytest_benchcell_script(trial, environment):\n    open('script.log', 'a').write(trial.task + '\\n')\n",
)


def test_changes_that_do_not_resolve_spend_nothing_and_skip_the_task(pytester: pytest.Pytester) -> None:
    write_bench(pytester, CHANGES_BENCH, DICT_SNAPSHOT)
    result = sitting(pytester, "--bench-trials", "3", task="close-99")
    result.assert_outcomes(errors=1, skipped=2)
    reason = "task close-99: change 1 (set issues[number=99].state): issues[number=99] matches no element (number values present: 1, 2)"
    pattern = "".join(f"[{c}]" if c in "[]" else c for c in reason)  # fnmatch-safe
    result.stdout.fnmatch_lines(
        [
            f"*{pattern}*checked before the agent started, no model request made*",  # the error's section
            f"SKIPPED [[]2[]] *task close-99 skipped for this sitting: {pattern}*",
            "ERROR bench.toml::bare-close-99-t1 - error: task close-99: change 1*",
        ]
    )
    (sample,) = samples(pytester, "bare", "close-99")  # the skipped trials are gaps, never samples
    assert sample["reason"].startswith(reason) and sample["turns"] == 0 and sample["tool_calls"] == []
    assert not (pytester.path / "script.log").exists()  # no script, so no scripted model and no request
    assert json.loads(json.dumps(sample["usage"]["total"])) == dict.fromkeys(sample["usage"]["total"], 0)


RUNS_EVERYTHING_TWICE = CONFTEST + '''
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    # a plugin that runs every item's protocol twice (as a repeat or rerun plugin might)
    for item in session.items:
        for _ in range(2):
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
    return True
'''


def test_an_item_run_twice_is_refused_and_records_nothing_more(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=RUNS_EVERYTHING_TWICE)
    result = sitting(pytester, "--bench-trials", "1")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "trial 1 of bare x say-hello already ran in this sitting; a trial is one draw*",
            "bare x say-hello: 1 recorded this sitting (1 passed, 0 failed, 0 invalid, 0 errors)",
            "FAILED bench.toml::bare-say-hello-t1 - refused: *",
        ]
    )
    assert trial_numbers(pytester) == [1]  # one sample: the first run's
    assert samples(pytester, "bare", "say-hello")[0]["outcome"] == "pass"


HARNESS_BUG_ON_FIRST = CONFTEST + '''
import pytest_benchcell.trial.walk as trial_module  # where the trial's walk looks check_changes up

_real_check = trial_module.check_changes
_calls = []

def _buggy_check(bench, task, ground_truth):
    # stands in for a bug of the harness itself, on the first trial only
    _calls.append(task.id)
    if len(_calls) == 1:
        raise RuntimeError("boom in the harness")
    return _real_check(bench, task, ground_truth)

trial_module.check_changes = _buggy_check
'''


def test_a_harness_bug_is_recorded_as_internal_shown_with_its_traceback_and_the_next_trial_works(
    pytester: pytest.Pytester,
) -> None:
    write_bench(pytester, conftest=HARNESS_BUG_ON_FIRST)
    result = sitting(pytester, "--bench-trials", "2")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*RuntimeError: boom in the harness*", "ERROR bench.toml::bare-say-hello-t1 - RuntimeError*"])
    assert "_buggy_check" in result.stdout.str()  # the traceback, for the bug report
    first, second = samples(pytester, "bare", "say-hello")
    assert (first["status"], first["reason"]) == ("error", "internal: RuntimeError: boom in the harness")
    assert (second["status"], second["outcome"]) == ("scored", "pass")
    assert (pytester.path / "teardown.log").read_text().splitlines() == ["bare-say-hello-t1", "bare-say-hello-t2"]
