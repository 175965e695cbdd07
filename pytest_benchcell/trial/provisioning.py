"""A trial's folders and environment: provisioned and made ready by the bench's hooks, its snapshots,
and torn down and removed (whatever the agent left) with an interrupt noted, never lost."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import leftovers
from ..config import Bench
from ..environment import Environment, TrialInfo
from .spec import HarnessError, TrialSpec, _call_hook

READY_POLL_S = 0.5


def _tear_down(
    hooks: Any, info: TrialInfo | None, environment: Environment | None, workdir: Path | None, sample: dict[str, Any]
) -> BaseException | None:
    """The bench's teardown, then the trial's folders removed. Nothing escapes from here before the
    sample is recorded: an interrupt (Ctrl-C, a pytest-timeout) is noted in the reason and returned,
    to be passed on after the record. The folders hold what the agent left (deep trees, links out,
    FIFOs): leftovers.remove_tree never follows a link, has no depth limit and a time limit, and
    what it could not remove is kept in the sample's `leftovers`."""
    interrupted: BaseException | None = None
    if info is not None:
        try:
            _call_hook(hooks.pytest_benchcell_teardown, trial=info, environment=environment)
        except HarnessError as exc:
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"teardown: {exc}") if part)
        except BaseException as exc:  # noqa: BLE001 - recorded below, re-raised by run_trial
            interrupted = exc
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"teardown interrupted: {_interruption(exc)}") if part)
    if workdir is not None:
        try:
            removal = leftovers.remove_tree(workdir)
        except BaseException as exc:  # noqa: BLE001 - an interrupt mid-removal: recorded, then passed on
            interrupted = interrupted or exc
            removal = leftovers.Removal(str(workdir), 0, (".: the removal was interrupted",), 1)
        if not removal.complete:
            sample["leftovers"] = removal.as_dict()
    return interrupted


def _trial_folders(spec: TrialSpec) -> tuple[Path, TrialInfo]:
    return trial_folders(spec.bench, spec.arm, spec.task, spec.trial, spec.model_kind)


def trial_folders(bench: Bench, arm: str, task: str, trial: int, model_kind: str) -> tuple[Path, TrialInfo]:
    """A fresh folder per trial: the environment's workdir and the agent's empty cwd inside it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"benchcell-{arm}-{task}-t{trial}-"))
    info = TrialInfo(
        arm=arm,
        task=task,
        tier=bench.tasks[task].tier,
        trial=trial,
        model_kind=model_kind,
        workdir=workdir / "environment",
        agent_cwd=workdir / "cwd",
    )
    info.workdir.mkdir()
    info.agent_cwd.mkdir()
    return workdir, info


def _provision(hooks: Any, info: TrialInfo) -> Environment:
    environment = _call_hook(hooks.pytest_benchcell_provision, trial=info) or Environment()
    if not isinstance(environment, Environment):
        raise HarnessError(
            f"pytest_benchcell_provision returned {type(environment).__name__}; allowed: "
            f"pytest_benchcell.Environment(values=..., data=..., secrets=...) or None"
        )
    return environment


@contextlib.contextmanager
def provisioned(
    bench: Bench, arm: str, task: str, trial: int, model_kind: str, hooks: Any
) -> Iterator[tuple[TrialInfo, Environment, Path, dict[str, str]]]:
    """A trial's environment outside a trial (the pre-flight's): its folders, provisioned by the
    bench's hooks and ready; torn down and removed afterwards, whatever happened. Yields (info,
    environment, the trial's folder, the placeholder values). The bench's hooks failing (teardown
    too) raise HarnessError."""
    workdir, info = trial_folders(bench, arm, task, trial, model_kind)
    environment: Environment | None = None
    noted: dict[str, Any] = {"reason": ""}
    try:
        environment = _provision(hooks, info)
        _wait_until_ready(hooks, info, environment, bench.ready_timeout_ms)
        yield info, environment, workdir, trial_values(bench, info, environment)
    finally:
        interrupted = _tear_down(hooks, info, environment, workdir, noted)
        if interrupted is not None:
            raise interrupted
    if noted["reason"]:
        raise HarnessError(noted["reason"])


def trial_values(bench: Bench, info: TrialInfo, environment: Environment) -> dict[str, str]:
    """The values that fill {placeholders}: the built-ins and the provision hook's."""
    return {
        "python": sys.executable,
        "bench_root": str(bench.root),
        "cwd": str(info.agent_cwd),
        **{str(k): str(v) for k, v in environment.values.items()},
    }


def _interruption(exc: BaseException) -> str:
    """Why a trial was cut short, in words (the sample's reason)."""
    if isinstance(exc, KeyboardInterrupt):
        return f"{exc} during the trial" if str(exc) else "Ctrl-C during the trial"
    text = str(exc).strip() or type(exc).__name__
    return f"{text} (during the trial)" if text.lower().startswith("timeout") else f"{type(exc).__name__}: {text}"


def _snapshot(hooks: Any, info: TrialInfo, environment: Environment) -> Any:
    snapshot = _call_hook(hooks.pytest_benchcell_snapshot, trial=info, environment=environment)
    if snapshot is None:
        raise HarnessError(
            f"task {info.task!r} has check_state = true but no pytest_benchcell_snapshot hook returned a state"
        )
    return snapshot


def _wait_until_ready(hooks: Any, info: TrialInfo, environment: Environment, timeout_ms: int) -> None:
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        ready = _call_hook(hooks.pytest_benchcell_ready, trial=info, environment=environment)
        if ready is None or ready:
            return
        if time.monotonic() >= deadline:
            raise HarnessError(f"the environment was not ready after {timeout_ms} ms (pytest_benchcell_ready)")
        time.sleep(READY_POLL_S)
