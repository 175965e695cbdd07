"""The bench hooks through pytester: readiness, probe, expected states, overrides, rescore, bonus."""

from __future__ import annotations

import json
import textwrap

import pytest

pytestmark = pytest.mark.e2e

BENCH = """
[bench]
name = "files"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 30000
ready_timeout_ms = 1500

[checker]
multiset_keys = ["files"]

[arms.shell]
tools = ["Bash"]
binaries = ["touch"]

[arms.talker]
tools = ["Bash"]

[tasks.make-file]
tier = "single-mutation"
intent = "Create made.txt."
changes = [{ op = "append", path = "files", value = "made.txt" }]

[tasks.make-file-variant]
tier = "single-mutation"
intent = "Create made.txt (variant)."
changes = [{ op = "append", path = "files", value = "made.txt" }]

[tasks.greet]
tier = "read"
intent = "Greet me."
required_facts = ["hello"]

[tasks.touch-only]
tier = "read"
bonus = true
arms = ["shell"]
intent = "Only the shell arm can do this."
required_facts = ["hello"]
"""

CONFTEST = """
import json, os
from pytest_benchcell import Environment, Probe
from pytest_benchcell.scripted import Answer, ToolUse

READY_AFTER = int(os.environ.get("READY_AFTER", "0"))
CALLS = {"ready": 0}

def pytest_benchcell_provision(trial):
    return Environment(values={}, data=trial.agent_cwd)

def pytest_benchcell_ready(trial, environment):
    CALLS["ready"] += 1
    if os.environ.get("NEVER_READY"):
        return False
    return CALLS["ready"] > READY_AFTER

def pytest_benchcell_snapshot(trial, environment):
    return {"files": sorted(p.name for p in environment.data.iterdir())}

def pytest_benchcell_script(trial, environment):
    if trial.task.startswith("make-file"):
        return [ToolUse("Bash", {"command": "touch made.txt"}), Answer("done")]
    return [Answer("hello there")]

def pytest_benchcell_update_sample(trial, sample):
    sample["host_version"] = "files 1.0"
    sample["ready_polls"] = CALLS["ready"]
"""


def write(pytester: pytest.Pytester, bench: str = BENCH, extra_conftest: str = "") -> None:
    pytester.makefile(".toml", bench=textwrap.dedent(bench))
    pytester.makeconftest(CONFTEST + textwrap.dedent(extra_conftest))


def stored(pytester: pytest.Pytester, arm: str, task: str) -> list[dict]:
    path = pytester.path / "results" / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run(pytester: pytest.Pytester, arm: str, task: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", "-rA", *args)


def test_expected_state_from_declared_changes_passes_and_records_state(pytester: pytest.Pytester) -> None:
    write(pytester)
    run(pytester, "shell", "make-file").assert_outcomes(passed=1)
    (sample,) = stored(pytester, "shell", "make-file")
    assert sample["state"] == {"before": {"files": []}, "after": {"files": ["made.txt"]}}
    assert sample["host_version"] == "files 1.0"  # pytest_benchcell_update_sample


def test_a_missing_change_fails_with_a_readable_difference(pytester: pytest.Pytester) -> None:
    write(pytester)
    run(pytester, "talker", "make-file").assert_outcomes(failed=1)  # talker may not run touch
    (sample,) = stored(pytester, "talker", "make-file")
    assert sample["outcome"] == "incorrect"
    assert sample["score"]["differences"] == ['files: missing "made.txt"']


def test_collateral_change_fails(pytester: pytest.Pytester) -> None:
    write(pytester, extra_conftest="""
        def pytest_benchcell_script(trial, environment):
            return [ToolUse("Bash", {"command": "touch made.txt extra.txt"}), Answer("done")]
    """)
    run(pytester, "shell", "make-file").assert_outcomes(failed=1)
    (sample,) = stored(pytester, "shell", "make-file")
    assert sample["score"]["differences"] == ['files: unexpected "extra.txt"']


def test_expected_state_hook_and_check_state_hook_override_the_defaults(pytester: pytest.Pytester) -> None:
    write(pytester, extra_conftest="""
        def pytest_benchcell_expected_state(trial, environment, ground_truth):
            return {"files": ["made.txt", "other.txt"]}

        def pytest_benchcell_check_state(trial, environment, snapshot, expected):
            return [f"custom: wanted {expected['files']}, saw {snapshot['files']}"]
    """)
    run(pytester, "shell", "make-file").assert_outcomes(failed=1)
    (sample,) = stored(pytester, "shell", "make-file")
    assert sample["reason"] == "custom: wanted ['made.txt', 'other.txt'], saw ['made.txt']"


def test_score_hook_overrides_the_checker(pytester: pytest.Pytester) -> None:
    write(pytester, extra_conftest="""
        def pytest_benchcell_score(trial, answer, ground_truth, snapshot):
            if trial.task == "greet":
                return [] if answer == "hello there" and ground_truth is None else ["not exactly hello there"]
    """)
    bench = BENCH.replace('required_facts = ["hello"]', 'required_facts = ["goodbye"]', 1)
    write(pytester, bench, extra_conftest="""
        def pytest_benchcell_score(trial, answer, ground_truth, snapshot):
            return [] if answer == "hello there" else ["not exactly hello there"]
    """)
    run(pytester, "talker", "greet").assert_outcomes(passed=1)


def test_readiness_is_polled_until_ready(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("READY_AFTER", "2")
    write(pytester)
    run(pytester, "talker", "greet").assert_outcomes(passed=1)
    (sample,) = stored(pytester, "talker", "greet")
    assert sample["ready_polls"] == 3


@pytest.mark.slow
def test_readiness_timeout_is_a_harness_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEVER_READY", "1")
    write(pytester)
    result = run(pytester, "talker", "greet", "--bench-trials", "2")
    result.assert_outcomes(errors=2)
    samples = stored(pytester, "talker", "greet")
    assert [s["status"] for s in samples] == ["error", "error"]
    assert samples[0]["reason"] == "the environment was not ready after 1500 ms (pytest_benchcell_ready)"


def test_probe_swaps_and_drops_tasks_and_its_verdict_is_on_every_sample(pytester: pytest.Pytester) -> None:
    write(pytester, extra_conftest="""
        def pytest_benchcell_probe(bench):
            return Probe(verdict={"can_touch": False}, swap={"make-file": "make-file-variant"}, drop=("greet",))
    """)
    result = run(pytester, "shell", "make-file,greet")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["benchcell: probe verdict {'can_touch': False}", "PASSED bench.toml::shell-make-file-variant-t1"])
    (sample,) = stored(pytester, "shell", "make-file-variant")
    assert sample["probe"] == {"can_touch": False}


def test_probe_naming_an_unknown_task_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write(pytester, extra_conftest="""
        def pytest_benchcell_probe(bench):
            return Probe(drop=("nope",))
    """)
    result = run(pytester, "shell", "greet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_benchcell_probe names task 'nope'*valid tasks: make-file*"])


