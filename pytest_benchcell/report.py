"""Store -> report: tables with honest statistics, rendered as terminal lines, Markdown, JSON, HTML.

Pure: takes a Store and ReportSettings, returns a Report (plain dataclasses, every figure with its
interval and n), and renders it. matplotlib is imported only inside render_html.

How the figures are made (the README repeats this; statistics.py has the formulas):

* Only ``scored`` samples enter success, tokens, turns and duration. ``invalid`` and ``error`` samples
  are counted apart per arm. A ``hung`` trial counts with whatever usage it had (it is not zeroed, so
  an arm that hangs never looks cheaper for it).
* Per-task means first, then the mean over tasks: every task weighs the same, however deep its cell.
  The "median" beside a mean is the mean over the same tasks of the per-task medians, so the gap
  between the two shows skew within tasks and nothing else.
* The headline and the per-tier, per-component and pass^k tables use only the tasks where every
  reported arm has at least ``floor`` scored trials, and say which. Pairwise comparisons use the tasks
  where both arms of the pair meet the floor.
* Intervals: task-clustered percentile bootstrap (resampling tasks), seeded per figure from
  ``settings.seed`` so the same store always gives byte-identical output. Success per cell: Wilson.
* A comparison claims a difference only when its interval excludes zero *and* its sign-flip p-value
  (Holm-adjusted across the pairs when there are more than two arms) is below 1 - confidence;
  otherwise it says "not distinguishable at this sample size" and gives the minimum detectable effect.
* Provenance: within a cell, samples of different fingerprints (model, arm/task definition, skill
  text, tool version) are never pooled. Both policies compute every figure from each cell's newest
  fingerprint (the one most recently seen); ``newest`` states how many older samples were left out,
  ``group`` additionally shows every fingerprint group of every cell with its own figures.
  Real and scripted samples live in separate folders and are reported one kind at a time.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from . import statistics as stats
from .sample import (
    MODEL_KINDS,
    OUTCOME_CONFUSED,
    OUTCOME_HUNG,
    OUTCOME_INCORRECT,
    OUTCOME_PASS,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_RESCORE,
    STATUS_SCORED,
    TOKEN_COMPONENTS,
)
from .sample import Definition
from .store import DUPLICATE, STALE_PREFIX, Cell, Problem, Store, StoreSet

REPORT_SCHEMA_VERSION = 1
# Same defaults as [pricing] in bench.toml (config.DEFAULT_WEIGHTS): API price ratios to fresh input.
DEFAULT_WEIGHTS: dict[str, float] = {"fresh_input": 1.0, "cache_write": 1.25, "cache_read": 0.1, "output": 5.0}
FINGERPRINT_POLICIES = ("newest", "group")
COVERED, PARTIAL, MISSING = "covered", "partial", "missing"
COMPONENT_LABELS = {
    "fresh_input": "fresh input",
    "cache_write": "cache write",
    "cache_read": "cache read",
    "output": "output",
}
# Lists of task names inside prose notices are cut after this many names (the JSON keeps them all).
_NAMES_IN_PROSE = 8


class ReportError(ValueError):
    """The settings cannot produce a report. The message is complete and meant for the user."""


@dataclass(frozen=True)
class TaskInfo:
    tier: str
    bonus: bool = False
    arms: tuple[str, ...] = ()  # arms that can do the task (bonus tasks); () = every arm


@dataclass
class ReportSettings:
    floor: int = 3
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    model_kind: str = "real"
    arms: list[str] | None = None  # display order and selection; None: every arm found, sorted
    tasks: dict[str, TaskInfo] | None = None  # the bench's catalogue; None: discovered from samples
    fingerprint_policy: str = "newest"
    seed: int = 0
    resamples: int = stats.DEFAULT_RESAMPLES
    confidence: float = stats.DEFAULT_CONFIDENCE
    # (arm, task) -> the bench's current Definition: pools schema-1 samples of it and sets verdicts of
    # an older scoring apart (store.read_summaries). None: samples pool by their conditions alone.
    definitions: Mapping[tuple[str, str], Definition] | None = None

    def validate(self) -> None:
        if not isinstance(self.floor, int) or isinstance(self.floor, bool) or self.floor < 1:
            raise ReportError(f"floor must be a whole number >= 1, got {self.floor!r}")
        unknown = sorted(set(self.weights) - set(TOKEN_COMPONENTS))
        missing = [name for name in TOKEN_COMPONENTS if name not in self.weights]
        if unknown or missing:
            raise ReportError(
                f"weights need exactly the components {', '.join(TOKEN_COMPONENTS)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + (f"; missing: {', '.join(missing)}" if missing else "")
            )
        for name, value in self.weights.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or math.isinf(value):
                raise ReportError(f"weight {name} must be a finite number >= 0, got {value!r}")
        if self.model_kind not in MODEL_KINDS:
            raise ReportError(f"model kind must be one of {', '.join(MODEL_KINDS)}, got {self.model_kind!r}")
        if self.fingerprint_policy not in FINGERPRINT_POLICIES:
            raise ReportError(
                f"fingerprint policy must be one of {', '.join(FINGERPRINT_POLICIES)}, got {self.fingerprint_policy!r}"
            )
        if self.arms is not None and len(set(self.arms)) != len(self.arms):
            raise ReportError(f"arms are listed more than once: {self.arms}")
        if not isinstance(self.resamples, int) or self.resamples < 100:
            raise ReportError(f"resamples must be a whole number >= 100, got {self.resamples!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ReportError(f"confidence must be in [0.5, 1), got {self.confidence!r}")


# =====================================================================================================
# The report: plain data. Field names are the JSON keys (see data/report.schema.json).
# =====================================================================================================
@dataclass(frozen=True)
class Figure:
    """A mean over tasks of per-task means, with its task-clustered bootstrap interval."""

    mean: float | None
    low: float | None  # None when fewer than two tasks (no spread can be estimated)
    high: float | None
    median: float | None  # mean over the same tasks of the per-task medians
    n_tasks: int
    n_samples: int


@dataclass(frozen=True)
class Rate:
    rate: float | None
    low: float | None
    high: float | None
    successes: int
    n_samples: int
    n_tasks: int
    method: str


@dataclass(frozen=True)
class CellFigure:
    mean: float | None
    median: float | None
    n: int


@dataclass(frozen=True)
class CoverageCount:
    covered: int
    partial: int
    missing: int
    total: int


@dataclass(frozen=True)
class FingerprintGroup:
    fingerprint: str
    samples: int
    scored: int
    passes: int
    cost_equivalent_mean: float | None
    first_seen: str
    last_seen: str
    used: bool


@dataclass(frozen=True)
class CellSummary:
    arm: str
    task: str
    tier: str
    bonus: bool
    coverage: str  # covered | partial | missing
    samples: int  # every sample of the used fingerprint, whatever its status
    scored: int
    invalid: int
    error: int
    outcomes: dict[str, int]
    success: Rate
    cost_equivalent: CellFigure
    raw_tokens: CellFigure
    turns: CellFigure
    duration_s: CellFigure
    imputed_cost_usd: CellFigure
    components: dict[str, CellFigure]
    fingerprint: str | None
    left_out_older: int
    groups: list[FingerprintGroup]
    models: dict[str, int]  # model -> samples of the used fingerprint


@dataclass(frozen=True)
class HeadlineRow:
    arm: str
    cost_equivalent: Figure
    raw_tokens: Figure
    turns: Figure
    duration_s: Figure
    success: Rate
    coverage: CoverageCount
    imputed_cost_usd: Figure


@dataclass(frozen=True)
class Headline:
    tasks: list[str]
    note: str
    rows: list[HeadlineRow]


@dataclass(frozen=True)
class ArmCoverage:
    arm: str
    covered: int
    partial: int
    missing: int
    total: int
    covered_tasks: list[str]
    partial_tasks: list[str]
    missing_tasks: list[str]


@dataclass(frozen=True)
class TierRow:
    arm: str
    cost_equivalent: Figure
    success: Rate
    coverage: CoverageCount


@dataclass(frozen=True)
class TierSection:
    tier: str
    tasks: list[str]  # the tier's headline tasks (every arm at the floor)
    catalogue_tasks: int
    rows: list[TierRow]


@dataclass(frozen=True)
class ComponentRow:
    arm: str
    fresh_input: Figure
    cache_write: Figure
    cache_read: Figure
    output: Figure


@dataclass(frozen=True)
class OutcomeRow:
    arm: str
    samples: int
    scored: int
    passed: int
    incorrect: int
    confused: int
    hung: int
    invalid: int
    error: int


@dataclass(frozen=True)
class PairComparison:
    arm_a: str
    arm_b: str
    n_tasks: int
    tasks: list[str]
    mean_a: float | None
    mean_b: float | None
    estimate: float | None  # mean over shared tasks of (a - b)
    low: float | None
    high: float | None
    relative: float | None  # estimate / mean_b
    p_value: float | None
    p_adjusted: float | None
    minimum_detectable_effect: float | None
    distinguishable: bool
    verdict: str


@dataclass(frozen=True)
class Comparison:
    metric: str
    unit: str
    better: str  # lower | higher
    holm_adjusted: bool
    pairs: list[PairComparison]


@dataclass(frozen=True)
class PassK:
    k: int
    value: float


@dataclass(frozen=True)
class PassHatK:
    arm: str
    n_tasks: int
    k_max: int
    values: list[PassK]


@dataclass(frozen=True)
class Bonus:
    tasks: list[str]
    cells: list[CellSummary]


@dataclass(frozen=True)
class Provenance:
    policy: str
    models: dict[str, int]  # model -> samples used
    left_out_older: int
    cells_with_older: int


@dataclass(frozen=True)
class StoreInfo:
    cells_read: int
    samples_read: int
    samples_used: int
    other_model_kind_cells: int
    cells_outside_selection: int
    problems: list[str]
    duplicates: list[str]
    usage_unknown: int
    stores: list[str]


@dataclass(frozen=True)
class SettingsInfo:
    model_kind: str
    floor: int
    weights: dict[str, float]
    fingerprint_policy: str
    seed: int
    resamples: int
    confidence: float


@dataclass(frozen=True)
class TaskEntry:
    task: str
    tier: str
    bonus: bool
    arms: list[str] = field(default_factory=list)  # arms that can do it; [] = every arm


@dataclass(frozen=True)
class Report:
    report_schema: int
    plugin_version: str
    settings: SettingsInfo
    store: StoreInfo
    arms: list[str]
    tasks: list[TaskEntry]
    notices: list[str]
    headline: Headline
    coverage: list[ArmCoverage]
    cells: list[CellSummary]
    tiers: list[TierSection]
    components: list[ComponentRow]
    outcomes: list[OutcomeRow]
    comparisons: list[Comparison]
    pass_hat_k: list[PassHatK]
    bonus: Bonus
    provenance: Provenance

    def to_dict(self) -> dict[str, Any]:
        return _rounded(dataclasses.asdict(self))


def _rounded(value: Any) -> Any:
    # Six decimals is far below anything the report claims, and keeps the JSON free of float noise.
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


# =====================================================================================================
# Reading the store: one cell at a time, each sample reduced at once to the few numbers the report uses
# =====================================================================================================
_OUTCOME_NAMES = (OUTCOME_PASS, OUTCOME_INCORRECT, OUTCOME_CONFUSED, OUTCOME_HUNG)
_NUMBERS = (int, float)  # matched with type(), not isinstance(): True is an int but never a count
_take_tokens = operator.itemgetter(*TOKEN_COMPONENTS)

# What the report keeps of one sample: plain values only (see _reduce). Positions in the tuple:
_SEEN, _STATUS, _OUTCOME, _TOKENS, _TURNS, _DURATION, _COST, _MODEL, _TIER, _BONUS = range(10)
_Row = tuple[Any, ...]


_SAMPLE_FIELDS = ("provenance", "started_at", "status", "outcome", "usage", "turns", "duration_ms", "cost_usd",
                  "model", "tier", "bonus")  # fmt: skip
_take_fields = operator.itemgetter(*_SAMPLE_FIELDS)


def _tokens_of(usage: Any) -> tuple[int, int, int, int] | None:
    """The four components of usage.total; None when the usage is unknown (null); a component that is
    absent or malformed counts as 0, never guessed."""
    total = usage.get("total") if type(usage) is dict else None
    if total is None and type(usage) is dict and "total" in usage:
        return None  # recorded as unknown: left out of token figures, counted in outcomes
    if type(total) is not dict:
        return (0, 0, 0, 0)
    try:
        a, b, c, d = _take_tokens(total)
        if type(a) is int and type(b) is int and type(c) is int and type(d) is int:
            return (a, b, c, d)
    except KeyError:
        pass
    return tuple(int(total.get(name) or 0) for name in TOKEN_COMPONENTS)  # type: ignore[return-value]


def _reduce(sample: Mapping[str, Any]) -> tuple[str, _Row]:
    """(fingerprint, row): the few values the report needs; the transcript goes with the dict.

    Runs once per sample of the store, hence the single itemgetter call for a complete sample. Rows
    hold only atomic values (tokens become a tuple of ints), which also keeps them cheap for the
    garbage collector: surviving nested dicts would be rescanned again and again.
    """
    try:
        provenance, seen, status, outcome, usage, turns, duration, cost, model, tier, bonus = _take_fields(sample)
    except KeyError:  # an incomplete sample (written by hand, or by an older plugin): field by field
        provenance, seen, status, outcome, usage, turns, duration, cost, model, tier, bonus = (
            sample.get(name) for name in _SAMPLE_FIELDS
        )
    if not seen:
        seen = sample.get("ended_at") or ""
    fingerprint = str((provenance.get("fingerprint") if type(provenance) is dict else None) or "")
    return fingerprint, (seen, status, outcome, _tokens_of(usage), turns, duration, cost, model, tier, bonus)


class _Group:
    """The samples of one fingerprint in one cell, reduced to columns of numbers.

    Built from the rows _reduce() keeps per sample; the numbers of scored samples are kept (the
    medians need them), the samples themselves are not.
    """

    def __init__(self, fingerprint: str, rows: Sequence[_Row], weights: Sequence[float]) -> None:
        columns = list(zip(*rows))
        seen = [value if type(value) is str else str(value) for value in columns[_SEEN]]
        statuses = Counter(columns[_STATUS])
        models = Counter("" if model is None else str(model) for model in columns[_MODEL])
        self.fingerprint = fingerprint
        self.samples = len(rows)
        self.first_seen, self.last_seen = min(seen), max(seen)
        self.invalid, self.error = statuses[STATUS_INVALID], statuses[STATUS_ERROR]
        self.models = dict(sorted(models.items()))
        self.tier = str(next((tier for tier in columns[_TIER] if tier), ""))
        self.bonus = any(value is True for value in columns[_BONUS])

        scored = [row for row in rows if row[_STATUS] == STATUS_SCORED]
        self.scored = len(scored)
        self.outcomes = Counter(row[_OUTCOME] for row in scored)
        tokens = [row[_TOKENS] for row in scored if row[_TOKENS] is not None]
        self.usage_unknown = len(scored) - len(tokens)
        w0, w1, w2, w3 = weights
        # Hung trials are scored: they count here with whatever usage they had.
        self.cost_equivalent = [w0 * a + w1 * b + w2 * c + w3 * d for a, b, c, d in tokens]
        self.components: list[tuple[int, ...]] = list(zip(*tokens)) if tokens else [(), (), (), ()]
        self.turns = [float(row[_TURNS]) for row in scored if type(row[_TURNS]) in _NUMBERS]
        self.duration_s = [row[_DURATION] / 1000.0 for row in scored if type(row[_DURATION]) in _NUMBERS]
        self.cost_usd = [float(row[_COST]) for row in scored if type(row[_COST]) in _NUMBERS]

    def summary(self, used: bool) -> FingerprintGroup:
        return FingerprintGroup(
            fingerprint=self.fingerprint,
            samples=self.samples,
            scored=self.scored,
            passes=self.outcomes[OUTCOME_PASS],
            cost_equivalent_mean=stats.mean(self.cost_equivalent) if self.cost_equivalent else None,
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            used=used,
        )


def _read_cell(
    store: Store | StoreSet, cell: Cell, weights: Sequence[float], problems: list[Problem],
    definitions: Mapping[tuple[str, str], Definition] | None = None,
) -> dict[str, _Group]:  # fmt: skip
    """Stream one cell's file and split its reduced samples by fingerprint.

    Rescore records (--bench-rescore) are not samples: the latest one for a sample replaces that
    sample's outcome, as sample.effective_samples does, without holding the samples themselves.
    """
    by_fingerprint: dict[str, list[_Row]] = {}
    where: dict[str, tuple[str, int]] = {}  # sample id -> (fingerprint, row index)
    rescored: dict[str, Any] = {}  # sample id -> latest outcome
    # One reader (store.read_summaries): the checked index where it can, else the samples; rescores
    # applied and duplicate ids dropped there already.
    for sample in store.iter_summaries(problems, cells=[cell], definitions=definitions):
        if sample.get("status") == STATUS_RESCORE:
            rescored[str(sample.get("rescore_of"))] = sample.get("outcome")
            continue
        fingerprint, row = _reduce(sample)
        rows = by_fingerprint.get(fingerprint)
        if rows is None:
            rows = by_fingerprint[fingerprint] = []
        where[str(sample.get("id"))] = (fingerprint, len(rows))
        rows.append(row)
    for sample_id, outcome in rescored.items():
        if sample_id in where:
            fingerprint, index = where[sample_id]
            row = by_fingerprint[fingerprint][index]
            by_fingerprint[fingerprint][index] = row[:_OUTCOME] + (outcome,) + row[_OUTCOME + 1 :]
    return {fingerprint: _Group(fingerprint, rows, weights) for fingerprint, rows in by_fingerprint.items()}


def settings_for_bench(bench: Any, *, model_kind: str = "real") -> ReportSettings:
    """Report settings from a loaded bench.toml (config.Bench): floor, weights, arms, task catalogue."""
    return ReportSettings(
        floor=bench.floor,
        weights={name: float(bench.weights[name]) for name in TOKEN_COMPONENTS},
        model_kind=model_kind,
        arms=list(bench.arms),
        definitions={(arm, task): bench.definition(arm, task) for arm in bench.arms for task in bench.tasks},
        tasks={
            task_id: TaskInfo(tier=task.tier, bonus=task.bonus, arms=tuple(task.arms))
            for task_id, task in bench.tasks.items()
        },
    )


def _cell_figure(values: Sequence[float]) -> CellFigure:
    if not values:
        return CellFigure(None, None, 0)
    return CellFigure(stats.mean(values), stats.median(values), len(values))


def _summarize_cell(arm: str, task: str, groups: Mapping[str, _Group], floor: int, z: float) -> CellSummary:
    """Keep the cell's newest fingerprint group and summarize it; the others are only counted."""
    if not groups:
        return _empty_cell(arm, task, TaskInfo(""))
    # Newest = the fingerprint seen most recently; ties broken by name so the choice is stable. Verdicts
    # of an older scoring definition are never the ones used (a rescore brings them up to date).
    usable = [group for group in groups.values() if not group.fingerprint.startswith(STALE_PREFIX)]
    if not usable:
        any_group = next(iter(groups.values()))
        empty = _empty_cell(arm, task, TaskInfo(any_group.tier, any_group.bonus))
        summaries = [group.summary(False) for group in groups.values()]
        return dataclasses.replace(empty, left_out_older=sum(g.samples for g in groups.values()), groups=summaries)
    used = max(usable, key=lambda g: (g.last_seen, g.fingerprint))
    summaries = sorted(
        (group.summary(group is used) for group in groups.values()),
        key=lambda g: (g.last_seen, g.fingerprint),
        reverse=True,
    )
    n = used.scored
    passes = used.outcomes[OUTCOME_PASS]
    low, high = stats.wilson_interval(passes, n, z) if n else (None, None)
    return CellSummary(
        arm=arm,
        task=task,
        tier=used.tier,
        bonus=used.bonus,
        coverage=COVERED if n >= floor else PARTIAL if n else MISSING,
        samples=used.samples,
        scored=n,
        invalid=used.invalid,
        error=used.error,
        outcomes={name: used.outcomes[name] for name in _OUTCOME_NAMES},
        success=Rate(passes / n if n else None, low, high, passes, n, 1 if n else 0, "wilson"),
        cost_equivalent=_cell_figure(used.cost_equivalent),
        raw_tokens=_cell_figure([float(sum(t)) for t in zip(*used.components)]),
        turns=_cell_figure(used.turns),
        duration_s=_cell_figure(used.duration_s),
        imputed_cost_usd=_cell_figure(used.cost_usd),
        components={
            name: _cell_figure([float(v) for v in column]) for name, column in zip(TOKEN_COMPONENTS, used.components)
        },
        fingerprint=used.fingerprint,
        left_out_older=sum(g.samples for g in groups.values()) - used.samples,
        groups=summaries,
        models=used.models,
    )


