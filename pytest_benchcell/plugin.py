"""pytest hooks of pytest-benchcell. Hooks and pytest glue only; the work happens in the cores.

Outcome mapping (see the README):
- scored pass                      -> PASSED
- scored incorrect/confused/hung   -> FAILED, "<tag>: <reason>" in the short summary
- invalid (a foreign tool ran)     -> INVALID (letter I), counted apart, never a pass
- harness error                    -> ERROR (letter E), counted apart from agent failures

Cheap when unused: pytest imports this module in every run of every project that has the plugin
installed, so it imports nothing of its own at module level but the hook specifications; the cores
(config, store, sitting, filelock, the SDK) are imported only once a bench option asks for them.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import hookspecs

if TYPE_CHECKING:
    from .allocation import DecidePlan
    from .config import Bench
    from .sitting import PlannedTrial, SittingState
    from .store import Store

# Mirrors of sample.py's constants (importing it here would cost every unrelated pytest run).
MODEL_REAL, MODEL_SCRIPTED = "real", "scripted"
STATUS_SCORED, STATUS_INVALID, STATUS_ERROR = "scored", "invalid", "error"

SITTING_KEY = pytest.StashKey["SittingState"]()
STATUS_PROPERTY = "benchcell_status"
PROGRESS_PROPERTY = "benchcell_progress"
COST_PROPERTY = "benchcell_cost"
REASON_PROPERTY = "benchcell_reason"
BLOCKED_PROPERTY = "benchcell_sandbox_blocked"
API_ERROR_PROPERTY = "benchcell_api_error"  # the sample's api_error: the model API ended the trial
UNMETERED_PROPERTY = "benchcell_unmetered"  # replies came without usage
WORKER_PLAN_KEY = "benchcell_plan"
# pytest-timeout's limit for a trial item, on top of its readiness bound and wall-clock backstop:
# provisioning, the CLI's start, scoring and teardown. A global --timeout never cuts a trial short.
TRIAL_TIMEOUT_MARGIN_S = 120
HTML_EXTRA_HINT = (
    "HTML reports draw their plots with matplotlib, part of the optional extra [html]: "
    "pip install 'pytest-benchcell[html]'"
)
CREDENTIAL_HINT = (
    "a real-model sitting needs credentials for the Claude Code CLI: set ANTHROPIC_API_KEY (API "
    "users), or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` (subscription users; an interactive "
    "login in ~/.claude is not visible to the isolated per-trial config), or ANTHROPIC_AUTH_TOKEN with "
    "ANTHROPIC_BASE_URL for a gateway; or run offline with --bench-scripted"
)


def _positive_int(text: str) -> int:
    from .config import positive_int  # imported when the option is used, not by every pytest run

    return positive_int(text)


def _trials_per_cell(text: str) -> int:
    import argparse

    from .sitting import MAX_TRIALS_PER_CELL

    value = _positive_int(text)
    if value > MAX_TRIALS_PER_CELL:
        raise argparse.ArgumentTypeError(f"{value} is too large; allowed: a whole number from 1 to {MAX_TRIALS_PER_CELL:,}")
    return value


FILL_DECIDE = "decide"


def _fill_target(text: str) -> int | str:
    """--bench-fill's value: a number of scored samples per cell, or `decide` (allocation.py)."""
    import argparse

    if text == FILL_DECIDE:
        return text
    try:
        return _trials_per_cell(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or {FILL_DECIDE}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("bench_config", "pytest-benchcell: the bench definition (relative to this ini file)", default="")
    group = parser.getgroup("benchcell", "benchcell: benchmark coding-agent tools one cell at a time")
    group.addoption("--bench-arm", action="append", default=[], dest="bench_arm", metavar="ARM",
                    help="arm(s) to run; repeatable or comma-separated; 'all' selects every arm")
    group.addoption("--bench-task", action="append", default=[], dest="bench_task", metavar="TASK",
                    help="task(s) to run; repeatable or comma-separated; 'all' selects every task")
    group.addoption("--bench-trials", type=_trials_per_cell, default=None, dest="bench_trials", metavar="N",
                    help="new trials per selected cell this sitting (default: [bench] trials, 5)")
    group.addoption("--bench-turn-cap", type=_positive_int, default=None, dest="bench_turn_cap", metavar="N",
                    help="agent turns before a trial counts as confused (default: [bench] turn_cap, 40); with --bench-report: "
                         "report the samples made under this cap")
    group.addoption("--bench-wall-clock-ms", type=_positive_int, default=None, dest="bench_wall_clock_ms",
                    metavar="MS", help="wall-clock backstop per trial; past it the trial is hung (default 300000); with "
                         "--bench-report: report the samples made under this backstop")
    group.addoption("--bench-store", default=None, dest="bench_store", metavar="DIR",
                    help="sample store folder, relative to the current directory (default: [bench] store, relative to "
                         "bench.toml)")
    group.addoption("--bench-config", default=None, dest="bench_config", metavar="PATH",
                    help="the bench definition, relative to the current directory (default: ini bench_config, else the "
                         "first bench.toml from the current directory upwards, else in the rootdir)")
    group.addoption("--bench-fill", type=_fill_target, nargs="?", const=0, default=None, dest="bench_fill",
                    metavar="N|decide", help="run only the trials each cell needs to reach N scored samples (default N: "
                    "the floor); 'decide': only trials that advance a comparison still undecided (see the README)")
    group.addoption("--bench-budget", type=_positive_int, default=None, dest="bench_budget", metavar="TOKENS",
                    help="stop starting trials once this sitting spent this many cost-equivalent tokens")
    group.addoption("--bench-rescore", action="store_true", default=False, dest="bench_rescore",
                    help="score the stored samples of the selected cells again with the current checker (no trials, "
                         "no model calls); changed verdicts are appended as rescore records")
    group.addoption("--bench-report", action="store_true", default=False, dest="bench_report",
                    help="render the store as report tables (no trials run); narrow it with --bench-arm/--bench-task")
    group.addoption("--bench-report-md", default=None, dest="bench_report_md", metavar="PATH",
                    help="also write the report as Markdown (implies --bench-report)")
    group.addoption("--bench-report-json", default=None, dest="bench_report_json", metavar="PATH",
                    help="also write the report as JSON (implies --bench-report)")
    group.addoption("--bench-report-html", default=None, dest="bench_report_html", metavar="PATH",
                    help="also write a self-contained HTML report with plots (implies --bench-report)")
    group.addoption("--bench-report-store", action="append", default=[], dest="bench_report_store", metavar="DIR",
                    help="also read this store into the report, as one with the bench's store (repeatable; each "
                         "sample id counted once)")
    group.addoption("--bench-weights", default=None, dest="bench_weights", metavar="SPEC",
                    help="cost-equivalent weights for the report, e.g. cache_read=0.1,output=5 (default: [pricing])")
    group.addoption("--bench-scripted", action="store_true", default=False, dest="bench_scripted",
                    help="play the bench's scripted model on 127.0.0.1 instead of a real model (no tokens spent)")  # fmt: skip


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def _bench_requested(config: pytest.Config) -> bool:
    return bool(config.option.bench_arm or config.option.bench_task)


BENCH_CONFIG_ALLOWED = "a bench.toml file"


def bench_location(config: pytest.Config) -> tuple[Path, str | None]:
    """Where the bench file is, whatever pytest guessed as its rootdir (pytest picks it from argument
    values that are existing paths before it knows our options), and where that was said:
    --bench-config, then the ini key bench_config, then the first bench.toml from the invocation
    directory upwards, then the rootdir (these last two: None, the file was found, not named)."""
    invocation = config.invocation_params.dir
    option = config.option.bench_config
    if option is not None:
        if not option.strip():
            raise pytest.UsageError(f"--bench-config {option!r} is empty; allowed: the path of {BENCH_CONFIG_ALLOWED}")
        return (invocation / option).resolve(), f"--bench-config {option}"
    configured = str(config.getini("bench_config"))
    if configured:
        base = config.inipath.parent if config.inipath else config.rootpath
        where = f" in {config.inipath}" if config.inipath else ""
        return (base / configured).resolve(), f"ini key bench_config = {configured!r}{where}"
    for folder in (invocation, *invocation.parents):
        if (folder / "bench.toml").is_file():
            return folder / "bench.toml", None
    return config.rootpath / "bench.toml", None


def _load(config: pytest.Config) -> Bench:
    from .config import BenchConfigError, load_bench

    path, source = bench_location(config)
    if source is not None and not path.is_file():
        what = "is a folder" if path.is_dir() else "no such bench file" if not path.exists() else "not a regular file"
        raise pytest.UsageError(f"{source}: {path}: {what}; allowed: the path of {BENCH_CONFIG_ALLOWED} (see the README)")
    try:
        return load_bench(path)
    except BenchConfigError as exc:
        if source is not None or path.exists():
            raise pytest.UsageError(str(exc)) from None
        raise pytest.UsageError(
            f"no bench.toml in {config.invocation_params.dir} or its parents, nor in the rootdir "
            f"{config.rootpath}; create one (see the README), or name it with --bench-config PATH or the "
            f"ini key bench_config"
        ) from None


STORE_ALLOWED = "a folder this user can write (created if missing)"


def _store_source(config: pytest.Config, bench: Bench) -> str:
    option = config.option.bench_store
    return f"--bench-store {option}" if option else f"[bench] store in {bench.path}"


def _store(config: pytest.Config, bench: Bench, *, write: bool) -> Store:
    """The sample store: --bench-store relative to the invocation directory, [bench] store relative
    to bench.toml. An unusable one is refused with where the value came from and what is allowed."""
    from .store import Store

    option = config.option.bench_store
    root = (config.invocation_params.dir / option).resolve() if option else bench.store
    source = _store_source(config, bench)
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"{source}: {root} is a file, not a folder; allowed: {STORE_ALLOWED}")
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), None)
    if existing is not None and not existing.is_dir():
        raise pytest.UsageError(f"{source}: {root} cannot be created: {existing} is a file; allowed: {STORE_ALLOWED}")
    if write and existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        what = "the store" if existing == root else f"its parent {existing}"
        raise pytest.UsageError(f"{source}: {root}: {what} is read-only for this user; allowed: {STORE_ALLOWED}")
    return Store(root)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "benchcell: one trial of a benchmark cell (added by pytest-benchcell)")
    if config.option.help:
        return
    if config.option.bench_rescore:
        _refuse_weights_outside_reports(config)
        config.pluginmanager.register(RescorePlugin(config, _load(config)), "benchcell-rescore")
        return
    option = config.option
    if (option.bench_report or option.bench_report_md or option.bench_report_json or option.bench_report_html
            or option.bench_report_store):
        _refuse_unusable_outputs(config)
        if option.bench_report_html:
            _require_extra("matplotlib", HTML_EXTRA_HINT)  # before any report file is written
        config.pluginmanager.register(ReportPlugin(config, _load(config)), "benchcell-report")
        return
    if not _bench_requested(config):
        return
    _refuse_weights_outside_reports(config)
    try:
        state = _plan_sitting(config)
    except pytest.UsageError as exc:
        if WORKER_PLAN_KEY not in getattr(config, "workerinput", {}):
            raise
        from .remote import REFUSAL_PREFIX  # the controller names this worker's gateway and stops

        raise pytest.UsageError(f"{REFUSAL_PREFIX}{exc}") from None
    config.stash[SITTING_KEY] = state
    # A sitting runs trials only: the bench file is what gets collected, not the project's tests
    # (which would otherwise be imported and run beside trials that spend tokens).
    config.args[:] = [str(state.bench.path)]
    config.pluginmanager.register(SittingPlugin(state, config), "benchcell-sitting")
    if WORKER_PLAN_KEY in getattr(config, "workerinput", {}):
        config.pluginmanager.register(_XdistWorker(state, config), "benchcell-xdist-worker")
    elif config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistBridge(state, config), "benchcell-xdist")