def test_bonus_task_is_not_applicable_to_other_arms(pytester: pytest.Pytester) -> None:
    write(pytester)
    result = run(pytester, "all", "touch-only")
    result.assert_outcomes(passed=1)  # the talker x touch-only cell is not collected at all
    result.stdout.fnmatch_lines(["benchcell: not collected, not applicable: talker x touch-only: task touch-only is only for arms shell"])
    assert "talker-touch-only" not in result.stdout.str()
    (sample,) = stored(pytester, "shell", "touch-only")
    assert sample["bonus"] is True
    assert not (pytester.path / "results" / "scripted" / "talker" / "touch-only.jsonl").exists()


def test_rescore_flips_a_stored_verdict_without_any_model_call(pytester: pytest.Pytester) -> None:
    write(pytester)
    run(pytester, "shell", "make-file,greet").assert_outcomes(passed=2)
    # a checker fix: the task now expects another file, and the greeting fact changed
    fixed = BENCH.replace('value = "made.txt" }]\n\n[tasks.make-file-variant]', 'value = "other.txt" }]\n\n[tasks.make-file-variant]')
    fixed = fixed.replace('required_facts = ["hello"]', 'required_facts = ["goodbye"]', 1)
    assert fixed != BENCH
    no_model = "\ndef pytest_benchcell_script(trial, environment):\n    raise AssertionError('no model call on rescore')\n"
    write(pytester, fixed, extra_conftest=no_model)
    result = pytester.runpytest("--bench-rescore", "--bench-scripted", "--bench-arm", "shell")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*benchcell rescore*",
            "re-scored 2 stored samples in 2 cells of *: 2 verdicts changed, 0 kept their verdict under the current scoring (appended as rescore records), 0 already current (nothing appended), 0 skipped",
            "    shell-make-file-t1: pass -> incorrect (files: missing \"other.txt\"; unexpected \"made.txt\")",
            "    shell-greet-t1: pass -> incorrect (missing fact: goodbye*",
        ]
    )
    original, rescore = stored(pytester, "shell", "make-file")
    assert (original["status"], original["outcome"]) == ("scored", "pass")  # never rewritten
    assert (rescore["status"], rescore["rescore_of"], rescore["outcome"]) == ("rescore", original["id"], "incorrect")
    # a second rescore with the same checker appends nothing
    again = pytester.runpytest("--bench-rescore", "--bench-scripted", "--bench-arm", "shell")
    again.stdout.fnmatch_lines(["re-scored 2 stored samples in 2 cells of *: 0 verdicts changed*"])
    assert len(stored(pytester, "shell", "make-file")) == 2
