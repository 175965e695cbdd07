"""End to end: what an agent leaves behind in its folders cannot cost the trial its sample, reveal
the answer key, reach the terminal raw, run code in the harness, or outlive the trial.

The agent is driven by a scripted model through the real SDK and CLI; its Bash commands are
ordinary ones an arm with mkdir, ln, mkfifo and touch may run: one each for 1,200 nested folders,
symbolic links to bench.toml and to the bench's folder, a FIFO, a file whose name holds terminal
escapes, control characters and a byte that is not UTF-8, and Python files named like modules the
harness imports.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from benches import file_bytes

from pytest_benchcell.isolation.exec_audit import find_tracer

pytestmark = pytest.mark.e2e

ANSWER_KEY = "answer-key-0f9e2b7c41"  # only in bench.toml: must never be copied anywhere
DEPTH = 1200
ESCAPE_NAME = r"x\033[2J\033]0;pwned\007\rred\033[31m\001\377"  # printf text: ESC CSI, OSC title, BEL, CR, SOH, a non-UTF-8 byte
PLANTED = ("\x1b", "\x07", "\x01", "\x9b")

BENCH_TOML = f"""
# {ANSWER_KEY}
[bench]
name = "leftovers"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 12
wall_clock_ms = 60000

[arms.litter]
tools = ["Bash"]
binaries = ["ln", "mkfifo", "touch"]
bootstrap = "mkdir, ln, mkfifo and touch are available."

[arms.loose]
tools = ["Bash"]
binaries = ["runner"]
path = ["bin"]
bootstrap = "runner runs a task."
preflight = ["runner true"]  # it has no help or version: the pre-flight refuses to guess

[tasks.litter]
tier = "single-mutation"
intent = "Leave the working directory tidy."
check_state = true

