"""The pre-flight of MCP servers (preflight_mcp.py, mcp_launch.py) and the lines that name an error
(output_lines.py).

A bench whose MCP server cannot start as a trial starts it (its settings file missing), does not
offer a tool the arm declares, or does not answer within [bench] mcp_timeout_ms is refused before
any model request, with the server's own error; the same server with its settings in place passes,
and so does the example bench's mcp arm.
"""

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
from pytest_benchcell.output_lines import bounded, lines_naming_the_error
from pytest_benchcell.scripted import Repeat, ScriptedModel, ToolUse
from pytest_benchcell.store import Store
from pytest_benchcell.transcript import events_of, read_transcript
from pytest_benchcell.trial import TrialSpec, run_trial

# inventory_mcp.py MODE: reads its settings from the bench folder ($SETTINGS) and dies with
# FileNotFoundError when they are missing; prints its token first (which the message must redact).
# MODE "hang": never speaks MCP. It offers list_items (unless MODE is "bare") and count_items (unless
# MODE is "old" or "bare").
INVENTORY_MCP = """
import os, sys, time, tomllib
mode = sys.argv[1]
print(f"inventory server starting with token {os.environ['INVENTORY_TOKEN']}", file=sys.stderr)
if mode == "hang":
    time.sleep(600)
with open(os.environ["SETTINGS"], "rb") as file:
    settings = tomllib.load(file)
from mcp.server.mcpserver import MCPServer

server = MCPServer("inventory", log_level="WARNING")

if mode != "bare":
    @server.tool(structured_output=False)
    def list_items() -> str:
        \"\"\"List the items of the makerspace.\"\"\"
        return ", ".join(settings["items"])

if mode not in ("old", "bare"):
    @server.tool(structured_output=False)
    def count_items() -> str:
        \"\"\"Count the items.\"\"\"
        return str(len(settings["items"]))

server.run("stdio")
"""

BENCH = """
[bench]
name = "makerspace"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 30000
mcp_timeout_ms = {timeout_ms}
secrets = ["token"]

[arms.mcp]
tools = []
[arms.mcp.mcp_servers.inventory]
command = "{{python}}"
args = ["{{bench_root}}/inventory_mcp.py", "{mode}"]
env = {{ SETTINGS = "{{bench_root}}/settings.toml", INVENTORY_TOKEN = "{{token}}" }}
{tools}

[tasks.count]
tier = "read"
intent = "How many items does the makerspace have?"
required_facts = ["2 items"]
"""

CONFTEST = """
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

def pytest_benchcell_provision(trial):
    return Environment(values={"token": "tok-4f9a0c2e71b8d356"})

def pytest_benchcell_script(trial, environment):
    with open("script-hook-calls.log", "a") as log:  # a trial's scripted model gets its steps here
        log.write("called\\n")
    return [ToolUse("mcp__inventory__count_items", {}), Answer("The makerspace has 2 items.")]
"""

SETTINGS = 'items = ["drill", "laser cutter"]\n'


def write_bench(
    folder: Path, *, mode: str = "serve", timeout_ms: int = 10000, settings: bool = False,
    tools: str = 'tools = ["list_items", "count_items"]',
) -> None:  # fmt: skip
    (folder / "bench.toml").write_text(textwrap.dedent(BENCH.format(mode=mode, timeout_ms=timeout_ms, tools=tools)))
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "inventory_mcp.py").write_text(INVENTORY_MCP)
    if settings:
        (folder / "settings.toml").write_text(SETTINGS)


def sitting(pytester: pytest.Pytester) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", "mcp", "--bench-task", "count", "--bench-scripted", "-p", "no:randomly")


def assert_refused_before_anything(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "results").exists()  # no store written, no number reserved
    assert not (pytester.path / "script-hook-calls.log").exists()  # no trial's model ever started: no request
    assert "Traceback" not in result.stdout.str()  # one message, never the harness's traceback
    assert "tok-4f9a0c2e71b8d356" not in result.stderr.str()  # the server printed its token: redacted


def test_a_server_that_dies_on_a_missing_settings_file_refuses_the_sitting_with_its_own_error(pytester: pytest.Pytester) -> None:
    write_bench(pytester.path)
    result = sitting(pytester)
    assert_refused_before_anything(pytester, result)
    settings = pytester.path / "settings.toml"
    result.stderr.fnmatch_lines([
        "ERROR: benchcell pre-flight: 1 MCP server of the selected arms, started as in a trial, would leave its arm without "
        "the arm's tools, so every trial would be invalid (nothing was reserved, no model request was made); fix the "
        f"server or its table in {pytester.path}/bench.toml:",
        f"arm mcp: MCP server 'inventory' (* {pytester.path}/inventory_mcp.py serve) exited with status 1 before it "
        "answered MCP's initialize (after *s)",
        "    it said: inventory server starting with token [[]redacted]",
        "        Traceback (most recent call last):",
        "*",
        f"        FileNotFoundError: [[]Errno 2] No such file or directory: '{settings}'",
        f"    -> make `* {pytester.path}/inventory_mcp.py serve` start as in a trial: in an empty working folder (the agent's, "
        "new for each trial), "
        "with the variables of [[]arms.mcp.mcp_servers.inventory] (*)",
    ])  # fmt: skip


