"""Tool isolation end to end: the guard, the independent audit, environment hygiene, redaction."""

from __future__ import annotations

import textwrap

import pytest
from benches import one_trial, stored_text

pytestmark = pytest.mark.e2e

SECRET = "s3cr3t-tracker-token-9f8e7d"
SERVICE_KEY = "svc-key-4d5e6f"  # under a name with KEY: a credential by its name (README, Tool isolation)
SHORT_SECRET = "q7Zx9"  # five characters, declared by the provision hook: redacted all the same

BENCH = """
[bench]
name = "isolation"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 20
wall_clock_ms = 30000
secrets = ["token"]

[arms.shell]
tools = ["Bash"]
binaries = ["touch"]
env = { TRACKER_TOKEN = "{token}", PLAIN = "visible" }

[arms.keys]
tools = ["Bash"]
binaries = ["touch"]
env = { SERVICE_KEY = "{service_key}" }

[arms.loose]
tools = ["Bash"]
binaries = ["touch"]
guard_exempt = ["cp"]

[arms.reader]
tools = ["Bash", "Read"]
binaries = ["touch"]

[arms.mcp-only]
tools = []
[arms.mcp-only.mcp_servers.files]
command = "{python}"
args = ["{bench_root}/files_mcp.py"]

[tasks.escape]
tier = "single-mutation"
intent = "Try everything."
changes = [{ op = "append", path = "files", value = "ok.txt" }]

[checker]
multiset_keys = ["files"]
"""

ESCAPES = [
    "wget -O wget.txt http://127.0.0.1:9/",
    "curl -o curl.txt http://127.0.0.1:9/",
    "python3 -c \"open('python.txt', 'w')\"",
    "bash -c 'touch bash.txt'",
    "env touch env.txt",
    "/usr/bin/touch path.txt",
    "touch ok.txt; cp ok.txt cp.txt",
    "$(echo touch) subst.txt",
    "echo x | xargs touch xargs.txt",
    "OPENSSL_CONF=./x.cnf touch openssl.txt",
    "MAKEFLAGS=-j touch makeflags.txt",
    'd=/../..; mkdir -p x && echo plant > "x$d/dotdot.txt"',  # would land beside the working directory
    "cd - ; echo plant > cdback.txt",
]

CONFTEST = f"""
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

ESCAPES = {ESCAPES!r}

def pytest_benchcell_provision(trial):
    return Environment(values={{"token": {SECRET!r}, "service_key": {SERVICE_KEY!r}}}, data=trial.agent_cwd,
                       secrets=({SHORT_SECRET!r},))

def pytest_benchcell_snapshot(trial, environment):
    return {{"files": sorted(p.name for p in environment.data.iterdir())}}

def pytest_benchcell_script(trial, environment):
    if trial.arm == "shell":
        steps = [ToolUse("Bash", {{"command": command}}) for command in ESCAPES]
        steps.append(ToolUse("Bash", {{"command": "touch ok.txt"}}))
        steps.append(ToolUse("Bash", {{"command": 'echo "token=$TRACKER_TOKEN plain=$PLAIN harness=${{HARNESS_ONLY:-unset}} path=$PATH"'}}))
        return steps + [Answer("done; my token was {SECRET}")]
    if trial.arm == "keys":
        spaced = " ".join({SECRET!r})
        return [ToolUse("Bash", {{"command": "echo key=$SERVICE_KEY; touch ok.txt"}}),
                Answer(f"short={SHORT_SECRET} spaced={{spaced}} dashed={{'-'.join({SECRET!r})}}")]
    if trial.arm == "loose":
        return [ToolUse("Bash", {{"command": "touch ok.txt && cp ok.txt copy.txt"}}), Answer("done")]
    if trial.arm == "reader":
        return [ToolUse("Write", {{"file_path": str(environment.data / "w.txt"), "content": "x"}}),
                ToolUse("Read", {{"file_path": "/etc/hostname"}}),
                ToolUse("Bash", {{"command": "touch ok.txt"}}), Answer("done")]
    return [ToolUse("Bash", {{"command": "touch ok.txt"}}), ToolUse("mcp__files__ping", {{}}), Answer("done")]
"""


FILES_MCP = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("files", log_level="WARNING")

@server.tool(structured_output=False)
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"