[tasks.foreign]
tier = "read"
intent = "Say done."
required_facts = ["done"]
"""

CONFTEST = '''
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

SCRIPTS = {{
    "litter": [
        ToolUse("Bash", {{"command": "mkdir -p " + "/".join(["d"] * {depth})}}),
        ToolUse("Bash", {{"command": "ln -s {bench_toml} key.toml && ln -s {bench_dir} bench-folder"}}),
        ToolUse("Bash", {{"command": "mkfifo pipe"}}),
        ToolUse("Bash", {{"command": "touch \\"$(printf '{escape_name}')\\""}}),
        # Python files for whatever the harness might run after the trial (the CLI itself refuses
        # writes into a .git folder: "a sensitive file").
        ToolUse("Bash", {{"command": "printf 'open(\\\\x27{python_marker}\\\\x27, \\\\x27w\\\\x27)\\\\n' > sitecustomize.py && printf 'open(\\\\x27{python_marker}\\\\x27, \\\\x27w\\\\x27)\\\\n' > json.py"}}),
        Answer("tidied"),
    ],
    "foreign": [
        # runner (a shell script) starts rm: only the execution audit sees it, with its argv as it was
        ToolUse("Bash", {{"command": "runner \\"rm -f $(printf 'gone\\\\033]0;pwned\\\\007\\\\033[31m')\\""}}),
        Answer("done"),
    ],
}}

def pytest_benchcell_provision(trial):
    with open({folders_log!r}, "a") as log:  # where the trial's folders are, to check they are gone
        log.write(str(trial.workdir.parent) + "\\n")
    return Environment(data=trial.agent_cwd)

def pytest_benchcell_snapshot(trial, environment):
    return sorted(path.name for path in environment.data.iterdir())

def pytest_benchcell_check_state(trial, environment, snapshot):
    # A bench author's plain message: it names the files as they are.
    return [f"unexpected files: {{', '.join(reversed(snapshot))}}"] if snapshot else []

def pytest_benchcell_script(trial, environment):
    return SCRIPTS[trial.task]
'''


def write(pytester: pytest.Pytester) -> dict[str, Path]:
    bench = pytester.makefile(".toml", bench=textwrap.dedent(BENCH_TOML))
    markers = {"python": pytester.path / "python-ran", "folders": pytester.path / "trial-folders.log"}
    runner = pytester.mkdir("bin") / "runner"  # the loose arm's one binary: a shell script
    runner.write_text('#!/bin/sh\nexec /bin/sh -c "$1"\n')
    runner.chmod(0o755)
    pytester.makeconftest(
        CONFTEST.format(
            depth=DEPTH,
            bench_toml=bench,
            bench_dir=pytester.path,
            escape_name=ESCAPE_NAME.replace("\\", "\\\\"),
            python_marker=markers["python"],
            folders_log=str(markers["folders"]),
        )
    )
    return {"bench": bench, **markers}


def test_what_the_agent_leaves_costs_no_sample_reveals_nothing_and_is_removed(pytester: pytest.Pytester) -> None:
    paths = write(pytester)
    bench_text = paths["bench"].read_bytes()
    result = pytester.runpytest("--bench-arm", "litter", "--bench-task", "litter", "--bench-scripted", "-rA", "-v")
    # exactly one sample, scored: the checker named the files the agent left
    result.assert_outcomes(failed=1)
    store = pytester.path / "results" / "scripted" / "litter" / "litter.jsonl"
    (sample,) = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert (sample["status"], sample["outcome"]) == ("scored", "incorrect")
    assert [call["allowed"] for call in sample["tool_calls"]] == [True] * 5
    assert "leftovers" not in sample  # everything was removed
    names = sample["state"]["after"]
    assert {"d", "key.toml", "bench-folder", "pipe", "sitecustomize.py", "json.py"} <= set(names)
    escape_name = next(name for name in names if name.startswith("x"))
    assert escape_name == "x\x1b[2J\x1b]0;pwned\x07\rred\x1b[31m\x01\udcff"  # the store keeps it as it was
    # nothing revealed: the answer key is in no file but bench.toml, nor in pytest's output
    output = result.stdout.str() + result.stderr.str()
    assert ANSWER_KEY not in output
    copies = [
        path for path in pytester.path.rglob("*")
        if path.is_file() and not path.is_symlink() and path != paths["bench"] and ANSWER_KEY.encode() in file_bytes(path)
    ]  # fmt: skip
    assert copies == []
    # no escape byte reaches the terminal: the reason is shown with visible escapes
    assert [char for char in PLANTED if char in output] == []
    assert r"unexpected files: x\x1b[2J\x1b]0;pwned\x07\x0dred\x1b[31m\x01\udcff, sitecustomize.py" in output
    # nothing ran in the harness from the Python files left behind
    assert not paths["python"].exists()
    # nothing left behind: the trial's folder is gone, the link's target intact
    folders = paths["folders"].read_text().splitlines()
    (folder,) = [line for line in folders if "-t0-" not in Path(line).name]  # the pre-flight's is trial 0
    assert not any(Path(line).exists() for line in folders)
    assert Path(folder).name.startswith("benchcell-litter-litter-t1-") and not Path(folder).exists()
    assert paths["bench"].read_bytes() == bench_text and not paths["bench"].is_symlink()
    # .cache: the plugin's own folder in the user's cache (pytester's HOME is this folder): the pre-flight it passed
    assert {p.name for p in pytester.path.iterdir()} - {".pytest_cache", "__pycache__", ".cache"} == {"bench.toml", "bin", "conftest.py", "results", "trial-folders.log"}
    # where bytecode is written: only pytest's cache of the bench's own conftest.py
    cached = pytester.path / "__pycache__"
    assert all(re.fullmatch(r"conftest\.cpython-\d+(-pytest-[\d.]+)?\.pyc", p.name) for p in (cached.iterdir() if cached.exists() else ()))


@pytest.mark.skipif(not find_tracer().available, reason="the execution audit is not available here")
def test_an_escape_in_a_foreign_programs_argv_reaches_the_summary_visibly(pytester: pytest.Pytester) -> None:
    write(pytester)
    result = pytester.runpytest("--bench-arm", "loose", "--bench-task", "foreign", "--bench-scripted", "-rA")
    store = pytester.path / "results" / "scripted" / "loose" / "foreign.jsonl"
    (sample,) = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert sample["status"] == "invalid" and "\x1b]0;pwned\x07" in sample["reason"]
    output = result.stdout.str() + result.stderr.str()
    assert [char for char in PLANTED if char in output] == []
    (line,) = [line for line in output.splitlines() if line.startswith("INVALID bench.toml::loose-foreign-t1 - foreign tool call ran: exec ")]
    assert r"gone\x1b]0;pwned\x07\x1b[31m" in line