def _empty_cell(arm: str, task: str, info: TaskInfo) -> CellSummary:
    nothing = CellFigure(None, None, 0)
    return CellSummary(
        arm=arm, task=task, tier=info.tier, bonus=info.bonus, coverage=MISSING, samples=0, scored=0,
        invalid=0, error=0, outcomes={name: 0 for name in _OUTCOME_NAMES},
        success=Rate(None, None, None, 0, 0, 0, "wilson"), cost_equivalent=nothing, raw_tokens=nothing,
        turns=nothing, duration_s=nothing, imputed_cost_usd=nothing,
        components={name: nothing for name in TOKEN_COMPONENTS}, fingerprint=None, left_out_older=0, groups=[],
        models={},
    )  # fmt: skip


def discover_tasks(store: Store | StoreSet, model_kind: str = "real") -> dict[str, TaskInfo]:
    """Task -> TaskInfo from the first readable sample of each task's first cell (cheap: one line each).

    For callers that need a catalogue before building the report (the CLI's --task filter).
    """
    found: dict[str, TaskInfo] = {}
    for cell in store.cells([model_kind]):
        if cell.task in found:
            continue
        for sample in store.iter_samples([], cells=[cell]):
            found[cell.task] = TaskInfo(tier=str(sample.get("tier") or ""), bonus=sample.get("bonus") is True)
            break
    return dict(sorted(found.items()))


