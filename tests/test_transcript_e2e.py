"""Transcripts end to end: real SDK + CLI + scripted model; what a sitting keeps beside the store."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import docs_text
import pytest
from benches import TASKS, write_bench

from pytest_benchcell.cli import main as benchcell
from pytest_benchcell.transcript import PRUNED, events_of, read_transcript, transcript_status

pytestmark = pytest.mark.e2e

SECRET = "tr4nscript-s3cret-5a6b7c"

BENCH = """
[bench]
name = "transcripts"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 6
wall_clock_ms = 30000
secrets = ["token"]

[arms.shell]
tools = ["Bash"]
binaries = ["touch"]
env = { TRACKER_TOKEN = "{token}" }

[tasks.make-file]
tier = "single-mutation"
intent = "Create made.txt; the tracker token is {token}."
""" + TASKS["stall"] + TASKS["loop-forever"] + """
[tasks.api-down]
tier = "read"
intent = "Say hello."
required_facts = ["hello"]

[arms.loose]
tools = ["Bash"]
binaries = ["touch"]
guard_exempt = ["cp"]
"""

CONFTEST = f"""
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ApiError, Delay, Repeat, ToolUse

SCRIPTS = {{
    "make-file": [
        ToolUse("Bash", {{"command": "seq 1 3000; echo token=$TRACKER_TOKEN"}}, text="Counting first."),
        ToolUse("Bash", {{"command": "wget http://127.0.0.1:9/"}}),
        ToolUse("Bash", {{"command": "touch made.txt"}}, text="Now the file."),
        Answer("made it; the token was {SECRET}"),
    ],
    "stall": [ToolUse("Bash", {{"command": "echo started"}}), Delay(60, Answer("too late"))],
    "loop-forever": [Repeat(ToolUse("Bash", {{"command": "ls"}}))],
    "api-down": [ApiError(500, "internal"), ApiError(500, "internal"), ApiError(500, "internal")],
}}

def pytest_benchcell_provision(trial):
    return Environment(values={{"token": {SECRET!r}}}, data=trial.agent_cwd)

def pytest_benchcell_snapshot(trial, environment):
    return sorted(p.name for p in environment.data.iterdir())

def pytest_benchcell_check_state(trial, environment, snapshot):
    expected = ["made.txt"] if trial.task == "make-file" else []
    return [] if snapshot == expected else [f"files: expected {{expected}}, got {{snapshot}}"]

def pytest_benchcell_script(trial, environment):
    if trial.arm == "loose":
        return [ToolUse("Bash", {{"command": "touch made.txt && cp made.txt copy.txt"}}), Answer("done")]
    return SCRIPTS[trial.task]
