"""The pre-flight and the trials the sandbox breaks (preflight.py, isolation/blocked.py).

End to end, as a user meets them: the three benches of issue 24, each correct and passing without
the sandbox's declarations (`readable`, `network`), are refused before any model request with the
declaration to add named, and pass once it is added; a program that passes the pre-flight but fails
on a hidden file mid-trial is recorded with `sandbox_blocked` and never counted for or against the arm.
"""

from __future__ import annotations

import functools
import json
import re
import textwrap
from pathlib import Path

import docs_text
import pytest

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.exec_audit import find_tracer

TOOL = sandbox.find_sandbox()
TRACER = find_tracer()
needs_sandbox = pytest.mark.skipif(not TOOL.available, reason=f"the sandbox cannot run here: {TOOL.reason}")
needs_audit = pytest.mark.skipif(
    not (TRACER.available and TRACER.accesses), reason=f"the execution audit cannot trace opens here: {TRACER.reason}"
)

BENCH = """
[bench]
name = "upgraded"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 60000
exec_audit = "{exec_audit}"
base_prompt = "Use the tools."

# (a) a CLI that is a wrapper in the bench's bin/ running `python3 <bench>/tracker.py`
[arms.wrapper]
tools = ["Bash"]
binaries = ["tracker"]
path = ["bin"]
{wrapper}

# (b) a CLI that imports its own package from the bench folder
[arms.package]
tools = ["Bash"]
binaries = ["pkgcli"]
path = ["bin"]
{package}

# (c) a Python CLI that talks to the bench's service through $SERVICE_URL
[arms.service]
tools = ["Bash"]
binaries = ["svc"]
path = ["bin"]
env = {{ SERVICE_URL = "http://127.0.0.1:{{port}}/" }}
{service}

# a CLI that works until a subcommand reads a file of the bench that is not declared
[arms.reports]
tools = ["Bash"]
binaries = ["reports"]
path = ["bin"]
{reports}

[tasks.count]
tier = "read"
intent = "How many issues are open?"
required_facts = ["3 open"]
"""

CONFTEST = '''
import socket, threading
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

COMMANDS = {"wrapper": "tracker list", "package": "pkgcli list", "service": "svc list", "reports": "reports summary"}
ANSWERS = {"reports": "I could not read the report."}


def pytest_benchcell_provision(trial):
    sock = socket.create_server(("127.0.0.1", 0))
    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 12\\r\\n\\r\\n3 open today")
    threading.Thread(target=serve, daemon=True).start()
    return Environment(values={"port": str(sock.getsockname()[1])}, data=sock)


def pytest_benchcell_teardown(trial, environment):
    if environment is not None:
        environment.data.close()


def pytest_benchcell_script(trial, environment):
    return [ToolUse("Bash", {"command": COMMANDS[trial.arm]}), Answer(ANSWERS.get(trial.arm, "There are 3 open issues."))]
'''

TRACKER_WRAPPER = """#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
exec python3 "$here/../tracker.py" "$@"
"""
TRACKER_PY = """import sys
print("usage: tracker list" if sys.argv[1:] == ["--help"] else "3 open issues")
"""
PKGCLI = """#!/usr/bin/env python3
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pkgtool import main
main()
"""
PKGTOOL = """import sys
def main():
    print("usage: pkgcli list" if sys.argv[1:] == ["--help"] else "3 open issues")
"""
SVC = """#!/usr/bin/env python3
import os, sys, urllib.request
if sys.argv[1:] == ["--help"]:
    print("usage: svc list")
else:
    print(urllib.request.urlopen(os.environ["SERVICE_URL"], timeout=10).read().decode())
"""
REPORTS = """#!/usr/bin/env python3
import sys
from pathlib import Path
if sys.argv[1:] == ["--help"]:
    print("usage: reports summary")
else:
    print((Path(__file__).resolve().parent.parent / "data" / "summary.txt").read_text())
"""


def write_bench(pytester: pytest.Pytester, *, exec_audit: str = "auto", **declared: str) -> None:
    keys = {arm: declared.get(arm, "") for arm in ("wrapper", "package", "service", "reports")}
    pytester.makefile(".toml", bench=textwrap.dedent(BENCH).format(exec_audit=exec_audit, **keys))
    pytester.makeconftest(CONFTEST)
    files = {
        "bin/tracker": TRACKER_WRAPPER, "tracker.py": TRACKER_PY, "bin/pkgcli": PKGCLI,
        "pkgtool/__init__.py": PKGTOOL, "bin/svc": SVC, "bin/reports": REPORTS, "data/summary.txt": "3 open issues\n",
    }  # fmt: skip
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)


