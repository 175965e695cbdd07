"""build_report: the store read one cell at a time, then every table computed from the per-cell summaries."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ... import __version__
from ... import statistics as stats
from ...sample import MODEL_KINDS, TOKEN_COMPONENTS
from ...store import DUPLICATE, Problem, Store, StoreSet
from ..model import (
    REPORT_SCHEMA_VERSION,
    Bonus,
    CellSummary,
    Report,
    ReportError,
    ReportSettings,
    SettingsInfo,
    StoreInfo,
    TaskEntry,
    TaskInfo,
)
from ..reading import Trial, TrialUsage, _Group, empty_cell, newest, read_cell, summarize_cell
from ..stored_definitions import StoredConditions
from .comparisons import _comparisons
from .context import _Context, _headline_tasks
from .cost import _cost_per_success
from .definitions import arm_definitions
from .dollars import dollars_table
from .headline import _arm_coverage, _headline, _outcomes, _pass_hat_k, _tiers
from .hosts import Place, where_trials_ran
from .notices import _notices, _provenance


def build_report(store: Store | StoreSet, settings: ReportSettings | None = None) -> Report:
    """Read the store one cell at a time and compute every table. Never holds a transcript."""
    settings = settings or ReportSettings()
    settings.validate()
    _check_horizon(store, settings)
    problems: list[Problem] = []
    weights = [float(settings.weights[name]) for name in TOKEN_COMPONENTS]
    z = stats.two_sided_z(settings.confidence)

    all_cells = store.cells([settings.model_kind])
    arms = list(settings.arms) if settings.arms is not None else sorted({c.arm for c in all_cells})
    selected = [
        c for c in all_cells
        if c.arm in arms and (settings.tasks is None or c.task in settings.tasks)
    ]  # fmt: skip
    summaries: dict[tuple[str, str], CellSummary] = {}
    trials: dict[tuple[str, str], list[Trial]] = {}
    priced: dict[tuple[str, str], list[TrialUsage]] = {}
    samples_read = usage_unknown = 0
    places: list[Place] = []
    every_group: dict[tuple[str, str], dict[str, _Group]] = {}  # for the Definitions section
    for cell in selected:
        groups = every_group[(cell.arm, cell.task)] = read_cell(store, cell, weights, problems, settings.definitions)
        samples_read += sum(group.samples for group in groups.values())
        definition = (settings.definitions or {}).get((cell.arm, cell.task))
        # The group the cell reports (None: none usable): with the bench known its current conditions
        # only, never samples of another bench or model merged in, however recent.
        used = groups.get(definition.conditions) if definition is not None else newest(groups)
        summaries[(cell.arm, cell.task)] = summarize_cell(cell.arm, cell.task, groups, used, settings.floor, z)
        usage_unknown += used.usage_unknown if used is not None else 0
        trials[(cell.arm, cell.task)] = used.trials if used is not None else []
        priced[(cell.arm, cell.task)] = used.priced if used is not None else []
        if used is not None:
            places += [(cell.arm, host, gateway, tally) for (host, gateway), tally in used.places.items()]

    catalogue = _catalogue(settings, summaries)
    for arm in arms:
        for task, info in catalogue.items():
            if (arm, task) not in summaries:
                summaries[(arm, task)] = empty_cell(arm, task, info)
            elif settings.tasks is not None:
                # The bench's catalogue is the authority on tier and bonus, not what old samples say.
                summaries[(arm, task)] = dataclasses.replace(summaries[(arm, task)], tier=info.tier, bonus=info.bonus)
    context = _Context(settings, arms, catalogue, summaries, z, trials)

    other_kind = [kind for kind in MODEL_KINDS if kind != settings.model_kind]
    store_info = StoreInfo(
        cells_read=len(selected),
        samples_read=samples_read,
        samples_used=sum(s.samples for s in summaries.values()),
        other_model_kind_cells=len(store.cells(other_kind)),
        cells_outside_selection=len(all_cells) - len(selected),
        problems=[_problem_text(store, p) for p in problems if p.kind != DUPLICATE],
        duplicates=[p.sample_id for p in problems if p.kind == DUPLICATE],
        usage_unknown=usage_unknown,
        stores=[str(one.root) for one in store.stores] if isinstance(store, StoreSet) and len(store.stores) > 1 else [],
    )
    headline_tasks = _headline_tasks(context)
    cells = [summaries[(arm, task)] for arm in arms for task in context.scored_tasks()]
    bonus_tasks = [task for task, info in catalogue.items() if info.bonus and not info.excluded]
    provenance = _provenance(context)
    headline, components = _headline(context, headline_tasks)
    report = Report(
        report_schema=REPORT_SCHEMA_VERSION,
        plugin_version=__version__,
        settings=SettingsInfo(
            model_kind=settings.model_kind, floor=settings.floor,
            weights={name: float(settings.weights[name]) for name in TOKEN_COMPONENTS},
            fingerprint_policy=settings.fingerprint_policy, seed=settings.seed,
            resamples=settings.resamples, confidence=settings.confidence, horizon_pairs=settings.horizon_pairs,
        ),  # fmt: skip
        store=store_info,
        arms=arms,
        tasks=[TaskEntry(task, info.tier, info.bonus, list(info.arms), info.excluded) for task, info in catalogue.items()],
        notices=[],
        headline=headline,
        coverage=[_arm_coverage(context, arm) for arm in arms],
        cells=cells,
        tiers=_tiers(context, headline_tasks),
        components=components,
        outcomes=[_outcomes(context, arm) for arm in arms],
        comparisons=_comparisons(context),
        pass_hat_k=[_pass_hat_k(context, arm, headline_tasks) for arm in arms],
        bonus=Bonus(bonus_tasks, [summaries[(arm, task)] for task in bonus_tasks for arm in arms]),
        provenance=provenance,
        cost_per_success=_cost_per_success(context, headline_tasks),
        hosts=where_trials_ran(places, arms),
        definitions=arm_definitions(every_group, arms, settings, StoredConditions(store), z, context.scored_tasks()),
        dollars=dollars_table(context, headline_tasks, priced),
    )
    return dataclasses.replace(report, notices=_notices(report, context))


def _catalogue(settings: ReportSettings, summaries: Mapping[tuple[str, str], CellSummary]) -> dict[str, TaskInfo]:
    if settings.tasks is not None:
        return dict(settings.tasks)
    found: dict[str, TaskInfo] = {}
    for (_, task), summary in sorted(summaries.items()):
        known = found.get(task)
        tier = known.tier if known and known.tier else summary.tier
        found[task] = TaskInfo(
            tier=tier, bonus=(known.bonus if known else False) or summary.bonus, arms=known.arms if known else ()
        )
    return dict(sorted(found.items()))


def _problem_text(store: Store | StoreSet, problem: Problem) -> str:
    try:
        where = problem.path.relative_to(store.root).as_posix()
    except ValueError:
        where = str(problem.path)
    return f"{where}:{problem.line}: {problem.message}"


def _check_horizon(store: Store | StoreSet, settings: ReportSettings) -> None:
    """The settings' horizon_pairs must be the one the samples were recorded with (horizon.py): the claims
    the plan made are the ones the report prints. A store that records none (in memory) is not checked."""
    from ...horizon import describe, horizon_conflict, recorded_horizons

    stores = getattr(store, "stores", [store])
    if not all(hasattr(one, "samples_path") for one in stores):
        return
    conflict = horizon_conflict(settings.horizon_pairs, recorded_horizons(stores, settings.model_kind))
    if conflict is not None:
        raise ReportError(f"the report's settings have {describe(settings.horizon_pairs)}, but {conflict}; "
                          f"allowed: the horizon the samples were recorded with")

