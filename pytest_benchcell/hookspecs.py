"""Hooks a bench implements in its conftest.py.

The plugin adds these specs in `pytest_addhooks`; implement them as plain functions in conftest.py
(no decorator needed) and pytest's pluggy manager calls them for every trial. All are called with
keyword arguments, so an implementation may accept only the arguments it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .environment import Environment, TrialInfo
    from .scripted import Step

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_benchcell_provision(trial: TrialInfo) -> Environment | None:
    """Set up and seed a fresh environment for one trial, and return it.

    Called before the agent starts. Raise to record the trial as a harness `error` (never as an
    agent failure). Whatever is created here is released in `pytest_benchcell_teardown`, which runs even
    when this hook raises half-way, when the agent fails, and on Ctrl-C.

    Example::

        def pytest_benchcell_provision(trial):
            db = trial.workdir / "tracker.db"
            seed_tracker(db)
            return Environment(values={"db": str(db)}, data=db)
    """


@hookspec
def pytest_benchcell_teardown(trial: TrialInfo, environment: Environment | None) -> None:
    """Release what provisioning created. Always runs; `environment` is None if provisioning failed.

    Example::

        def pytest_benchcell_teardown(trial, environment):
            if environment is not None:
                environment.data.unlink(missing_ok=True)
    """


@hookspec(firstresult=True)
def pytest_benchcell_snapshot(trial: TrialInfo, environment: Environment) -> Any:
    """Return the environment's end state as JSON-like data (dicts, lists, strings, numbers).

    Called after the agent stopped, for tasks with `check_state = true`. The snapshot is handed to
    `pytest_benchcell_check_state`.

    Example::

        def pytest_benchcell_snapshot(trial, environment):
            return {"issues": read_issues(environment.data)}
    """


@hookspec(firstresult=True)
def pytest_benchcell_check_state(trial: TrialInfo, environment: Environment, snapshot: Any) -> Sequence[str] | None:
    """Compare the end state with the one the task expects; return the differences ([] = pass).

    Example::

        def pytest_benchcell_check_state(trial, environment, snapshot):
            expected = expected_state(trial.task)
            return checker.diff_states(expected, snapshot)
    """


@hookspec(firstresult=True)
def pytest_benchcell_script(trial: TrialInfo, environment: Environment) -> Sequence[Step] | None:
    """The scripted model's steps for this trial (only used with --bench-scripted).

    Return None to play no steps (the scripted model then answers "(script exhausted)").

    Example::

        from pytest_benchcell.scripted import Answer, ToolUse

        def pytest_benchcell_script(trial, environment):
            if trial.arm == "cli" and trial.task == "count-open":
                return [ToolUse("Bash", {"command": "tracker list --state open"}), Answer("3 open")]
    """


@hookspec
def pytest_benchcell_update_sample(trial: TrialInfo, sample: dict[str, Any]) -> None:
    """Add fields to a sample just before it is stored (mutate `sample` in place).

    Example::

        def pytest_benchcell_update_sample(trial, sample):
            sample["host_version"] = "gitea 1.22.3"
    """