def sitting(pytester: pytest.Pytester, arm: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", "count", "--bench-scripted", "-p", "no:randomly", *extra)


def samples(pytester: pytest.Pytester, arm: str) -> list[dict]:
    path = pytester.path / "results" / "scripted" / arm / "count.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_refused_before_anything(pytester: pytest.Pytester, result: pytest.RunResult, arm: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    # No trial ran, no number was reserved, no model request was made (the scripted model is a trial's).
    assert not (pytester.path / "results").exists() or not any((pytester.path / "results").rglob("*.trials"))
    assert samples(pytester, arm) == []


# --- the execution audit's trace of opens, connects and exits --------------------------------------

ACCESS_LOG = r"""10 execve("/usr/bin/bash", ["bash", "-c", "tracker list"], 0x1 /* 1 var */) = 0
10 clone(child_stack=NULL, flags=SIGCHLD) = 11
11 execve("/trial/bin/tracker", ["tracker", "list"], 0x1 /* 1 var */) = 0
11 execve("/usr/local/bin/python3", ["python3", "/bench/tracker.py"], 0x1 /* 1 var */) = -1 ENOENT (No such file or directory)
11 execve("/usr/bin/python3", ["python3", "/bench/tracker.py"], 0x1 /* 1 var */) = 0
11 openat(AT_FDCWD, "/usr/lib/python3/os.py", O_RDONLY|O_CLOEXEC) = 3
11 openat(AT_FDCWD, "/bench/tracker.py", O_RDONLY|O_CLOEXEC <unfinished ...>
10 wait4(-1,  <unfinished ...>
11 <... openat resumed>) = -1 ENOENT (No such file or directory)
11 openat(3, "relative.txt", O_RDONLY) = -1 ENOENT (No such file or directory)
11 connect(4, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)
11 connect(5, {sa_family=AF_INET6, sin6_port=htons(8080), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 EINPROGRESS (Operation now in progress)
11 connect(6, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0
11 open("/etc/x) = 3", O_RDONLY) = 7
11 +++ exited with 2 +++
10 +++ exited with 2 +++
"""


def test_the_trace_keeps_opens_connects_and_failed_execs_with_the_program_that_made_them() -> None:
    from pytest_benchcell.isolation.exec_audit import parse_strace

    log = parse_strace(ACCESS_LOG)
    assert [record.path for record in log.records] == ["/usr/bin/bash", "/trial/bin/tracker", "/usr/bin/python3"]
    assert [(a.call, a.target, a.result, a.record) for a in log.accesses] == [
        ("execve", "/usr/local/bin/python3", "ENOENT", 1),  # a PATH search, made by the wrapper
        ("openat", "/usr/lib/python3/os.py", "ok", 2),
        ("openat", "/bench/tracker.py", "ENOENT", 2),  # joined across another process's line
        ("connect", "127.0.0.1:8080", "ECONNREFUSED", 2),
        ("connect", "[::1]:8080", "EINPROGRESS", 2),  # refused later, where strace does not look
        ("connect", "unix:/run/x.sock", "ok", 2),
        ("open", "/etc/x) = 3", "ok", 2),  # a result-like text inside the path is not the result
    ]  # the open relative to a folder's descriptor names no path the log can place: left out
    assert log.failed_exit(11) == "exited with 2" and log.failed_exit(99) is None


def test_a_failure_counts_for_the_arm_binary_above_it_only_when_the_binary_then_failed() -> None:
    from pytest_benchcell.isolation.exec_audit import ExecPolicy, parse_strace, program_failures

    policy = ExecPolicy("a", "/usr/bin/bash", {"tracker": frozenset({"/trial/bin/tracker"})}, {}, {"tracker": frozenset({"python3"})})
    failures = program_failures(parse_strace(ACCESS_LOG), policy)
    assert {(f.binary, f.program, f.access.target, f.ended, f.command) for f in failures} >= {
        ("tracker", "/usr/bin/python3", "/bench/tracker.py", "exited with 2", "tracker list"),
    }
    succeeded = parse_strace(ACCESS_LOG.replace("11 +++ exited with 2 +++", "11 +++ exited with 0 +++"))
    assert program_failures(succeeded, policy) == []  # an optional file it did without is not a failure
    no_binary = ExecPolicy("a", "/usr/bin/bash", {}, {}, {})
    assert program_failures(parse_strace(ACCESS_LOG), no_binary) == []  # not the arm's program: the agent's doing


# --- what the sandbox hides, read from its own command line -----------------------------------------


def test_mounts_are_read_in_order_so_a_later_mount_decides(tmp_path: Path) -> None:
    from pytest_benchcell.isolation.blocked import Mounts

    bench = tmp_path / "bench"
    (bench / "bin").mkdir(parents=True)
    (bench / "tool.py").write_text("")
    (bench / "bench.toml").write_text("")
    argv = ["--ro-bind", "/", "/", "--tmpfs", "/tmp", "--unshare-pid", "--hostname", "sandbox", "--tmpfs", str(bench),
            "--ro-bind", str(bench / "bin"), str(bench / "bin"), "--ro-bind", "/dev/null", str(bench / "bench.toml"),
            "--setenv", "A", "--tmpfs", "--chdir", "/x", "bash", "-c", "--tmpfs /etc"]  # fmt: skip
    mounts = Mounts.from_arguments(argv)
    assert mounts.hidden(str(bench / "tool.py")) and mounts.hidden(str(bench / "bench.toml"))
    assert not mounts.hidden(str(bench / "bin" / "tool")) and not mounts.hidden("/usr/bin/env")
    assert mounts.hidden("/tmp/x")
    assert not mounts.hidden("/etc/passwd")  # words after the command are the command's, not bwrap's
    # the bench folder itself is there inside (empty but for bin/): a failure on it is no block;
    # bench.toml is replaced with nothing of it shown again
    assert mounts.partly_shown(str(bench)) and not mounts.partly_shown(str(bench / "bench.toml"))
    assert not mounts.partly_shown(str(bench / "bin"))  # shown as it is, not replaced


@needs_sandbox
def test_the_mounts_of_a_trials_prefix_are_those_bubblewrap_gets(tmp_path: Path) -> None:
    from pytest_benchcell.isolation.blocked import Mounts

    (tmp_path / "bench").mkdir()
    plan = sandbox.SandboxPlan(writable=(str(tmp_path / "cwd"),), readable=(), hidden=(str(tmp_path / "bench"),), home="")
    (tmp_path / "cwd").mkdir()
    prefix = sandbox.write_prefix(tmp_path / "prefix", TOOL, plan, sandbox.TrialNetwork(TOOL, tmp_path / "net", ()), trace="strace -o x")
    mounts = Mounts.from_prefix(prefix.read_text(), TOOL.bwrap)
    assert mounts.hidden(str(tmp_path / "bench" / "x")) and not mounts.hidden(str(tmp_path / "cwd" / "x"))


def view_of(tmp_path: Path, **fields):  # type: ignore[no-untyped-def]
    from pytest_benchcell.isolation.blocked import Mounts, SandboxView

    bench = tmp_path / "bench"
    hidden = [bench, tmp_path / "trial", tmp_path / "trial" / "environment" / "data"]
    shown = [tmp_path / "trial" / "environment"]
    points = tuple((str(path), False) for path in hidden[:2]) + tuple((str(path), True) for path in shown) + ((str(hidden[2]), False),)
    defaults = dict(
        arm="cli", mounts=Mounts(points), bench_root=str(bench), never=(str(bench / "bench.toml"),),
        harness="/nowhere/pytest_benchcell", trial_folder=str(tmp_path / "trial"),
        environment_hidden=(str(hidden[2]),), readable=("lib",),
    )  # fmt: skip
    return SandboxView(**{**defaults, **fields})


def test_a_hidden_file_is_named_with_why_and_the_declaration_that_gives_it_back(tmp_path: Path) -> None:
    for name in ("bench/bin/tracker", "bench/tracker.py", "bench/bench.toml", "bench/pkg/__init__.py", "bench/pkg/sub/__init__.py",
                 "bench/pkg/sub/__pycache__/m.cpython-311.pyc", "trial/environment/data/db", "trial/exec-audit/1.log",
                 "trial/environment/seed.json"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    view = view_of(tmp_path)
    script = view.file(str(tmp_path / "bench" / "bin" / ".." / "tracker.py"))
    assert script is not None and script.target == str(tmp_path / "bench" / "tracker.py")
    assert (script.why, script.remedy) == (
        "the bench folder is hidden but for what the arm declares", 'declare [arms.cli] readable = ["lib", "tracker.py"]'
    )
    module = view.file(str(tmp_path / "bench/pkg/sub/__pycache__/m.cpython-311.pyc"))
    assert module is not None and module.remedy == 'declare [arms.cli] readable = ["lib", "pkg"]'  # the whole package
    answers = view.file(str(tmp_path / "bench/bench.toml"))
    assert answers is not None and answers.remedy == "" and "never shown" in answers.why
    data = view.file(str(tmp_path / "trial/environment/data/db"))
    assert data is not None and "leave it out of `hidden`" in data.remedy
    logs = view.file(str(tmp_path / "trial/exec-audit/1.log"))
    assert logs is not None and logs.remedy == "" and "trial's own folder" in logs.why
    assert view.file(str(tmp_path / "trial/environment/seed.json")) is None  # shared with the commands
    assert view.file(str(tmp_path / "bench/missing.py")) is None  # not there outside either: not the sandbox's doing
    assert view.file("relative/path") is None and view.file("/proc/self/status") is None


def test_an_endpoint_of_the_environment_the_arm_does_not_declare_is_named_as_the_arm_would_declare_it(tmp_path: Path) -> None:
    from pytest_benchcell.isolation.blocked import endpoints_offered

    offered = endpoints_offered(
        {"SERVICE_URL": "http://127.0.0.1:{port}/", "NAME": "tracker"},
        {"SERVICE_URL": "http://127.0.0.1:4242/", "NAME": "tracker"},
        {"port": "4242", "admin": "http://localhost:4343", "db": "/tmp/x.db", "admin_port": "4444"},
    )
    assert offered == {
        sandbox.Endpoint("127.0.0.1", 4242): "http://127.0.0.1:{port}/",
        sandbox.Endpoint("127.0.0.1", 4343): "{admin}",
        sandbox.Endpoint("127.0.0.1", 4444): "127.0.0.1:{admin_port}",
    }
    view = view_of(tmp_path, offered=offered, network=("{admin}",), declared=frozenset({sandbox.Endpoint("127.0.0.1", 4343)}))
    refused = view.endpoint("127.0.0.1:4242")
    assert refused is not None and refused.remedy == 'declare [arms.cli] network = ["{admin}", "http://127.0.0.1:{port}/"]'
    assert view.endpoint("127.0.0.1:4343") is None  # declared: relayed
    assert view.endpoint("127.0.0.1:9") is None  # nothing of the bench's: the agent's doing
    assert view.endpoint("[::1]:4242") is None  # the relays listen on IPv4: a client falls back to it


def test_the_judge_leaves_a_hidden_path_the_agents_command_names_to_the_agent(tmp_path: Path) -> None:
    from pytest_benchcell.isolation.exec_audit import Access, ProgramFailure

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "notes.txt").write_text("")
    view = view_of(tmp_path)
    target = str(tmp_path / "bench" / "notes.txt")
    access = Access(11, "openat", target, "ENOENT", 2)
    own = ProgramFailure("tool", "/usr/bin/python3", "exited with 1", access, "tool import")
    asked = ProgramFailure("tool", "/usr/bin/python3", "exited with 1", access, "tool import ../bench/notes.txt")
    assert view.judge(own) == {
        "program": "tool", "call": "openat", "target": target, "error": "ENOENT", "ended": "exited with 1",
        "command": "tool import", "why": "the bench folder is hidden but for what the arm declares",
        "remedy": 'declare [arms.cli] readable = ["lib", "notes.txt"]',
    }  # fmt: skip
    assert view.judge(asked) is None


# --- the rule: a trial the harness broke is never counted for or against the arm ----------------------

BLOCKED = {"program": "tool", "call": "openat", "target": "/b/x.py", "error": "ENOENT", "ended": "exited with 1",
           "command": "tool x", "why": "the bench folder is hidden but for what the arm declares",
           "remedy": 'declare [arms.a] readable = ["x.py"]'}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "outcome", "after"),
    [("scored", "incorrect", ("error", None)), ("scored", "confused", ("error", None)), ("scored", "hung", ("error", None)),
     ("scored", "pass", ("error", None)), ("invalid", None, ("invalid", None)), ("error", None, ("error", None))],
)  # fmt: skip
def test_a_scored_trial_the_sandbox_broke_becomes_an_error_whatever_its_verdict(status: str, outcome: str | None, after: tuple) -> None:
    from pytest_benchcell.trial import not_against_the_arm

    sample = {"status": status, "outcome": outcome, "reason": "why", "sandbox_blocked": [BLOCKED]}
    not_against_the_arm(sample)
    assert (sample["status"], sample["outcome"]) == after
    unblocked = {"status": status, "outcome": outcome, "reason": "why", "sandbox_blocked": []}
    not_against_the_arm(unblocked)
    assert (unblocked["status"], unblocked["outcome"]) == (status, outcome)


