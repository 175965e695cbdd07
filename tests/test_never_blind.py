"""Never spend blind: the pre-flight refuses what it cannot check, a blocked program is recognised
however it looked for its file, and every message quotes the lines that name the error.

Reproduced as the benches were written: `shopctl`, a Python CLI in the bench folder that puts the
bench folder on sys.path and imports its package `shop` from there, whose help is a `help`
subcommand (`--help` and `--version` exit 1 outside the sandbox too); `shopq`, the same CLI that
answers `help` before it imports, so the pre-flight passes and its trials fail on the import (found
by `stat`, never a failed open); `invctl`, a Node CLI that `require`s `../lib/inventory`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from test_preflight import assert_refused_before_anything, needs_audit, needs_sandbox, readme_block_after, samples, view_of

from pytest_benchcell.isolation.exec_audit import ExecPolicy, FailedRun, failed_runs, parse_strace
from pytest_benchcell.isolation.missing_paths import paths_named_missing
from pytest_benchcell.output_lines import GAP, lines_naming_the_error

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

# --- the lines that name the error ------------------------------------------------------------------


def run_failing(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    return done.stdout + done.stderr


@needs_node
def test_nodes_cannot_find_module_is_quoted_not_the_tail_of_its_stack(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "invctl.js").write_text("const inventory = require('../lib/inventory');\n")
    output = run_failing(["node", "bin/invctl.js"], tmp_path)
    assert "Cannot find module" not in "\n".join(output.splitlines()[-6:])  # the tail misses it
    assert lines_naming_the_error(output) == [
        "Error: Cannot find module '../lib/inventory'",
        "Require stack:",
        f"- {tmp_path}/bin/invctl.js",
    ]


@needs_node
def test_nodes_import_of_a_missing_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "main.mjs").write_text("import inventory from './lib/inventory.js';\n")
    shown = lines_naming_the_error(run_failing(["node", "main.mjs"], tmp_path))
    assert shown[0].startswith(f"Error [ERR_MODULE_NOT_FOUND]: Cannot find module '{tmp_path}/lib/inventory.js'")
    assert not any(line.lstrip().startswith("at ") for line in shown)  # a stack frame is no context


def test_a_python_traceback_shows_its_error_and_where_it_started(tmp_path: Path) -> None:
    (tmp_path / "tool.py").write_text("import sys\n\ndef load():\n    import shop\n\ndef main():\n    load()\n\nmain()\n")
    output = run_failing([shutil.which("python3") or "python3", "tool.py"], tmp_path)
    assert lines_naming_the_error(output) == [
        "Traceback (most recent call last):",
        f'  File "{tmp_path}/tool.py", line 9, in <module>',
        GAP,
        "    import shop",
        "ModuleNotFoundError: No module named 'shop'",
    ]


def test_without_a_line_naming_an_error_the_tail_is_shown_and_every_line_is_bounded() -> None:
    assert lines_naming_the_error("one\ntwo\n\nthree\nfour", limit=2) == ["three", "four"]
    assert lines_naming_the_error("") == []
    long = "x" * 500 + " error"
    assert lines_naming_the_error(long, width=40) == ["x" * 37 + "..."]
    many = "\n".join(f"warning {n}\nerror {n}" for n in range(20)) + "\nValueError: the cause"
    shown = lines_naming_the_error(many, limit=6)
    assert len([line for line in shown if line != GAP]) == 6
    assert shown[-1] == "ValueError: the cause"  # the error's own statement first, whatever its place


# --- the files an error output says a program could not find ---------------------------------------


def shop_bench(root: Path) -> Path:
    for name in ("shop/__init__.py", "shop/db.py", "lib/inventory.js", "vendor/pylib/tally/__init__.py", "config/shop.toml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "bin").mkdir(exist_ok=True)
    return root


def test_the_files_a_python_or_node_error_names_are_found_in_the_bench(tmp_path: Path) -> None:
    bench = shop_bench(tmp_path / "bench")

    def found(output: str, program: str = "") -> list[str]:
        return [path for path, _ in paths_named_missing(output, bench_root=str(bench), program=program)]

    assert found("ModuleNotFoundError: No module named 'shop'") == [f"{bench}/shop"]
    assert found("ModuleNotFoundError: No module named 'shop.db'") == [f"{bench}/shop/db.py"]  # not a folder: the module's file
    assert found("No module named 'tally'") == [f"{bench}/vendor/pylib/tally"]  # two levels down
    assert found("ModuleNotFoundError: No module named 'nosuchmodule'") == []  # nowhere: not the sandbox's doing
    node = f"Error: Cannot find module '../lib/inventory'\nRequire stack:\n- {bench}/bin/invctl\n"
    assert found(node) == [f"{bench}/lib/inventory.js"]
    assert found("Error: Cannot find module '../lib/inventory'", program=f"{bench}/bin/invctl") == [f"{bench}/lib/inventory.js"]
    esm = f"Error [ERR_MODULE_NOT_FOUND]: Cannot find module '{bench}/lib/inventory.js' imported from {bench}/bin/x.mjs"
    assert found(esm) == [f"{bench}/lib/inventory.js"]
    python_open = f"FileNotFoundError: [Errno 2] No such file or directory: '{bench}/config/shop.toml'"
    assert found(python_open) == [f"{bench}/config/shop.toml"]
    assert found(f"usage: shopctl list (config in {bench}/config/shop.toml)") == []  # no error named on the line
    assert found(f'  File "{bench}/shop/__init__.py", line 3, in <module>\nValueError: bad') == []  # a file that ran


def test_a_failed_run_of_the_arms_binary_is_found_with_its_script_behind_env() -> None:
    log = parse_strace(
        '10 execve("/usr/bin/bash", ["bash", "-c", "x"], 0x1 /* 1 var */) = 0\n'
        "10 clone(child_stack=NULL, flags=SIGCHLD) = 11\n"
        '11 execve("/trial/bin/invctl", ["invctl", "list"], 0x1 /* 1 var */) = 0\n'
        '11 execve("/b/bin/invctl", ["/b/bin/invctl", "/etc/x"], 0x1 /* 1 var */) = 0\n'
        '11 execve("/usr/bin/node", ["node", "/b/bin/invctl", "/etc/x"], 0x1 /* 1 var */) = 0\n'
        "11 +++ exited with 1 +++\n"
        "10 +++ exited with 1 +++\n",
        log="1-10.log",
    )
    policy = ExecPolicy("a", "/usr/bin/bash", {"invctl": frozenset({"/trial/bin/invctl", "/b/bin/invctl"})}, {}, {"invctl": frozenset({"node", "env"})})
    from pytest_benchcell.isolation.exec_audit.policy import _check

    (run,) = failed_runs(log, policy, _check(log.records, policy)[1])
    assert (run.binary, run.program, run.ended, run.log) == ("invctl", "/b/bin/invctl", "exited with 1", "1-10.log")
    succeeded = parse_strace(log_text := "11 execve(\"/trial/bin/invctl\", [\"invctl\"], 0x1 /* 1 var */) = 0\n11 +++ exited with 0 +++\n")
    assert failed_runs(succeeded, policy, _check(succeeded.records, policy)[1]) == [] and log_text


def calls(*pairs: tuple[str, str]) -> list[dict]:
    return [{"tool": "Bash", "input": {"command": command}, "output": output} for command, output in pairs]


def test_the_judge_reads_a_failed_runs_output_for_what_the_sandbox_hides(tmp_path: Path) -> None:
    bench = shop_bench(tmp_path / "bench")
    view = view_of(tmp_path, readable=())
    said = "Traceback (most recent call last):\n  File \"/b/bin/shopctl\", line 5\n    import shop\nModuleNotFoundError: No module named 'shop'"
    run = FailedRun("shopctl", f"{bench}/bin/shopctl", "exited with 1", "shopctl list", "2-1.log", 1)
    entries = view.judge_runs([run], calls(("shopctl list", "3 open"), ("ls", ""), ("shopctl list", said)), [])
    assert entries == [{
        "program": "shopctl", "call": "output", "target": f"{bench}/shop",
        "error": "ModuleNotFoundError: No module named 'shop'", "ended": "exited with 1", "command": "shopctl list",
        "why": "the bench folder is hidden but for what the arm declares", "remedy": 'declare [arms.cli] readable = ["shop"]',
        "said": said,
    }]  # fmt: skip  (the second `shopctl list` call is the one that failed: repeat 1)
    first_call_only = view.judge_runs([FailedRun("shopctl", "", "exited with 1", "shopctl list", "2-1.log", 0)],
                                      calls(("shopctl list", "3 open"), ("shopctl list", said)), [])  # fmt: skip
    assert first_call_only == []  # the run that failed printed no error naming a file


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("shopctl frobnicate", "error: unknown command 'frobnicate'"),  # fails for its own reasons
        ("shopctl plugin nosuch", "ModuleNotFoundError: No module named 'nosuch'"),  # a module that exists nowhere
        ("shopctl show ../bench/config/shop.toml", "FileNotFoundError: [Errno 2] No such file or directory: "
         "'{bench}/config/shop.toml'"),  # the agent's command names the hidden file: its own doing
    ],
)  # fmt: skip
def test_ordinary_failures_are_not_blocks(tmp_path: Path, command: str, output: str) -> None:
    bench = shop_bench(tmp_path / "bench")
    view = view_of(tmp_path, readable=())
    run = FailedRun("shopctl", f"{bench}/bin/shopctl", "exited with 1", command, "1.log", 0)
    assert view.judge_runs([run], calls((command, output.format(bench=bench))), []) == []


# --- the pre-flight: shopctl, shopq and invctl as they were written ---------------------------------

BENCH = """
[bench]
name = "makerspace"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 60000
exec_audit = "{exec_audit}"
base_prompt = "Use the tools."

