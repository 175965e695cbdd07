"""Small benches written into pytester folders by the plugin tests."""

from __future__ import annotations

import gzip
import textwrap
from pathlib import Path

import pytest

BENCH_HEADER = """
[bench]
name = "mini"
model = "claude-sonnet-4-5"
store = "results"
trials = 2
turn_cap = 4
wall_clock_ms = 30000
base_prompt = "You work on a tiny folder. Answer plainly."
"""

# The mini bench's arms and tasks by name, so a test's own bench takes them rather than restating them.
ARMS = {
    "shell": """
[arms.shell]
tools = ["Bash"]
binaries = ["touch"]
bootstrap = "The shell is available."
""",
    "bare": """
[arms.bare]
tools = ["Bash"]
bootstrap = "Only common text utilities are available."
""",
}
TASKS = {
    "say-hello": """
[tasks.say-hello]
tier = "read"
intent = "Say hello."
required_facts = ["hello"]
""",
    "make-file": """
[tasks.make-file]
tier = "single-mutation"
intent = "Create the file made.txt in the working directory."
""",
    "loop-forever": """
[tasks.loop-forever]
tier = "multi-step"
intent = "Keep listing files."
required_facts = ["never"]
""",
    "stall": """
[tasks.stall]
tier = "read"
intent = "Think for a long time."
required_facts = ["never"]
""",
    "try-foreign": """
[tasks.try-foreign]
tier = "single-mutation"
intent = "Fetch a page."
""",
}
BENCH_TOML = BENCH_HEADER + "".join(ARMS.values()) + "".join(TASKS.values())

CONFTEST = '''
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, Delay, Repeat, ToolUse

SCRIPTS = {
    "say-hello": [Answer("hello from the agent")],
    "make-file": [ToolUse("Bash", {"command": "touch made.txt"}), Answer("made it")],
    "loop-forever": [Repeat(ToolUse("Bash", {"command": "ls"}))],
    "stall": [Delay(60, Answer("too late"))],
    "try-foreign": [
        ToolUse("Bash", {"command": "wget -O leaked.txt http://127.0.0.1:9/"}),
        ToolUse("Bash", {"command": "ls leaked.txt"}),
        Answer("could not fetch"),
    ],
}

def pytest_benchcell_provision(trial):
    (trial.workdir / "provisioned").write_text(trial.arm)
    return Environment(values={"marker": "m1"}, data=trial.agent_cwd)

def pytest_benchcell_teardown(trial, environment):
    with open(TEARDOWN_LOG, "a") as log:
        log.write(f"{trial.arm}-{trial.task}-t{trial.trial}\\n")

def pytest_benchcell_snapshot(trial, environment):
    return sorted(p.name for p in environment.data.iterdir())

def pytest_benchcell_check_state(trial, environment, snapshot):
    expected = ["made.txt"] if trial.task == "make-file" else []
    return [] if snapshot == expected else [f"files: expected {expected}, got {snapshot}"]

def pytest_benchcell_script(trial, environment):
    return SCRIPTS[trial.task]
'''


def write_bench(pytester: pytest.Pytester, bench_toml: str = BENCH_TOML, conftest: str = CONFTEST) -> None:
    pytester.makefile(".toml", bench=textwrap.dedent(bench_toml))
    log = pytester.path / "teardown.log"
    pytester.makeconftest(f"TEARDOWN_LOG = {str(log)!r}\n" + conftest)


def one_trial(pytester: pytest.Pytester, arm: str, task: str) -> tuple[pytest.RunResult, dict]:
    """Run one scripted trial of a cell in-process; return the run and the one sample it stored."""
    import json

    result = pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", "-rA")
    path = pytester.path / "results" / "scripted" / arm / f"{task}.jsonl"
    (sample,) = [json.loads(line) for line in path.read_text().splitlines()]
    return result, sample


def file_bytes(path: Path) -> bytes:
    """A file's content as a reader would see it: transcripts (.gz) decompressed, since a secret
    inside a compressed file is invisible to a search of its raw bytes."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def stored_text(folder: Path) -> str:
    """Every file under a folder (a store), transcripts decompressed: everywhere a secret could be."""
    return "".join(file_bytes(p).decode(errors="replace") for p in sorted(folder.rglob("*")) if p.is_file())