server.run("stdio")
"""


@pytest.fixture()
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("HARNESS_ONLY", "harness-secret-value")
    pytester.makefile(".toml", bench=textwrap.dedent(BENCH))
    pytester.makepyfile(files_mcp=FILES_MCP)
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester: pytest.Pytester, arm: str) -> tuple[pytest.RunResult, dict]:
    return one_trial(pytester, arm, "escape")


def test_foreign_commands_are_denied_and_never_write_their_files(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "shell")
    result.assert_outcomes(passed=1)  # only ok.txt exists: nothing the escapes would have written
    calls = sample["tool_calls"]
    escapes = calls[: len(ESCAPES)]
    assert [c["input"]["command"] for c in escapes] == ESCAPES
    assert all(c["allowed"] is False and c["reason"] for c in escapes), [c for c in escapes if c["allowed"]]
    assert all(c["is_error"] for c in escapes)
    assert sample["state"]["after"] == {"files": ["ok.txt"]}
    assert sample["leaks"] == [] and sample["status"] == "scored"


def test_the_agent_sees_a_curated_path_and_no_harness_variables(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "shell")
    echo = sample["tool_calls"][-1]["output"]
    assert "plain=visible" in echo
    assert "harness=unset" in echo  # HARNESS_ONLY was set in the harness's environment
    path = echo.split("path=", 1)[1].strip()
    assert ":" not in path and path.endswith("/bin")  # one curated folder, nothing else


def test_secrets_never_reach_the_store(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "shell")
    store_text = stored_text(bench.path / "results")
    assert SECRET not in store_text
    assert "token=[redacted]" in sample["tool_calls"][-1]["output"]
    assert sample["final_answer"] == "done; my token was [redacted]"
    assert "harness-secret-value" not in store_text


def test_declared_short_secrets_key_named_variables_and_spaced_out_secrets_are_redacted(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "keys")
    store_text = stored_text(bench.path / "results")
    assert SERVICE_KEY not in store_text and SHORT_SECRET not in store_text
    assert "key=[redacted]" in sample["tool_calls"][0]["output"]
    assert sample["final_answer"] == "short=[redacted] spaced=[redacted] dashed=[redacted]"


def test_a_loosened_guard_lets_one_through_and_the_audit_marks_the_trial_invalid(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "loose")
    result.assert_outcomes()  # not passed, not failed: invalid
    result.stdout.fnmatch_lines(["*1 invalid*"])
    assert sample["status"] == "invalid" and sample["outcome"] is None
    assert sample["tool_calls"][0]["allowed"] is True  # the guard let it pass...
    assert "cp" in sample["leaks"][0]  # ...the tool audit did not...
    if sample["exec_audit"] is not None:  # ...nor did the execution audit, which saw it run
        (leak,) = sample["exec_audit"]["leaks"]
        assert leak["argv"] == ["cp", "ok.txt", "copy.txt"]
        assert [above["argv"][-1] for above in leak["chain"]] == ["touch ok.txt && cp ok.txt copy.txt"]
        assert len(sample["leaks"]) == 2 and sample["leaks"][1].startswith("exec ")
    else:
        assert len(sample["leaks"]) == 1
    result.stdout.fnmatch_lines(
        [
            "*benchcell sitting*",
            "INVALID bench.toml::loose-escape-t1 - foreign tool call ran: *cp*",  # the reason, in the terminal
            "*loose x escape: 1 recorded this sitting (0 passed, 0 failed, 1 invalid, 0 errors)",
        ]
    )


def test_built_in_tools_only_where_declared(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "reader")
    write, read, touch = sample["tool_calls"]
    # the CLI was never given Write: it refuses the call itself, before any hook, so it never ran
    assert write["tool"] == "Write" and write["allowed"] is False and "No such tool available" in write["output"]
    assert write["reason"].startswith("refused by the Claude Code CLI before the guard: ") and "Write" in write["reason"]
    assert read["tool"] == "Read" and read["allowed"] is True
    assert touch["allowed"] is True
    assert sample["outcome"] == "pass"  # w.txt was never written


def test_an_mcp_only_arm_has_no_shell(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "mcp-only")
    bash, ping = sample["tool_calls"]
    assert bash["tool"] == "Bash" and bash["allowed"] is False and "No such tool available" in bash["output"]
    assert bash["reason"].startswith("refused by the Claude Code CLI before the guard: ") and "Bash" in bash["reason"]
    assert ping["tool"] == "mcp__files__ping" and ping["allowed"] is True and "pong" in ping["output"]
    assert sample["leaks"] == []
    assert sample["outcome"] == "incorrect"  # ok.txt was never created