"""


def stored(root: Path, arm: str, task: str) -> list[dict]:
    path = root / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sitting(pytester: pytest.Pytester, task: str, *args: str, arm: str = "shell") -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", *args)


@pytest.fixture
def bench(pytester: pytest.Pytester) -> pytest.Pytester:
    write_bench(pytester, BENCH, CONFTEST)
    return pytester


def test_a_sittings_samples_reference_transcripts_with_every_call_full_results_text_and_usage(bench: pytest.Pytester) -> None:
    sitting(bench, "make-file", "--bench-trials", "2").assert_outcomes(passed=2)
    root = bench.path / "results"
    samples = stored(root, "shell", "make-file")
    assert len(samples) == 2
    for sample in samples:
        ref = sample["transcript"]
        assert ref["path"] == f"transcripts/scripted/shell/make-file/{sample['id']}.jsonl.gz"
        assert (root / ref["path"]).stat().st_size == ref["bytes"] < ref["raw_bytes"]
        lines = read_transcript(root, sample)
        assert lines is not None and len(lines) == ref["events"] + 1
        head = lines[0]
        assert (head["sample"], head["arm"], head["task"], head["trial"]) == (sample["id"], "shell", "make-file", sample["trial"])
        kinds = [event["kind"] for event in lines[1:]]
        assert kinds[:2] == ["prompt", "init"] and kinds[-2:] == ["result", "ended"]
        (init,) = events_of(lines, "init")
        assert init["tools"] == ["Bash"]
        # every tool call, with the guard's decision and its full result (the sample clips at 4000)
        calls = list(events_of(lines, "tool_use"))
        assert [call["input"]["command"] for call in calls] == [
            "seq 1 3000; echo token=$TRACKER_TOKEN", "wget http://127.0.0.1:9/", "touch made.txt"
        ]
        results = {event["tool_use_id"]: event for event in events_of(lines, "tool_result")}
        counted = results[calls[0]["id"]]["content"]
        assert counted.startswith("1\n2\n3\n") and "\n2999\n3000\n" in counted and counted.endswith("token=[redacted]")
        assert "more characters]" in sample["tool_calls"][0]["output"]  # what the sample keeps is clipped
        assert results[calls[1]["id"]]["is_error"] is True
        guard = {event["tool_use_id"]: event for event in events_of(lines, "guard")}
        assert guard[calls[1]["id"]]["allowed"] is False and "wget" in guard[calls[1]["id"]]["reason"]
        assert guard[calls[0]["id"]]["allowed"] is True
        # the agent's text between calls, and its answer
        assert [event["text"] for event in events_of(lines, "text")] == [
            "Counting first.", "Now the file.", "made it; the token was [redacted]"
        ]
        # one request and one complete response per model reply, each with its own usage
        requests = list(events_of(lines, "model_request"))
        responses = list(events_of(lines, "model_response"))
        assert [r["request"] for r in requests] == [r["request"] for r in responses] == [1, 2, 3, 4]
        assert all(r["complete"] for r in responses) and len(responses) == sample["turns"]
        assert [r["stop_reason"] for r in responses] == ["tool_use"] * 3 + ["end_turn"]
        assert all(r["usage"]["output"] > 0 for r in responses)
        assert responses[0]["usage"]["cache_write"] > 0 and responses[1]["usage"]["cache_read"] > 0
        per_request = {name: sum(r["usage"][name] for r in responses) for name in responses[0]["usage"]}
        assert per_request == sample["usage"]["total"]  # the CLI's own total, from its result message
        (ended,) = events_of(lines, "ended")
        assert (ended["status"], ended["outcome"]) == ("scored", "pass")


def test_no_secret_reaches_a_transcript(bench: pytest.Pytester) -> None:
    sitting(bench, "make-file").assert_outcomes(passed=1)
    root = bench.path / "results"
    (sample,) = stored(root, "shell", "make-file")
    text = gzip.decompress((root / sample["transcript"]["path"]).read_bytes()).decode()
    assert SECRET not in text
    assert "tracker token is [redacted]" in text  # in the prompt (the seed)
    assert "token=[redacted]" in text  # in a tool's output
    assert "the token was [redacted]" in text  # in the agent's answer


@pytest.mark.slow
def test_a_trial_cut_by_the_wall_clock_keeps_its_transcript(bench: pytest.Pytester) -> None:
    sitting(bench, "stall", "--bench-wall-clock-ms", "3000").assert_outcomes(failed=1)
    root = bench.path / "results"
    (sample,) = stored(root, "shell", "stall")
    assert sample["outcome"] == "hung"
    lines = read_transcript(root, sample)
    assert lines is not None
    kinds = [event["kind"] for event in lines[1:]]
    assert [e["content"] for e in events_of(lines, "tool_result")] == ["started"]
    # the second request was made and never answered: the backstop stopped it
    assert [r["request"] for r in events_of(lines, "model_request")] == [1, 2]
    assert [r["request"] for r in events_of(lines, "model_response")] == [1]
    assert kinds.index("backstop") > kinds.index("tool_result") and kinds[-1] == "ended"
    (backstop,) = events_of(lines, "backstop")
    assert backstop["wall_clock_ms"] == 3000 and backstop["t_ms"] >= 3000
    assert lines[-1]["outcome"] == "hung"


def test_a_trial_at_the_turn_cap_keeps_its_transcript(bench: pytest.Pytester) -> None:
    sitting(bench, "loop-forever", "--bench-turn-cap", "3").assert_outcomes(failed=1)
    root = bench.path / "results"
    (sample,) = stored(root, "shell", "loop-forever")
    lines = read_transcript(root, sample)
    assert sample["outcome"] == "confused" and lines is not None
    assert len(list(events_of(lines, "tool_use"))) == 3
    (result,) = events_of(lines, "result")
    assert result["subtype"] == "error_max_turns"


@pytest.mark.slow
def test_pruning_keeps_samples_and_reports_and_merge_carries_transcripts(bench: pytest.Pytester, tmp_path: Path, capsys) -> None:
    sitting(bench, "make-file", "--bench-trials", "2").assert_outcomes(passed=2)
    root = bench.path / "results"
    merged = tmp_path / "merged"
    assert benchcell(["merge", str(root), "--into", str(merged)]) == 0
    assert "2 transcripts copied" in capsys.readouterr().out
    for sample in stored(merged, "shell", "make-file"):
        assert read_transcript(merged, sample) == read_transcript(root, sample) is not None

    samples_before = (root / "scripted" / "shell" / "make-file.jsonl").read_bytes()
    assert benchcell(["transcripts", "prune", "--store", str(root), "--before", "2000-01-01"]) == 0
    assert "0 transcripts removed" in capsys.readouterr().out
    assert benchcell(["transcripts", "prune", "--store", str(root), "--before", "2999-01-01"]) == 0
    assert "2 transcripts removed" in capsys.readouterr().out
    assert (root / "scripted" / "shell" / "make-file.jsonl").read_bytes() == samples_before  # never rewritten
    for sample in stored(root, "shell", "make-file"):
        assert transcript_status(root, sample) == PRUNED and read_transcript(root, sample) is None
    assert benchcell(["report", "--store", str(root), "--model-kind", "scripted", "--floor", "1"]) == 0
    assert "make-file" in capsys.readouterr().out
    # a merge of pruned samples says so, and DEST's samples read as pruned too
    again = tmp_path / "again"
    assert benchcell(["merge", str(root), "--into", str(again)]) == 0
    assert "0 transcripts copied (2 pruned in the source; DEST reads them as pruned)" in capsys.readouterr().out
    assert all(transcript_status(again, s) == PRUNED for s in stored(again, "shell", "make-file"))


@pytest.mark.slow
def test_the_readme_figure_of_transcript_bytes_per_trial_holds_for_a_task_of_the_example_bench(
    tmp_path: Path,
) -> None:
    """README, Benchmarks: the row of benchmarks/transcript_size.py. One task in every arm, measured
    the way the script measures, lands between half the stated median and the stated maximum."""
    import re

    row = docs_text.table_row("benchmarks/transcript_size.py")
    figures = re.search(r"median ([\d,]+) bytes per trial compressed \(([\d,]+) bytes of JSON inside, ([\d.]+)x\), max ([\d,]+)", row)
    assert figures, f"README's transcript_size row no longer states its figures: {row}"
    median, _, ratio, largest = (float(value.replace(",", "")) for value in figures.groups())
    script = docs_text.benchmark_script("transcript_size")
    script.sitting(tmp_path / "store", "all", "count-open", 1, 1)
    rows = script.measure(tmp_path / "store")
    assert sorted(str(row["arm"]) for row in rows) == ["cli-skill", "cli-skill-native", "mcp", "native", "raw-api"]
    assert all(median / 2 <= int(row["bytes"]) <= largest for row in rows), rows
    assert all(int(row["raw"]) / int(row["bytes"]) >= ratio * 0.6 for row in rows), rows


@pytest.mark.slow
def test_an_invalid_trial_and_an_errored_one_keep_their_transcripts(bench: pytest.Pytester) -> None:
    root = bench.path / "results"
    sitting(bench, "make-file", arm="loose")
    (invalid,) = stored(root, "loose", "make-file")
    lines = read_transcript(root, invalid)
    assert invalid["status"] == "invalid" and lines is not None
    assert [e["input"]["command"] for e in events_of(lines, "tool_use")] == ["touch made.txt && cp made.txt copy.txt"]
    assert (lines[-1]["status"], lines[-1]["reason"]) == ("invalid", invalid["reason"])
    sitting(bench, "api-down")
    (errored,) = stored(root, "shell", "api-down")
    lines = read_transcript(root, errored)
    assert errored["status"] == "error" and lines is not None
    assert list(events_of(lines, "model_request")) and not list(events_of(lines, "model_response"))
    assert "500" in " ".join(str(e) for e in events_of(lines, "api_error", "result", "error"))
    assert lines[-1]["status"] == "error"
