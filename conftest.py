"""Hooks of the example bench (bench.toml): seed, snapshot, check and script the issue tracker.

Every trial gets a freshly seeded SQLite tracker in its own workdir. Mutation tasks are scored by
comparing the whole end state with the seed plus the task's intended change, so a missing change
and any collateral change both fail. The scripted solutions let the bench run offline
(--bench-scripted): they drive the real tools, so a scripted run really changes the database.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

from tracker import db  # noqa: E402  (bench/tracker/db.py)

from pytest_benchcell.environment import Environment  # noqa: E402

DB_FILE = "tracker.db"


def pytest_benchcell_provision(trial):
    path = trial.workdir / DB_FILE
    db.seed(path)
    return Environment(values={"db": str(path)}, data=path)  # {db} fills the arms' TRACKER_DB


def pytest_benchcell_teardown(trial, environment):
    if environment is not None:
        environment.data.unlink(missing_ok=True)


def pytest_benchcell_snapshot(trial, environment):
    return db.snapshot(environment.data)


# --- the capability probe: run once per session, before trials are planned ----------------------


def pytest_benchcell_probe(bench):
    """Can a user assign an issue to themselves on this tracker? (The seed's host analogue: may a
    user approve their own pull request.) If not, triage-perf is swapped for its variant."""
    from pytest_benchcell import Probe

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / DB_FILE
        db.seed(path)
        try:
            db.assign(path, 1, db.CURRENT_USER)
            self_assign = True
        except db.TrackerError:
            self_assign = False
    return Probe(
        verdict={"self_assign": self_assign},
        swap={} if self_assign else {"triage-perf": "triage-perf-no-assign"},
        drop=("triage-perf-no-assign",) if self_assign else (),  # the variant only replaces triage-perf
    )


# --- scripted solutions (--bench-scripted): one list of steps per (arm, task) ---------------------


def pytest_benchcell_script(trial, environment):
    from pytest_benchcell.scripted import Answer, ToolUse  # only needed for scripted runs

    def sh(command):
        return ToolUse("Bash", {"command": command})

    def tool(name, **arguments):
        return ToolUse(f"mcp__tracker__{name}", arguments)  # Claude Code's name for an MCP tool

    answers = {
        "export-open-csv": Answer("The CSV export of the open issues has 5 data rows."),
        "triage-perf-no-assign": Answer('Issue #5 now has the performance label and the comment "Profiling this week."'),
        "count-open": Answer("There are 5 open issues."),
        "close-export": Answer("Closed issue #2 (CSV export drops the last row)."),
        "label-crash-dialog": Answer('Added the bug label to issue #4, "App quits when I open Preferences".'),
        "triage-perf": Answer(
            "Issue #5 (search is slow) now has the performance label, is assigned to me "
            'and has the comment "Profiling this week."'
        ),
    }
    comment = "tracker comment 5 --body 'Profiling this week.'"
    scripts = {
        # The skill documents the commands, so this arm goes straight to work.
        "cli-skill": {
            "count-open": [sh("tracker list --state open")],
            "export-open-csv": [sh("tracker export --state open | tail -n +2 | wc -l")],
            "triage-perf-no-assign": [sh(f"tracker label 5 --add performance && {comment}")],
            "close-export": [sh("tracker close 2")],
            "label-crash-dialog": [sh("tracker list --state open"), sh("tracker label 4 --add bug")],
            "triage-perf": [
                sh("tracker list --state open"),
                sh(f"tracker label 5 --add performance && tracker assign 5 --to me && {comment}"),
            ],
        },
        # Without the skill the agent first learns the commands from --help.
        "cli-bare": {
            "count-open": [sh("tracker --help"), sh("tracker list")],
            "export-open-csv": [sh("tracker --help"), sh("tracker export --help"), sh("tracker export | tail -n +2 | wc -l")],
            "triage-perf-no-assign": [sh("tracker --help"), sh("tracker label 5 --add performance"), sh(comment)],
            "close-export": [sh("tracker --help"), sh("tracker close 2")],
            "label-crash-dialog": [
                sh("tracker --help"),
                sh("tracker list"),
                sh("tracker label --help"),
                sh("tracker label 4 --add bug"),
            ],
            "triage-perf": [
                sh("tracker --help"),
                sh("tracker list"),
                sh("tracker label --help && tracker assign --help && tracker comment --help"),
                sh("tracker label 5 --add performance"),
                sh("tracker assign 5 --to me"),
                sh(comment),
            ],
        },
        # MCP tools describe themselves: no exploring, but one call per change.
        "mcp": {
            "count-open": [tool("list_issues", state="open")],
            "triage-perf-no-assign": [
                tool("add_label", number=5, label="performance"),
                tool("comment_issue", number=5, body="Profiling this week."),
            ],
            "close-export": [tool("close_issue", number=2)],
            "label-crash-dialog": [tool("list_issues", state="open"), tool("add_label", number=4, label="bug")],
            "triage-perf": [
                tool("list_issues", state="open"),
                tool("add_label", number=5, label="performance"),
                tool("assign_issue", number=5, user="me"),
                tool("comment_issue", number=5, body="Profiling this week."),
            ],
        },
    }
    steps = scripts.get(trial.arm, {}).get(trial.task)
    return None if steps is None else [*steps, answers[trial.task]]