[arms.shopctl]
tools = ["Bash"]
binaries = ["shopctl"]
path = ["bin"]
{shopctl}

[arms.shopq]
tools = ["Bash"]
binaries = ["shopq"]
path = ["bin"]
{shopq}

[arms.invctl]
tools = ["Bash"]
binaries = ["invctl"]
path = ["bin"]
{invctl}

[arms.mute]
tools = ["Bash"]
binaries = ["mutectl"]
path = ["bin"]
{mute}

[tasks.count]
tier = "read"
intent = "How many orders are open?"
required_facts = ["3 open"]
"""

CONFTEST = '''
from pathlib import Path
from pytest_benchcell.scripted import Answer, ToolUse

COMMANDS = {"shopq": ["shopq list"], "shopctl": ["shopctl list"], "invctl": ["invctl list"]}


def pytest_benchcell_script(trial, environment):
    commands = COMMANDS.get(trial.arm, ["true"])
    if trial.arm == "shopq" and "ORDINARY" in Path(__file__).with_name("bench.toml").read_text():
        commands = ["shopq frobnicate", "shopq plugin nosuch"]
    return [*(ToolUse("Bash", {"command": command}) for command in commands), Answer("I could not count the orders.")]
'''

SHOPCTL = """#!/usr/bin/env python3
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import shop
if sys.argv[1:] == ["help"]:
    print("usage: shopctl list")
