"""pytest hooks of pytest-benchcell. Hooks and pytest glue only; the work happens in the cores.

Outcome mapping (see the README):
- scored pass                      -> PASSED
- scored incorrect/confused/hung   -> FAILED, "<tag>: <reason>" in the short summary
- invalid (a foreign tool ran)     -> INVALID (letter I), counted apart, never a pass
- harness error                    -> ERROR (letter E), counted apart from agent failures
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from . import hookspecs
from .config import Bench, BenchConfigError, load_bench
from .sample import MODEL_REAL, MODEL_SCRIPTED, STATUS_ERROR, STATUS_INVALID, STATUS_SCORED
from .sitting import (
    CellTally,
    PlannedTrial,
    SittingState,
    new_sitting_id,
    plan_trials,
    resolve_selection,
    scored_count,
    summary_lines,
)
from .store import Cell, Store, StoreError

SITTING_KEY = pytest.StashKey[SittingState]()
STATUS_PROPERTY = "benchcell_status"
WORKER_PLAN_KEY = "benchcell_plan"
CREDENTIAL_HINT = (
    "a real-model sitting needs credentials for the Claude Code CLI: set ANTHROPIC_API_KEY (API "
    "users), or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` (subscription users; an interactive "
    "login in ~/.claude is not visible to the isolated per-trial config), or ANTHROPIC_AUTH_TOKEN with "
    "ANTHROPIC_BASE_URL for a gateway; or run offline with --bench-scripted"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; allowed: a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small; allowed: a whole number >= 1")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchcell", "benchcell: benchmark coding-agent tools one cell at a time")
    group.addoption("--bench-arm", action="append", default=[], dest="bench_arm", metavar="ARM",
                    help="arm(s) to run; repeatable or comma-separated; 'all' selects every arm")
    group.addoption("--bench-task", action="append", default=[], dest="bench_task", metavar="TASK",
                    help="task(s) to run; repeatable or comma-separated; 'all' selects every task")
    group.addoption("--bench-trials", type=_positive_int, default=None, dest="bench_trials", metavar="N",
                    help="new trials per selected cell this sitting (default: [bench] trials, 5)")
    group.addoption("--bench-turn-cap", type=_positive_int, default=None, dest="bench_turn_cap", metavar="N",
                    help="agent turns before a trial counts as confused (default: [bench] turn_cap, 40)")
    group.addoption("--bench-wall-clock-ms", type=_positive_int, default=None, dest="bench_wall_clock_ms",
                    metavar="MS", help="wall-clock backstop per trial; past it the trial is hung (default 300000)")
    group.addoption("--bench-store", default=None, dest="bench_store", metavar="DIR",
                    help="sample store folder (default: [bench] store, bench/results)")
    group.addoption("--bench-config", default=None, dest="bench_config", metavar="PATH",
                    help="the bench definition (default: bench.toml in the rootdir)")
    group.addoption("--bench-scripted", action="store_true", default=False, dest="bench_scripted",
                    help="play the bench's scripted model on 127.0.0.1 instead of a real model (no tokens spent)")  # fmt: skip


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def _bench_requested(config: pytest.Config) -> bool:
    return bool(config.option.bench_arm or config.option.bench_task)


def _load(config: pytest.Config) -> Bench:
    path = config.option.bench_config or (config.rootpath / "bench.toml")
    try:
        return load_bench(Path(path))
    except BenchConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "benchcell: one trial of a benchmark cell (added by pytest-benchcell)")
    if not _bench_requested(config) or config.option.help:
        return
    option = config.option
    if not option.bench_arm or not option.bench_task:
        missing = "--bench-task" if option.bench_arm else "--bench-arm"
        raise pytest.UsageError(f"{missing} is missing: a sitting needs both --bench-arm and --bench-task (or 'all')")
    bench = _load(config)
    try:
        arms = resolve_selection(option.bench_arm, bench.arms, kind="arm", option="--bench-arm")
        tasks = resolve_selection(option.bench_task, bench.tasks, kind="task", option="--bench-task")
    except BenchConfigError as exc:
        raise pytest.UsageError(f"{bench.path}: {exc}") from None
    model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
    collect_only = bool(config.option.collectonly)
    if model_kind == MODEL_REAL and not collect_only and not _has_credentials():
        raise pytest.UsageError(CREDENTIAL_HINT)
    store_root = Path(option.bench_store).resolve() if option.bench_store else bench.store
    store = Store(store_root)
    trials_per_cell = option.bench_trials or bench.trials
    cells = [(arm, task) for arm in arms for task in tasks]
    worker_plan = getattr(config, "workerinput", {}).get(WORKER_PLAN_KEY)
    sitting_id = new_sitting_id()
    try:
        if worker_plan is not None:
            # xdist worker: the controller decided the numbers once for every worker.
            numbers = {(arm, task): trials for arm, task, trials in worker_plan["numbers"]}
            sitting_id = worker_plan["sitting"]
        elif collect_only:
            numbers = {cell: store.preview_trials(Cell(model_kind, *cell), trials_per_cell) for cell in cells}
        else:
            numbers = {
                cell: store.reserve_trials(Cell(model_kind, *cell), trials_per_cell, sitting=sitting_id)
                for cell in cells
            }
    except (StoreError, OSError) as exc:
        raise pytest.UsageError(f"bench store {store_root}: {exc}") from None
    state = SittingState(
        bench=bench,
        store=store,
        model_kind=model_kind,
        sitting_id=sitting_id,
        trials=plan_trials(numbers),
        turn_cap=option.bench_turn_cap or bench.turn_cap,
        wall_clock_ms=option.bench_wall_clock_ms or bench.wall_clock_ms,
        reserved=not collect_only,
    )
    state.extra["numbers"] = [[arm, task, list(trials)] for (arm, task), trials in numbers.items()]
    for arm, task in cells:
        before = scored_count(store, Cell(model_kind, arm, task))
        state.tallies[(arm, task)] = CellTally(arm=arm, task=task, scored_before=before)
    config.stash[SITTING_KEY] = state
    # A sitting runs trials only: the bench file is what gets collected, not the project's tests
    # (which would otherwise be imported and run beside trials that spend tokens).
    config.args[:] = [str(bench.path)]
    config.pluginmanager.register(SittingPlugin(state), "benchcell-sitting")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistBridge(state), "benchcell-xdist")


def _has_credentials() -> bool:
    return any(
        os.environ.get(name)
        for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
    )


class _XdistBridge:
    """Hands the controller's trial numbers to every worker (their collections must be identical)."""

    def __init__(self, state: SittingState) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_PLAN_KEY] = {"sitting": self.state.sitting_id, "numbers": self.state.extra["numbers"]}


