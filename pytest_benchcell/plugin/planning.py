"""A sitting's plan from its options: the selection, the capability probe, the sandbox and execution
audit's state, the trial numbers (previewed, reserved or, on an xdist worker, the controller's), the
pre-flight, and a worker's check of its own checkout and its spool."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .keys import MODEL_REAL, MODEL_SCRIPTED, WORKER_PLAN_KEY
from .options import FILL_DECIDE, PREFLIGHT_ALWAYS, STORE_ALLOWED, _load, _store, _store_source

if TYPE_CHECKING:
    from ..allocation import DecidePlan
    from ..config import Bench
    from ..sitting import SittingState
    from ..store import Store

CREDENTIAL_HINT = (
    "a real-model sitting needs credentials for the Claude Code CLI: set ANTHROPIC_API_KEY (API "
    "users), or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` (subscription users; an interactive "
    "login in ~/.claude is not visible to the isolated per-trial config), or ANTHROPIC_AUTH_TOKEN with "
    "ANTHROPIC_BASE_URL for a gateway; or run offline with --bench-scripted"
)


def _plan_sitting(config: pytest.Config) -> SittingState:
    from ..arm_stops import ArmStops
    from ..sitting import CellTally, SittingState, SittingStop, new_sitting_id, plan_trials
    from ..store import Cell, StoreError

    option = config.option
    if not option.bench_arm or not option.bench_task:
        missing = "--bench-task" if option.bench_arm else "--bench-arm"
        raise pytest.UsageError(f"{missing} is missing: a sitting needs both --bench-arm and --bench-task (or 'all')")
    worker_plan = getattr(config, "workerinput", {}).get(WORKER_PLAN_KEY)
    bench = _load(config) if worker_plan is None else _load_worker_bench(config, worker_plan)
    arms, tasks = _selection(bench, option.bench_arm, option.bench_task)
    if option.bench_budget_usd is not None and bench.price_table.find(bench.model) is None:
        from ..prices import unpriced_message

        raise pytest.UsageError(f"{bench.path}: {unpriced_message(bench.model, str(bench.path))}")
    if option.bench_fill not in (None, FILL_DECIDE) and option.bench_trials is not None:
        raise pytest.UsageError("--bench-fill and --bench-trials exclude each other: fill decides the trials per cell")
    probe = worker_plan["probe"] if worker_plan else _run_probe(config, bench)
    if probe is not None:
        tasks = _apply_probe(bench, tasks, probe)
    model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
    collect_only = bool(option.collectonly)
    if model_kind == MODEL_REAL and not collect_only and not _has_credentials():
        raise pytest.UsageError(CREDENTIAL_HINT)
    from ..isolation.exec_audit import INSTALL_HINT, audit_state  # stdlib only: no SDK, no bashlex

    watches_bash = any("Bash" in bench.arms[arm].tools for arm in arms)
    tracer = audit_state(
        bench.exec_audit, watches_bash=watches_bash, no_bash="no selected arm has a Bash tool", one_cpu=bench.exec_audit_cpus == "one"
    )
    exec_audit = tracer.describe()  # the header line: "on (strace 6.1, ...)" or "off (why)"
    # Required means every Bash command is watched: a sitting with no Bash arm has nothing to refuse,
    # as each trial of such an arm is not refused either (trial._exec_audit).
    if bench.exec_audit == "required" and watches_bash and not tracer.available and not collect_only:
        raise pytest.UsageError(
            f'{bench.path}: [bench] exec_audit = "required", but the execution audit cannot run here '
            f'({tracer.reason}): {INSTALL_HINT}; or set exec_audit = "auto"'
        )
    from ..isolation import sandbox as sandbox_module  # stdlib only

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
    learned: list[list[Any]] = []  # what an xdist controller's probes learned, for its workers
    try:
        if worker_plan is not None:
            # xdist worker: the controller decided the numbers once for every worker, because the
            # workers' collections must be identical while other sittings may append meanwhile.
            numbers = {(arm, task): trials for arm, task, trials in worker_plan["numbers"]}
            if worker_plan.get("bench_path") == str(bench.path):
                _learn_from_controller(bench, arms, worker_plan.get("learned", []), worker_plan.get("host"))
            elif not collect_only:
                # Another checkout (another machine): its sandbox is not the one the controller checked.
                first_task: dict[str, str] = {}
                for (arm, task), trials in numbers.items():
                    if trials:
                        first_task.setdefault(arm, task)
                preflight_notes = _preflight(config, bench, first_task, model_kind, store.root)
            scored = dict.fromkeys(cells, 0)  # the tally lives on the controller
            counts = {}
        else:
            _refuse_changed_horizon(bench, store, model_kind)
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
                arms_to_check: dict[str, str] = {}
                for cell in cells:
                    if wanted[cell]:
                        arms_to_check.setdefault(cell[0], cell[1])
                preflight_notes = _preflight(config, bench, arms_to_check, model_kind, store.root)
                learned = _learned_for_workers()
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
        budget_usd=option.bench_budget_usd,
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
    state.extra["learned"] = learned
    state.extra["planned"] = len(state.trials)  # before deselection: 0 means a fill found nothing to do
    if option.bench_fill == FILL_DECIDE:
        if worker_plan is None:  # workers run the controller's numbers; the plan's reasons live there
            state.extra["decide"] = decide
            # The comparisons as the sitting leaves them, judged as the plan and the report judge them.
            state.extra["decide_after"] = lambda: _decide(option, bench, store, model_kind, arms, cells, definitions)
        state.extra["nothing_left"] = decide.nothing_left if worker_plan is None else "nothing left to decide"
    elif option.bench_fill is not None:
        target = option.bench_fill or bench.floor
        state.extra["nothing_left"] = f"nothing to do: every selected cell already has {target} scored samples"
    state.stop = SittingStop(after_api_failures=bench.stop_after_api_failures,
                             budget=option.bench_budget is not None or option.bench_budget_usd is not None,
                             budget_option="--bench-budget" if option.bench_budget is not None else "--bench-budget-usd")  # fmt: skip
    state.arm_stops = ArmStops(after_blocked=bench.stop_after_blocked)
    for cell in cells:
        tally = state.tallies[cell] = CellTally(arm=cell[0], task=cell[1], scored_before=scored[cell])
        if cell in counts:
            tally.stale_scoring, tally.duplicates = counts[cell].stale_scoring, counts[cell].duplicates
            tally.other_conditions = counts[cell].other_conditions
        if option.bench_fill not in (None, FILL_DECIDE):  # what the listing adds to the stored samples
            tally.fill = (option.bench_fill or bench.floor, len(numbers[cell]))
    return state


def _refuse_changed_horizon(bench: Bench, store: Store, model_kind: str) -> None:
    """[bench] horizon_pairs is fixed before the first pair: a sitting whose bench declares another one
    than the stored samples recorded (horizon.py) is refused before any number is reserved."""
    from ..horizon import describe, horizon_conflict, recorded_horizons

    conflict = horizon_conflict(bench.horizon_pairs, recorded_horizons([store], model_kind))
    if conflict is not None:
        raise pytest.UsageError(
            f"{bench.path}: [bench] horizon_pairs: {describe(bench.horizon_pairs)} is declared, but {conflict} in "
            f"{store.root}; allowed: the horizon the samples were recorded with (a horizon is fixed before the first "
            f"pair: a new horizon is a new analysis, so give it a new store with [bench] store)"
        )


def _decide(option: Any, bench: Bench, store: Store, model_kind: str, arms: list[str], cells: list[Any],
            definitions: dict[Any, Any]) -> DecidePlan:  # fmt: skip
    """--bench-fill decide: the plan from the samples stored before this sitting (allocation.py)."""
    from ..allocation import plan_sitting

    if not bench.compared_pairs(arms):
        declared = ", ".join(f"{a} vs {b}" for a, b in bench.comparisons)
        raise pytest.UsageError(
            f"--bench-fill decide --bench-arm {','.join(arms)}: no comparison among the selected arms to decide "
            f"([bench] comparisons in {bench.path}: {declared or 'every pair of arms'}); select both arms of a comparison"
        )
    return plan_sitting(store, bench, model_kind=model_kind, arms=arms, cells=cells, definitions=definitions,
                        trials=option.bench_trials, budget=option.bench_budget)  # fmt: skip


def _preflight(config: pytest.Config, bench: Bench, arms: dict[str, str], model_kind: str, store: Path) -> list[str]:
    """The pre-flight (preflight.py) before any number is reserved: refuses a sitting whose arm's
    programs work outside the sandbox and fail inside it, or fail outside it too; else the lines for the
    sitting's summary."""
    if not arms:
        return []
    from ..agent import bundled_cli
    from ..config import BenchConfigError
    from ..confinement import exec_audit_state, sandbox_state, start_arm_probes
    from ..preflight import Preflight, run_preflight
    from ..preflight_memory import PreflightMemory, arm_keys, remembered_line

    # The binaries' start-up probes run beside the pre-flight: for this process's trials, or on an
    # xdist controller for its workers on this machine (handed over in the plan: `_learned_for_workers`).
    for arm in arms:
        start_arm_probes(bench, bench.arms[arm])

    # An arm whose same pre-flight passed lately on this machine is not checked again (preflight_memory.py).
    memory = PreflightMemory.in_user_cache()  # `always` checks every arm, and keeps what passes for later sittings
    tools = {
        arm: {"sandbox": repr(sandbox_state(bench, bench.arms[arm])), "audit": repr(exec_audit_state(bench, bench.arms[arm]))}
        for arm in arms
    }
    keys = arm_keys(bench, arms, tools, store=store)
    recall = config.option.bench_preflight != PREFLIGHT_ALWAYS
    remembered = {arm: record for arm in arms if recall and (record := memory.recall(keys[arm])) is not None}
    to_check = {arm: task for arm, task in arms.items() if arm not in remembered}
    try:
        found = run_preflight(bench, to_check, config.hook, model_kind, cli=bundled_cli()) if to_check else Preflight()
    except BenchConfigError as exc:  # a placeholder of a preflight command the environment does not supply
        raise pytest.UsageError(str(exc)) from None
    if found.refuses:
        raise pytest.UsageError(found.refusal(bench))
    for arm, task in to_check.items():
        if found.passed(arm):
            memory.remember(keys[arm], {"arm": arm, "task": task, "bench": str(bench.path)})
    return [line for line in (found.summary(), remembered_line(remembered, memory.now), *found.notes) if line]


