"""What a binary's start-up runs (its learned helpers) is kept between sittings in the user's cache
and recalled while the files it ran are the same (isolation/exec_audit/policy.py); where the kept
helpers leave a program of a trial unexplained, the probe runs again and the trial is judged with
what the start-up runs today, so a kept record never makes a trial invalid.

Each process here is a fresh Python, as each sitting is, with its own XDG_CACHE_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_preflight import needs_sandbox

from pytest_benchcell.isolation.exec_audit import find_tracer

TRACER = find_tracer()
needs_audit = pytest.mark.skipif(not TRACER.available, reason=f"the execution audit cannot run here: {TRACER.reason}")

LEARN = """
import json, sys
from pytest_benchcell.isolation.exec_audit import find_tracer, learned_helpers
from pytest_benchcell.isolation.exec_audit.policy import probe_again
tracer = find_tracer()
first = learned_helpers("tool", ["tool", "--version"], sys.argv[1], tracer)
again = probe_again("tool", ["tool", "--version"], sys.argv[1], tracer) if sys.argv[2:] == ["again"] else False
print(json.dumps([sorted(first), again, sorted(learned_helpers("tool", ["tool", "--version"], sys.argv[1], tracer))]))
"""


def _tool(folder: Path, helper: Path) -> Path:
    """A wrapper whose start-up runs `helper` and counts its runs in `tally`."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    tool = folder / "bin" / "tool"
    tool.write_text(f"#!/bin/sh\necho run >> {folder / 'tally'}\nexec {helper} \"$@\"\n")
    tool.chmod(0o755)
    return tool


def _learn(folder: Path, *extra: str) -> tuple[list[str], bool, list[str]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
    done = subprocess.run([sys.executable, "-c", LEARN, f"{folder / 'bin'}:/usr/bin:/bin", *extra],
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    first, again, after = json.loads(done.stdout)
    return first, again, after


def _runs(folder: Path) -> int:
    return len((folder / "tally").read_text().splitlines()) if (folder / "tally").exists() else 0


@needs_audit
def test_a_later_process_takes_the_kept_helpers_without_running_the_probe(tmp_path: Path) -> None:
    helper = tmp_path / "helper"
    helper.write_bytes(Path("/usr/bin/true").read_bytes())
    helper.chmod(0o755)
    _tool(tmp_path, helper)
    first, _, _ = _learn(tmp_path)
    assert str(helper) in first and _runs(tmp_path) == 1
    again, _, _ = _learn(tmp_path)
    assert again == first and _runs(tmp_path) == 1  # recalled: the start-up did not run again
    assert len(list((tmp_path / "cache" / "pytest-benchcell" / "probes").glob("*.json"))) == 1


@needs_audit
def test_a_replaced_helper_or_binary_runs_the_probe_again(tmp_path: Path) -> None:
    helper = tmp_path / "helper"
    helper.write_bytes(Path("/usr/bin/true").read_bytes())
    helper.chmod(0o755)
    tool = _tool(tmp_path, helper)
    _learn(tmp_path)
    os.utime(helper, ns=(1_000_000_000, 1_000_000_000))  # the same name, another file as far as stat says
    _learn(tmp_path)
    assert _runs(tmp_path) == 2
    tool.write_text(tool.read_text() + "# edited\n")
    _learn(tmp_path)
    assert _runs(tmp_path) == 3
    _learn(tmp_path)
    assert _runs(tmp_path) == 3


@needs_audit
def test_kept_helpers_are_learned_again_on_request_and_fresh_ones_are_not(tmp_path: Path) -> None:
    choice = tmp_path / "choice"
    choice.write_text("/usr/bin/true")
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'tally'}\nexec $(cat {choice})\n")
    tool.chmod(0o755)
    first, again, _ = _learn(tmp_path, "again")
    assert "/usr/bin/true" in first and again is False  # learned here: nothing to learn again
    choice.write_text("/usr/bin/perl -e 1")  # what the start-up runs changed; no file it ran did
    kept, again, fresh = _learn(tmp_path, "again")
    assert "/usr/bin/true" in kept and "/usr/bin/perl" not in kept  # the record still holds by its files
    assert again is True and "/usr/bin/perl" in fresh and "/usr/bin/true" not in fresh
    assert _runs(tmp_path) == 2
    after, _, _ = _learn(tmp_path)
    assert after == fresh and _runs(tmp_path) == 2  # what was learned again is kept, and recalled


# --- a sitting --------------------------------------------------------------------------------------

BENCH = """
[bench]
name = "kept-helpers"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 60000
base_prompt = "Use the tools."

[arms.cli]
tools = ["Bash"]
binaries = ["tool"]
path = ["bin"]
readable = ["choice.txt"]

[tasks.count]
tier = "read"
intent = "How many issues are open?"
required_facts = ["3 open"]
"""

CONFTEST = """
from pytest_benchcell.scripted import Answer, ToolUse


def pytest_benchcell_script(trial, environment):
    return [ToolUse("Bash", {"command": "tool"}), Answer("There are 3 open issues.")]
"""

TOOL = """#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
eval "exec $(cat "$here/../choice.txt")"
"""


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_sitting_whose_kept_helpers_no_longer_explain_the_start_up_is_not_made_invalid(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench=BENCH)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "bin").mkdir()
    (pytester.path / "bin" / "tool").write_text(TOOL)
    (pytester.path / "bin" / "tool").chmod(0o755)
    (pytester.path / "choice.txt").write_text("/usr/bin/perl -e 'print qq(3 open\\n)'")
    run = ("--bench-arm", "cli", "--bench-task", "count", "--bench-scripted", "-p", "no:randomly")
    pytester.runpytest_subprocess(*run).assert_outcomes(passed=1)
    # The start-up now runs awk (through the alternatives link) where it ran perl; the tool's own
    # file and every file the kept record names are unchanged, so the record is recalled.
    (pytester.path / "choice.txt").write_text("/usr/bin/awk 'BEGIN { print \"3 open\" }'")
    result = pytester.runpytest_subprocess(*run)
    result.assert_outcomes(passed=1)
    lines = (pytester.path / "results" / "scripted" / "cli" / "count.jsonl").read_text().splitlines()
    second = json.loads(lines[-1])
    assert (second["trial"], second["status"], second["outcome"]) == (2, "scored", "pass"), textwrap.shorten(lines[-1], 600)
    assert second["exec_audit"]["leaks"] == [] and second["leaks"] == []
    assert second["tool_calls"][0]["output"] == "3 open"
    kept = [json.loads(path.read_text()) for path in (pytester.path / ".cache" / "pytest-benchcell" / "probes").glob("*.json")]
    assert any(any(path.endswith("awk") for path in record["helpers"]) for record in kept)  # learned again, and kept