# =====================================================================================================
# Building the report
# =====================================================================================================
@dataclass
class _Context:
    settings: ReportSettings
    arms: list[str]
    catalogue: dict[str, TaskInfo]
    cells: dict[tuple[str, str], CellSummary]  # (arm, task) -> summary, every arm x catalogue task
    z: float

    def seed(self, *labels: str) -> int:
        return stats.derive_seed(self.settings.seed, *labels)

    def scored_tasks(self) -> list[str]:
        return [task for task, info in self.catalogue.items() if not info.bonus]

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
    samples_read = usage_unknown = 0
    for cell in selected:
        groups = _read_cell(store, cell, weights, problems, settings.definitions)
        samples_read += sum(group.samples for group in groups.values())
        summary = summaries[(cell.arm, cell.task)] = _summarize_cell(cell.arm, cell.task, groups, settings.floor, z)
        usage_unknown += groups[summary.fingerprint].usage_unknown if summary.fingerprint in groups else 0

    catalogue = _catalogue(settings, summaries)
    for arm in arms:
        for task, info in catalogue.items():
            if (arm, task) not in summaries:
                summaries[(arm, task)] = _empty_cell(arm, task, info)
            elif settings.tasks is not None:
                # The bench's catalogue is the authority on tier and bonus, not what old samples say.
                summaries[(arm, task)] = dataclasses.replace(summaries[(arm, task)], tier=info.tier, bonus=info.bonus)
    context = _Context(settings, arms, catalogue, summaries, z)

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
    cells = [summaries[(arm, task)] for arm in arms for task in catalogue if not catalogue[task].bonus]
    bonus_tasks = [task for task, info in catalogue.items() if info.bonus]
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
        tasks=[TaskEntry(task, info.tier, info.bonus, list(info.arms)) for task, info in catalogue.items()],
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