def _learned_for_workers() -> list[list[Any]]:
    """What this controller's probes learned (they ran beside its pre-flight), for the workers on its
    machine (the plan's `host`)."""
    from ..isolation.exec_audit import learned_so_far

    return learned_so_far()


def _learn_from_controller(bench: Bench, arms: list[str], learned: list[list[Any]], host: str | None) -> None:
    """A worker on the controller's machine takes what the controller's probes learned instead of
    probing each binary again (one probe per sitting, not one per worker); a worker on another host
    probes its own binaries."""
    import socket

    from ..confinement import exec_audit_state
    from ..isolation.exec_audit import teach

    if host != socket.gethostname():
        return
    for tracer in {exec_audit_state(bench, bench.arms[arm]) for arm in arms}:
        if tracer.available:
            teach(learned, tracer)


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands trials to xdist workers (it runs none itself)."""
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"


def _refuse_too_many_trials(option: Any, bench: Bench) -> None:
    from ..sitting import MAX_TRIALS_PER_CELL

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
    from ..config import BenchConfigError
    from ..sitting import resolve_selection

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
    from ..sitting import fill_counts

    if option.bench_fill is None:
        return dict.fromkeys(scored, option.bench_trials or bench.trials)
    target = option.bench_fill or bench.floor  # a bare --bench-fill fills to the reporting floor
    return fill_counts(scored, target)


def _has_credentials() -> bool:
    return any(
        os.environ.get(name)
        for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")
    )


def _load_worker_bench(config: pytest.Config, plan: dict[str, Any]) -> Bench:
    """The bench in this worker's own checkout, where the controller's is relative to its rootdir."""
    import sys

    from ..config import BenchConfigError, load_bench
    from ..gateway_check import identity, identity_mismatch
    from ..remote import worker_bench_path

    path = worker_bench_path(config.rootpath, plan["bench"])
    mine = identity(path.parent if path.parent.is_dir() else config.rootpath)
    mismatch = identity_mismatch(mine, plan.get("identity") or {}, python=sys.executable, checkout=config.rootpath)
    if mismatch:
        raise pytest.UsageError(mismatch)
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
    from ..agent import bundled_cli, import_sdk
    from ..remote import Spool, definition_mismatch, spool_root

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