def test_the_error_says_what_the_sandbox_kept_and_what_the_trial_would_have_been() -> None:
    from pytest_benchcell.trial import not_against_the_arm

    sample = {"status": "scored", "outcome": "incorrect", "reason": "missing fact: 3 open", "sandbox_blocked": [BLOCKED, BLOCKED]}
    not_against_the_arm(sample)
    assert sample["reason"] == (
        "sandbox: tool could not open /b/x.py (the bench folder is hidden but for what the arm declares) and exited "
        'with 1; declare [arms.a] readable = ["x.py"] (+1 more); the trial would have been incorrect: missing fact: '
        "3 open, which the harness caused, so it is not counted for or against the arm"
    )
    passed = {"status": "scored", "outcome": "pass", "reason": "", "final_answer": "3 open", "sandbox_blocked": [BLOCKED]}
    not_against_the_arm(passed)
    assert passed["reason"].endswith("; the trial would have been pass, which the harness caused, so it is not counted "
                                     "for or against the arm") and passed["final_answer"] == ""  # fmt: skip


def test_a_trial_whose_mcp_server_failed_is_never_counted_either() -> None:
    from pytest_benchcell.trial import not_against_the_arm

    failed = {"server": "inventory", "error": "FileNotFoundError: mcp.toml"}
    sample = {"status": "scored", "outcome": "pass", "reason": "", "mcp_failed": [failed]}
    not_against_the_arm(sample)
    assert (sample["status"], sample["outcome"]) == ("error", None)
    assert sample["reason"] == (
        "MCP: MCP server 'inventory' failed: FileNotFoundError: mcp.toml; the trial would have been pass, which the "
        "harness caused, so it is not counted for or against the arm"
    )