def _headline_tasks(context: _Context) -> list[str]:
    if not context.arms:
        return []
    return [t for t in context.scored_tasks() if all(context.covered(arm, t) for arm in context.arms)]


# -- figures over a set of tasks ----------------------------------------------------------------------
SUCCESS_METHOD = "task-clustered bootstrap, widened to pooled Wilson"
_Pick = Callable[[CellSummary], CellFigure]


def _arm_figures(
    context: _Context, arm: str, tasks: Sequence[str], picks: Mapping[str, _Pick], *labels: str
) -> tuple[dict[str, Figure], Rate]:
    """One arm's figures over a set of tasks: per-task means first, then the mean over tasks.

    Intervals resample tasks (each cell's mean is one cluster: the clustered bootstrap of
    statistics.py, one stage). Metrics present on the same tasks share one set of resamples, which
    keeps them coherent and pays for the random draws once.
    """
    cells = [context.cells[(arm, task)] for task in sorted(tasks)]
    columns: dict[str, list[CellFigure]] = {name: [pick(cell) for cell in cells] for name, pick in picks.items()}
    present = {name: tuple(i for i, f in enumerate(figures) if f.mean is not None) for name, figures in columns.items()}
    scored = tuple(i for i, cell in enumerate(cells) if cell.scored)
    rates = [cells[i].success.successes / cells[i].scored for i in scored]

    # Group the metrics (and the success rate) by the tasks they are present on; bootstrap each group once.
    groups: dict[tuple[int, ...], list[tuple[str, list[float]]]] = {}
    for name, rows in present.items():
        groups.setdefault(rows, []).append((name, [columns[name][i].mean for i in rows]))  # type: ignore[misc]
    groups.setdefault(scored, []).append(("\0success", rates))
    intervals: dict[str, tuple[float, float]] = {}
    for rows, members in groups.items():
        if len(rows) < 2:
            continue  # one task has no spread to resample
        found = stats.bootstrap_mean_intervals(
            [values for _, values in members], resamples=context.settings.resamples,
            seed=context.seed(*labels, arm, *(name for name, _ in members)), confidence=context.settings.confidence,
        )  # fmt: skip
        intervals.update(zip((name for name, _ in members), found))

    figures = {}
    for name, rows in present.items():
        chosen = [columns[name][i] for i in rows]
        if not chosen:
            figures[name] = Figure(None, None, None, None, 0, 0)
            continue
        low, high = intervals.get(name, (None, None))
        medians = [f.median for f in chosen if f.median is not None]
        figures[name] = Figure(
            mean=stats.mean(f.mean for f in chosen if f.mean is not None),
            low=low,
            high=high,
            median=stats.mean(medians) if medians else None,
            n_tasks=len(chosen),
            n_samples=sum(f.n for f in chosen),
        )
    return figures, _success_rate(context, [cells[i] for i in scored], rates, intervals.get("\0success"))


