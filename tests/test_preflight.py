"""The pre-flight and the trials the sandbox breaks (preflight.py, isolation/blocked.py).

End to end, as a user meets them: the three benches of issue 24, each correct and passing without
the sandbox's declarations (`readable`, `network`), are refused before any model request with the
declaration to add named, and pass once it is added; a program that passes the pre-flight but fails
on a hidden file mid-trial is recorded with `sandbox_blocked` and never scored against the arm.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

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
print("tracker 1.0" if sys.argv[1:] == ["--version"] else "3 open issues")
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
    print("pkgcli 1.0" if sys.argv[1:] == ["--version"] else "3 open issues")
"""
SVC = """#!/usr/bin/env python3
import os, sys, urllib.request
if sys.argv[1:] == ["--version"]:
    print("svc 1.0")
else:
    print(urllib.request.urlopen(os.environ["SERVICE_URL"], timeout=10).read().decode())
"""
REPORTS = """#!/usr/bin/env python3
import sys
from pathlib import Path
if sys.argv[1:] == ["--version"]:
    print("reports 1.0")
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


def sitting(pytester: pytest.Pytester, arm: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", "count", "--bench-scripted", "-p", "no:randomly")


def samples(pytester: pytest.Pytester, arm: str) -> list[dict]:
    path = pytester.path / "results" / "scripted" / arm / "count.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_refused_before_anything(pytester: pytest.Pytester, result: pytest.RunResult, arm: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    # No trial ran, no number was reserved, no model request was made (the scripted model is a trial's).
    assert not (pytester.path / "results").exists() or not any((pytester.path / "results").rglob("*.trials"))
    assert samples(pytester, arm) == []


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
        "arm wrapper: `tracker --version` works outside the sandbox (exit 0) and fails inside it (exit 2)",
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
        "arm package: `pkgcli --version` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        f"    could not open {pytester.path}/pkgtool/__init__.py (the bench folder is hidden but for what the arm declares)",
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
def test_with_the_audit_off_the_refusal_says_what_failed_and_what_it_printed(pytester: pytest.Pytester) -> None:
    write_bench(pytester, exec_audit="off")
    result = sitting(pytester, "wrapper")
    assert_refused_before_anything(pytester, result, "wrapper")
    result.stderr.fnmatch_lines([
        "arm wrapper: `tracker --version` works outside the sandbox (exit 0) and fails inside it (exit 2)",
        "    the execution audit is off here, so what it could not reach is not traced: declare the files of the bench "
        "it reads in [arms.wrapper] readable = [...], the endpoints it connects to in network = [...]",
        "    it said: *python3: can't open file *tracker.py*",
    ])  # fmt: skip


# --- a program the sandbox breaks mid-trial ------------------------------------------------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_program_failing_on_a_hidden_file_mid_trial_is_not_scored_against_the_arm(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "reports")  # `reports --version` works in the sandbox: the pre-flight passes
    (sample,) = samples(pytester, "reports")
    assert (sample["status"], sample["outcome"]) == ("error", None)
    summary = pytester.path / "data" / "summary.txt"
    (blocked,) = sample["sandbox_blocked"]
    assert blocked == {
        "program": "reports", "call": "openat", "target": str(summary), "error": "ENOENT", "ended": "exited with 1",
        "command": "reports summary", "why": "the bench folder is hidden but for what the arm declares",
        "remedy": 'declare [arms.reports] readable = ["data/summary.txt"]',
    }  # fmt: skip
    assert sample["reason"].startswith(
        f"sandbox: reports could not open {summary} (the bench folder is hidden but for what the arm declares) and "
        f'exited with 1; declare [arms.reports] readable = ["data/summary.txt"]; the trial would have been incorrect: '
    )
    assert sample["reason"].endswith("which the harness caused, so it is not scored against the arm")
    result.stdout.fnmatch_lines(["ERROR bench.toml::reports-count-t1 - error: sandbox: reports could not open *"])