def test_a_server_that_lacks_a_declared_tool_refuses_the_sitting_naming_it(pytester: pytest.Pytester) -> None:
    write_bench(pytester.path, mode="old", settings=True)
    result = sitting(pytester)
    assert_refused_before_anything(pytester, result)
    result.stderr.fnmatch_lines([
        "arm mcp: MCP server 'inventory' (*inventory_mcp.py old) does not offer count_items of the tools the arm "
        "declares for it; it offers: list_items",
        "    it said: inventory server starting with token [[]redacted]",
        f"    -> fix the server, or the `tools` of [[]arms.mcp.mcp_servers.inventory] in {pytester.path}/bench.toml to "
        "the names it offers",
    ])  # fmt: skip


def test_without_declared_tools_a_server_that_offers_none_refuses_the_sitting(pytester: pytest.Pytester) -> None:
    write_bench(pytester.path, mode="bare", settings=True, tools="")
    result = sitting(pytester)
    assert_refused_before_anything(pytester, result)
    result.stderr.fnmatch_lines([
        "arm mcp: MCP server 'inventory' (*inventory_mcp.py bare) offers no tool at all, so the arm would have none",
        "    -> fix the server started by [[]arms.mcp.mcp_servers.inventory]",
    ])  # fmt: skip


def test_a_server_that_does_not_answer_within_the_wait_refuses_the_sitting(pytester: pytest.Pytester) -> None:
    write_bench(pytester.path, mode="hang", timeout_ms=1000, settings=True)
    result = sitting(pytester)
    assert_refused_before_anything(pytester, result)
    result.stderr.fnmatch_lines([
        "arm mcp: MCP server 'inventory' (*inventory_mcp.py hang) gave no answer to MCP's initialize within 1000 ms "
        "([[]bench] mcp_timeout_ms)",
        "    it said: inventory server starting with token [[]redacted]",
        "    -> make * start as in a trial: *; or, if it needs longer to start, raise [[]bench] mcp_timeout_ms",
    ])  # fmt: skip