def _success_rate(
    context: _Context, cells: Sequence[CellSummary], rates: Sequence[float], boot: tuple[float, float] | None
) -> Rate:
    """Mean over tasks of per-task pass rates, with an interval that cannot collapse to a point.

    The task bootstrap alone says [100%, 100%] when every task passed every trial, which is exactly
    the overconfidence this report exists to prevent; so the interval is widened to include the
    Wilson interval of the pooled counts, which stays honest at 0/n and n/n.
    """
    if not cells:
        return Rate(None, None, None, 0, 0, 0, SUCCESS_METHOD)
    successes = sum(c.success.successes for c in cells)
    n = sum(c.scored for c in cells)
    low, high = stats.wilson_interval(successes, n, context.z)
    if boot is not None:
        low, high = min(low, boot[0]), max(high, boot[1])
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
    """The headline rows and the per-component rows: both over the headline tasks, one bootstrap per arm."""
    scored = context.scored_tasks()
    floor = context.settings.floor
    if not context.arms:
        note = "no arm has samples yet"
    elif not tasks:
        note = f"no task has every arm at >= {floor} scored trials yet, so no figure can be compared"
    else:
        note = (
            f"means over {len(tasks)} of {_plural(len(scored), 'task')}: those where every arm has >= {floor} "
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


# -- comparisons ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _MetricSpec:
    key: str
    unit: str
    better: str
    values: Callable[[CellSummary], float | None]
    show: Callable[[float], str]  # a magnitude, e.g. "1,234 tokens" or "5.0 pp"


_COMPARED_METRICS = (
    _MetricSpec(
        "cost_equivalent", "cost-equivalent tokens per trial", "lower",
        lambda c: c.cost_equivalent.mean, lambda v: f"{v:,.0f} tokens",
    ),
    _MetricSpec(
        "success", "success rate", "higher",
        lambda c: c.success.successes / c.scored if c.scored else None, lambda v: f"{100 * v:.1f} pp",
    ),
)  # fmt: skip


def _comparisons(context: _Context) -> list[Comparison]:
    pairs = [(a, b) for i, a in enumerate(context.arms) for b in context.arms[i + 1 :]]
    if not pairs:
        return []
    return [_compare_metric(context, spec, pairs) for spec in _COMPARED_METRICS]


def _compare_metric(context: _Context, spec: _MetricSpec, pairs: list[tuple[str, str]]) -> Comparison:
    raw = []
    for a, b in pairs:
        shared = [t for t in context.scored_tasks() if context.covered(a, t) and context.covered(b, t)]
        per_a = {t: [v] for t in shared if (v := spec.values(context.cells[(a, t)])) is not None}
        per_b = {t: [v] for t in shared if (v := spec.values(context.cells[(b, t)])) is not None}
        result = stats.paired_difference(
            per_a, per_b, resamples=context.settings.resamples, seed=context.seed("compare", spec.key, a, b),
            confidence=context.settings.confidence,
        )  # fmt: skip
        raw.append((a, b, result, per_a, per_b))
    tested = [r.p_value for _, _, r, _, _ in raw if r.p_value is not None]
    holm = len(tested) > 1
    adjusted = iter(stats.holm_adjust(tested)) if holm else iter(tested)
    alpha = 1.0 - context.settings.confidence
    out = []
    for a, b, result, per_a, per_b in raw:
        p_adjusted = next(adjusted) if result.p_value is not None else None
        mean_a = stats.mean(v[0] for t, v in per_a.items() if t in result.tasks) if result.tasks else None
        mean_b = stats.mean(v[0] for t, v in per_b.items() if t in result.tasks) if result.tasks else None
        distinguishable = (
            result.n_tasks >= 2 and not result.spans_zero and p_adjusted is not None and p_adjusted < alpha
        )
        relative = result.estimate / mean_b if result.estimate is not None and mean_b else None
        out.append(
            PairComparison(
                arm_a=a, arm_b=b, n_tasks=result.n_tasks, tasks=list(result.tasks), mean_a=mean_a, mean_b=mean_b,
                estimate=result.estimate, low=result.low, high=result.high, relative=relative,
                p_value=result.p_value, p_adjusted=p_adjusted,
                # Below the tasks the exact test needs, no effect is detectable: the normal-theory MDE would lie.
                minimum_detectable_effect=(
                    result.minimum_detectable_effect if result.n_tasks >= _tasks_needed(alpha) else None
                ),
                distinguishable=distinguishable,
                verdict=_verdict(spec, a, b, result, p_adjusted, distinguishable, alpha, mean_b),
            )  # fmt: skip
        )
    return Comparison(metric=spec.key, unit=spec.unit, better=spec.better, holm_adjusted=holm, pairs=out)


def _verdict(
    spec: _MetricSpec,
    a: str,
    b: str,
    result: stats.PairedDifference,
    p_adjusted: float | None,
    distinguishable: bool,
    alpha: float,
    mean_b: float | None,
) -> str:
    """The sentence a reader quotes. Only a distinguishable difference gets a winner."""
    if result.n_tasks == 0 or result.estimate is None:
        return "not compared: no task has both arms at the floor"
    if result.n_tasks == 1:
        return "not distinguishable at this sample size: only 1 shared task, no interval can be estimated"
    if distinguishable:
        direction = "lower" if result.estimate < 0 else "higher"
        winner = a if direction == spec.better else b
        return f"distinguishable: {winner} is better ({a} is {direction} than {b} by {spec.show(abs(result.estimate))})"
    needed = _tasks_needed(alpha)
    if result.n_tasks < needed:
        return (
            f"not distinguishable at this sample size: with {result.n_tasks} shared tasks the paired test cannot "
            f"reach p < {alpha:g} whatever the difference (no minimum detectable effect; it needs at least "
            f"{needed} tasks)"
        )
    reason = ""
    if not result.spans_zero and result.p_value is not None and result.p_value >= alpha:
        reason = f" (the interval excludes zero but the paired sign-flip test does not, p {_p(result.p_value)})"
    elif not result.spans_zero and p_adjusted is not None:
        reason = f" after Holm adjustment (p {_p(p_adjusted)})"
    mde = result.minimum_detectable_effect
    if mde is None or mde == 0.0:
        detail = "every shared task gave the same difference, so no minimum detectable effect can be estimated"
    else:
        share = f" ({100 * mde / abs(mean_b):.0f}% of {b})" if mean_b and spec.key != "success" else ""
        detail = f"minimum detectable effect ~ {spec.show(mde)}{share}"
    return f"not distinguishable at this sample size{reason}; {detail}"


def _tasks_needed(alpha: float) -> int:
    """Fewest shared tasks for which the exact sign-flip test can reach p < alpha (2 / 2^T < alpha)."""
    tasks = 1
    while 2 / 2**tasks >= alpha:
        tasks += 1
    return tasks


# -- provenance and notices -----------------------------------------------------------------------------
def _provenance(context: _Context) -> Provenance:
    models: Counter[str] = Counter()
    for cell in context.cells.values():
        models.update(cell.models)
    older = [c for c in context.cells.values() if c.left_out_older]
    return Provenance(
        policy=context.settings.fingerprint_policy,
        models=dict(sorted(models.items())),
        left_out_older=sum(c.left_out_older for c in older),
        cells_with_older=len(older),
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
            f"Left out {_plural(report.store.cells_outside_selection, 'cell')} of arms or tasks outside the selection."
        )
    for row in report.coverage:
        if row.covered + row.partial == 0:
            notes.append(f"Arm {row.arm} has no scored samples.")
    missing = sum(r.missing for r in report.coverage)
    partial = sum(r.partial for r in report.coverage)
    total = sum(r.total for r in report.coverage)
    if missing or partial:
        notes.append(
            f"Of {_plural(total, 'cell')}, {missing} missing and {partial} partial (below the floor of "
            f"{report.settings.floor} scored trials); see Coverage."
        )
    scored = context.scored_tasks()
    headline = report.headline.tasks
    if context.arms and scored and len(headline) < len(scored):
        left = [t for t in scored if t not in headline]
        notes.append(
            f"Headline over {len(headline)} of {len(scored)} tasks (those where every arm meets the floor); "
            f"left out: {_names(left)}."
        )
    if report.provenance.left_out_older:
        notes.append(
            f"Left out {_plural(report.provenance.left_out_older, 'sample')} of older fingerprints in "
            f"{_plural(report.provenance.cells_with_older, 'cell')}: each cell reports its newest fingerprint only; "
            "see Provenance."
        )
    if len(report.provenance.models) > 1:
        listed = ", ".join(f"{model or 'unrecorded'} ({n} samples)" for model, n in report.provenance.models.items())
        notes.append(f"Samples of more than one model are in this report: {listed}; the JSON lists each cell's models.")
    if report.store.problems:
        notes.append(f"Skipped {_plural(len(report.store.problems), 'unreadable line')} of the store; see Problems.")
    if report.store.duplicates:
        notes.append(
            f"Counted once: {_plural(len(report.store.duplicates), 'sample')} stored more than once (same sample id): "
            f"{_names(report.store.duplicates)}."
        )
    if report.store.usage_unknown:
        notes.append(
            f"Left out of token figures: {_plural(report.store.usage_unknown, 'scored sample')} with unknown usage "
            "(no model reply was ever reported); their outcomes count."
        )
    if len(report.store.stores) > 1:
        notes.append(f"Read {len(report.store.stores)} stores as one, each sample id once: {', '.join(report.store.stores)}.")
    return notes


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _names(names: Sequence[str]) -> str:
    if len(names) <= _NAMES_IN_PROSE:
        return ", ".join(names)
    return f"{', '.join(names[:_NAMES_IN_PROSE])} and {len(names) - _NAMES_IN_PROSE} more"


# =====================================================================================================
# Rendering. One document model (headings, text, tables, lists) feeds every format, so the terminal,
# Markdown and HTML reports always say the same things.
# =====================================================================================================
@dataclass(frozen=True)
class _Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Table:
    headers: list[str]
    rows: list[list[str]]
    left: int = 1  # how many leading columns are left-aligned (names); the rest are numbers


@dataclass(frozen=True)
class _Bullets:
    items: list[str]


@dataclass(frozen=True)
class _Plots:
    """Where the HTML report places its plots; the text formats skip it."""


_Block = _Heading | _Text | _Table | _Bullets | _Plots
DASH = "\u2014"  # an absent figure: never shown as 0


def _tokens(value: float | None) -> str:
    return DASH if value is None else f"{value:,.0f}"


def _turns(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}"


def _seconds(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}s"


def _percent(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.0f}%"


def _usd(value: float | None) -> str:
    if value is None:
        return DASH
    return f"~${value:.2f}" if value >= 1 else f"~${value:.3f}"


def _with_interval(value: float | None, low: float | None, high: float | None, show: Callable[[float], str]) -> str:
    if value is None:
        return DASH
    if low is None or high is None:
        return show(value)
    return f"{show(value)} [{show(low)}\u2013{show(high)}]"


def _figure_text(figure: Figure, show: Callable[[float | None], str]) -> str:
    return _with_interval(figure.mean, figure.low, figure.high, show)  # type: ignore[arg-type]


def _rate_text(rate: Rate) -> str:
    if rate.rate is None:
        return DASH
    if rate.low is None or rate.high is None:
        return _percent(rate.rate)
    return f"{_percent(rate.rate)} [{100 * rate.low:.0f}\u2013{_percent(rate.high)}]"


def _mean_median(figure: Figure | CellFigure, show: Callable[[float | None], str]) -> str:
    if figure.mean is None:
        return DASH
    return f"{show(figure.mean)} ({show(figure.median)})"


def _document(report: Report, *, detail: bool) -> list[_Block]:
    blocks: list[_Block] = [_Heading(f"benchcell report \u2014 {report.settings.model_kind} model", 1)]
    blocks += _header(report)
    if report.notices:
        blocks += [_Heading("Notes"), _Bullets(report.notices)]
    blocks += _headline_blocks(report)
    blocks += _comparison_blocks(report)
    blocks += _coverage_blocks(report)
    blocks += _tier_blocks(report)
    blocks += _component_blocks(report)
    blocks += _outcome_blocks(report)
    blocks += _pass_k_blocks(report)
    if detail:
        blocks += _cell_detail_blocks(report)
    else:
        blocks += [
            _Heading("Per cell"),
            _Text("Per-cell figures (Wilson intervals, medians) are in the Markdown, JSON and HTML reports."),
        ]
    blocks += _bonus_blocks(report)
    blocks += _provenance_blocks(report, detail=detail)
    if report.store.problems:
        blocks += [
            _Heading("Problems"),
            _Text("Lines of the store that could not be read (skipped, kept on disk as they are):"),
            _Bullets(report.store.problems),
        ]
    # A table with no rows says nothing: name the absence instead of printing a bare header.
    return [_Text("Nothing to show yet.") if isinstance(b, _Table) and not b.rows else b for b in blocks]


def _header(report: Report) -> list[_Block]:
    settings = report.settings
    scored = sum(1 for t in report.tasks if not t.bonus)
    bonus = len(report.tasks) - scored
    weights = settings.weights
    return [
        _Text(
            f"{_plural(len(report.arms), 'arm')}, {_plural(scored, 'task')}" + (f" (+{bonus} bonus)" if bonus else "")
            + f"; floor {settings.floor} scored trials per cell; {report.store.samples_used:,} samples used of "
            f"{report.store.samples_read:,} read."
        ),
        _Text(
            "Cost-equivalent tokens = "
            + " + ".join(f"{weights[name]:g} \u00d7 {COMPONENT_LABELS[name]}" for name in TOKEN_COMPONENTS)
            + " (weights relative to fresh input; hung trials count with the usage they had)."
        ),
        _Text(
            f"Intervals: {100 * settings.confidence:g}%, task-clustered bootstrap ({settings.resamples} resamples, "
            f"seed {settings.seed}); per-cell success: Wilson. Only scored trials enter the figures."
        ),
    ]  # fmt: skip


def _headline_blocks(report: Report) -> list[_Block]:
    headers = [
        "arm", "cost-eq tokens [95% CI]", "median", "raw tokens (median)", "turns", "duration (median)",
        "success [95% CI]", "tasks", "trials", "coverage", "(imputed $)",
    ]  # fmt: skip
    headers[1] = f"cost-eq tokens [{100 * report.settings.confidence:g}% CI]"
    headers[6] = f"success [{100 * report.settings.confidence:g}% CI]"
    rows = [
        [
            row.arm,
            _figure_text(row.cost_equivalent, _tokens),
            _tokens(row.cost_equivalent.median),
            _mean_median(row.raw_tokens, _tokens),
            _turns(row.turns.mean),
            _mean_median(row.duration_s, _seconds),
            _rate_text(row.success),
            str(row.cost_equivalent.n_tasks),
            str(row.cost_equivalent.n_samples),
            f"{row.coverage.covered}/{row.coverage.total}",
            f"({_usd(row.imputed_cost_usd.mean)})",
        ]
        for row in report.headline.rows
    ]
    note = report.headline.note
    blocks: list[_Block] = [_Heading("Headline"), _Text(note[0].upper() + note[1:] + ".")]
    if report.headline.tasks:
        blocks.append(_Text(f"Tasks used: {', '.join(report.headline.tasks)}."))
    blocks += [_Table(headers, rows), _Plots()]
    return blocks


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"


def _signed(spec_key: str, value: float) -> str:
    return f"{100 * value:+.1f} pp" if spec_key == "success" else f"{value:+,.0f}"


def _comparison_blocks(report: Report) -> list[_Block]:
    if not report.comparisons:
        return [_Heading("Comparisons"), _Text("Pairwise comparisons need at least two arms.")]
    blocks: list[_Block] = [
        _Heading("Comparisons"),
        _Text(
            "Paired over the tasks where both arms meet the floor: the mean per-task difference (a \u2212 b) with "
            "its bootstrap interval and sign-flip p-value"
            + (", Holm-adjusted across the pairs." if any(c.holm_adjusted for c in report.comparisons) else ".")
        ),
    ]
    for comparison in report.comparisons:
        items = []
        for pair in comparison.pairs:
            head = f"{pair.arm_a} vs {pair.arm_b} ({_plural(pair.n_tasks, 'shared task')})"
            if pair.estimate is None:
                items.append(f"{head}: {pair.verdict}.")
                continue
            figures = f"{pair.arm_a} \u2212 {pair.arm_b} = {_signed(comparison.metric, pair.estimate)}"
            if pair.low is not None and pair.high is not None:
                figures += f" [{_signed(comparison.metric, pair.low)} to {_signed(comparison.metric, pair.high)}]"
            if pair.relative is not None and comparison.metric != "success":
                figures += f" ({100 * pair.relative:+.1f}%)"
            if pair.p_value is not None:
                figures += f", p {_p(pair.p_value)}"
                if comparison.holm_adjusted and pair.p_adjusted is not None:
                    figures += f" (Holm {_p(pair.p_adjusted)})"
            items.append(f"{head}: {figures}: {pair.verdict}.")
        unit = comparison.unit[0].upper() + comparison.unit[1:]
        blocks += [_Text(f"{unit} ({comparison.better} is better):"), _Bullets(items)]
    return blocks


def _coverage_blocks(report: Report) -> list[_Block]:
    floor = report.settings.floor
    per_arm = [
        [row.arm, str(row.covered), str(row.partial), str(row.missing), str(row.total),
         "complete" if row.covered == row.total else "incomplete"]
        for row in report.coverage
    ]  # fmt: skip
    blocks: list[_Block] = [
        _Heading("Coverage"),
        _Text(f"Cells with >= {floor} scored trials (covered), 1 to {floor - 1} (partial), none (missing)."),
        _Table(["arm", "covered", "partial", "missing", "tasks", "status"], per_arm),
    ]
    by_cell = {(c.arm, c.task): c for c in report.cells}
    matrix = []
    for entry in report.tasks:
        if entry.bonus:
            continue
        row = [entry.task, entry.tier or DASH]
        for arm in report.arms:
            cell = by_cell[(arm, entry.task)]
            row.append(
                str(cell.scored) if cell.coverage == COVERED
                else f"{cell.scored} partial" if cell.coverage == PARTIAL
                else "missing"
            )  # fmt: skip
        matrix.append(row)
    if matrix and report.arms:
        blocks += [_Text("Scored trials per cell:"), _Table(["task", "tier", *report.arms], matrix, left=2)]
    return blocks


def _tier_blocks(report: Report) -> list[_Block]:
    rows = []
    for section in report.tiers:
        label = f"{section.tier or DASH} ({len(section.tasks)}/{section.catalogue_tasks} tasks)"
        for row in section.rows:
            rows.append(
                [label, row.arm, _figure_text(row.cost_equivalent, _tokens), _rate_text(row.success),
                 f"{row.coverage.covered}/{row.coverage.total}"]
            )  # fmt: skip
            label = ""
    return [
        _Heading("Per tier"),
        _Text("Over each tier's headline tasks (every arm at the floor); coverage counts all the tier's tasks."),
        _Table(["tier", "arm", "cost-eq tokens [CI]", "success [CI]", "coverage"], rows, left=2),
    ]


def _component_blocks(report: Report) -> list[_Block]:
    rows = [
        [row.arm, *(_figure_text(getattr(row, name), _tokens) for name in TOKEN_COMPONENTS)]
        for row in report.components
    ]
    return [
        _Heading("Per token component"),
        _Text("Mean tokens per trial (unweighted) over the headline tasks, with intervals."),
        _Table(["arm", *(COMPONENT_LABELS[name] for name in TOKEN_COMPONENTS)], rows),
    ]


def _outcome_blocks(report: Report) -> list[_Block]:
    rows = [
        [row.arm, str(row.samples), str(row.scored), str(row.passed), str(row.incorrect), str(row.confused),
         str(row.hung), str(row.invalid), str(row.error)]
        for row in report.outcomes
    ]  # fmt: skip
    return [
        _Heading("Outcomes"),
        _Text(
            "Counts over every scored task of the catalogue. Invalid trials (a tool outside the arm ran) and harness "
            "errors are never scored; they are counted here so that no attempt disappears."
        ),
        _Table(["arm", "samples", "scored", "pass", "incorrect", "confused", "hung", "invalid", "error"], rows),
    ]


def _pass_k_blocks(report: Report) -> list[_Block]:
    k_all = max((p.k_max for p in report.pass_hat_k), default=0)
    blocks: list[_Block] = [
        _Heading("pass^k"),
        _Text(
            "Chance that k fresh trials of a task all pass, C(c, k) / C(n, k) averaged over the headline tasks; "
            "k goes up to each arm's smallest cell."
        ),
    ]
    if k_all == 0:
        return blocks + [_Text("No headline task yet.")]
    shown = sorted({*range(1, min(k_all, 5) + 1), k_all})
    rows = []
    for entry in report.pass_hat_k:
        values = {v.k: v.value for v in entry.values}
        rows.append([entry.arm, str(entry.n_tasks), *(_percent(values.get(k)) for k in shown)])
    return blocks + [_Table(["arm", "tasks", *(f"k={k}" for k in shown)], rows)]


def _cell_detail_blocks(report: Report) -> list[_Block]:
    rows = [_cell_row(cell) for cell in report.cells]
    return [
        _Heading("Per cell"),
        _Text("Success with its Wilson interval; means with medians in parentheses; scored trials only."),
        _Table(
            ["arm", "task", "tier", "coverage", "scored", "success [Wilson]", "cost-eq (median)", "turns",
             "duration (median)", "invalid", "error", "older left out"],
            rows, left=4,
        ),  # fmt: skip
    ]


def _cell_row(cell: CellSummary) -> list[str]:
    success = _rate_text(cell.success)
    if cell.scored:
        success = f"{cell.success.successes}/{cell.scored} {success}"
    return [
        cell.arm, cell.task, cell.tier or DASH, cell.coverage, str(cell.scored), success,
        _mean_median(cell.cost_equivalent, _tokens), _turns(cell.turns.mean), _mean_median(cell.duration_s, _seconds),
        str(cell.invalid), str(cell.error), str(cell.left_out_older),
    ]  # fmt: skip


def _bonus_blocks(report: Report) -> list[_Block]:
    blocks: list[_Block] = [_Heading("Bonus tasks")]
    if not report.bonus.tasks:
        return blocks + [_Text("No bonus tasks.")]
    rows = []
    applicable = {entry.task: entry.arms for entry in report.tasks}
    for cell in report.bonus.cells:
        if applicable.get(cell.task) and cell.arm not in applicable[cell.task]:
            rows.append([cell.task, cell.arm, "n/a", "not applicable to this arm", DASH, DASH, DASH])
            continue
        success = f"{cell.success.successes}/{cell.scored} {_rate_text(cell.success)}" if cell.scored else DASH
        rows.append([cell.task, cell.arm, str(cell.scored), success, _mean_median(cell.cost_equivalent, _tokens),
                     str(cell.invalid), str(cell.error)])  # fmt: skip
    return blocks + [
        _Text("Outside the scored comparison: bonus tasks never enter the headline, tiers or comparisons."),
        _Table(["task", "arm", "scored", "success [Wilson]", "cost-eq (median)", "invalid", "error"], rows, left=2),
    ]


def _provenance_blocks(report: Report, *, detail: bool) -> list[_Block]:
    provenance = report.provenance
    models = ", ".join(f"{m or 'unrecorded'} ({n})" for m, n in provenance.models.items()) or "none"
    blocks: list[_Block] = [
        _Heading("Provenance"),
        _Text(
            f"Model kind: {report.settings.model_kind} (real and scripted samples are never pooled). "
            f"Models (samples used): {models}. Fingerprint policy: {provenance.policy}; every figure uses each "
            f"cell's newest fingerprint."
        ),
    ]
    cells = [c for c in [*report.cells, *report.bonus.cells] if c.groups]
    older = [c for c in cells if c.left_out_older]
    if provenance.policy == "group":
        rows = [
            [c.arm, c.task, g.fingerprint or "unrecorded", "yes" if g.used else "no", str(g.samples), str(g.scored),
             f"{g.passes}/{g.scored}" if g.scored else DASH, _tokens(g.cost_equivalent_mean), g.first_seen, g.last_seen]
            for c in cells for g in c.groups
        ]  # fmt: skip
        blocks += [
            _Text("Every fingerprint group of every cell, newest first:"),
            _Table(["arm", "task", "fingerprint", "used", "samples", "scored", "passed", "cost-eq mean",
                    "first seen", "last seen"], rows, left=4),
        ]  # fmt: skip
    elif older:
        items = [
            f"{c.arm} \u00d7 {c.task}: used {c.fingerprint or 'unrecorded'} ({c.samples} samples); left out "
            f"{_plural(c.left_out_older, 'older sample')} of {_plural(len(c.groups) - 1, 'fingerprint')}"
            for c in older
        ]
        blocks += [
            _Text("Cells with samples of older fingerprints (left out; --fingerprints group shows them):"),
            _Bullets(items),
        ]
    else:
        blocks.append(_Text("No cell has samples of more than one fingerprint."))
    return blocks


# -- terminal ----------------------------------------------------------------------------------------
def _aligned(table: _Table, gap: str = "  ") -> list[str]:
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if i < table.left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return gap.join(parts).rstrip()

    return [line(table.headers), gap.join("-" * w for w in widths), *(line(row) for row in table.rows)]


def render_terminal(report: Report) -> list[str]:
    """Plain aligned lines (no trailing newlines), for pytest's TerminalReporter or stdout."""
    lines: list[str] = []
    for block in _document(report, detail=False):
        if isinstance(block, _Heading):
            if lines:
                lines.append("")
            lines += [block.text, ("=" if block.level == 1 else "-") * len(block.text)]
        elif isinstance(block, _Text):
            lines.append(block.text)
        elif isinstance(block, _Bullets):
            lines += [f"  * {item}" for item in block.items]
        elif isinstance(block, _Table):
            lines += [f"  {line}" if line else line for line in _aligned(block)]
    return lines


# -- Markdown ----------------------------------------------------------------------------------------
def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(table: _Table) -> list[str]:
    rule = ["---" if i < table.left else "---:" for i in range(len(table.headers))]
    return [
        "| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
        "| " + " | ".join(rule) + " |",
        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows),
    ]