# --- bench.toml: preflight ------------------------------------------------------------------------


def test_an_arm_declares_its_preflight_commands_and_they_replace_the_default_checks(tmp_path: Path) -> None:
    from pytest_benchcell.config import BenchConfigError, parse_bench
    from pytest_benchcell.preflight import checks_for_binaries

    def bench(arm: dict):  # type: ignore[no-untyped-def]
        document = {"bench": {"model": "m"}, "arms": {"a": {"binaries": ["git", "curl"], **arm}},
                    "tasks": {"t": {"tier": "read", "intent": "x", "required_facts": ["x"]}}}  # fmt: skip
        return parse_bench(tmp_path / "bench.toml", document)

    plain = bench({"probe": {"git": "git status"}})
    assert [check.commands for check in checks_for_binaries(plain.arms["a"])] == [
        ("git status",), ("curl --help", "curl --version")
    ]
    declared = bench({"preflight": ["curl -sf {url}", "git log -1"]})
    assert [check.commands for check in checks_for_binaries(declared.arms["a"])] == [("curl -sf {url}",), ("git log -1",)]
    assert declared.definition("a", "t").conditions == bench({}).definition("a", "t").conditions  # not a condition
    with pytest.raises(BenchConfigError, match=r"\[arms.a\] preflight has value \"echo 'x\"; allowed: shell command lines"):
        bench({"preflight": ["echo 'x"]})
    with pytest.raises(BenchConfigError, match=r"\[arms.a\] preflight has value \[\]|a list of non-empty strings"):
        bench({"preflight": "git status"})


