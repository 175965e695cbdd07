"""The pure decision whether the agent was offered its arm's tools, the wait's settings, and what a
Messages API request offers (the scripted model's evidence)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_benchcell.config import DEFAULT_MCP_TIMEOUT_MS, BenchConfigError, load_bench
from pytest_benchcell.isolation.tool_offer import McpWait, ToolOffer, tools_not_offered
from pytest_benchcell.scripted import ScriptedModel, offered_tools

WAIT = McpWait(timeout_ms=2000, servers=("files",))


def judge(offer: ToolOffer | None, tools: tuple[str, ...] = (), servers: tuple[str, ...] = ("files",), **kwargs: Any) -> str | None:
    return tools_not_offered(offer, declared_tools=tools, declared_servers=servers, wait=McpWait(2000, servers), **kwargs)


def test_every_server_connected_and_only_the_arms_tools_is_a_trial_that_counts() -> None:
    offer = ToolOffer({"files": "connected"}, ("Bash", "mcp__files__touch"), first_request=("Bash", "mcp__files__touch"))
    assert judge(offer, tools=("Bash",)) is None
    assert judge(ToolOffer({}, ("Bash", "Read")), tools=("Bash", "Read"), servers=()) is None


@pytest.mark.parametrize("status", ["failed", "pending", "needs-auth"])
def test_a_server_not_connected_is_named_with_its_status_and_the_wait(status: str) -> None:
    reason = judge(ToolOffer({"files": status}, ()))
    assert reason == (
        f"MCP server 'files' was {status} at the agent's first model request (the CLI waited up to 2000 ms, "
        "[bench] mcp_timeout_ms): its tools were not offered, so the trial does not measure the arm"
    )


def test_a_server_that_ended_before_the_wait_is_said_as_its_exit_with_its_error_line() -> None:
    end = SimpleNamespace(status=1, stderr="starting\nTraceback (most recent call last):\n  x\nFileNotFoundError: mcp.toml\n")
    reason = judge(ToolOffer({"files": "failed"}, ()), offer_ms=400, ends={"files": end})
    assert reason == (
        "MCP server 'files' exited with status 1 before the agent's first model request; it said: FileNotFoundError: "
        "mcp.toml: its tools were not offered, so the trial does not measure the arm"
    )
    silent = SimpleNamespace(status=None, stderr="")  # no exit recorded: only the connection's end is known
    assert judge(ToolOffer({"files": "failed"}, ()), offer_ms=400, ends={"files": silent}) == (
        "MCP server 'files' was failed at the agent's first model request, 400 ms after the CLI started (its "
        "connection ended: not the CLI's wait): its tools were not offered, so the trial does not measure the arm"
    )


def test_a_server_the_cli_gave_up_on_is_said_as_the_wait_though_it_was_stopped_with_a_status() -> None:
    stopped = SimpleNamespace(status=143, stderr="loading a large index\n")  # the CLI stopped it at the wait's end
    reason = judge(ToolOffer({"files": "failed"}, ()), offer_ms=2300, ends={"files": stopped})
    assert reason == (
        "MCP server 'files' was failed at the agent's first model request (the CLI waited up to 2000 ms, [bench] "
        "mcp_timeout_ms); it said: loading a large index: its tools were not offered, so the trial does not measure the arm"
    )


def test_a_declared_server_the_cli_never_listed_is_missing_and_each_bad_server_is_named() -> None:
    offer = ToolOffer({"db": "failed", "files": "connected"}, ("mcp__files__touch",))
    reason = judge(offer, servers=("files", "db", "web"))
    assert reason is not None and reason.startswith("MCP server 'db' was failed, 'web' was missing at the agent's")


@pytest.mark.parametrize(
    ("offered", "foreign"),
    [
        (("Bash", "Read"), "Read"),  # a built-in the arm does not declare
        (("Bash", "mcp__other__get"), "mcp__other__get"),  # another arm's server
        (("Bash", "mcp__filesx__get"), "mcp__filesx__get"),  # a server whose name only starts like the arm's
    ],
)
def test_a_tool_outside_the_arm_is_named(offered: tuple[str, ...], foreign: str) -> None:
    reason = judge(ToolOffer({"files": "connected"}, offered), tools=("Bash",))
    assert reason == f"tool the arm does not declare offered at the first model request: {foreign}"


def test_the_first_request_is_judged_too_when_it_is_known() -> None:
    offer = ToolOffer({"files": "connected"}, ("mcp__files__touch",), first_request=("mcp__files__touch", "Write"))
    assert judge(offer) == "tool the arm does not declare offered at the first model request: Write"
    offer = ToolOffer({"files": "connected"}, ("mcp__files__touch",), first_request=())
    assert judge(offer) == "MCP tools listed by the CLI but missing from the first model request: mcp__files__touch"


def test_task_and_agent_are_one_tool() -> None:
    # CLI 2.1.332 lists a declared "Task" as "Task" at init and sends it as "Agent"; and the reverse.
    assert judge(ToolOffer({}, ("Task",), first_request=("Agent",)), tools=("Task",), servers=()) is None
    assert judge(ToolOffer({}, ("Task",), first_request=("Agent",)), tools=("Agent",), servers=()) is None


def test_no_init_message_matters_only_when_the_harness_stopped_a_cli_still_connecting_servers() -> None:
    assert judge(None) is None  # the CLI failed before its init: an error, judged elsewhere
    assert judge(None, servers=(), stopped_before_start=True) is None  # no server to wait for: a hang like any
    reason = judge(None, stopped_before_start=True)
    assert reason is not None and reason.startswith("MCP server 'files': no status: the CLI had not reported")


def test_the_wait_sets_the_clis_connection_settings_only_for_an_arm_with_servers() -> None:
    assert WAIT.environment() == {"MCP_TIMEOUT": "2000", "MCP_CONNECTION_NONBLOCKING": "false"}
    assert WAIT.seconds == 2.0
    none = McpWait(timeout_ms=2000, servers=())
    assert (none.environment(), none.seconds) == ({}, 0.0)


BENCH = """
[bench]
model = "claude-sonnet-4-5"
{setting}