REPORT_OUTPUTS = ("--bench-report-md", "--bench-report-json", "--bench-report-html")


def _report_target(config: pytest.Config, path: str) -> Path:
    return config.invocation_params.dir / path  # relative to where pytest was started


def _refuse_unusable_outputs(config: pytest.Config) -> None:
    """Every report file can be written, checked before the store is read."""
    from .cli import unusable_output

    for name in REPORT_OUTPUTS:
        value = getattr(config.option, name[2:].replace("-", "_"))
        problem = unusable_output(_report_target(config, value)) if value else None
        if problem:
            raise pytest.UsageError(f"{name} {value}: {problem}")


def _require_extra(module: str, hint: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise pytest.UsageError(hint)


def _refuse_weights_outside_reports(config: pytest.Config) -> None:
    if config.option.bench_weights is not None:
        raise pytest.UsageError(
            f"--bench-weights {config.option.bench_weights!r}: weights apply to reports only (--bench-report, "
            f"--bench-report-md/-json/-html); a sitting stores raw token counts and reports weigh them"
        )


def _plan_sitting(config: pytest.Config) -> SittingState:
    from .sitting import CellTally, SittingState, SittingStop, new_sitting_id, plan_trials
    from .store import Cell, StoreError

    option = config.option
    if not option.bench_arm or not option.bench_task:
        missing = "--bench-task" if option.bench_arm else "--bench-arm"
        raise pytest.UsageError(f"{missing} is missing: a sitting needs both --bench-arm and --bench-task (or 'all')")
    worker_plan = getattr(config, "workerinput", {}).get(WORKER_PLAN_KEY)
    bench = _load(config) if worker_plan is None else _load_worker_bench(config, worker_plan)
    arms, tasks = _selection(bench, option.bench_arm, option.bench_task)
    if option.bench_fill not in (None, FILL_DECIDE) and option.bench_trials is not None:
        raise pytest.UsageError("--bench-fill and --bench-trials exclude each other: fill decides the trials per cell")
    probe = worker_plan["probe"] if worker_plan else _run_probe(config, bench)
    if probe is not None:
        tasks = _apply_probe(bench, tasks, probe)
    model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
    collect_only = bool(option.collectonly)
    if model_kind == MODEL_REAL and not collect_only and not _has_credentials():
        raise pytest.UsageError(CREDENTIAL_HINT)
    from .isolation.exec_audit import INSTALL_HINT, audit_state  # stdlib only: no SDK, no bashlex

    watches_bash = any("Bash" in bench.arms[arm].tools for arm in arms)
    tracer = audit_state(bench.exec_audit, watches_bash=watches_bash, no_bash="no selected arm has a Bash tool")
    exec_audit = tracer.describe()  # the header line: "on (strace 6.1, ...)" or "off (why)"
    # Required means every Bash command is watched: a sitting with no Bash arm has nothing to refuse,
    # as each trial of such an arm is not refused either (trial._exec_audit).
    if bench.exec_audit == "required" and watches_bash and not tracer.available and not collect_only:
        raise pytest.UsageError(
            f'{bench.path}: [bench] exec_audit = "required", but the execution audit cannot run here '
            f'({tracer.reason}): {INSTALL_HINT}; or set exec_audit = "auto"'
        )
    from .isolation import sandbox as sandbox_module  # stdlib only

    boundary = sandbox_module.sandbox_state(bench.sandbox, watches_bash=watches_bash, no_bash="no selected arm has a Bash tool")
    if bench.sandbox == "required" and watches_bash and not boundary.available and not collect_only:
        raise pytest.UsageError(
            f'{bench.path}: [bench] sandbox = "required", but the sandbox cannot run here '
            f'({boundary.reason}): {sandbox_module.INSTALL_HINT}; or set sandbox = "auto"'
        )
    cells = [(arm, task) for arm in arms for task in tasks if bench.tasks[task].applies_to(arm)]
    if not cells:
        only = "; ".join(f"task {task} is only for arms {', '.join(bench.tasks[task].arms)}" for task in tasks)
        raise pytest.UsageError(
            f"--bench-arm {','.join(arms)} --bench-task {','.join(tasks)}: no selected task applies to a selected "
            f"arm ({only}; [tasks.*] arms in {bench.path}); select an arm the task is for"
        )
    _refuse_too_many_trials(option, bench)
    turn_cap = option.bench_turn_cap or bench.turn_cap
    wall_clock_ms = option.bench_wall_clock_ms or bench.wall_clock_ms
    # A worker records into a spool of its own; its samples reach the store through the controller.
    if worker_plan is None:
        store = _store(config, bench, write=not collect_only)
    else:
        store = _worker_spool(config, bench, worker_plan, turn_cap, wall_clock_ms)
    store.expect_root()
    definitions = {cell: bench.definition(*cell, turn_cap=turn_cap, wall_clock_ms=wall_clock_ms) for cell in cells}
    sitting_id = worker_plan["sitting"] if worker_plan else new_sitting_id()
    preflight_notes: list[str] = []  # the pre-flight's summary lines (run here only for an xdist controller)
    try:
        if worker_plan is not None:
            # xdist worker: the controller decided the numbers once for every worker, because the
            # workers' collections must be identical while other sittings may append meanwhile.
            numbers = {(arm, task): trials for arm, task, trials in worker_plan["numbers"]}
            if not collect_only and worker_plan.get("bench_path") != str(bench.path):
                # Another checkout (another machine): its sandbox is not the one the controller checked.
                first_task: dict[str, str] = {}
                for (arm, task), trials in numbers.items():
                    if trials:
                        first_task.setdefault(arm, task)
                preflight_notes = _preflight(config, bench, first_task, model_kind)
            scored = {cell: 0 for cell in cells}  # the tally lives on the controller
            counts = {}
        else:
            counts = {cell: store.count_current(Cell(model_kind, *cell), definitions[cell]) for cell in cells}
            scored = {cell: count.current for cell, count in counts.items()}
            if option.bench_fill == FILL_DECIDE:
                decide = _decide(option, bench, store, model_kind, arms, cells, definitions)
                wanted = decide.counts()
            else:
                wanted = _trials_wanted(option, bench, scored)
            if collect_only or not _xdist_controller(config):
                # Without xdist the numbers are reserved once deselection (-k, -m) is done, for the
                # trials that will run (SittingPlugin.pytest_collection_finish); --collect-only never does.
                numbers = {cell: store.preview_trials(Cell(model_kind, *cell), wanted[cell]) for cell in cells}
            else:
                # xdist workers collect with the controller's numbers, so it reserves them before they
                # start, and the pre-flight runs before that (workers on this machine need no other).
                arms_to_check = {}
                for cell in cells:
                    if wanted[cell]:
                        arms_to_check.setdefault(cell[0], cell[1])
                preflight_notes = _preflight(config, bench, arms_to_check, model_kind)
                numbers = {
                    cell: store.reserve_trials(Cell(model_kind, *cell), wanted[cell], sitting=sitting_id)
                    for cell in cells
                }
    except (StoreError, OSError) as exc:
        raise pytest.UsageError(f"{_store_source(config, bench)}: {store.root}: {exc}; allowed: {STORE_ALLOWED}") from None
    state = SittingState(
        bench=bench,
        store=store,
        model_kind=model_kind,
        sitting_id=sitting_id,
        trials=plan_trials(numbers),
        turn_cap=turn_cap,
        wall_clock_ms=wall_clock_ms,
        reserved=not collect_only,
        budget=option.bench_budget,
        probe=probe,
        exec_audit=exec_audit,
        sandbox=boundary.describe(),
    )
    state.extra["numbers"] = [[arm, task, list(trials)] for (arm, task), trials in numbers.items()]
    state.extra["reserve_selected"] = not collect_only and worker_plan is None and not _xdist_controller(config)
    state.extra["not_applicable"] = [
        f"{arm} x {task}: task {task} is only for arms {', '.join(bench.tasks[task].arms)}"
        for arm in arms for task in tasks if not bench.tasks[task].applies_to(arm)
    ]  # fmt: skip
    state.extra["definitions"] = definitions
    state.extra["notes"] = preflight_notes
    state.extra["planned"] = len(state.trials)  # before deselection: 0 means a fill found nothing to do
    if option.bench_fill == FILL_DECIDE:
        if worker_plan is None:  # workers run the controller's numbers; the plan's reasons live there
            state.extra["decide"] = decide
        state.extra["nothing_left"] = decide.nothing_left if worker_plan is None else "nothing left to decide"
    elif option.bench_fill is not None:
        target = option.bench_fill or bench.floor
        state.extra["nothing_left"] = f"nothing to do: every selected cell already has {target} scored samples"
    state.stop = SittingStop(after_api_failures=bench.stop_after_api_failures, budget=option.bench_budget is not None)
    for cell in cells:
        tally = state.tallies[cell] = CellTally(arm=cell[0], task=cell[1], scored_before=scored[cell])
        if cell in counts:
            tally.stale_scoring, tally.duplicates = counts[cell].stale_scoring, counts[cell].duplicates
    return state


def _decide(option: Any, bench: Bench, store: Store, model_kind: str, arms: list[str], cells: list[Any],
            definitions: dict[Any, Any]) -> DecidePlan:  # fmt: skip
    """--bench-fill decide: the plan from the samples stored before this sitting (allocation.py)."""
    from .allocation import plan_sitting

    if not bench.compared_pairs(arms):
        declared = ", ".join(f"{a} vs {b}" for a, b in bench.comparisons)
        raise pytest.UsageError(
            f"--bench-fill decide --bench-arm {','.join(arms)}: no comparison among the selected arms to decide "
            f"([bench] comparisons in {bench.path}: {declared or 'every pair of arms'}); select both arms of a comparison"
        )
    return plan_sitting(store, bench, model_kind=model_kind, arms=arms, cells=cells, definitions=definitions,
                        trials=option.bench_trials, budget=option.bench_budget)  # fmt: skip


def _preflight(config: pytest.Config, bench: Bench, arms: dict[str, str], model_kind: str) -> list[str]:
    """The pre-flight (preflight.py) before any number is reserved: refuses a sitting whose arm's
    programs work outside the sandbox and fail inside it; else the lines for the sitting's summary."""
    if not arms:
        return []
    from .agent import bundled_cli
    from .config import BenchConfigError
    from .preflight import run_preflight

    try:
        found = run_preflight(bench, arms, config.hook, model_kind, cli=bundled_cli())
    except BenchConfigError as exc:  # a placeholder of a preflight command the environment does not supply
        raise pytest.UsageError(str(exc)) from None
    if found.broken:
        raise pytest.UsageError(found.refusal(bench))
    return [line for line in (found.summary(), *found.notes) if line]


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands trials to xdist workers (it runs none itself)."""
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"


def _refuse_too_many_trials(option: Any, bench: Bench) -> None:
    from .sitting import MAX_TRIALS_PER_CELL

    if option.bench_trials is None and option.bench_fill is None and bench.trials > MAX_TRIALS_PER_CELL:
        raise pytest.UsageError(
            f"{bench.path}: [bench] trials = {bench.trials} is too large; allowed: a whole number from 1 to "
            f"{MAX_TRIALS_PER_CELL:,} (trials per cell and sitting)"
        )
    if option.bench_fill == 0 and bench.floor > MAX_TRIALS_PER_CELL:  # a bare --bench-fill fills to the floor
        raise pytest.UsageError(
            f"{bench.path}: [bench] floor = {bench.floor} is too large for --bench-fill; allowed: a whole number "
            f"from 1 to {MAX_TRIALS_PER_CELL:,}, or name the target: --bench-fill=N"
        )


def _selection(bench: Bench, arms: list[str], tasks: list[str]) -> tuple[list[str], list[str]]:
    """The arms and tasks named on the command line ('all' expanded), or a UsageError."""
    from .config import BenchConfigError
    from .sitting import resolve_selection

    try:
        return (
            resolve_selection(arms, bench.arms, kind="arm", option="--bench-arm"),
            resolve_selection(tasks, bench.tasks, kind="task", option="--bench-task"),
        )
    except BenchConfigError as exc:
        raise pytest.UsageError(f"{bench.path}: {exc}") from None


def _run_probe(config: pytest.Config, bench: Bench) -> dict[str, Any] | None:
    """Run the bench's capability probe once per session (on the controller under xdist)."""
    try:
        probe = config.hook.pytest_benchcell_probe(bench=bench)
    except Exception as exc:  # noqa: BLE001 - a crashing probe must stop the sitting with its reason
        raise pytest.UsageError(f"pytest_benchcell_probe raised {type(exc).__name__}: {exc}") from exc
    if probe is None:
        return None
    return {"verdict": dict(probe.verdict), "drop": list(probe.drop), "swap": dict(probe.swap)}


def _probe_exclusions(config: pytest.Config, bench: Bench) -> dict[str, str]:
    """Task -> why the capability probe leaves it out on this machine (reports count it as not applicable)."""
    probe = _run_probe(config, bench)
    if probe is None:
        return {}
    kept = _apply_probe(bench, list(bench.tasks), probe)
    verdict = ", ".join(f"{key}: {json.dumps(value)}" for key, value in sorted(probe["verdict"].items()))
    reason = "left out by the capability probe" + (f" ({verdict})" if verdict else "")
    return {task: reason for task in bench.tasks if task not in kept}


def _apply_probe(bench: Bench, tasks: list[str], probe: dict[str, Any]) -> list[str]:
    for task_id in [*probe["drop"], *probe["swap"], *probe["swap"].values()]:
        if task_id not in bench.tasks:
            raise pytest.UsageError(
                f"pytest_benchcell_probe names task {task_id!r}, which {bench.path} does not declare; "
                f"valid tasks: {', '.join(bench.tasks)}"
            )
    chosen: list[str] = []
    for task_id in tasks:
        task_id = probe["swap"].get(task_id, task_id)
        if task_id not in probe["drop"] and task_id not in chosen:
            chosen.append(task_id)
    return chosen


def _trials_wanted(option: Any, bench: Bench, scored: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    from .sitting import fill_counts

    if option.bench_fill is None:
        return {cell: option.bench_trials or bench.trials for cell in scored}
    target = option.bench_fill or bench.floor  # a bare --bench-fill fills to the reporting floor
    return fill_counts(scored, target)


def _has_credentials() -> bool:
    return any(
        os.environ.get(name)
        for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
    )


def _load_worker_bench(config: pytest.Config, plan: dict[str, Any]) -> Bench:
    """The bench in this worker's own checkout, where the controller's is relative to its rootdir."""
    from .config import BenchConfigError, load_bench
    from .remote import worker_bench_path

    path = worker_bench_path(config.rootpath, plan["bench"])
    if not path.is_file():
        raise pytest.UsageError(
            f"no bench file at {path} (the controller's bench is {plan['bench']} from its rootdir; this worker's "
            f"rootdir is {config.rootpath}): run the worker in a checkout of the same project, e.g. --tx "
            f"...//chdir=CHECKOUT"
        )
    try:
        return load_bench(path)
    except BenchConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _worker_spool(config: pytest.Config, bench: Bench, plan: dict[str, Any], turn_cap: int, wall_clock_ms: int) -> Store:
    """Check this worker's bench against the controller's (before anything runs) and make its spool."""
    from .agent import bundled_cli, import_sdk
    from .remote import Spool, definition_mismatch, spool_root

    mismatch = definition_mismatch(bench, plan["definitions"], turn_cap=turn_cap, wall_clock_ms=wall_clock_ms)
    if mismatch:
        raise pytest.UsageError(f"{mismatch}; no trial runs on a bench that differs: check out the controller's version")
    try:
        import_sdk()
    except ImportError as exc:
        raise pytest.UsageError(f"the Claude Agent SDK cannot be imported ({exc}): pip install pytest-benchcell") from None
    if not Path(bundled_cli()).is_file():
        raise pytest.UsageError(f"the SDK's bundled Claude Code CLI is missing ({bundled_cli()}): reinstall claude-agent-sdk")
    spool = spool_root(bench.root, plan["sitting"], config.workerinput["workerid"])  # type: ignore[attr-defined]
    try:
        spool.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"cannot make the spool of finished samples at {spool}: {exc.strerror or exc}") from None
    return Spool(spool)


class _XdistBridge:
    """The controller's side of an xdist sitting: hands every worker the plan (its collection must be
    identical), stores the samples the workers send, and stops a sitting whose worker cannot run."""

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.receiver: Any = None
        self.worker_plan: dict[str, Any] = {}  # what every worker gets (made with the receiver)
        self.spools: dict[str, tuple[str, str]] = {}  # gateway id -> (its spec, its spool path)

    def pytest_configure_node(self, node: Any) -> None:
        from .remote import Receiver, bench_reference, cell_definitions, stop_file

        state = self.state
        if self.receiver is None:  # the first worker: the receiver and the plan, made once for all of them
            self.receiver = Receiver(
                store=state.store, bench=state.bench, sitting=state.sitting_id, model_kind=state.model_kind,
                turn_cap=state.turn_cap, wall_clock_ms=state.wall_clock_ms,
                expected={(t.arm, t.task, t.trial) for t in state.trials},
            )  # fmt: skip
            self.worker_plan = {
                "sitting": state.sitting_id,
                "numbers": state.extra["numbers"],
                "probe": state.probe,
                "bench": bench_reference(state.bench.path, self.config.rootpath),
                "definitions": cell_definitions(
                    state.bench, state.tallies, turn_cap=state.turn_cap, wall_clock_ms=state.wall_clock_ms
                ),
                "store": str(state.store.root.resolve()),
                "stop_file": str(stop_file(state.bench.root, state.sitting_id).resolve()),
                "bench_path": str(state.bench.path),  # a worker elsewhere runs the pre-flight on its own checkout
            }
        node.workerinput[WORKER_PLAN_KEY] = self.worker_plan

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from .remote import SAMPLE_ATTRIBUTE, TRANSCRIPT_ATTRIBUTE
        from .store import StoreError

        line = getattr(report, SAMPLE_ATTRIBUTE, None)
        payload = getattr(report, TRANSCRIPT_ATTRIBUTE, None)
        node = getattr(report, "node", None)
        spool = getattr(report, "benchcell_spool", None)
        if node is not None and spool:
            self.spools[node.gateway.id] = (str(node.gateway.spec), spool)
        if line is None or self.receiver is None:
            return
        try:
            self.receiver.take(line, payload)
        except StoreError as exc:
            pytest.exit(
                f"benchcell: {exc}; the sitting stops (the worker's spool keeps the sample: benchcell merge "
                f"{spool} --into {self.state.store.root})", returncode=pytest.ExitCode.INTERNAL_ERROR,
            )  # fmt: skip

    @pytest.hookimpl(tryfirst=True)  # before xdist prints the worker's whole traceback
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from .remote import SPOOL_OUTPUT, UNSENT_OUTPUT, gateway_label, refusal_cause

        gateway = f"gateway {gateway_label(node.gateway.id, str(node.gateway.spec))}"
        if error is not None and getattr(node, "workerinfo", None) is None:
            # It went down before it could collect (its bench, a mismatch, no CLI): a replacement would
            # fail the same way, so the sitting stops here instead of xdist restarting it forever.
            pytest.exit(
                f"benchcell: {gateway} cannot run trials: {refusal_cause(str(error))}; the sitting stops (no "
                f"trial ran there; the numbers reserved for this sitting stay unused)",
                returncode=pytest.ExitCode.USAGE_ERROR,
            )
        output = getattr(node, "workeroutput", None) or {}
        if output.get(SPOOL_OUTPUT):
            self.spools[node.gateway.id] = (str(node.gateway.spec), output[SPOOL_OUTPUT])
        for line, payload in output.get(UNSENT_OUTPUT, ()):  # trials an interrupt ended: no report carried them
            if self.receiver is not None:
                self.receiver.take(line, payload)

    def tell_workers_to_stop(self, reason: str) -> None:
        """Workers on this machine see the stop file before their next trial (remote.stop_file); a
        worker elsewhere stops by the same rule applied to its own trials, or once xdist shuts it down."""
        from .remote import stop_file

        path = stop_file(self.state.bench.root, self.state.sitting_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(reason, encoding="utf-8")
        except OSError:
            pass  # the workers stop after the trials already handed to them

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Spools on this machine whose samples are all stored go; any other is named with the merge
        that takes it in."""
        from .remote import gateway_label, remove_settled_spool, stop_file

        stop_file(self.state.bench.root, self.state.sitting_id).unlink(missing_ok=True)
        if self.receiver is None:
            return
        notes = self.state.extra.setdefault("notes", [])
        for gateway_id, (spec, path) in sorted(self.spools.items()):
            gateway = gateway_label(gateway_id, spec)
            spool = Path(path)
            if spool.is_dir() and self.receiver.spool_settled(spool):
                remove_settled_spool(spool)
            elif spool.is_dir():
                merge = f"benchcell merge {spool} --into {self.state.store.root}"
                notes.append(f"the spool of {gateway} holds samples this store lacks: {merge}")
            else:
                notes.append(f"the spool of {gateway} stays on its machine: {spool}")


class _XdistWorker:
    """A worker's side: each stored sample rides on its trial's call report to the controller."""

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        # nodeid -> the sample (its store line) and its transcript (bytes or None), until a report carries them
        self.unsent: dict[str, tuple[bytes, bytes | None]] = {}
        controller_store = Path(config.workerinput[WORKER_PLAN_KEY]["store"])  # type: ignore[attr-defined]
        if state.budget is not None and controller_store.is_dir():
            # The controller's store is in sight (this machine): the budget counts every worker's spend
            # stored so far, plus this worker's own (its spool), each sample once.
            from .store import StoreSet

            state.extra["spend_in"] = StoreSet([controller_store, state.store.root])
        elif state.budget is not None:
            # Out of sight (another machine): each worker keeps to its share, so the sitting stays within.
            state.budget = max(1, state.budget // int(config.workerinput.get("workercount", 1)))  # type: ignore[attr-defined]

    def stop_requested(self) -> str | None:
        """The controller's reason to stop the sitting, when its stop file is in sight (this machine)."""
        path = self.config.workerinput[WORKER_PLAN_KEY].get("stop_file")  # type: ignore[attr-defined]
        try:
            return Path(path).read_text(encoding="utf-8") or "stopped" if path else None
        except OSError:
            return None

    def record(self, nodeid: str, sample: dict[str, Any]) -> None:
        spool = self.state.store
        self.unsent[nodeid] = (spool.line_of(sample), spool.transcript_of(sample))  # type: ignore[attr-defined]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        from .remote import SAMPLE_ATTRIBUTE, TRANSCRIPT_ATTRIBUTE

        outcome = yield
        report = outcome.get_result()
        unsent = self.unsent.pop(item.nodeid, None)
        if unsent is not None:
            setattr(report, SAMPLE_ATTRIBUTE, unsent[0])
            setattr(report, TRANSCRIPT_ATTRIBUTE, unsent[1])
        report.benchcell_spool = str(self.state.store.root)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from .remote import SPOOL_OUTPUT, UNSENT_OUTPUT

        output = self.config.workeroutput  # type: ignore[attr-defined]
        output[UNSENT_OUTPUT] = [list(unsent) for unsent in self.unsent.values()]
        output[SPOOL_OUTPUT] = str(self.state.store.root)


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


TRIAL_EXCEPTIONS = {
    tag: _outcome_exception(tag) for tag in ("incorrect", "confused", "hung", "invalid", "error", "refused")
}


class TrialItem(pytest.Item):
    """One new trial of one cell."""

    def __init__(self, *, planned: PlannedTrial, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.add_marker(pytest.mark.benchcell)
        state = self.config.stash[SITTING_KEY]
        plugins = self.config.pluginmanager
        if plugins.hasplugin("timeout"):
            # The trial bounds itself (readiness bound + MCP servers' wait + backstop); a global
            # --timeout meant for unit tests must not cut it short. The marker overrides the global value.
            mcp_wait_ms = state.bench.mcp_timeout_ms if state.bench.arms[planned.arm].mcp_servers else 0
            bound_s = (state.bench.ready_timeout_ms + mcp_wait_ms + state.wall_clock_ms) / 1000 + TRIAL_TIMEOUT_MARGIN_S
            self.add_marker(pytest.mark.timeout(bound_s))
        if plugins.hasplugin("rerunfailures"):
            self.add_marker(pytest.mark.flaky(reruns=0))  # a trial is a draw: never retried

    def runtest(self) -> None:
        from .leftovers import printable
        from .sitting import sitting_spend
        from .store import Cell
        from .trial import StoreUnavailable, TrialSpec, run_trial

        state = self.config.stash[SITTING_KEY]
        key = (self.planned.arm, self.planned.task, self.planned.trial)
        started = state.extra.setdefault("started", set())
        if key in started:
            # Something ran this item again (a rerun plugin, a plugin calling the protocol twice):
            # a second draw under one trial number would bias the cell, so it is refused, unrecorded,
            # and its report must not carry the first run's sample into the tally.
            self.user_properties[:] = [item for item in self.user_properties if not item[0].startswith("benchcell_")]
            raise TRIAL_EXCEPTIONS["refused"](
                f"trial {self.planned.trial} of {self.planned.arm} x {self.planned.task} already ran in this "
                f"sitting; a trial is one draw and never runs twice under one number (rerun plugins and "
                f"options such as --reruns are ignored for trials; nothing was recorded for this attempt)",
                pytrace=False,
            )
        started.add(key)
        task = state.bench.tasks[self.planned.task]
        unusable = state.extra.setdefault("unusable_tasks", {}).get(task.id)
        if unusable is not None:
            pytest.skip(f"task {task.id} skipped for this sitting: {unusable}")
        if state.budget is not None:
            cells = [Cell(state.model_kind, arm, task) for arm, task in state.tallies]
            spent = sitting_spend(state.extra.get("spend_in", state.store), cells, state.sitting_id, state.bench.weights)
            if spent >= state.budget:
                pytest.skip(f"budget of {state.budget:,} cost-equivalent tokens reached ({spent:,.0f} spent this sitting)")
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
            probe=state.probe["verdict"] if state.probe else None,
        )
        try:
            sample = run_trial(spec, self.ihook, on_recorded=self._recorded)
        except StoreUnavailable as exc:
            pytest.exit(f"benchcell: {exc}", returncode=pytest.ExitCode.INTERNAL_ERROR)
        if sample["status"] == STATUS_SCORED and sample["outcome"] == "pass":
            return
        tag = sample["outcome"] if sample["status"] == STATUS_SCORED else sample["status"]
        raise TRIAL_EXCEPTIONS[tag](printable(sample["reason"]), pytrace=False)  # it may quote what the agent made

    def _recorded(self, sample: dict[str, Any], *, task_unusable: str | None) -> None:
        """The stored sample's facts for the report, also when the trial was interrupted.

        user_properties travel with the report (also from xdist workers to the controller) and end
        up in junit XML as <property> elements: sample id, status, outcome."""
        from .sample import cost_equivalent
        from .sitting import unmetered

        state = self.config.stash[SITTING_KEY]
        if task_unusable is not None:
            state.extra.setdefault("unusable_tasks", {})[self.planned.task] = task_unusable
        self.user_properties.append((STATUS_PROPERTY, sample["status"]))
        self.user_properties.append(("benchcell_outcome", sample["outcome"]))
        self.user_properties.append(("benchcell_sample", sample["id"]))
        self.user_properties.append(("benchcell_cell", [self.planned.arm, self.planned.task]))
        cost = cost_equivalent(sample["usage"]["total"], state.bench.weights)
        self.user_properties.append((COST_PROPERTY, cost))
        spend = f"{cost:,.0f} cost-eq tokens" if sample["usage"]["total"] is not None else "usage unknown"
        waited = sample.get("api_wait_ms") or 0
        api_wait = f" ({waited / 1000:.1f} s of it the API's retry waits)" if waited else ""
        progress = f"{sample['turns']} turns, {spend}, {sample['duration_ms'] / 1000:.1f} s{api_wait}"
        if (sample.get("sandbox") or {}).get("reached"):
            progress += f", {len(sample['sandbox']['reached'])} sandbox limit(s) reached"
        self.user_properties.append((PROGRESS_PROPERTY, progress))
        self.user_properties.append((REASON_PROPERTY, sample["reason"] or ""))
        self.user_properties.append((API_ERROR_PROPERTY, sample.get("api_error")))
        self.user_properties.append((UNMETERED_PROPERTY, unmetered(sample)))
        if sample.get("sandbox_blocked"):
            from .isolation.blocked import describe_record
            from .leftovers import printable

            lines = [printable(describe_record(entry)) for entry in sample["sandbox_blocked"]]
            self.user_properties.append((BLOCKED_PROPERTY, lines))
        worker = self.config.pluginmanager.get_plugin("benchcell-xdist-worker")
        if worker is not None:  # an xdist worker: the sample travels to the controller's store
            worker.record(self.nodeid, sample)

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

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.invalid: list[str] = []  # "INVALID nodeid - reason" lines for the summary

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        state = self.state
        return [
            f"benchcell: bench {state.bench.name} ({state.bench.path}), {state.bench.model} ({state.model_kind} model)",
            f"benchcell: store {state.store.root / state.model_kind}, sitting {state.sitting_id}",
            *([f"benchcell: probe verdict {state.probe['verdict']}"] if state.probe else []),
            f"benchcell: execution audit {state.exec_audit}",
            f"benchcell: sandbox {state.sandbox}",
            *(f"benchcell: not collected, not applicable: {cell}" for cell in state.extra["not_applicable"]),
            *([state.extra["decide"].headline()] if "decide" in state.extra else []),
        ]

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path == self.state.bench.path:
            return BenchFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # The plan's order (trial 1 of every cell, then trial 2...) is part of the experiment:
        # a shuffling plugin such as pytest-randomly must not put one arm's trials together.
        # Keep whatever selection other plugins made; restore only the order.
        order = {planned: index for index, planned in enumerate(self.state.trials)}
        trials = sorted((item for item in items if isinstance(item, TrialItem)), key=lambda item: order[item.planned])
        slots = iter(trials)
        items[:] = [next(slots) if isinstance(item, TrialItem) else item for item in items]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Reserve the numbers of the trials that will run, now that -k, -m and other deselection is
        done (before the terminal lists the items). A trial that another sitting's reservation moved
        to a fresh number is renamed after it."""
        from .sitting import reserve_selected
        from .store import StoreError

        state = self.state
        if not state.extra["reserve_selected"]:
            return
        state.extra["reserve_selected"] = False
        selected = [item for item in session.items if isinstance(item, TrialItem)]
        arms: dict[str, str] = {}
        for item in selected:
            arms.setdefault(item.planned.arm, item.planned.task)
        try:
            state.extra["notes"] += _preflight(self.config, state.bench, arms, state.model_kind)
        except pytest.UsageError:
            state.extra["refused"] = True  # nothing ran: no sitting summary under the refusal
            raise
        try:
            reserved = reserve_selected(
                state.store, state.model_kind, [item.planned for item in selected], state.sitting_id
            )
        except (StoreError, OSError) as exc:
            source = _store_source(self.config, state.bench)
            raise pytest.UsageError(f"{source}: {state.store.root}: {exc}; allowed: {STORE_ALLOWED}") from None
        for index, item in enumerate(session.items):
            if isinstance(item, TrialItem) and reserved[item.planned] != item.planned:
                planned = reserved[item.planned]
                renamed = TrialItem.from_parent(item.parent, name=planned.item_name, planned=planned)
                for mark in item.own_markers:  # markers other plugins added to the item keep applying
                    if mark not in renamed.own_markers:
                        renamed.add_marker(mark)
                session.items[index] = renamed
        state.trials = [reserved[item.planned] for item in selected]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Run a trial item exactly once. This answers the (first-result) protocol hook before
        pytest-rerunfailures' implementation can loop over it; timeouts and other wrappers still apply."""
        if not isinstance(item, TrialItem):
            return None
        worker = self.config.pluginmanager.get_plugin("benchcell-xdist-worker")
        stop = worker.stop_requested() if worker is not None else None
        if stop is not None:  # the controller stopped the sitting: this trial, already handed out, does not run
            item.session.shouldstop = stop
            return True
        from _pytest.runner import runtestprotocol  # what pytest's own implementation calls

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        runtestprotocol(item, nextitem=nextitem)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for xdist workers' reports too, so the tally is complete there.
        if report.when != "call":
            return
        properties = dict(report.user_properties)
        status = properties.get(STATUS_PROPERTY)
        cell = properties.get("benchcell_cell")
        if status is None or cell is None:
            return
        outcome = properties.get("benchcell_outcome")
        if status == STATUS_INVALID:  # pytest's short summary has no section for this category
            from .leftovers import printable

            self.invalid.append(f"INVALID {report.nodeid} - {printable(str(properties.get(REASON_PROPERTY, '')))}")
        tally = self.state.tallies.get(tuple(cell))
        unmetered = bool(properties.get(UNMETERED_PROPERTY))
        if tally is not None:
            tally.count(status, outcome, float(properties.get(COST_PROPERTY) or 0.0), properties.get(BLOCKED_PROPERTY) or (), unmetered=unmetered)
        name = report.nodeid.rsplit("::", 1)[-1]
        stop = self.state.stop.record(name, status, properties.get(API_ERROR_PROPERTY), unmetered=unmetered)
        if stop is not None:
            self._stop(stop)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.option.verbose > 0 and not hasattr(self.config, "workerinput"):
            result = outcome if status == STATUS_SCORED else status
            reporter.write_line(f"    {name}: {result}, {properties.get(PROGRESS_PROPERTY, '')}")

    def _stop(self, reason: str) -> None:
        """Stop the sitting after this trial (sitting.SittingStop said it cannot succeed). Without xdist
        and on a worker, pytest stops after the running item (session.shouldstop); xdist's controller
        stops handing out trials and ends when its workers have (DSession.shouldstop), and tells the
        workers on this machine to run none of the trials they were already given."""
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None:  # the xdist controller
            if not getattr(dsession, "shouldstop", False):
                dsession.shouldstop = reason
            bridge = self.config.pluginmanager.get_plugin("benchcell-xdist")
            if bridge is not None:
                bridge.tell_workers_to_stop(reason)
        elif getattr(self, "session", None) is not None and not self.session.shouldstop:
            self.session.shouldstop = reason

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        from .sitting import STOP_PREFIX, stop_line, summary_lines
        from .store import Cell

        if hasattr(config, "workerinput") or self.state.extra.get("refused"):
            return
        state = self.state
        cells = [Cell(state.model_kind, arm, task) for arm, task in state.tallies]
        for cell in cells if state.reserved else ():  # collect-only ran nothing: after = before
            count = state.store.count_current(cell, state.extra["definitions"][(cell.arm, cell.task)])
            tally = state.tallies[(cell.arm, cell.task)]
            tally.scored_after, tally.stale_scoring, tally.duplicates = count.current, count.stale_scoring, count.duplicates
        # The controller saw every trial's report (xdist workers' too): no need to re-read the store.
        spent = sum(tally.spent for tally in state.tallies.values()) if state.reserved else None
        title = "benchcell sitting" if state.reserved else "benchcell sitting (collect-only: nothing ran or was reserved)"
        terminalreporter.write_sep("=", title)
        lines = summary_lines(
            list(state.tallies.values()),
            str(state.store.root / state.model_kind),
            state.bench.floor,
            spent=spent,
            budget=state.budget,
        )
        dsession = config.pluginmanager.get_plugin("dsession")
        worker_stop = str(getattr(dsession, "shouldstop", "") or "")  # a worker's own rule stopped it
        stopped = state.stop.reason or (worker_stop if worker_stop.startswith(STOP_PREFIX) else None)
        if stopped and state.reserved:
            lines.insert(0, stop_line(stopped, len(state.trials), sum(tally.recorded for tally in state.tallies.values())))
        if "decide" in state.extra:  # --bench-fill decide: the comparisons, the plan and why, before the tallies
            lines[:0] = state.extra["decide"].lines()
        elif state.reserved and not state.extra["planned"] and state.extra.get("nothing_left"):
            lines.insert(0, state.extra["nothing_left"])
        lines[:0] = self.invalid
        lines[-1:-1] = state.extra.get("notes", [])
        for line in lines:
            terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # A fill with nothing left to fill (or to decide) is success, not pytest's "no tests collected".
        nothing_planned = not self.state.extra["planned"] and bool(self.state.extra.get("nothing_left"))
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and nothing_planned:
            session.exitstatus = pytest.ExitCode.OK

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # SIGTERM (a CI cancel, `kill`) ends a trial like Ctrl-C does: the CLI is stopped, teardown
        # runs and the trial is recorded as `error: interrupted`, instead of dying mid-append.
        import signal
        import threading

        self.session = session
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        runs_trials_here = not session.config.pluginmanager.hasplugin("dsession")  # not an xdist controller
        if self.state.reserved and self.state.trials and runs_trials_here:
            # The SDK (and the `mcp` it pulls in) is imported now, outside any trial: an interrupt
            # landing inside a half-done import would break every later trial of the sitting.
            from .agent import import_sdk

            import_sdk()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        previous = getattr(self, "_previous_sigterm", None)
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class OffloadPlugin:
    """Base for modes that run no trials (rescore, report): nothing is collected, and pytest's
    "no tests collected" is success for them."""

    def __init__(self, config: pytest.Config, bench: Bench) -> None:
        self.config = config
        self.bench = bench
        self.lines: list[str] = []

    def selected_cells(self, model_kind: str) -> list[Any]:
        from .store import Cell

        option = self.config.option
        arms, tasks = _selection(self.bench, option.bench_arm or ["all"], option.bench_task or ["all"])
        return [Cell(model_kind, arm, task) for arm in arms for task in tasks]

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool:
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK


class RescorePlugin(OffloadPlugin):
    """--bench-rescore: new verdicts for stored samples from the current checker."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .rescore import rescore_cells, samples_elsewhere  # imports the trial machinery, not the SDK itself
        from .sitting import new_sitting_id

        option = self.config.option
        model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
        store = _store(self.config, self.bench, write=True)
        cells = [cell for cell in self.selected_cells(model_kind) if store.samples_path(cell).exists()]
        tally = rescore_cells(self.bench, store, cells, self.config.hook, sitting=new_sitting_id())
        self.lines = tally.summary_lines(f"{len(cells)} cells of {store.root / model_kind}")
        if not cells:  # real and scripted samples live apart: say where this selection's samples are
            other_kind = MODEL_REAL if model_kind == MODEL_SCRIPTED else MODEL_SCRIPTED
            flag = "add --bench-scripted" if other_kind == MODEL_SCRIPTED else "leave out --bench-scripted"
            self.lines.extend(samples_elsewhere(store, self.selected_cells(other_kind), flag))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "benchcell rescore")
        for line in self.lines:
            terminalreporter.write_line(line)


class ReportPlugin(OffloadPlugin):
    """--bench-report: tables from the store, in the terminal and optionally as files."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .cli import UsageError, parse_weights
        from .report import (
            ReportError,
            build_report,
            render_html,
            render_json,
            render_markdown,
            render_terminal,
            settings_for_bench,
        )

        option = self.config.option
        model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
        cells = self.selected_cells(model_kind)
        settings = settings_for_bench(self.bench, model_kind=model_kind)
        if option.bench_turn_cap or option.bench_wall_clock_ms:  # the bounds are part of the conditions
            settings.definitions = {
                (cell.arm, cell.task): self.bench.definition(
                    cell.arm, cell.task, turn_cap=option.bench_turn_cap, wall_clock_ms=option.bench_wall_clock_ms
                )
                for cell in cells
            }
        settings.arms = list(dict.fromkeys(cell.arm for cell in cells))
        settings.tasks = {task: info for task, info in (settings.tasks or {}).items() if any(c.task == task for c in cells)}
        for task, reason in _probe_exclusions(self.config, self.bench).items():
            if task in settings.tasks:
                settings.tasks[task] = dataclasses.replace(settings.tasks[task], excluded=reason)
        try:
            if option.bench_weights:
                settings.weights = parse_weights(option.bench_weights, settings.weights)
            settings.validate()
        except (UsageError, ReportError) as exc:
            raise pytest.UsageError(str(exc).replace("--weights:", "--bench-weights:")) from None
        store = _store(self.config, self.bench, write=False)
        extra = [(self.config.invocation_params.dir / path).resolve() for path in option.bench_report_store]
        for path in extra:
            if not path.is_dir():
                raise pytest.UsageError(f"--bench-report-store: {path} is not a folder; allowed: a store folder")
        if extra:
            from .store import StoreSet

            report = build_report(StoreSet([store.root, *extra]), settings)
        else:
            report = build_report(store, settings)
        self.lines = render_terminal(report)
        writers = (
            (option.bench_report_md, render_markdown),
            (option.bench_report_json, render_json),
            (option.bench_report_html, render_html),
        )
        for path, render in writers:
            if path:
                target = _report_target(self.config, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(render(report), encoding="utf-8")
                self.lines.append(f"wrote {target}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "benchcell report")
        for line in self.lines:
            terminalreporter.write_line(line)