elif sys.argv[1:] == ["list"]:
    print(shop.orders())
else:
    print(f"shopctl: unknown command {' '.join(sys.argv[1:])}; try shopctl help", file=sys.stderr)
    sys.exit(1)
"""
SHOPQ = """#!/usr/bin/env python3
import importlib, sys
from pathlib import Path
if sys.argv[1:] == ["help"]:
    print("usage: shopq list | plugin NAME")
    sys.exit(0)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if sys.argv[1:] == ["list"]:
    import shop
    print(shop.orders())
elif sys.argv[1:2] == ["plugin"]:
    importlib.import_module(sys.argv[2])
else:
    print(f"error: unknown command {' '.join(sys.argv[1:])}", file=sys.stderr)
    sys.exit(2)
"""
INVCTL = """#!/usr/bin/env node
const inventory = require('../lib/inventory');
console.log(process.argv[2] === '--help' ? 'usage: invctl list' : inventory.count());
"""
MUTECTL = """#!/bin/sh
echo "mutectl: no such command: $*" >&2
exit 3
"""


def write_bench(pytester: pytest.Pytester, *, exec_audit: str = "auto", **declared: str) -> None:
    keys = {arm: declared.get(arm, "") for arm in ("shopctl", "shopq", "invctl", "mute")}
    pytester.makefile(".toml", bench=textwrap.dedent(BENCH).format(exec_audit=exec_audit, **keys))
    pytester.makeconftest(CONFTEST)
    files = {
        "bin/shopctl": SHOPCTL, "bin/shopq": SHOPQ, "bin/invctl": INVCTL, "bin/mutectl": MUTECTL,
        "shop/__init__.py": "def orders():\n    return '3 open orders'\n",
        "lib/inventory.js": "module.exports = { count: () => '3 open items' };\n",
    }  # fmt: skip
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)


def one_line(text: str, bench: Path) -> str:
    """A message as the docs print it: wrapped lines joined, the bench's folder as `...`."""
    return " ".join(text.replace(str(bench), "...").split())