[arms.mcp]
tools = []
[arms.mcp.mcp_servers.files]
command = "python3"

[tasks.say]
tier = "read"
intent = "Say done."
required_facts = ["done"]
"""


def test_mcp_timeout_ms_defaults_to_a_minute_and_bad_values_get_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(BENCH.format(setting=""))
    assert load_bench(path).mcp_timeout_ms == DEFAULT_MCP_TIMEOUT_MS == 60_000
    path.write_text(BENCH.format(setting="mcp_timeout_ms = 90000"))
    assert load_bench(path).mcp_timeout_ms == 90_000
    for value in ("500", '"60s"', "true"):
        path.write_text(BENCH.format(setting=f"mcp_timeout_ms = {value}"))
        with pytest.raises(BenchConfigError, match=r"bench.toml: \[bench\] mcp_timeout_ms has value .*; allowed: a whole number >= 1000$"):
            load_bench(path)


# The shape CLI 2.1.332 sends with tool search on (recorded, trimmed): MCP tools deferred, named in a
# system reminder, and a placeholder with defer_loading in the tools array.
DEFERRED_REQUEST = {
    "tools": [
        {"name": "Bash", "input_schema": {}},
        {"name": "DeferredToolPlaceholder", "input_schema": {}, "defer_loading": True},
        {"name": "ToolSearch", "input_schema": {}},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nThe following deferred tools are now available via "
                 "ToolSearch. Their schemas are NOT loaded \u2014 calling them directly will fail with "
                 "InputValidationError. Use ToolSearch with query \"select:<name>[,<name>...]\" to load tool "
                 "schemas before calling them:\nmcp__files__ping\nmcp__files__touch\n</system-reminder>"},
                {"type": "text", "text": "hi"},
            ],
        }
    ],
}


def test_a_request_offers_its_tools_array_and_the_deferred_tools_it_names() -> None:
    assert offered_tools({"tools": [{"name": "Bash"}, {"name": "mcp__files__touch"}], "messages": []}) == ("Bash", "mcp__files__touch")
    assert offered_tools(DEFERRED_REQUEST) == ("Bash", "ToolSearch", "mcp__files__ping", "mcp__files__touch")
    assert offered_tools({"messages": [{"role": "user", "content": "plain text"}]}) == ()


def test_the_scripted_model_reports_its_first_requests_tools() -> None:
    import json
    import urllib.request

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    with ScriptedModel([]) as model:
        assert model.first_request_tools is None
        for tools in (["Bash"], ["Read"]):
            body = json.dumps({"tools": [{"name": name} for name in tools], "messages": [{"role": "user", "content": "hi"}]})
            direct.open(urllib.request.Request(f"{model.base_url}/v1/messages", body.encode(), method="POST")).read()
        assert model.first_request_tools == ("Bash",)


def test_a_trial_item_of_an_arm_with_servers_is_bounded_with_their_wait(pytester: pytest.Pytester) -> None:
    bench = BENCH.format(setting="mcp_timeout_ms = 5000\nready_timeout_ms = 1000\nwall_clock_ms = 2000")
    pytester.makefile(".toml", bench=bench + '\n[arms.shell]\ntools = ["Bash"]\n')
    items, _ = pytester.inline_genitems("--bench-arm", "all", "--bench-task", "say", "--bench-scripted", "--bench-trials", "1")
    bounds = {item.name: item.get_closest_marker("timeout").args[0] for item in items}
    # readiness + MCP wait (arms with servers) + backstop + the plugin's margin of 120 s
    assert bounds == {"mcp-say-t1": 1 + 5 + 2 + 120, "shell-say-t1": 1 + 2 + 120}
