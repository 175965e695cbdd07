"""The arm's tools were there: end to end through the real CLI and the scripted model.

An MCP server that starts too late for the agent's first model request leaves the agent without the
arm's tools; such a trial is stored `invalid` (server and status named), never scored. A server that
starts within the wait ([bench] mcp_timeout_ms, the CLI's MCP_TIMEOUT) is waited for."""

from __future__ import annotations

import json
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_benchcell import Environment
from pytest_benchcell.agent import AgentRequest, AgentResult, run_agent
from pytest_benchcell.config import load_bench
from pytest_benchcell.scripted import Answer, ToolUse
from pytest_benchcell.store import Store
from pytest_benchcell.trial import TrialSpec, run_trial

pytestmark = pytest.mark.e2e

# `files_mcp.py SECONDS`: sleeps that long before it speaks MCP (a server slow to start), then offers
# one tool that creates a file in the agent's working directory: the task's end state needs it.
FILES_MCP = """
import os, sys, time
time.sleep(float(sys.argv[1]))
from mcp.server.mcpserver import MCPServer

server = MCPServer("files", log_level="WARNING")

@server.tool(structured_output=False)
def touch(name: str) -> str:
    \"\"\"Create an empty file in the working directory.\"\"\"
    open(os.path.join(os.environ["DATA"], name), "w").close()
    return f"created {name}"

server.run("stdio")
"""

BENCH = """
[bench]
name = "offer"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 30000
{mcp_timeout}

[arms.mcp]
tools = []
[arms.mcp.mcp_servers.files]
command = "{{python}}"
args = ["{{bench_root}}/files_mcp.py", "{{start_s}}"]
env = {{ DATA = "{{cwd}}" }}

[arms.delegating]
tools = ["Task"]
[arms.delegating.mcp_servers.files]
command = "{{python}}"
args = ["{{bench_root}}/files_mcp.py", "0"]
env = {{ DATA = "{{cwd}}" }}

[tasks.make-ok]
tier = "single-mutation"
intent = "Create ok.txt."
changes = [{{ op = "append", path = "files", value = "ok.txt" }}]

[checker]
multiset_keys = ["files"]
"""

SCRIPT = [ToolUse("mcp__files__touch", {"name": "ok.txt"}), Answer("created ok.txt")]

# The server starts at once in the pre-flight's environment (trial 0), which would otherwise refuse a
# server slower than the wait before any trial: these tests are about the trial itself.
CONFTEST = """
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

def pytest_benchcell_provision(trial):
    return Environment(data=trial.agent_cwd, values={"start_s": "0" if trial.trial == 0 else START_S})

def pytest_benchcell_snapshot(trial, environment):
    return {"files": sorted(p.name for p in environment.data.iterdir())}

def pytest_benchcell_script(trial, environment):
    return [ToolUse("mcp__files__touch", {"name": "ok.txt"}), Answer("created ok.txt")]
"""


def write_bench(folder: Path, *, mcp_timeout_ms: int | None) -> Path:
    setting = f"mcp_timeout_ms = {mcp_timeout_ms}" if mcp_timeout_ms is not None else ""
    (folder / "bench.toml").write_text(textwrap.dedent(BENCH.format(mcp_timeout=setting)))
    (folder / "files_mcp.py").write_text(FILES_MCP)
    return folder / "bench.toml"


