"""The figures: from per-cell summaries to every table of the report (statistics.py has the formulas).

How the figures are made (the README repeats this):

* Only ``scored`` samples enter success, tokens, turns and duration. ``invalid`` and ``error`` samples
  are counted apart per arm. A ``hung`` trial counts with whatever usage it had (it is not zeroed, so
  an arm that hangs never looks cheaper for it).
* Per-task means first, then the mean over tasks: every task weighs the same, however deep its cell.
  The "median" beside a mean is the mean over the same tasks of the per-task medians, so the gap
  between the two shows skew within tasks and nothing else.
* The headline and the per-tier, per-component and pass^k tables use only the tasks where every
  reported arm has at least ``floor`` scored trials, and say which; an arm with no scored sample at
  all takes no part in that choice (a notice names it), so one broken arm does not empty the table.
  Pairwise comparisons use the tasks where both arms of the pair meet the floor.
* Per-arm intervals are about tasks like these and need MIN_TASKS tasks: success is the t interval over
  task rates widened to the pooled Wilson interval; positive figures (tokens, turns, times, cost) the
  lognormal generalized interval over task means, seeded per arm and table from ``settings.seed`` so
  the same store always gives byte-identical output. Success per cell: Wilson.
* A comparison is claimed for these tasks when the e-process over paired trials (in the order the
  report could first see them; success: the sign e-process; tokens: statistics.token_e_process on
  the paired log-ratios, which weighs how much dearer, not only which) reaches the family's Holm
  level and the mean difference points the same way; such a claim also generalizes to tasks like these when the sign-flip test over
  per-task differences (Holm-adjusted) and their t interval exclude zero. Otherwise the verdict says
  "not distinguishable at this sample size" with, for success, the minimum detectable effect of the
  claim rule and, for tokens, the ratio a/b with its anytime-valid interval.
* Cost per verified success (these tasks): mean tokens per trial / mean pass rate over the headline
  tasks, with Fieller's interval (statistics.cost_per_success), per arm and as a ratio per pair.
* Provenance: within a cell, samples of different fingerprints (model, arm/task definition, skill
  text, tool version) are never pooled. With the bench known (its current definitions in the
  settings) every figure uses each cell's current conditions and scoring only, whatever else a merge
  brought in; without it, each cell's newest fingerprint (the one most recently seen). ``newest``
  states how many samples were left out and why, ``group`` additionally shows every fingerprint group
  of every cell with its own figures.
  Real and scripted samples live in separate folders and are reported one kind at a time.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .. import __version__
from .. import statistics as stats
from ..sample import (
    MODEL_KINDS,
    OUTCOME_CONFUSED,
    OUTCOME_HUNG,
    OUTCOME_INCORRECT,
    OUTCOME_PASS,
    TOKEN_COMPONENTS,
)
from ..store import DUPLICATE, STALE_PREFIX, Problem, Store, StoreSet
from .model import (
    COVERED,
    PARTIAL,
    MISSING,
    REPORT_SCHEMA_VERSION,
    ArmCoverage,
    Bonus,
    CellFigure,
    CellSummary,
    Comparison,
    ComponentRow,
    CostPerSuccessPair,
    CostPerSuccessRow,
    CostPerSuccessTable,
    CoverageCount,
    Figure,
    Headline,
    HeadlineRow,
    OutcomeRow,
    SCOPE_TASKS_LIKE_THESE,
    SCOPE_THESE_TASKS,
    PairComparison,
    WithinTasks,
    PassHatK,
    PassK,
    Provenance,
    Rate,
    Report,
    ReportSettings,
    SettingsInfo,
    StoreInfo,
    TaskEntry,
    TaskInfo,
    TierRow,
    TierSection,
    names_in_prose,
    p_text,
    plural,
)
from .reading import Trial, empty_cell, newest, read_cell, summarize_cell


@dataclass
class _Context:
    settings: ReportSettings
    arms: list[str]
    catalogue: dict[str, TaskInfo]
    cells: dict[tuple[str, str], CellSummary]  # (arm, task) -> summary, every arm x catalogue task
    z: float
    trials: dict[tuple[str, str], list[Trial]]  # (arm, task) -> scored trials of the reported group, oldest first
    paired: dict[tuple[str, str, tuple[str, ...]], list[tuple[Trial, Trial]]] = dataclasses.field(default_factory=dict)

    def seed(self, *labels: str) -> int:
        return stats.derive_seed(self.settings.seed, *labels)

    def scored_tasks(self) -> list[str]:
        """The tasks every scored table counts: not bonus, not left out by the bench (its capability probe)."""
        return [task for task, info in self.catalogue.items() if not info.bonus and not info.excluded]

    def covered(self, arm: str, task: str) -> bool:
        return self.cells[(arm, task)].coverage == COVERED


def build_report(store: Store | StoreSet, settings: ReportSettings | None = None) -> Report:
    """Read the store one cell at a time and compute every table. Never holds a transcript."""
    settings = settings or ReportSettings()
    settings.validate()
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
    samples_read = usage_unknown = 0
    for cell in selected:
        groups = read_cell(store, cell, weights, problems, settings.definitions)
        samples_read += sum(group.samples for group in groups.values())
        definition = (settings.definitions or {}).get((cell.arm, cell.task))
        # The group the cell reports (None: none usable): with the bench known its current conditions
        # only, never samples of another bench or model merged in, however recent.
        used = groups.get(definition.conditions) if definition is not None else newest(groups)
        summaries[(cell.arm, cell.task)] = summarize_cell(cell.arm, cell.task, groups, used, settings.floor, z)
        usage_unknown += used.usage_unknown if used is not None else 0
        trials[(cell.arm, cell.task)] = used.trials if used is not None else []

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
            resamples=settings.resamples, confidence=settings.confidence,
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


def _problem_text(store: Store, problem: Problem) -> str:
    try:
        where = problem.path.relative_to(store.root).as_posix()
    except ValueError:
        where = str(problem.path)
    return f"{where}:{problem.line}: {problem.message}"


def _arms_without_scores(context: _Context) -> list[str]:
    """Arms with no scored sample in any scored task (every trial invalid or errored, or none yet)."""
    return [arm for arm in context.arms if not any(context.cells[(arm, t)].scored for t in context.scored_tasks())]


def _headline_arms(context: _Context) -> list[str]:
    """The arms the headline tasks are chosen for: an arm with no scored sample at all is left out
    (and named), so one broken arm does not empty the table for the others."""
    without = _arms_without_scores(context)
    return [arm for arm in context.arms if arm not in without] or list(context.arms)


def _every_headline_arm(context: _Context) -> str:
    left_out = [arm for arm in context.arms if arm not in _headline_arms(context)]
    return f"every arm but {names_in_prose(left_out)} (no scored sample)" if left_out else "every arm"


def _headline_tasks(context: _Context) -> list[str]:
    if not context.arms:
        return []
    arms = _headline_arms(context)
    return [t for t in context.scored_tasks() if all(context.covered(arm, t) for arm in arms)]


# -- figures over a set of tasks ----------------------------------------------------------------------
MIN_TASKS = stats.MIN_TASKS_FOR_INTERVAL
SUCCESS_METHOD = "t over task rates, widened to pooled Wilson"
LOGNORMAL_METHOD = "lognormal generalized interval over task means"
T_METHOD = "t over task means"
NO_INTERVAL = f"none: fewer than {MIN_TASKS} tasks"
_Pick = Callable[[CellSummary], CellFigure]


def _interval_over_tasks(context: _Context, values: Sequence[float], seed: int) -> tuple[float | None, float | None, str]:
    """The interval of a per-arm figure about tasks like these (the README's "How the figures are computed").

    Positive values (costs, tokens, turns, times: right-skewed over tasks) get the lognormal
    generalized interval; a figure with a zero task mean gets the t interval, cut at 0 (it cannot be
    negative). Fewer than MIN_TASKS tasks get no interval at all.
    """
    if len(values) < MIN_TASKS:
        return None, None, NO_INTERVAL
    confidence = context.settings.confidence
    if all(v > 0 for v in values):
        low, high = stats.lognormal_mean_interval(
            values, confidence=confidence, draws=context.settings.resamples, seed=seed
        )
        return low, high, LOGNORMAL_METHOD
    low, high = stats.t_interval(values, confidence=confidence)
    return max(0.0, low), high, T_METHOD


def _arm_figures(
    context: _Context, arm: str, tasks: Sequence[str], picks: Mapping[str, _Pick], *labels: str
) -> tuple[dict[str, Figure], Rate]:
    """One arm's figures over a set of tasks: per-task means first, then the mean over tasks."""
    cells = [context.cells[(arm, task)] for task in sorted(tasks)]
    figures = {}
    for name, pick in picks.items():
        chosen = [figure for figure in map(pick, cells) if figure.mean is not None]
        if not chosen:
            figures[name] = Figure(None, None, None, None, 0, 0, NO_INTERVAL)
            continue
        means = [f.mean for f in chosen if f.mean is not None]
        # One seed per arm and table: its figures share the Monte-Carlo draws (statistics._pivot_draws).
        low, high, method = _interval_over_tasks(context, means, context.seed(*labels, arm))
        medians = [f.median for f in chosen if f.median is not None]
        figures[name] = Figure(
            mean=stats.mean(means),
            low=low,
            high=high,
            median=stats.mean(medians) if medians else None,
            n_tasks=len(chosen),
            n_samples=sum(f.n for f in chosen),
            method=method,
        )
    return figures, _success_rate(context, [cell for cell in cells if cell.scored])


def _success_rate(context: _Context, cells: Sequence[CellSummary]) -> Rate:
    """Mean over tasks of per-task pass rates, with an interval that cannot collapse to a point.

    The t interval alone says [100%, 100%] when every task passed every trial, which is exactly the
    overconfidence this report exists to prevent; so the interval is widened to include the Wilson
    interval of the pooled counts (honest at 0/n and n/n), then cut to [0, 1].
    """
    if not cells:
        return Rate(None, None, None, 0, 0, 0, NO_INTERVAL)
    rates = [c.success.successes / c.scored for c in cells]
    successes = sum(c.success.successes for c in cells)
    n = sum(c.scored for c in cells)
    if len(cells) < MIN_TASKS:
        return Rate(stats.mean(rates), None, None, successes, n, len(cells), NO_INTERVAL)
    low, high = stats.wilson_interval(successes, n, context.z)
    t_low, t_high = stats.t_interval(rates, confidence=context.settings.confidence)
    low, high = max(0.0, min(low, t_low)), min(1.0, max(high, t_high))
    return Rate(stats.mean(rates), low, high, successes, n, len(cells), SUCCESS_METHOD)


_HEADLINE_PICKS: dict[str, _Pick] = {
    "cost_equivalent": lambda c: c.cost_equivalent,
    "raw_tokens": lambda c: c.raw_tokens,
    "turns": lambda c: c.turns,
    "duration_s": lambda c: c.duration_s,
    "imputed_cost_usd": lambda c: c.imputed_cost_usd,
    **{name: (lambda c, name=name: c.components[name]) for name in TOKEN_COMPONENTS},  # type: ignore[misc]
}
_TIER_PICKS: dict[str, _Pick] = {"cost_equivalent": _HEADLINE_PICKS["cost_equivalent"]}


def _coverage_count(context: _Context, arm: str, tasks: Iterable[str]) -> CoverageCount:
    states = Counter(context.cells[(arm, task)].coverage for task in tasks)
    return CoverageCount(states[COVERED], states[PARTIAL], states[MISSING], sum(states.values()))


def _headline(context: _Context, tasks: list[str]) -> tuple[Headline, list[ComponentRow]]:
    """The headline rows and the per-component rows: both over the headline tasks, one set of draws per arm."""
    scored = context.scored_tasks()
    floor = context.settings.floor
    every_arm = _every_headline_arm(context)
    if not context.arms:
        note = "no arm has samples yet"
    elif not tasks:
        note = f"no task has {every_arm} at >= {floor} scored trials yet, so no figure can be compared"
    else:
        note = (
            f"means over {len(tasks)} of {plural(len(scored), 'task')}: those where {every_arm} has >= {floor} "
            "scored trials; per-task means first, each task weighs the same"
        )
    rows, components = [], []
    for arm in context.arms:
        figures, success = _arm_figures(context, arm, tasks, _HEADLINE_PICKS, "headline")
        rows.append(
            HeadlineRow(
                arm=arm,
                cost_equivalent=figures["cost_equivalent"],
                raw_tokens=figures["raw_tokens"],
                turns=figures["turns"],
                duration_s=figures["duration_s"],
                success=success,
                coverage=_coverage_count(context, arm, scored),
                imputed_cost_usd=figures["imputed_cost_usd"],
            )
        )
        components.append(ComponentRow(arm, *(figures[name] for name in TOKEN_COMPONENTS)))
    return Headline(tasks=tasks, note=note, rows=rows), components


def _arm_coverage(context: _Context, arm: str) -> ArmCoverage:
    by_state: dict[str, list[str]] = {COVERED: [], PARTIAL: [], MISSING: []}
    for task in context.scored_tasks():
        by_state[context.cells[(arm, task)].coverage].append(task)
    return ArmCoverage(
        arm=arm,
        covered=len(by_state[COVERED]),
        partial=len(by_state[PARTIAL]),
        missing=len(by_state[MISSING]),
        total=len(context.scored_tasks()),
        covered_tasks=by_state[COVERED],
        partial_tasks=by_state[PARTIAL],
        missing_tasks=by_state[MISSING],
    )


def _tier_order(context: _Context) -> list[str]:
    tiers: list[str] = []
    for task in context.scored_tasks():
        tier = context.catalogue[task].tier
        if tier not in tiers:
            tiers.append(tier)
    # With a bench catalogue its declaration order is meaningful; discovered tiers are sorted.
    return tiers if context.settings.tasks is not None else sorted(tiers)


def _tiers(context: _Context, headline_tasks: list[str]) -> list[TierSection]:
    sections = []
    for tier in _tier_order(context):
        tier_tasks = [t for t in context.scored_tasks() if context.catalogue[t].tier == tier]
        tasks = [t for t in headline_tasks if context.catalogue[t].tier == tier]
        rows = []
        for arm in context.arms:
            figures, success = _arm_figures(context, arm, tasks, _TIER_PICKS, "tier", tier)
            rows.append(TierRow(arm, figures["cost_equivalent"], success, _coverage_count(context, arm, tier_tasks)))
        sections.append(TierSection(tier=tier, tasks=tasks, catalogue_tasks=len(tier_tasks), rows=rows))
    return sections


def _outcomes(context: _Context, arm: str) -> OutcomeRow:
    """Counts over every non-bonus task of the catalogue (not only the headline tasks)."""
    cells = [context.cells[(arm, task)] for task in context.scored_tasks()]
    return OutcomeRow(
        arm=arm,
        samples=sum(c.samples for c in cells),
        scored=sum(c.scored for c in cells),
        passed=sum(c.outcomes[OUTCOME_PASS] for c in cells),
        incorrect=sum(c.outcomes[OUTCOME_INCORRECT] for c in cells),
        confused=sum(c.outcomes[OUTCOME_CONFUSED] for c in cells),
        hung=sum(c.outcomes[OUTCOME_HUNG] for c in cells),
        invalid=sum(c.invalid for c in cells),
        error=sum(c.error for c in cells),
    )


def _pass_hat_k(context: _Context, arm: str, tasks: list[str]) -> PassHatK:
    cells = [context.cells[(arm, task)] for task in tasks]
    if not cells:
        return PassHatK(arm, 0, 0, [])
    k_max = min(c.scored for c in cells)
    counts = [(c.success.successes, c.scored) for c in cells]
    curve = stats.pass_hat_k_curve(counts, k_max)
    return PassHatK(arm, len(cells), k_max, [PassK(k, value) for k, value in enumerate(curve, start=1)])


# -- cost per verified success ------------------------------------------------------------------------------
COST_PER_SUCCESS_METHOD = (
    "mean cost-equivalent tokens per trial / mean pass rate, over the headline tasks (each task weighs the same); "
    "Fieller interval, the trials within each task the replicates"
)


def _cost_per_success(context: _Context, tasks: list[str]) -> CostPerSuccessTable:
    """Tokens per verified success per arm and per pair, about these tasks (trials with known usage)."""
    confidence = context.settings.confidence
    found: dict[str, stats.CostPerSuccess] = {}
    rows = []
    for arm in context.arms:
        cells = [
            [(cost, passed) for _, passed, cost in context.trials.get((arm, task), []) if cost is not None]
            for task in tasks
        ]
        if not cells or not all(cells):
            rows.append(CostPerSuccessRow(arm, None, None, None, None, None, sum(map(len, cells))))
            continue
        if all(len(cell) >= 2 for cell in cells):
            figure = found[arm] = stats.cost_per_success(cells, confidence=confidence)
            low, high = figure.low, figure.high
            estimate, per_trial, rate = figure.estimate, figure.tokens_per_trial, figure.success_rate
        else:  # one trial in some task: the figure without an interval
            per_trial = stats.mean(stats.mean(cost for cost, _ in cell) for cell in cells)
            rate = stats.mean(stats.mean(1.0 if passed else 0.0 for _, passed in cell) for cell in cells)
            estimate, low, high = (per_trial / rate if rate else None), None, None
        rows.append(CostPerSuccessRow(arm, estimate, low, high, per_trial, rate, sum(map(len, cells))))
    pairs = []
    for i, a in enumerate(context.arms):
        for b in context.arms[i + 1 :]:
            ratio = stats.cost_per_success_ratio(found[a], found[b], confidence=confidence) if a in found and b in found else None
            pairs.append(CostPerSuccessPair(a, b, *(ratio or (None, None, None))))
    return CostPerSuccessTable(SCOPE_THESE_TASKS, list(tasks), COST_PER_SUCCESS_METHOD, rows, pairs)


# -- comparisons ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _MetricSpec:
    key: str
    unit: str
    better: str
    values: Callable[[CellSummary], float | None]  # the cell's mean
    trial_value: Callable[[Trial], float | None]  # one trial's value, for the pairs within tasks (None: unknown)
    show: Callable[[float], str]  # a magnitude, e.g. "1,234 tokens" or "5.0 pp"


_COMPARED_METRICS = (
    _MetricSpec(
        "cost_equivalent", "cost-equivalent tokens per trial", "lower",
        lambda c: c.cost_equivalent.mean, lambda trial: trial[2], lambda v: f"{v:,.0f} tokens",
    ),
    _MetricSpec(
        "success", "success rate", "higher",
        lambda c: c.success.successes / c.scored if c.scored else None, lambda trial: 1.0 if trial[1] else 0.0,
        lambda v: f"{100 * v:.1f} pp",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class _Evidence:
    """Everything one (metric, pair) contributes before the family's Holm adjustment."""

    spec: _MetricSpec
    a: str
    b: str
    over_tasks: stats.PairedDifference
    within: stats.SignEvidence | stats.BettingEvidence
    signs: tuple[int, int]  # (non-zero pairs, pairs with a - b > 0)
    these_tasks: tuple[float, float, float] | None  # (estimate, low, high) of the paired trials; None: no pair
    mde: float | None
    mean_a: float | None
    mean_b: float | None
    clipped: int = 0  # token pairs whose ratio was beyond the clip (counted at the clip)


def _comparisons(context: _Context) -> list[Comparison]:
    """Every pair on both metrics, as one family: Holm over all of them, in both scopes."""
    pairs = [(a, b) for i, a in enumerate(context.arms) for b in context.arms[i + 1 :]]
    if not pairs:
        return []
    alpha = 1.0 - context.settings.confidence
    family_size = len(pairs) * len(_COMPARED_METRICS)
    claim_e = family_size / alpha
    found = [_evidence(context, spec, a, b, claim_e, alpha / family_size) for spec in _COMPARED_METRICS for a, b in pairs]
    within_adjusted = stats.holm_adjust([e.within.anytime_p for e in found])
    over_tested = [e.over_tasks.p_value for e in found if e.over_tasks.p_value is not None]
    over_adjusted = iter(stats.holm_adjust(over_tested))
    out: dict[str, list[PairComparison]] = {spec.key: [] for spec in _COMPARED_METRICS}
    for evidence, within_p in zip(found, within_adjusted):
        over_p = next(over_adjusted) if evidence.over_tasks.p_value is not None else None
        out[evidence.spec.key].append(_pair(evidence, within_p, over_p, alpha, claim_e))
    return [
        Comparison(spec.key, spec.unit, spec.better, family_size > 1, family_size, out[spec.key])
        for spec in _COMPARED_METRICS
    ]


def _evidence(context: _Context, spec: _MetricSpec, a: str, b: str, claim_e: float, level: float) -> _Evidence:
    shared = [t for t in context.scored_tasks() if context.covered(a, t) and context.covered(b, t)]
    per_a = {t: [v] for t in shared if (v := spec.values(context.cells[(a, t)])) is not None}
    per_b = {t: [v] for t in shared if (v := spec.values(context.cells[(b, t)])) is not None}
    over_tasks = stats.paired_difference(
        per_a, per_b, resamples=context.settings.resamples, seed=context.seed("compare", spec.key, a, b),
        confidence=context.settings.confidence,
    )  # fmt: skip
    tasks = over_tasks.tasks
    trials = {(arm, t): context.trials.get((arm, t), []) for arm in (a, b) for t in tasks}
    key = (a, b, tasks)
    if key not in context.paired:  # the same order serves both metrics
        context.paired[key] = paired_in_time_order(trials, a, b, tasks, context.settings.floor)
    differences = [_difference(spec, trial_a, trial_b) for trial_a, trial_b in context.paired[key]]
    signs = (sum(d != 0 for d in differences), sum(d > 0 for d in differences))
    within: stats.SignEvidence | stats.BettingEvidence
    mde = None
    clipped = 0
    if spec.key == "success":
        within = stats.sign_e_process(differences)
        pairs_per_task = [min(len(trials[(a, t)]), len(trials[(b, t)])) for t in tasks]
        base = [(per_a[t][0] + per_b[t][0]) / 2.0 for t in tasks]
        mde = stats.success_mde(base, pairs_per_task, claim_e) if tasks else None
        bound, values = 1.0, differences
    else:
        # By how much, not only which: the betting e-process on the paired log-ratios log(a / b), clipped.
        bound = stats.TOKEN_LOG_RATIO_CLIP
        ratios = [
            stats.token_log_ratio(value_b, value_a)
            for trial_a, trial_b in context.paired[key]
            if (value_a := spec.trial_value(trial_a)) is not None and (value_b := spec.trial_value(trial_b)) is not None
        ]  # a pair with unknown usage carries no evidence and is left out
        clipped = sum(abs(value) > bound for value in ratios)
        values = [stats.clip(value, bound) for value in ratios]
        within = stats.token_e_process(values, bound=bound)
    these_tasks = None
    if values:
        low, high = stats.confidence_sequence(values, low=-bound, high=bound, alpha=level)[-1]
        these_tasks = (stats.mean(values), low, high)
        if spec.key != "success":
            these_tasks = (math.exp(these_tasks[0]), math.exp(low), math.exp(high))
    mean_a = stats.mean(per_a[t][0] for t in tasks) if tasks else None
    mean_b = stats.mean(per_b[t][0] for t in tasks) if tasks else None
    return _Evidence(spec, a, b, over_tasks, within, signs, these_tasks, mde, mean_a, mean_b, clipped)


def _difference(spec: _MetricSpec, trial_a: Trial, trial_b: Trial) -> float:
    """One pair's difference; a pair with an unknown value (usage never reported) is a tie: no evidence."""
    value_a, value_b = spec.trial_value(trial_a), spec.trial_value(trial_b)
    return 0.0 if value_a is None or value_b is None else value_a - value_b


def paired_in_time_order(
    trials: Mapping[tuple[str, str], Sequence[Trial]], a: str, b: str, tasks: Sequence[str], floor: int
) -> list[tuple[Trial, Trial]]:
    """The paired trials (a, b), in the order the report could first have seen each pair.

    Within a task the k-th trial of a (by start time) pairs with the k-th of b. A pair counts from the
    later of its two start times, but never before its task had both arms at the floor (the moment
    the task joined the comparison). So a later reading only appends pairs to the sequence an earlier
    reading saw, and the sign e-process over it is one test martingale however often it is read.
    """
    keyed = []
    for task in tasks:
        cell_a, cell_b = trials[(a, task)], trials[(b, task)]
        joined = max(cell_a[floor - 1][0], cell_b[floor - 1][0])
        for k, (trial_a, trial_b) in enumerate(zip(cell_a, cell_b)):
            completed = max(trial_a[0], trial_b[0])
            keyed.append((max(joined, completed), completed, task, k, trial_a, trial_b))
    keyed.sort(key=lambda item: item[:4])
    return [(item[4], item[5]) for item in keyed]


def _pair(evidence: _Evidence, within_p: float, over_p: float | None, alpha: float, claim_e: float) -> PairComparison:
    result, within = evidence.over_tasks, evidence.within
    direction = 0 if not result.estimate else (1 if result.estimate > 0 else -1)
    # A claim needs the evidence within tasks (Holm-adjusted) and the mean difference to point the same way.
    claimed = within_p <= alpha and direction != 0 and within.direction == direction
    conflicting = within_p <= alpha and direction != 0 and within.direction == -direction
    generalizes = (
        claimed and over_p is not None and over_p < alpha and result.low is not None and result.high is not None
        and (result.low > 0 if direction > 0 else result.high < 0)
    )  # fmt: skip
    scope = SCOPE_TASKS_LIKE_THESE if generalizes else SCOPE_THESE_TASKS if claimed else None
    these = evidence.these_tasks
    e_max = within.max_up if within.direction >= 0 else within.max_down
    return PairComparison(
        arm_a=evidence.a, arm_b=evidence.b, n_tasks=result.n_tasks, tasks=list(result.tasks),
        mean_a=evidence.mean_a, mean_b=evidence.mean_b, estimate=result.estimate, low=result.low, high=result.high,
        relative=result.estimate / evidence.mean_b if result.estimate is not None and evidence.mean_b else None,
        p_value=result.p_value, p_adjusted=over_p,
        within_tasks=WithinTasks(
            pairs=within.pairs, nonzero=evidence.signs[0], positives=evidence.signs[1], e_value=within.e_value,
            e_max=e_max, anytime_p=within.anytime_p, p_adjusted=within_p, claim_e_value=claim_e,
            method=SIGN_METHOD if evidence.spec.key == "success" else BETTING_METHOD,
            scale="difference" if evidence.spec.key == "success" else "ratio",
            estimate=these[0] if these else None, low=these[1] if these else None, high=these[2] if these else None,
        ),
        minimum_detectable_effect=evidence.mde, distinguishable=claimed, scope=scope,
        verdict=_verdict(evidence, scope, over_p, alpha, conflicting),
    )  # fmt: skip


SIGN_METHOD = "sign e-process"
BETTING_METHOD = "betting e-process on clipped log-ratios mixed with the sign e-process"


def _ratio_text(a: str, b: str, these: tuple[float, float, float] | None, clipped: int = 0) -> str:
    """"a/b = 1.20x": the geometric mean ratio of the paired trials' tokens (clipped log-ratios). When
    pairs were clipped the ratio understates the gap, so the text says how many were counted at the clip."""
    if not these:
        return f"{a}/{b} unknown"
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    note = f" (counting {plural(clipped, 'paired trial')} more than {limit:g}x apart as {limit:g}x)" if clipped else ""
    return f"{a}/{b} = {these[0]:.2f}x{note}"


def _interval_text(low: float, high: float) -> str:
    """The anytime interval of the clipped ratio: an end at the clip means "that far or farther"."""
    limit = math.exp(stats.TOKEN_LOG_RATIO_CLIP)
    low_text = f"{low:.2f}x or less" if low <= 1.0 / limit * (1 + 1e-9) else f"{low:.2f}x"
    high_text = f"{high:.2f}x or more" if high >= limit * (1 - 1e-9) else f"{high:.2f}x"
    return f"{low_text} to {high_text}"


def _verdict(evidence: _Evidence, scope: str | None, over_p: float | None, alpha: float, conflicting: bool) -> str:
    """The sentence a reader quotes. Only a claimed difference gets a winner, and it names its scope."""
    spec, a, b, result, within = evidence.spec, evidence.a, evidence.b, evidence.over_tasks, evidence.within
    if result.n_tasks == 0 or result.estimate is None:
        return "not compared: no task has both arms at the floor"
    if scope is not None:
        direction = "lower" if result.estimate < 0 else "higher"
        winner = a if direction == spec.better else b
        nonzero, positives = evidence.signs
        if spec.key == "success":
            agreeing = positives if result.estimate > 0 else nonzero - positives
            support = f"{agreeing} of {plural(nonzero, 'differing paired trial')} agree"
        else:
            support = f"{_ratio_text(a, b, evidence.these_tasks, evidence.clipped)} over {plural(within.pairs, 'paired trial')}"
        head = (
            f"distinguishable for {scope}: {winner} is better ({a} is {direction} than {b} by "
            f"{spec.show(abs(result.estimate))}; {support})"
        )
        if scope == SCOPE_TASKS_LIKE_THESE:
            return head
        needed = stats.sign_flip_tasks_needed(alpha)
        if result.n_tasks < needed:
            return f"{head}; whether it generalizes to tasks like these needs at least {needed} shared tasks"
        return f"{head}; not shown to generalize to tasks like these (over tasks p {p_text(over_p or 1.0)})"
    if conflicting:
        return "not distinguishable at this sample size: most paired trials and the mean difference point opposite ways"
    mde = evidence.mde
    if spec.key != "success":
        if evidence.these_tasks is None:
            return "not distinguishable at this sample size: no paired trial with known usage"
        _, low, high = evidence.these_tasks
        return (
            f"not distinguishable at this sample size; for these tasks "
            f"{_ratio_text(a, b, evidence.these_tasks, evidence.clipped)} over {plural(within.pairs, 'paired trial')}, "
            f"anytime interval {_interval_text(low, high)}"
        )
    if mde is None:
        detail = "no difference is detectable with so few paired trials"
    elif mde == 0.0:
        detail = "trials within a cell do not vary, so any difference is detectable for these tasks"
    else:
        share = f" ({100 * mde / abs(evidence.mean_b):.0f}% of {b})" if evidence.mean_b and spec.key != "success" else ""
        detail = f"minimum detectable effect for these tasks ~ {spec.show(mde)}{share}"
    return f"not distinguishable at this sample size; {detail}"


# -- provenance and notices -----------------------------------------------------------------------------
def _provenance(context: _Context) -> Provenance:
    models: Counter[str] = Counter()
    for cell in context.cells.values():
        models.update(cell.models)
    older = [c for c in context.cells.values() if c.left_out_older]
    stale = sum(g.samples for c in older for g in c.groups if not g.used and g.fingerprint.startswith(STALE_PREFIX))
    return Provenance(
        policy=context.settings.fingerprint_policy,
        models=dict(sorted(models.items())),
        left_out_older=sum(c.left_out_older for c in older),
        cells_with_older=len(older),
        current_conditions=context.settings.definitions is not None,
        left_out_stale_scoring=stale,
        left_out_other_conditions=sum(c.left_out_older for c in older) - stale,
    )


def _notices(report: Report, context: _Context) -> list[str]:
    notes: list[str] = []
    kind = report.settings.model_kind
    if report.store.cells_read == 0:
        selection = " for the selected arms and tasks" if report.store.cells_outside_selection else ""
        notes.append(f"The store has no {kind}-model samples{selection}.")
    if report.store.other_model_kind_cells:
        other = "scripted" if kind == "real" else "real"
        notes.append(
            f"The store also holds {report.store.other_model_kind_cells} {other}-model cells, reported separately "
            f"(pytest --bench-report {'with' if other == 'scripted' else 'without'} --bench-scripted, or benchcell report "
            f"--model-kind {other}); the two kinds are never pooled."
        )
    if report.store.cells_outside_selection:
        notes.append(
            f"Left out {plural(report.store.cells_outside_selection, 'cell')} of arms or tasks outside the selection."
        )
    headline_arms = _headline_arms(context)
    for row, outcomes in zip(report.coverage, report.outcomes):
        if row.covered + row.partial == 0:
            why = (
                f"{outcomes.invalid} invalid and {outcomes.error} errored of its {plural(outcomes.samples, 'sample')}"
                if outcomes.samples
                else "no sample of the current conditions yet" if context.settings.definitions is not None
                else "no sample yet"
            )
            left_out = " and is left out of the headline, which is over the other arms" if row.arm not in headline_arms else ""
            notes.append(f"Arm {row.arm} has no scored samples ({why}){left_out}.")
    missing = sum(r.missing for r in report.coverage)
    partial = sum(r.partial for r in report.coverage)
    total = sum(r.total for r in report.coverage)
    if missing or partial:
        notes.append(
            f"Of {plural(total, 'cell')}, {missing} missing and {partial} partial (below the floor of "
            f"{report.settings.floor} scored trials); see Coverage."
        )
    scored = context.scored_tasks()
    headline = report.headline.tasks
    if 0 < len(headline) < MIN_TASKS:
        notes.append(
            f"With {plural(len(headline), 'headline task')} no interval can be honest (they need {MIN_TASKS} tasks, "
            "see How the figures are computed): the headline shows means without ranges."
        )
    if context.arms and scored and len(headline) < len(scored):
        left = [t for t in scored if t not in headline]
        notes.append(
            f"Headline over {len(headline)} of {len(scored)} tasks (those where {_every_headline_arm(context)} "
            "meets the floor); "
            f"left out: {names_in_prose(left)}."
        )
    provenance = report.provenance
    if provenance.left_out_stale_scoring:
        stale_cells = sum(
            any(not g.used and g.fingerprint.startswith(STALE_PREFIX) for g in c.groups) for c in context.cells.values()
        )
        rescore = "pytest --bench-rescore" + (" --bench-scripted" if kind == "scripted" else "")
        notes.append(
            f"Left out {plural(provenance.left_out_stale_scoring, 'sample')} in {plural(stale_cells, 'cell')} judged "
            f"under an older scoring definition (facts, changes or [checker]): `{rescore}` scores them again without "
            "running them, and they count again."
        )
    if provenance.left_out_other_conditions:
        other_cells = sum(
            any(not g.used and not g.fingerprint.startswith(STALE_PREFIX) for g in c.groups) for c in context.cells.values()
        )
        if provenance.current_conditions:
            notes.append(
                f"Left out {plural(provenance.left_out_other_conditions, 'sample')} of other conditions in "
                f"{plural(other_cells, 'cell')} (another model or bench, as merged from another store, earlier "
                "definitions of these cells, or other bounds: --bench-turn-cap/--bench-wall-clock-ms select those): "
                "never pooled with the current conditions; see Provenance."
            )
        else:
            notes.append(
                f"Left out {plural(provenance.left_out_other_conditions, 'sample')} of older fingerprints in "
                f"{plural(other_cells, 'cell')}: each cell reports its newest fingerprint only (with the bench's "
                "definitions, `benchcell report --config bench.toml`, the current conditions instead); see Provenance."
            )
    if len(report.provenance.models) > 1:
        listed = ", ".join(f"{model or 'unrecorded'} ({n} samples)" for model, n in report.provenance.models.items())
        notes.append(f"Samples of more than one model are in this report: {listed}; the JSON lists each cell's models.")
    if report.store.problems:
        notes.append(f"Skipped {plural(len(report.store.problems), 'unreadable line')} of the store; see Problems.")
    if report.store.duplicates:
        notes.append(
            f"Counted once: {plural(len(report.store.duplicates), 'sample')} stored more than once (same sample id): "
            f"{names_in_prose(report.store.duplicates)}."
        )
    if report.store.usage_unknown:
        notes.append(
            f"Left out of token figures: {plural(report.store.usage_unknown, 'scored sample')} with unknown usage "
            "(no model reply came, or replies came without usage); their outcomes count."
        )
    if len(report.store.stores) > 1:
        notes.append(f"Read {len(report.store.stores)} stores as one, each sample id once: {', '.join(report.store.stores)}.")
    for cell in [*report.cells, *report.bonus.cells]:
        broken = [failure for failure in cell.failures if failure.sandbox_blocked]
        if broken:
            notes.append(
                f"{cell.arm} \u00d7 {cell.task}: the sandbox kept the arm's own program from what it needs in "
                f"{plural(len(broken), 'listed trial')}, never scored against the arm: {broken[0].sandbox_blocked[0]}."
            )
    return notes