# --- the three benches of issue 24 -------------------------------------------------------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_wrapper_running_a_script_of_the_bench_is_refused_naming_the_script(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "wrapper")
    assert_refused_before_anything(pytester, result, "wrapper")
    result.stderr.fnmatch_lines([
        "ERROR: benchcell pre-flight: 1 check of the selected arms works outside the sandbox and fails inside it*",
        "arm wrapper: `tracker --help` works outside the sandbox (exit 0) and fails inside it (exit 2)",
        f"    could not open {pytester.path}/tracker.py (the bench folder is hidden but for what the arm declares)",
        '    -> declare [arms.wrapper] readable = ["tracker.py"]',
        "    it said: *python3: can't open file *tracker.py*",
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_cli_importing_its_own_package_from_the_bench_is_refused_naming_the_package(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "package")
    assert_refused_before_anything(pytester, result, "package")
    result.stderr.fnmatch_lines([
        "arm package: `pkgcli --help` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        # its module or the module's cache, whichever Python read outside (the first run outside writes the cache)
        f"    could not open {pytester.path}/pkgtool/* (the bench folder is hidden but for what the arm declares)",
        '    -> declare [arms.package] readable = ["pkgtool"]',
        "*ModuleNotFoundError: No module named 'pkgtool'",
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
def test_a_cli_reaching_the_service_through_a_variable_is_refused_naming_the_endpoint(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "service")
    assert_refused_before_anything(pytester, result, "service")
    result.stderr.re_match_lines([
        re.escape("arm service: $SERVICE_URL (127.0.0.1:") + r"\d+" + re.escape(
            ") is a service that answers outside the sandbox, but inside it the connection is refused: declare "
            '[arms.service] network = ["http://127.0.0.1:{port}/"]'
        ),
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
@pytest.mark.parametrize(
    ("arm", "declaration"),
    [("wrapper", 'readable = ["tracker.py"]'), ("package", 'readable = ["pkgtool"]'),
     ("service", 'network = ["http://127.0.0.1:{port}/"]')],
)  # fmt: skip
def test_each_bench_passes_once_the_named_declaration_is_added(pytester: pytest.Pytester, arm: str, declaration: str) -> None:
    write_bench(pytester, **{arm: declaration})
    result = sitting(pytester, arm)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"])
    (sample,) = samples(pytester, arm)
    assert sample["provenance"]["sandbox"].startswith("on (")
    assert "3 open" in sample["tool_calls"][0]["output"] and sample["sandbox_blocked"] == []


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_declared_preflight_command_that_reaches_the_service_names_the_refused_connection(pytester: pytest.Pytester) -> None:
    write_bench(pytester, service='preflight = ["svc list"]')
    result = sitting(pytester, "service")
    assert_refused_before_anything(pytester, result, "service")
    result.stderr.re_match_lines([
        re.escape("arm service: `svc list` works outside the sandbox (exit 0) and fails inside it (exit 1)"),
        r"    could not connect to 127\.0\.0\.1:\d+ \(the sandbox lets commands reach only the endpoints the arm declares\)",
        re.escape('    -> declare [arms.service] network = ["http://127.0.0.1:{port}/"]'),
        r"    it said: .*",
        re.escape("        urllib.error.URLError: <urlopen error [Errno 111] Connection refused>"),
    ])  # fmt: skip
    write_bench(pytester, service='preflight = ["svc list"]\nnetwork = ["http://127.0.0.1:{port}/"]')
    sitting(pytester, "service").assert_outcomes(passed=1)


@pytest.mark.e2e
@needs_sandbox
def test_a_preflight_command_with_a_placeholder_the_environment_lacks_is_refused(pytester: pytest.Pytester) -> None:
    write_bench(pytester, wrapper='preflight = ["tracker list --since {yesterday}"]')
    result = sitting(pytester, "wrapper")
    assert_refused_before_anything(pytester, result, "wrapper")
    result.stderr.fnmatch_lines([
        f"ERROR: {pytester.path}/bench.toml: [[]arms.wrapper] preflight uses the placeholder {{yesterday}}, but the "
        "environment supplies only: bench_root, cwd, port, python",
    ])  # fmt: skip


@needs_sandbox
def test_collect_only_runs_no_pre_flight(pytester: pytest.Pytester) -> None:
    write_bench(pytester)  # the wrapper arm is broken: a pre-flight would refuse it
    result = sitting(pytester, "wrapper", "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*<TrialItem wrapper-count-t1>*"])
    assert "pre-flight" not in result.stdout.str() + result.stderr.str()


@pytest.mark.e2e
@needs_sandbox
def test_an_arm_left_out_by_k_is_not_checked_so_it_cannot_refuse_the_sitting(pytester: pytest.Pytester) -> None:
    write_bench(pytester, package='readable = ["pkgtool"]')
    result = sitting(pytester, "wrapper,package", "-k", "package")  # the wrapper arm is broken, and deselected
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"])


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
def test_under_xdist_the_controller_refuses_before_it_reserves_numbers_for_its_workers(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "wrapper", "-n", "2")
    assert_refused_before_anything(pytester, result, "wrapper")
    result.stderr.fnmatch_lines(["arm wrapper: `tracker --help` works outside the sandbox (exit 0) and fails inside it (exit 2)"])
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    result = sitting(pytester, "wrapper", "-n", "2", "--bench-trials", "2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"])


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
def test_a_gateway_whose_checkout_the_sandbox_breaks_refuses_before_any_trial(pytester: pytest.Pytester, tmp_path: Path) -> None:
    import shutil

    write_bench(pytester, wrapper='readable = ["tracker.py"]')  # the controller's checkout works
    far = tmp_path / "far"
    shutil.copytree(pytester.path, far)
    # The far checkout has the same definitions (its readable declaration and files too) but hides
    # the CLI's program in its provisioning hook, which is not a condition: its own pre-flight catches it.
    (far / "conftest.py").write_text(CONFTEST.replace(
        'return Environment(values={"port": str(sock.getsockname()[1])}, data=sock)',
        'return Environment(values={"port": str(sock.getsockname()[1])}, data=sock, hidden=(__import__("pathlib").Path(__file__).parent / "tracker.py",))',
    ))  # fmt: skip
    result = pytester.runpytest_subprocess(
        "--bench-arm", "wrapper", "--bench-task", "count", "--bench-scripted", "-p", "no:randomly",
        "-d", "--tx", f"popen//chdir={far}",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        f"*benchcell: gateway gw0 (popen//chdir={far}) cannot run trials: benchcell pre-flight: 1 check of the "
        "selected arms works outside the sandbox and fails inside it*",
        "arm wrapper: `tracker --help` works outside the sandbox (exit 0) and fails inside it (exit 2)",
    ])  # fmt: skip
    assert samples(pytester, "wrapper") == [] and not (far / "results").exists()


@pytest.mark.e2e
@needs_sandbox
def test_a_gateway_whose_checkout_lacks_a_readable_declaration_is_refused_by_its_definition(pytester: pytest.Pytester, tmp_path: Path) -> None:
    import shutil

    write_bench(pytester)  # the far checkout: without `readable`, which is part of the conditions
    far = tmp_path / "far"
    shutil.copytree(pytester.path, far)
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    result = pytester.runpytest_subprocess(
        "--bench-arm", "wrapper", "--bench-task", "count", "--bench-scripted", "-p", "no:randomly",
        "-d", "--tx", f"popen//chdir={far}",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*benchcell: gateway gw0 (popen//chdir={far}) cannot run trials: *differs from the controller's bench "
                                 "for wrapper x count: conditions fingerprint * (conditions.arm.readable is only on the controller)*"])  # fmt: skip
    assert samples(pytester, "wrapper") == [] and not (far / "results").exists()


@pytest.mark.e2e
@needs_sandbox
def test_with_the_audit_off_the_refusal_says_what_failed_and_what_it_printed(pytester: pytest.Pytester) -> None:
    write_bench(pytester, exec_audit="off")
    result = sitting(pytester, "wrapper")
    assert_refused_before_anything(pytester, result, "wrapper")
    result.stderr.fnmatch_lines([
        "arm wrapper: `tracker --help` works outside the sandbox (exit 0) and fails inside it (exit 2)",
        # untraced, the file is the one its output names
        f"    could not open {pytester.path}/tracker.py (the bench folder is hidden but for what the arm declares)",
        '    -> declare [arms.wrapper] readable = ["tracker.py"]',
        "    it said: *python3: can't open file *tracker.py*",
    ])  # fmt: skip
    write_bench(pytester, exec_audit="off", service='preflight = ["svc list"]')  # a refused connection names no file
    result = sitting(pytester, "service")
    assert_refused_before_anything(pytester, result, "service")
    result.stderr.fnmatch_lines([
        "arm service: `svc list` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        "    the execution audit is off here, so what it could not reach is not traced: declare the files of the bench "
        "it reads in [arms.service] readable = [...], the endpoints it connects to in network = [...]",
        "    it said: *",
    ])  # fmt: skip


# --- a program the sandbox breaks mid-trial ------------------------------------------------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_program_failing_on_a_hidden_file_mid_trial_is_not_scored_against_the_arm(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "reports")  # `reports --help` works in the sandbox: the pre-flight passes
    (sample,) = samples(pytester, "reports")
    assert (sample["status"], sample["outcome"]) == ("error", None)
    summary = pytester.path / "data" / "summary.txt"
    # A trial does not trace opens (the pre-flight does): the program's own words name the file.
    error = f"FileNotFoundError: [Errno 2] No such file or directory: '{summary}'"
    (blocked,) = sample["sandbox_blocked"]
    assert blocked.pop("said").endswith(error)
    assert blocked == {
        "program": "reports", "call": "output", "target": str(summary), "error": error, "ended": "exited with 1",
        "command": "reports summary", "why": "the bench folder is hidden but for what the arm declares",
        "remedy": 'declare [arms.reports] readable = ["data/summary.txt"]',
    }  # fmt: skip
    found = (
        f"reports could not find {summary} (the bench folder is hidden but for what the arm declares; it said: {error}) "
        'and exited with 1; declare [arms.reports] readable = ["data/summary.txt"]'
    )
    assert sample["reason"].startswith(f"sandbox: {found}; the trial would have been incorrect: ")
    assert sample["reason"].endswith("which the harness caused, so it is not counted for or against the arm")
    result.stdout.fnmatch_lines(["ERROR bench.toml::reports-count-t1 - error: sandbox: reports could not find *"])
    assert result.stdout.lines.index(f"        {found}") == result.stdout.lines.index(
        "    sandbox: in 1 trial it kept the arm's own program from what it needs (errors, never counted for or against the arm):"
    ) + 1
    result.stdout.fnmatch_lines(["reports x count: 1 recorded this sitting (0 passed, 0 failed, 0 invalid, 1 errors)"])
    report = pytester.runpytest("--bench-report", "--bench-scripted", "--bench-arm", "reports", "--bench-report-json", "r.json")
    report.stdout.fnmatch_lines([
        "*reports \u00d7 count: the harness broke 1 trial (#1), counted as errors, never for or against the arm: the "
        f"sandbox kept the arm's own program from what it needs (reports could not find {summary}*",
    ])  # fmt: skip
    (cell,) = json.loads((pytester.path / "r.json").read_text())["cells"]
    assert cell["harness_broke"] == [1]
    assert cell["failures"][0]["sandbox_blocked"] == [found]


# --- the example bench: a false refusal is as wrong as an escape --------------------------------

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def preflight_cost_script():  # type: ignore[no-untyped-def]
    """benchmarks/preflight_cost.py as a module: its target, and its loader of the example bench's hooks."""
    return docs_text.benchmark_script("preflight_cost")


def example_hooks():  # type: ignore[no-untyped-def]
    """The example bench's hooks (the root conftest.py) as the plugin's hook relay calls them."""
    return preflight_cost_script().example_hooks()


def example_bench(**arm_changes: dict):  # type: ignore[no-untyped-def]
    import tomllib

    from pytest_benchcell.config import parse_bench

    document = tomllib.loads((ROOT / "bench.toml").read_text())
    for arm, changes in arm_changes.items():
        for key, value in changes.items():
            if value is None:
                document["arms"][arm].pop(key)
            else:
                document["arms"][arm][key] = value
    return parse_bench(ROOT / "bench.toml", document)


@needs_sandbox
def test_every_arm_of_the_example_bench_passes_the_pre_flight() -> None:
    from pytest_benchcell.agent import bundled_cli
    from pytest_benchcell.preflight import run_preflight

    bench = example_bench()
    found = run_preflight(bench, dict.fromkeys(bench.arms, "close-export"), example_hooks(), "scripted", cli=bundled_cli())
    assert (found.broken, found.notes) == ([], [])
    assert found.arms == ["cli-skill", "cli-skill-native", "native", "raw-api"]  # the mcp arm has no shell: nothing runs in a sandbox
    assert found.mcp_arms == ["mcp"] and found.mcp_failures == []  # ... its MCP server is started and asked instead
    assert re.fullmatch(
        r"pre-flight: 4 checks of 4 arms ran in the sandbox as in a trial and work there; 1 MCP server of 1 arm started "
        r"as in a trial and offers the arm's tools \(\d+\.\d\d s\)",
        found.summary(),
    )


def readme_block_after(words: str) -> str:
    text = docs_text.text()
    after = text[text.index(words) :]
    return docs_text.first_block(after).rstrip("\n")


def comparable(text: str) -> str:
    """A refusal as the README prints it: wrapped lines joined, paths and the port left out, and the
    files of a package named by count (a checkout's __pycache__ decides whether .py or .pyc are read)."""
    text = " ".join(text.replace(str(ROOT), "...").split())
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    return re.sub(r"could not open \d+ files in (\S+) \(([^()]*)\): .*? -> ", r"could not open files in \1 (\2) -> ", text)


@needs_sandbox
@needs_audit
def test_the_example_bench_without_its_declarations_is_refused_as_the_readme_shows() -> None:
    from pytest_benchcell.agent import bundled_cli
    from pytest_benchcell.preflight import run_preflight

    bench = example_bench(**{"cli-skill": {"readable": None}, "native": {"network": None}})
    found = run_preflight(bench, {"cli-skill": "close-export", "native": "close-export"}, example_hooks(), "scripted", cli=bundled_cli())
    first, second = found.broken
    assert (first.command, first.remedies()) == ("tracker --help", ['declare [arms.cli-skill] readable = ["bench/tracker"]'])
    assert "ModuleNotFoundError: No module named 'tracker'" in first.output
    assert second.check.label == "$TRACKER_URL"
    shown = readme_block_after("The example bench without its `readable` and")
    assert comparable("ERROR: " + found.refusal(bench)) == comparable(shown)


def test_the_readme_figure_of_the_pre_flight_is_said_against_the_scripts_target() -> None:
    """README, Benchmarks: the row of benchmarks/preflight_cost.py states its median and whether it
    meets the script's target; a figure said to meet a target it misses (or the reverse) is false."""
    script = preflight_cost_script()
    (row,) = [line for line in docs_text.text().splitlines() if "benchmarks/preflight_cost.py`" in line and line.startswith("|")]
    median = re.search(r"median ([\d.]+) s", row)
    target = re.search(r"\| < ([\d.]+) s per sitting for four arms: (met|missed)[^|]*\|$", row)
    assert median and target, f"README's pre-flight row no longer states its figure and target: {row}"
    assert float(target.group(1)) == script.TARGET_S
    assert (float(median.group(1)) < script.TARGET_S) == (target.group(2) == "met")