def sitting(pytester: pytest.Pytester, *, start_s: float, mcp_timeout_ms: int | None, arm: str = "mcp") -> tuple[pytest.RunResult, list[dict]]:
    write_bench(pytester.path, mcp_timeout_ms=mcp_timeout_ms)
    pytester.makeconftest(f"START_S = {str(start_s)!r}\n" + CONFTEST)
    result = pytester.runpytest("--bench-arm", arm, "--bench-task", "make-ok", "--bench-scripted", "-rA")
    path = pytester.path / "results" / "scripted" / arm / "make-ok.jsonl"
    return result, [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_server_slower_than_the_wait_makes_the_trial_invalid_naming_it(pytester: pytest.Pytester) -> None:
    result, samples = sitting(pytester, start_s=8, mcp_timeout_ms=2000)
    (sample,) = samples  # one trial, one sample
    assert (sample["status"], sample["outcome"]) == ("invalid", None)  # never scored, never charged to the arm
    assert sample["reason"] == (  # as the README shows it
        "MCP server 'files' was failed at the agent's first model request (the CLI waited up to 2000 ms, "
        "[bench] mcp_timeout_ms): its tools were not offered, so the trial does not measure the arm"
    )
    # Without the check this trial was scored incorrect: the model's call found no such tool. Now it
    # ends as the conversation begins, the server marked, before the script's second request.
    assert sample["turns"] <= 1 and sample["mcp_failed"] == ["files"]
    result.assert_outcomes()
    result.stdout.fnmatch_lines(["INVALID bench.toml::mcp-make-ok-t1 - MCP server 'files' was failed at the agent's first*"])


@pytest.mark.slow
def test_a_server_that_starts_within_the_wait_is_waited_for(pytester: pytest.Pytester) -> None:
    started = time.monotonic()
    result, samples = sitting(pytester, start_s=3, mcp_timeout_ms=15000)
    (sample,) = samples
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]
    assert sample["tool_calls"][0]["output"] == "created ok.txt"
    assert sample["duration_ms"] < 3000  # the CLI's own run time: the server's start-up is not the agent's
    assert time.monotonic() - started >= 3
    result.assert_outcomes(passed=1)


def test_a_tool_declared_under_its_other_name_is_the_arms_own(pytester: pytest.Pytester) -> None:
    # The CLI lists a declared "Task" as "Task" in its init message and sends it as "Agent".
    result, samples = sitting(pytester, start_s=0, mcp_timeout_ms=None, arm="delegating")
    (sample,) = samples
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_server_slower_than_the_clis_own_default_wait_is_waited_for(pytester: pytest.Pytester) -> None:
    """35 s: the CLI's own default (30 s) gave up on this server and the trial was scored incorrect.
    The bench's default mcp_timeout_ms (60 s) waits for it; the backstop (30 s) starts after it."""
    result, samples = sitting(pytester, start_s=35, mcp_timeout_ms=None)
    (sample,) = samples
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]
    assert sample["tool_calls"][0]["output"] == "created ok.txt"
    result.assert_outcomes(passed=1)


class Hooks:
    """The bench's hooks as plain callables, for run_trial."""

    def pytest_benchcell_provision(self, trial: Any) -> Environment:
        return Environment(data=trial.agent_cwd, values={"start_s": "0"})

    def pytest_benchcell_snapshot(self, trial: Any, environment: Environment) -> Any:
        return {"files": sorted(p.name for p in environment.data.iterdir())}

    def pytest_benchcell_script(self, trial: Any, environment: Environment) -> Any:
        return SCRIPT

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("pytest_benchcell_"):
            raise AttributeError(name)
        return lambda **kwargs: None


def test_a_tool_the_arm_does_not_declare_makes_the_trial_invalid(tmp_path: Path) -> None:
    """The harness gives the CLI exactly the arm's tools, so no bench can produce this; a runtime that
    added one (a CLI change, a setting that leaked) is stood in for by a runner that adds Read."""

    def runtime_adding_read(request: AgentRequest) -> AgentResult:
        return run_agent(replace(request, tools=(*request.tools, "Read")))

    bench = load_bench(write_bench(tmp_path, mcp_timeout_ms=None))
    spec = TrialSpec(bench=bench, arm="mcp", task="make-ok", trial=1, model_kind="scripted", sitting="s",
                     turn_cap=4, wall_clock_ms=30_000, store=Store(bench.store))  # fmt: skip
    sample = run_trial(spec, Hooks(), agent_runner=runtime_adding_read)
    assert (sample["status"], sample["outcome"]) == ("invalid", None)
    assert sample["reason"] == "tool the arm does not declare offered at the first model request: Read"
    assert sample["tool_calls"][0]["output"] == "created ok.txt"  # the trial itself went well: not the point
    lines = (bench.store / "scripted" / "mcp" / "make-ok.jsonl").read_text().splitlines()
    assert len(lines) == 1
