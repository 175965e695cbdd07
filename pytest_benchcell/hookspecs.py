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

    from .config import Bench
    from .environment import Environment, Probe, TrialInfo
    from .scripted import Step

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_benchcell_provision(trial: TrialInfo) -> Environment | None:
    """Set up and seed a fresh environment for one trial, and return it.

    Called before the agent starts, and once per arm with a shell before a sitting, with trial number
    0, by the pre-flight (preflight.py). Raise to record the trial as a harness `error` (never as an
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
def pytest_benchcell_ready(trial: TrialInfo, environment: Environment) -> bool | None:
    """Is the freshly seeded environment visible to an independent reader yet?

    Polled after provisioning (every 0.5 s) until it returns True, for at most [bench]
    ready_timeout_ms; a timeout records the trial as `error` (a slow host is never an agent
    failure). Return None (or do not implement it) when there is nothing to wait for.

    Example::

        def pytest_benchcell_ready(trial, environment):
            return search_index_has(environment.data, "Fix crash on startup")
    """


@hookspec(firstresult=True)
def pytest_benchcell_probe(bench: Bench) -> Probe | None:
    """Probe the system under test once per session, before trials are planned.

    The verdict is recorded on every sample of the sitting; `drop` removes tasks from the
    selection and `swap` replaces a task by a variant (for example a self-review task by a
    comment-review task on a host that forbids approving your own pull request).

    Example::

        def pytest_benchcell_probe(bench):
            allowed = host_allows_self_approval()
            return Probe(verdict={"self_review": allowed},
                         swap={} if allowed else {"approve-pr": "comment-pr"})
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
def pytest_benchcell_expected_state(trial: TrialInfo, environment: Environment | None, ground_truth: Any) -> Any:
    """The end state the task expects, when bench.toml's `changes` cannot express it.

    `ground_truth` is the snapshot taken after provisioning, before the agent ran. Without this
    hook the expected state is the ground truth with the task's declared `changes` applied.
    `environment` is None when stored samples are re-scored (--bench-rescore).

    Example::

        def pytest_benchcell_expected_state(trial, environment, ground_truth):
            if trial.task == "create-issue":
                return {**ground_truth, "issues": ground_truth["issues"] + [NEW_ISSUE]}
    """


@hookspec(firstresult=True)
def pytest_benchcell_check_state(
    trial: TrialInfo, environment: Environment | None, snapshot: Any, expected: Any
) -> Sequence[str] | None:
    """Compare the end state with the expected one yourself; return the differences ([] = pass).

    Without this hook the built-in full-state diff (checker.diff_states with the [checker]
    policy) is used. `environment` is None when stored samples are re-scored.

    Example::

        def pytest_benchcell_check_state(trial, environment, snapshot, expected):
            return my_diff(expected, snapshot)
    """


@hookspec(firstresult=True)
def pytest_benchcell_score(
    trial: TrialInfo, answer: str, ground_truth: Any, snapshot: Any
) -> Sequence[str] | None:
    """Score a task entirely yourself: return its differences ([] = pass), or None to let the
    built-in checker (facts, then state) decide. Also used by --bench-rescore.

    Example::

        def pytest_benchcell_score(trial, answer, ground_truth, snapshot):
            if trial.task == "summarize":
                return [] if len(answer.split()) <= 50 else ["summary longer than 50 words"]
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