class BenchFile(pytest.File):
    """The bench.toml, as the parent of a sitting's trial items (node ids: bench.toml::ARM-TASK-tN)."""

    def collect(self) -> list[pytest.Item]:
        state = self.config.stash[SITTING_KEY]
        return [TrialItem.from_parent(self, name=planned.item_name, planned=planned) for planned in state.trials]


def _outcome_exception(tag: str) -> type[BaseException]:
    # pytest prints an exception as "<name>: <message>" in the short summary and omits the module
    # of classes that claim to be builtins (as pytest's own Failed does). Naming the class after
    # the outcome makes the line read "FAILED ...-t3 - confused: turn cap of 40 reached".
    return type(tag, (pytest.fail.Exception,), {"__module__": "builtins", "__doc__": f"A trial that ended {tag}."})


TRIAL_EXCEPTIONS = {tag: _outcome_exception(tag) for tag in ("incorrect", "confused", "hung", "invalid", "error")}


class TrialItem(pytest.Item):
    """One new trial of one cell."""

    def __init__(self, *, planned: PlannedTrial, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.add_marker(pytest.mark.benchcell)

    def runtest(self) -> None:
        from .trial import TrialSpec, run_trial  # the SDK is imported only when a trial runs

        state = self.config.stash[SITTING_KEY]
        spec = TrialSpec(
            bench=state.bench,
            arm=self.planned.arm,
            task=self.planned.task,
            trial=self.planned.trial,
            model_kind=state.model_kind,
            sitting=state.sitting_id,
            turn_cap=state.turn_cap,
            wall_clock_ms=state.wall_clock_ms,
            store=state.store,
        )
        sample = run_trial(spec, self.ihook)
        self.user_properties.append((STATUS_PROPERTY, sample["status"]))
        self.user_properties.append(("benchcell_outcome", sample["outcome"]))
        self.user_properties.append(("benchcell_sample", sample["id"]))
        self.user_properties.append(("benchcell_cell", [self.planned.arm, self.planned.task]))
        if sample["status"] == STATUS_SCORED and sample["outcome"] == "pass":
            return
        tag = sample["outcome"] if sample["status"] == STATUS_SCORED else sample["status"]
        raise TRIAL_EXCEPTIONS[tag](sample["reason"], pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"trial {self.planned.trial} of {self.planned.arm} x {self.planned.task}"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    if report.when != "call" or not report.failed:
        return None
    status = dict(report.user_properties).get(STATUS_PROPERTY)
    if status == STATUS_INVALID:
        return "invalid", "I", "INVALID"
    if status == STATUS_ERROR:
        return "error", "E", "ERROR"
    return None




class SittingPlugin:
    """The hooks that only matter during a sitting, registered only then (off, they cost nothing)."""

    def __init__(self, state: SittingState) -> None:
        self.state = state

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        state = self.state
        return [
            f"benchcell: bench {state.bench.name} ({state.bench.path}), {state.bench.model} ({state.model_kind} model)",
            f"benchcell: store {state.store.root / state.model_kind}, sitting {state.sitting_id}",
        ]

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path == self.state.bench.path:
            return BenchFile.from_parent(parent, path=file_path)
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for xdist workers' reports too, so the tally is complete there.
        if report.when != "call":
            return
        properties = dict(report.user_properties)
        status = properties.get(STATUS_PROPERTY)
        cell = properties.get("benchcell_cell")
        if status is None or cell is None:
            return
        tally = self.state.tallies.get(tuple(cell))
        if tally is not None:
            tally.count(status, properties.get("benchcell_outcome"))

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            return
        state = self.state
        for (arm, task), tally in state.tallies.items():
            tally.scored_after = scored_count(state.store, Cell(state.model_kind, arm, task))
        title = "benchcell sitting" if state.reserved else "benchcell sitting (collect-only: nothing ran or was reserved)"
        terminalreporter.write_sep("=", title)
        lines = summary_lines(state.bench, list(state.tallies.values()), str(state.store.root / state.model_kind), state.bench.floor)
        for line in lines:
            terminalreporter.write_line(line)