@pytest.mark.e2e
def test_the_same_server_with_its_settings_in_place_passes_and_the_trial_uses_its_tools(pytester: pytest.Pytester) -> None:
    write_bench(pytester.path, settings=True)
    result = sitting(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pre-flight: 1 MCP server of 1 arm started as in a trial and offers the arm's tools (*s)"])
    (line,) = (pytester.path / "results" / "scripted" / "mcp" / "count.jsonl").read_text().splitlines()
    sample = json.loads(line)
    assert sample["tool_calls"][0]["output"] == "2"
    # What the healthy server wrote is kept too, redacted; no server failed.
    assert "inventory server starting with token [redacted]" in sample["mcp_stderr"]["inventory"]
    assert "tok-4f9a0c2e71b8d356" not in line and "mcp_failed" not in sample


def test_the_example_benchs_mcp_arm_passes_the_pre_flight() -> None:
    from test_preflight import example_bench, example_hooks

    from pytest_benchcell.agent import bundled_cli
    from pytest_benchcell.preflight import run_preflight

    bench = example_bench()
    found = run_preflight(bench, {"mcp": "close-export"}, example_hooks(), "scripted", cli=bundled_cli())
    assert (found.mcp_failures, found.notes, found.mcp_arms) == ([], [], ["mcp"])
    assert found.summary().startswith("pre-flight: 1 MCP server of 1 arm started as in a trial and offers the arm's tools")


def test_an_mcp_arms_servers_are_asked_while_the_other_arms_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP arm is provisioned first and torn down last, once its server has answered: its
    server's start overlaps the shell arms' checks (benchmarks/preflight_cost.py times it)."""
    from types import SimpleNamespace

    from test_preflight import example_bench, example_hooks

    from pytest_benchcell import preflight
    from pytest_benchcell.agent import bundled_cli

    hooks = example_hooks()
    calls: list[str] = []

    def logged(name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            calls.append(f"{name} {kwargs['trial'].arm}")
            return getattr(hooks, name)(**kwargs)

        return call

    # The check_servers the pre-flight's thread calls (the module run_preflight itself reached: an
    # in-process pytester sitting may have left another copy of preflight_mcp in sys.modules).
    thread_globals = preflight.ServerCheck._run.__globals__
    asked = thread_globals["check_servers"]

    def slow_to_answer(*args: Any, **kwargs: Any) -> Any:  # the server answers after the shell arm is done
        failures = asked(*args, **kwargs)
        time.sleep(1.0)
        calls.append("mcp answered")
        return failures

    spied = SimpleNamespace(**{name: logged(name) for name in ("pytest_benchcell_provision", "pytest_benchcell_ready", "pytest_benchcell_teardown")})
    monkeypatch.setitem(thread_globals, "check_servers", slow_to_answer)
    found = preflight.run_preflight(example_bench(), {"cli-skill": "close-export", "mcp": "close-export"}, spied, "scripted", cli=bundled_cli())
    assert (found.refuses, found.notes, found.arms, found.mcp_arms) == (False, [], ["cli-skill"], ["mcp"])
    order = [call for call in calls if not call.startswith("pytest_benchcell_ready")]
    assert order == [
        "pytest_benchcell_provision mcp", "pytest_benchcell_provision cli-skill", "pytest_benchcell_teardown cli-skill",
        "mcp answered", "pytest_benchcell_teardown mcp",
    ]  # fmt: skip


# --- the lines that name the error ----------------------------------------------------------------


def test_each_error_line_comes_with_its_context_and_gaps_are_marked() -> None:
    text = "start\nwarning: slow disk\nok\nok\nok\npermission denied: /data\nend\n"
    assert lines_naming_the_error(text) == ["ok", "permission denied: /data", "end"]
    text = "a\nTraceback (most recent call last):\nb\nc\nd\nFileNotFoundError: x\n"
    assert lines_naming_the_error(text) == ["a", "Traceback (most recent call last):", "b", "...", "d", "FileNotFoundError: x"]


def test_bounded_text_keeps_its_start_and_end_and_says_what_it_left_out() -> None:
    assert bounded("short", 10) == "short"
    text = "a" * 50 + "b" * 50
    kept = bounded(text, 40)
    assert kept.startswith("a" * 10) and kept.endswith("b" * 30) and "(60 characters left out)" in kept


# --- a trial whose MCP server failed (past a pre-flight: the file removed in between) -------------


class Hooks:
    """The makerspace bench's hooks as plain callables, for run_trial."""

    def pytest_benchcell_provision(self, trial: Any) -> Environment:
        return Environment(values={"token": "tok-4f9a0c2e71b8d356"})

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("pytest_benchcell_"):
            raise AttributeError(name)
        return lambda **kwargs: None


@pytest.mark.e2e
def test_a_trial_whose_server_dies_at_start_ends_at_once_and_keeps_the_servers_own_error(tmp_path: Path) -> None:
    write_bench(tmp_path, timeout_ms=20000)  # no settings.toml: the server dies with FileNotFoundError
    bench = load_bench(tmp_path / "bench.toml")
    model = ScriptedModel([Repeat(ToolUse("mcp__inventory__count_items", {}))]).start()  # would play to the turn cap

    def counted(request: AgentRequest) -> AgentResult:  # the CLI talks to this model: its requests are counted
        return run_agent(replace(request, env={**request.env, "ANTHROPIC_BASE_URL": model.base_url}))

    spec = TrialSpec(bench=bench, arm="mcp", task="count", trial=1, model_kind="scripted", sitting="s",
                     turn_cap=4, wall_clock_ms=30_000, store=Store(bench.store))  # fmt: skip
    started = time.monotonic()
    try:
        sample = run_trial(spec, Hooks(), agent_runner=counted)
    finally:
        model.stop()
    # Stopped as the init message showed the server failed: at most the request already in flight when the
    # interrupt landed (one alone on a quiet machine), where the script would have played to the turn cap.
    assert len(model.requests) <= 2
    assert time.monotonic() - started < 15  # not the CLI's 20 s wait: the server died at once
    assert (sample["status"], sample["outcome"]) == ("invalid", None)
    assert sample["mcp_failed"] == ["inventory"]  # the mark a sitting reads
    settings = tmp_path / "settings.toml"
    assert sample["reason"] == (
        "MCP server 'inventory' exited with status 1 before the agent's first model request; it said: "
        f"FileNotFoundError: [Errno 2] No such file or directory: '{settings}': its tools were not offered, so the "
        "trial does not measure the arm"
    )
    assert "mcp_timeout_ms" not in sample["reason"]  # the wait was not the cause
    stderr = sample["mcp_stderr"]["inventory"]
    assert "Traceback (most recent call last):" in stderr and f"FileNotFoundError: [Errno 2] No such file or directory: '{settings}'" in stderr
    assert "inventory server starting with token [redacted]" in stderr  # redacted like the rest of the sample
    (line,) = (bench.store / "scripted" / "mcp" / "count.jsonl").read_text().splitlines()
    assert "tok-4f9a0c2e71b8d356" not in line
    events = read_transcript(bench.store, sample)
    assert [event["servers"] for event in events_of(events, "mcp_failed")] == [["inventory"]]  # why the run stopped
