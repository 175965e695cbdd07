"""Hooks of the example bench (bench.toml): start, seed, check, snapshot, stop and script the tracker.

Every trial gets its own tracker service (bench/tracker/server.py): a process on 127.0.0.1 with
an ephemeral port and a fresh token, seeded through its admin API, read back through the user API
before the agent starts (an independent reader), and stopped at teardown. Mutation tasks are scored
by comparing the whole end state with the seed plus the task's intended change, so a missing change
and any collateral change both fail. The scripted solutions let the bench run offline
(--bench-scripted): they drive the real tools against the real service.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

from tracker import db, service  # noqa: E402  (bench/tracker/)

from pytest_benchcell.environment import Environment  # noqa: E402

DB_FILE = "tracker.db"


def pytest_benchcell_provision(trial):
    data = trial.workdir / "service"  # the service's own files: the answer key, hidden from the agent
    data.mkdir()
    tracker = service.start(data / DB_FILE)
    try:
        tracker.seed()
    except BaseException:  # also Ctrl-C: teardown would get no environment to stop
        tracker.stop()
        raise
    return Environment(
        values={"url": tracker.url, "token": tracker.token, "port": str(tracker.port)},  # fill {url} {token} {port}
        data=tracker,
        secrets=(tracker.token, tracker.admin_token),  # redacted from everything stored
        hidden=(data,),  # the sandbox mounts it empty for the agent's commands
    )


def pytest_benchcell_ready(trial, environment):
    return service.seed_visible(environment.data)  # the whole seed, read with the agent's token


def pytest_benchcell_teardown(trial, environment):
    if environment is not None:
        environment.data.stop()


def pytest_benchcell_snapshot(trial, environment):
    return environment.data.snapshot()


# --- the capability probe: run once per session, before trials are planned ----------------------


# Tasks that ask the agent to assign an issue to itself.
SELF_ASSIGN_TASKS = ("take-question", "triage-perf", "file-crash-report")


def pytest_benchcell_probe(bench):
    """Can a user assign an issue to themselves on this tracker? (The seed's host analogue: may a
    user approve their own pull request.) If not, the tasks that need it are left out of the
    sitting, and the verdict on every sample says why."""
    from pytest_benchcell import Probe

    with tempfile.TemporaryDirectory() as folder:
        tracker = service.start(Path(folder) / DB_FILE)
        try:
            tracker.seed()
            tracker.client().patch_issue(1, assignee=db.CURRENT_USER)
            self_assign = True
        except service.ApiError:
            self_assign = False
        finally:
            tracker.stop()
    return Probe(verdict={"self_assign": self_assign}, drop=() if self_assign else SELF_ASSIGN_TASKS)


# --- scripted solutions (--bench-scripted) ------------------------------------------------------


def pytest_benchcell_script(trial, environment):
    from bench_scripts import script_for  # bench/bench_scripts.py: one solution per (arm, task)

    return script_for(trial.arm, trial.task)