def sitting(pytester: pytest.Pytester, arm: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", "count", "--bench-scripted", "-p", "no:randomly", *extra)


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_cli_whose_help_is_a_subcommand_importing_from_the_hidden_bench_is_refused(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "shopctl")
    assert_refused_before_anything(pytester, result, "shopctl")
    result.stderr.fnmatch_lines([
        "ERROR: benchcell pre-flight: 1 check of the selected arms works outside the sandbox and fails inside it*",
        "arm shopctl: `shopctl help` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        "    (`shopctl --help` and `shopctl --version` fail outside the sandbox too; `shopctl help` is the first usual "
        'spelling that works: declare [arms.shopctl] preflight = ["shopctl help"], or a command that does what trials do)',
        '    -> declare [arms.shopctl] readable = ["shop"]',
        "    it said: Traceback (most recent call last):",
        "*ModuleNotFoundError: No module named 'shop'",
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
def test_with_the_audit_off_the_import_is_named_from_the_programs_output(pytester: pytest.Pytester) -> None:
    write_bench(pytester, exec_audit="off")
    result = sitting(pytester, "shopctl")
    assert_refused_before_anything(pytester, result, "shopctl")
    result.stderr.fnmatch_lines([
        "arm shopctl: `shopctl help` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        "*declare [[]arms.shopctl] preflight = [[]\"shopctl help\"]*",
        f"    could not open {pytester.path}/shop (the bench folder is hidden but for what the arm declares)",
        '    -> declare [arms.shopctl] readable = ["shop"]',
    ])  # fmt: skip
    assert "the execution audit is off here" not in result.stderr.str()


@pytest.mark.e2e
@needs_sandbox
def test_a_declared_preflight_command_that_works_outside_only_is_refused_naming_readable(pytester: pytest.Pytester) -> None:
    write_bench(pytester, shopctl='preflight = ["shopctl list"]')
    result = sitting(pytester, "shopctl")
    assert_refused_before_anything(pytester, result, "shopctl")
    result.stderr.fnmatch_lines([
        "arm shopctl: `shopctl list` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        '    -> declare [arms.shopctl] readable = ["shop"]',
    ])  # fmt: skip
    write_bench(pytester, shopctl='preflight = ["shopctl list"]\nreadable = ["shop"]')
    result = sitting(pytester, "shopctl")
    result.stdout.fnmatch_lines(["pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"])


@pytest.mark.e2e
@needs_sandbox
def test_a_declared_preflight_command_that_fails_outside_too_is_refused_with_what_it_said(pytester: pytest.Pytester) -> None:
    write_bench(pytester, shopctl='preflight = ["shopctl status"]\nreadable = ["shop"]')
    result = sitting(pytester, "shopctl")
    assert_refused_before_anything(pytester, result, "shopctl")
    result.stderr.fnmatch_lines([
        "ERROR: benchcell pre-flight: 1 check of the selected arms fails outside the sandbox too, so the pre-flight "
        "cannot tell whether the sandbox breaks the arm and every trial could spend tokens on a program that does not "
        "run (nothing was reserved, no model request was made); declare in */bench.toml:",
        "arm shopctl: the preflight command `shopctl status` fails outside the sandbox too, so it says nothing of the sandbox:",
        "    `shopctl status` exit 1: shopctl: unknown command status; try shopctl help",
        '    -> declare [arms.shopctl] preflight = ["<a command that works>"]: a command line that works outside the '
        "sandbox and does what trials do (reads the files, reaches the services)",
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
def test_a_binary_without_any_working_spelling_refuses_the_sitting_listing_each(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "mute")
    assert_refused_before_anything(pytester, result, "mute")
    shown = readme_block_after("the arm, each command tried with its exit status")  # docs/isolation.md
    assert one_line(result.stderr.str(), pytester.path) == one_line(shown, pytester.path)
    result.stderr.fnmatch_lines([
        "arm mute: no usual spelling of a help or version request of mutectl works outside the sandbox, so the "
        "pre-flight cannot tell whether the sandbox breaks it:",
        "    `mutectl --help` exit 3: mutectl: no such command: --help",
        "    `mutectl --version` exit 3: mutectl: no such command: --version",
        "    `mutectl -h` exit 3: mutectl: no such command: -h",
        "    `mutectl help` exit 3: mutectl: no such command: help",
        "    `mutectl version` exit 3: mutectl: no such command: version",
        '    -> declare [[]arms.mute] preflight = [[]"mutectl <arguments that work>"]: *',
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
@needs_audit
@needs_node
def test_a_node_cli_requiring_a_module_of_the_bench_is_refused_quoting_cannot_find_module(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "invctl")
    assert_refused_before_anything(pytester, result, "invctl")
    result.stderr.fnmatch_lines([
        "arm invctl: `invctl --help` works outside the sandbox (exit 0) and fails inside it (exit 1)",
        f"    could not open {pytester.path}/lib/inventory.js (the bench folder is hidden but for what the arm declares)",
        '    -> declare [arms.invctl] readable = ["lib/inventory.js"]',
        "    it said: Error: Cannot find module '../lib/inventory'",
        "        Require stack:",
    ])  # fmt: skip


# --- during a trial: an import from the hidden bench folder, found by stat ---------------------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_trial_whose_cli_cannot_import_its_package_records_the_block_with_its_remedy(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "shopq")  # `shopq help` answers before it imports: the pre-flight passes
    result.stdout.fnmatch_lines(["pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"])
    note = readme_block_after("the sitting goes on and its summary names it")  # docs/isolation.md
    assert one_line(note, pytester.path) in one_line(result.stdout.str(), pytester.path)
    (sample,) = samples(pytester, "shopq")
    assert (sample["status"], sample["outcome"]) == ("error", None)
    (blocked,) = sample["sandbox_blocked"]
    assert {key: blocked[key] for key in ("program", "call", "target", "error", "ended", "command", "remedy")} == {
        "program": "shopq", "call": "output", "target": str(pytester.path / "shop"),
        "error": "ModuleNotFoundError: No module named 'shop'", "ended": "exited with 1", "command": "shopq list",
        "remedy": 'declare [arms.shopq] readable = ["shop"]',
    }  # fmt: skip
    assert blocked["said"].endswith("ModuleNotFoundError: No module named 'shop'")
    assert sample["reason"].startswith(
        f"sandbox: shopq could not find {pytester.path}/shop (the bench folder is hidden but for what the arm declares; "
        "it said: ModuleNotFoundError: No module named 'shop') and exited with 1; declare [arms.shopq] readable = [\"shop\"]"
    )
    result.stdout.fnmatch_lines([
        "    sandbox: in 1 trial it kept the arm's own program from what it needs (errors, never counted for or against the arm):",
        f"        shopq could not find {pytester.path}/shop (*it said: ModuleNotFoundError: No module named 'shop')*",
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_trial_whose_cli_fails_for_its_own_reasons_stays_scored_against_the_arm(pytester: pytest.Pytester) -> None:
    write_bench(pytester, shopq='readable = ["shop"]  # ORDINARY')
    sitting(pytester, "shopq")
    (sample,) = samples(pytester, "shopq")
    outputs = [call["output"] for call in sample["tool_calls"]]
    assert "unknown command frobnicate" in outputs[0] and "No module named 'nosuch'" in outputs[1]
    assert sample["sandbox_blocked"] == []
    assert (sample["status"], sample["outcome"]) == ("scored", "incorrect")
    assert json.dumps(sample).count("sandbox:") == 0 and os.path.isdir(pytester.path / "shop")