def render_markdown(report: Report) -> str:
    """Paste-ready Markdown (GitHub-flavoured pipe tables)."""
    out: list[str] = []
    for block in _document(report, detail=True):
        if isinstance(block, _Heading):
            out += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, _Text):
            out += [block.text, ""]
        elif isinstance(block, _Bullets):
            out += [*(f"- {item}" for item in block.items), ""]
        elif isinstance(block, _Table):
            out += [*_md_table(block), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# -- JSON --------------------------------------------------------------------------------------------
def render_json(report: Report) -> str:
    """Every figure with its interval and n; sorted keys, so equal reports are equal bytes.

    The shape is described by pytest_benchcell/data/report.schema.json (JSON Schema draft 2020-12).
    """
    return json.dumps(report.to_dict(), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# -- HTML --------------------------------------------------------------------------------------------
_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.6em; margin-bottom: .3em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .55em; border-bottom: 1px solid #e6e6e6; white-space: nowrap; font-size: 13px; }
th { background: #f5f5f7; text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; }
ul { padding-left: 1.3em; } li { margin: .2em 0; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plot { flex: 1 1 480px; }
.plot svg { width: 100%; height: auto; }
.scroll { overflow-x: auto; }
"""


def _html_block(block: _Block, plots: Sequence[str]) -> str:
    if isinstance(block, _Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, _Text):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, _Bullets):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, _Table):
        def cells(values: Sequence[str], tag: str) -> str:
            numeric = ' class="num"'
            return "".join(
                f"<{tag}{'' if i < block.left else numeric}>{html.escape(v)}</{tag}>" for i, v in enumerate(values)
            )

        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in block.rows)
        head = f"<thead><tr>{cells(block.headers, 'th')}</tr></thead>"
        return f'<div class="scroll"><table>{head}<tbody>{body}</tbody></table></div>'
    if plots:
        return '<div class="plots">' + "".join(f'<div class="plot">{svg}</div>' for svg in plots) + "</div>"
    return ""


def render_html(report: Report) -> str:
    """One self-contained HTML file: the Markdown report's content plus plots, SVG inline, no URLs."""
    plots = _plots(report)
    body = "\n".join(_html_block(block, plots) for block in _document(report, detail=True))
    title = html.escape(f"benchcell report \u2014 {report.settings.model_kind} model")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _import_matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure as MplFigure
    except ImportError as exc:
        raise ImportError("HTML reports draw their plots with matplotlib: pip install pytest-benchcell[html]") from exc
    return matplotlib, MplFigure


def _plots(report: Report) -> list[str]:
    """The two plots as inline SVG strings ([] when there is nothing to plot yet)."""
    rows = [r for r in report.headline.rows if r.cost_equivalent.mean is not None and r.success.rate is not None]
    if not rows:
        return []
    matplotlib, MplFigure = _import_matplotlib()
    # A Figure with no pyplot never touches the global backend (the Agg/SVG canvases draw headless),
    # and a fixed hash salt plus no date make the SVG bytes reproducible.
    style = {"svg.hashsalt": "pytest-benchcell", "svg.fonttype": "path", "font.size": 10, "axes.spines.top": False,
             "axes.spines.right": False}  # fmt: skip
    with matplotlib.rc_context(style):
        return [_svg(_scatter(MplFigure, report, rows)), _svg(_tier_bars(MplFigure, report))]


def _error_bar(value: float, low: float | None, high: float | None) -> tuple[float, float]:
    return (value - low if low is not None else 0.0, high - value if high is not None else 0.0)


def _scatter(MplFigure: Any, report: Report, rows: Sequence[HeadlineRow]) -> Any:
    figure = MplFigure(figsize=(6.2, 4.6))
    axes = figure.add_subplot()
    colours = _colours(report.arms)
    for row in rows:
        x, y = row.cost_equivalent.mean, row.success.rate
        assert x is not None and y is not None
        xerr = _error_bar(x, row.cost_equivalent.low, row.cost_equivalent.high)
        yerr = _error_bar(y, row.success.low, row.success.high)
        axes.errorbar(
            [x], [100 * y], xerr=[[xerr[0]], [xerr[1]]], yerr=[[100 * yerr[0]], [100 * yerr[1]]],
            fmt="o", capsize=4, color=colours[row.arm], label=row.arm,
        )  # fmt: skip
    axes.set_xlabel("cost-equivalent tokens per trial (mean over tasks)")
    axes.set_ylabel("success (%)")
    axes.set_title(
        f"Cost against success ({len(report.headline.tasks)} headline tasks, "
        f"{100 * report.settings.confidence:g}% intervals)",
        fontsize=10,
    )
    axes.xaxis.set_major_formatter(matplotlib_thousands())
    axes.set_ylim(-2, 102)  # the whole 0-100% scale: a cut axis would exaggerate gaps
    axes.grid(alpha=0.3)
    _legend_below(axes, len(rows))
    figure.tight_layout()
    return figure


def _legend_below(axes: Any, entries: int) -> None:
    # Below the axes, so it never hides a point or a bar (arms at the same spot would overlap labels).
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(entries, 4), fontsize=9, frameon=False)


def matplotlib_thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:,.0f}")


def _tier_bars(MplFigure: Any, report: Report) -> Any:
    figure = MplFigure(figsize=(6.2, 4.6))
    axes = figure.add_subplot()
    tiers = [s for s in report.tiers if s.tasks]
    colours = _colours(report.arms)
    width = 0.8 / max(1, len(report.arms))
    for i, arm in enumerate(report.arms):
        xs, heights, errors = [], [], ([], [])
        for j, section in enumerate(tiers):
            row = next(r for r in section.rows if r.arm == arm)
            if row.cost_equivalent.mean is None:
                continue
            low, high = _error_bar(row.cost_equivalent.mean, row.cost_equivalent.low, row.cost_equivalent.high)
            xs.append(j + (i - (len(report.arms) - 1) / 2) * width)
            heights.append(row.cost_equivalent.mean)
            errors[0].append(low)
            errors[1].append(high)
        if xs:
            axes.bar(xs, heights, width=width, yerr=errors, capsize=3, color=colours[arm], label=arm)
    axes.set_xticks(range(len(tiers)), [f"{s.tier or DASH}\n({len(s.tasks)} tasks)" for s in tiers])
    axes.set_ylabel("cost-equivalent tokens per trial")
    axes.set_title("Per tier: mean over the tier's headline tasks", fontsize=10)
    axes.yaxis.set_major_formatter(matplotlib_thousands())
    axes.grid(axis="y", alpha=0.3)
    if report.arms:
        _legend_below(axes, len(report.arms))
    figure.tight_layout()
    return figure


def _colours(arms: Sequence[str]) -> dict[str, str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
    return {arm: palette[i % len(palette)] for i, arm in enumerate(arms)}


_SVG_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.DOTALL)
_SVG_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    # Inline SVG needs no XML prologue or DOCTYPE; the RDF metadata block only carries external URLs.
    return _SVG_METADATA.sub("", _SVG_PROLOGUE.sub("", buffer.getvalue(), count=1))
