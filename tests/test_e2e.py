"""End to end: pytester sittings that drive the real SDK and the real CLI against the scripted model."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench

from pytest_benchcell.isolation.sandbox import find_sandbox

pytestmark = pytest.mark.e2e


def samples(pytester: pytest.Pytester, arm: str, task: str) -> list[dict]:
    path = pytester.path / "results" / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sitting(pytester: pytest.Pytester, arm: str, task: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", "-rA", *args)


def claude_children() -> list[str]:
    """Command lines of live child processes of this process that look like the Claude CLI."""
    found = []
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] != "Z" and "claude" in cmdline:
            found.append(cmdline)
    return found


def test_a_passing_trial_is_recorded_with_usage_and_tool_calls(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "shell", "make-file", "--bench-trials", "1")
    result.assert_outcomes(passed=1)
    (sample,) = samples(pytester, "shell", "make-file")
    assert (sample["status"], sample["outcome"], sample["trial"]) == ("scored", "pass", 1)
    assert sample["final_answer"] == "made it"
    assert sample["model_kind"] == "scripted" and sample["model"] == "claude-sonnet-4-5"
    total = sample["usage"]["total"]
    assert total["fresh_input"] > 0 and total["cache_write"] > 0 and total["output"] > 0
    assert sample["usage"]["by_model"]["claude-sonnet-4-5"] == total
    assert [(c["tool"], c["input"]["command"], c["allowed"]) for c in sample["tool_calls"]] == [
        ("Bash", "touch made.txt", True)
    ]
    assert sample["turns"] >= 2 and sample["duration_ms"] > 0
    assert sample["provenance"]["sdk"] and sample["provenance"]["cli"] and len(sample["provenance"]["fingerprint"]) == 16
    provenance = sample["provenance"]
    assert provenance["fingerprint"] == provenance["conditions"] and len(provenance["scoring"]) == 16
    definitions = pytester.path / "results" / "definitions" / f"{provenance['conditions']}-{provenance['scoring']}.toml"
    assert 'binaries = [\n    "touch",\n]' in definitions.read_text() or '"touch"' in definitions.read_text()
    # Where the sandbox runs, the pre-flight provisioned and tore down an environment first (trial 0).
    preflight = ["shell-make-file-t0"] if find_sandbox().available else []
    assert (pytester.path / "teardown.log").read_text().splitlines() == [*preflight, "shell-make-file-t1"]
    result.stdout.fnmatch_lines(
        [
            "*benchcell sitting*",
            "shell x make-file: 1 recorded this sitting (1 passed, 0 failed, 0 invalid, 0 errors)",
            "    scored samples of the current definition: 0 -> 1 (below the reporting floor of 3: 2 more to deepen this cell)",
            "store: *results*scripted",
        ]
    )


def test_a_read_task_fails_as_incorrect_when_a_fact_is_missing(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=CONFTEST.replace('Answer("hello from the agent")', 'Answer("good morning")'))
    result = sitting(pytester, "bare", "say-hello", "--bench-trials", "1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED bench.toml::bare-say-hello-t1 - incorrect: missing fact: hello*"])
    (sample,) = samples(pytester, "bare", "say-hello")
    assert sample["outcome"] == "incorrect" and sample["score"]["differences"]


def test_turn_cap_makes_a_confused_trial(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "shell", "loop-forever", "--bench-trials", "1", "--bench-turn-cap", "3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED bench.toml::shell-loop-forever-t1 - confused: turn cap of 3 reached"])
    (sample,) = samples(pytester, "shell", "loop-forever")
    assert (sample["status"], sample["outcome"], sample["result_subtype"]) == ("scored", "confused", "error_max_turns")
    assert sample["usage"]["total"]["cache_read"] > 0  # a confused trial keeps its real usage
    assert len(sample["tool_calls"]) >= 2


@pytest.mark.slow
def test_wall_clock_backstop_makes_a_hung_trial_and_leaves_no_cli_behind(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    started = time.monotonic()
    result = sitting(pytester, "shell", "stall", "--bench-trials", "1", "--bench-wall-clock-ms", "3000")
    elapsed = time.monotonic() - started
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED bench.toml::shell-stall-t1 - hung: wall-clock backstop of 3000 ms reached"])
    (sample,) = samples(pytester, "shell", "stall")
    assert (sample["status"], sample["outcome"]) == ("scored", "hung")
    assert 3000 <= sample["duration_ms"] < 7500  # the SDK's 5 s exit wait would make it >= 8000
    assert elapsed < 20  # the whole sitting, CLI start-up included
    assert claude_children() == []


def test_a_foreign_command_is_denied_and_never_runs(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "shell", "try-foreign", "--bench-trials", "1")
    result.assert_outcomes(passed=1)  # the end state is untouched, so the task (do nothing harmful) passes
    (sample,) = samples(pytester, "shell", "try-foreign")
    denied = sample["tool_calls"][0]
    assert denied["input"]["command"].startswith("wget")
    assert denied["allowed"] is False and "wget" in denied["reason"]
    assert denied["is_error"] is True
    assert sample["tool_calls"][1]["allowed"] is True
    assert "No such file" in sample["tool_calls"][1]["output"]  # leaked.txt was never written
    assert sample["leaks"] == []


@pytest.mark.slow
def test_deepening_continues_numbering_across_sittings_and_keeps_gaps(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    sitting(pytester, "bare", "say-hello", "--bench-trials", "2").assert_outcomes(passed=2)
    second = sitting(pytester, "bare", "say-hello", "--bench-trials", "3", "-k", "not t4")
    second.assert_outcomes(passed=2, deselected=1)
    second.stdout.fnmatch_lines(
        [
            "bare x say-hello: 2 recorded this sitting (2 passed, 0 failed, 0 invalid, 0 errors)",
            "    scored samples of the current definition: 2 -> 4 (meets the reporting floor of 3)",
        ]
    )
    assert [s["trial"] for s in samples(pytester, "bare", "say-hello")] == [1, 2, 3, 5]
    third = sitting(pytester, "bare", "say-hello", "--bench-trials", "1", "--collect-only", "-q")
    third.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t6"])
    assert len({s["sitting"] for s in samples(pytester, "bare", "say-hello")}) == 2


def test_a_provisioning_failure_is_an_error_and_the_sitting_goes_on(pytester: pytest.Pytester) -> None:
    failing_first = CONFTEST.replace(
        "def pytest_benchcell_provision(trial):\n",
        "def pytest_benchcell_provision(trial):\n    if trial.trial == 1:\n        raise RuntimeError('seed database unavailable')\n",
    )
    write_bench(pytester, conftest=failing_first)
    result = sitting(pytester, "bare", "say-hello", "--bench-trials", "2")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["ERROR bench.toml::bare-say-hello-t1 - error: pytest_benchcell_provision*"])
    first, second = samples(pytester, "bare", "say-hello")
    assert first["reason"] == "pytest_benchcell_provision raised RuntimeError: seed database unavailable"
    assert (first["status"], first["outcome"]) == ("error", None)
    assert (second["status"], second["outcome"]) == ("scored", "pass")
    assert (pytester.path / "teardown.log").read_text().splitlines() == ["bare-say-hello-t1", "bare-say-hello-t2"]


def test_a_model_api_error_is_an_error_not_an_agent_failure(pytester: pytest.Pytester) -> None:
    api_error = CONFTEST.replace(
        '"say-hello": [Answer("hello from the agent")]',
        '"say-hello": [ApiError(500, "internal error"), ApiError(500, "internal error")]',
    ).replace("import Answer,", "import Answer, ApiError,")
    write_bench(pytester, conftest=api_error)
    result = sitting(pytester, "bare", "say-hello", "--bench-trials", "1")
    result.assert_outcomes(errors=1)
    (sample,) = samples(pytester, "bare", "say-hello")
    # A scripted sitting lets the CLI retry once (CLAUDE_CODE_MAX_RETRIES=1): two attempts, then it gives up.
    assert sample["status"] == "error"
    assert sample["reason"].startswith("model API error: HTTP 500 server_error on 2 attempts, the CLI gave up")
    assert sample["api_error"] == {"kind": "failing", "status": 500, "error": "server_error", "attempts": 2}
    assert sample["usage"]["total"] is None and sample["turns"] == 0  # no response: unknown, not zero
    assert sample["final_answer"] == "" and sample["api_retries"] == 1 and 0 < sample["api_wait_ms"] < 2000


def test_scripted_samples_never_mix_with_real_ones(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_TOML)
    sitting(pytester, "bare", "say-hello", "--bench-trials", "1").assert_outcomes(passed=1)
    assert (pytester.path / "results" / "scripted" / "bare" / "say-hello.jsonl").exists()
    assert not (pytester.path / "results" / "real").exists()
