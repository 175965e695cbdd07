"""The report's data: settings in, plain dataclasses out. Field names are the JSON keys.

Nothing here computes a figure (figures/ does) or formats one (renderers/ do); data/report.schema.json
describes the same shape for readers of the JSON.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import statistics as stats
from ..sample import MODEL_KINDS, TOKEN_COMPONENTS, Definition
from .definition_model import ArmDefinitions

REPORT_SCHEMA_VERSION = 6
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
    excluded: str = ""  # why this bench leaves the task out (the capability probe); "" = it counts


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
    # The family of comparisons ([bench] comparisons, over every arm of the bench, as `--bench-fill
    # decide` judges them); None: every pair of the reported arms. And [bench.smallest_effect]
    # (metric "success" or "tokens" -> smallest effect), which makes equivalence a verdict.
    comparisons: Sequence[tuple[str, str]] | None = None
    smallest_effect: Mapping[str, float] = field(default_factory=dict)
    prices: Any = None  # prices.PriceTable the dollars are priced at; None: the package's table
    # [bench] horizon_pairs: the claims come from the group-sequential test up to it; checked against
    # the horizon the store's samples recorded (horizon.py). None: the anytime e-processes.
    horizon_pairs: int | None = None

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
        horizon = self.horizon_pairs
        if horizon is not None and (not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 2):
            raise ReportError(f"horizon_pairs must be a whole number >= 2 or None, got {horizon!r}")



# =====================================================================================================
# The report: plain data. Field names are the JSON keys (see data/report.schema.json).
# =====================================================================================================
@dataclass(frozen=True)
class Figure:
    """A mean over tasks of per-task means, with its interval about tasks like these."""

    mean: float | None
    low: float | None  # None below statistics.MIN_TASKS_FOR_INTERVAL tasks (no interval can be honest)
    high: float | None
    median: float | None  # mean over the same tasks of the per-task medians
    n_tasks: int
    n_samples: int
    method: str  # how low/high were computed (docs/statistics.md, "How the figures are computed")


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
class FailedTrial:
    """A trial of a cell's reported group that did not pass, with what a maintainer needs to look at it."""

    id: str
    trial: int | None
    started_at: str
    verdict: str  # incorrect | confused | hung (scored) or invalid | error (never scored)
    reason: str  # the sample's own (its latest rescore's when rescored), cut at REASON_CHARS
    transcript: str | None  # the transcript's path relative to `store`, as the sample names it; None: none named
    transcript_status: str  # one of TRANSCRIPT_STATUSES
    store: str  # the store folder that holds the sample (and its transcript)
    # what the sandbox kept from the arm's own programs (the sample's sandbox_blocked, one line each)
    sandbox_blocked: list[str] = field(default_factory=list)


# Where a failed trial's transcript stands (FailedTrial.transcript_status).
TRANSCRIPT_KEPT = "kept"  # the file the sample names is there
TRANSCRIPT_PRUNED = "pruned"  # the sample names a file that is gone (benchcell transcripts prune)
TRANSCRIPT_NOT_WRITTEN = "not written"  # the trial ended before the agent started, or writing it failed
TRANSCRIPT_OLDER = "older sample"  # recorded before transcripts were kept: its tool calls are in the store
TRANSCRIPT_STATUSES = (TRANSCRIPT_KEPT, TRANSCRIPT_PRUNED, TRANSCRIPT_NOT_WRITTEN, TRANSCRIPT_OLDER)


@dataclass(frozen=True)
class SkillShare:
    """How often a cell's scored trials used the arm's skill (skill_use.py): embedded, every trial;
    delivered natively, the trials whose agent loaded it."""

    delivery: str  # embed | native
    trials: int  # scored trials with a record of the skill's use
    used: int
    share: float | None


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
    # Its trials that did not pass, newest FAILURES_PER_CELL of them in trial order; the rest are counted.
    failures: list[FailedTrial] = field(default_factory=list)
    failures_left_out: int = 0
    # The numbers of its trials the harness broke (harness_broke.py): errors, never counted for or against the arm.
    harness_broke: list[int] = field(default_factory=list)
    # The share of its scored trials that used the arm's skill; None: no skill, or no trial recorded its use.
    skill: SkillShare | None = None


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


SCOPE_THESE_TASKS = "these tasks"
SCOPE_TASKS_LIKE_THESE = "tasks like these"


@dataclass(frozen=True)
class WithinTasks:
    """The comparison "for these tasks": paired trials within each shared task, read as an e-process.
    Its decision is statistics.decide's, the one `--bench-fill decide` lists for the same store."""

    pairs: int  # trials paired (the k-th of a with the k-th of b, per task; tokens: both usages known)
    nonzero: int  # pairs with a difference (ties carry no evidence)
    positives: int  # pairs where a - b > 0
    e_value: float  # the e-process now
    e_max: float  # the largest value it ever reached
    anytime_p: float  # min(1, 1 / e_max)
    p_adjusted: float  # Bonferroni over the family: min(1, family_size x anytime_p)
    claim_e_value: float  # the e-value a claim needs: family size / alpha, at every reading
    # How the evidence was computed: "sign e-process" (success: which arm passed) or "betting e-process
    # on clipped log-ratios" (tokens: by how much, statistics.token_e_process).
    method: str
    # The paired trials' own figure with its anytime-valid confidence sequence at alpha / family size
    # (statistics.confidence_sequence, valid at every reading): success, the mean paired difference
    # a - b ("difference"); tokens, a / b as exp of the mean clipped log-ratio ("ratio"). None: no
    # pair; low and high also None below 3 shared tasks (withheld, as every interval of the report).
    scale: str
    estimate: float | None
    low: float | None
    high: float | None
    # Printed where the interval would be beside a success difference: the sign count that made the
    # claim ("a passed where b failed in 14 of the 16 paired trials that differ"); None otherwise.
    statement: str | None = None


@dataclass(frozen=True)
class PairComparison:
    arm_a: str
    arm_b: str
    n_tasks: int
    tasks: list[str]
    mean_a: float | None
    mean_b: float | None
    estimate: float | None  # mean over shared tasks of (a - b)
    low: float | None  # t interval over the per-task differences (tasks like these)
    high: float | None
    relative: float | None  # estimate / mean_b
    p_value: float | None  # sign-flip test over tasks (tasks like these)
    p_adjusted: float | None  # Bonferroni over the family: min(1, family_size x p_value)
    within_tasks: WithinTasks
    # Success only: the difference claimed with 80% chance at these trials (for tokens None: the verdict
    # gives within_tasks' interval of the ratio a / b instead, a statement the data support).
    minimum_detectable_effect: float | None
    # statistics.decide's verdict for these tasks: "differs", "equivalent" (the interval within_tasks
    # gives lies inside the comparison's margin) or "undecided"; the same `--bench-fill decide` lists.
    decision: str
    claim: str  # the verdict in a few words: "mcp better", "equivalent (±20%)", "undecided", "not compared"
    distinguishable: bool  # decision == "differs"
    scope: str | None  # the widest scope a difference is claimed for: "tasks like these", "these tasks", or None
    verdict: str


@dataclass(frozen=True)
class Comparison:
    metric: str
    unit: str
    better: str  # lower | higher
    family_size: int  # comparisons judged together: the declared pairs x metrics
    correction: str  # statistics.BONFERRONI: a claim needs e >= family_size / alpha at every reading
    # The smallest effect of interest ([bench.smallest_effect]) on within_tasks' scale: success a share
    # (0.15: 15 points either way), tokens a ratio (1.2: a / b between 1/1.2 and 1.2); None: not declared.
    margin: float | None
    pairs: list[PairComparison]


@dataclass(frozen=True)
class CostPerSuccessRow:
    """One arm's tokens per verified success over the table's tasks (statistics.cost_per_success)."""

    arm: str
    tokens_per_success: float | None  # mean tokens per trial / mean pass rate; None: nothing passed
    low: float | None  # Fieller interval for these tasks; None: no interval (fewer than 2 trials a task)
    high: float | None  # None with low set: unbounded above (the pass rate could be 0)
    tokens_per_trial: float | None
    success_rate: float | None
    trials: int


@dataclass(frozen=True)
class CostPerSuccessPair:
    arm_a: str
    arm_b: str
    ratio: float | None  # a's cost per success / b's; None when either arm has no success
    low: float | None  # delta-method interval on the log scale, for these tasks
    high: float | None


@dataclass(frozen=True)
class CostPerSuccessTable:
    scope: str  # "these tasks": the tasks are fixed, their trials the replicates
    tasks: list[str]  # the headline tasks
    method: str
    rows: list[CostPerSuccessRow]
    pairs: list[CostPerSuccessPair]


@dataclass(frozen=True)
class DollarsRow:
    """One arm in US dollars over the table's tasks, each trial priced from its own usage."""

    arm: str
    per_trial: Figure  # mean over tasks of the per-task mean dollars, interval about tasks like these
    per_success: float | None  # dollars per trial / pass rate (these tasks); None: nothing passed or unknown
    per_success_low: float | None  # Fieller interval; None: no interval (fewer than 2 trials a task)
    per_success_high: float | None  # None with low set: unbounded above
    success_rate: float | None
    cli_estimate_per_trial: float | None  # the CLI's own estimate (cost_usd) over the same trials, mean over tasks
    trials: int  # scored trials priced
    unknown: int  # scored trials of these tasks without dollars: usage unknown, or a model without a price
    default_lifetime: int  # of `trials`: cache writes priced at the 5-minute price, their lifetime not recorded


@dataclass(frozen=True)
class ModelPrice:
    """The prices a model's trials were priced at (US dollars per million tokens); all None: no price."""

    model: str
    origin: str  # the package's price table, or the bench.toml that sets it
    as_of: str
    source: str
    input: float | None
    cache_write_5m: float | None
    cache_write_1h: float | None
    cache_read: float | None
    output: float | None
    long_context_above: int | None  # prompt tokens past which a request pays long-context prices
    notes: str


@dataclass(frozen=True)
class DollarsTable:
    scope: str  # per trial: tasks like these; per success: these tasks
    tasks: list[str]  # the headline tasks
    method: str
    rows: list[DollarsRow]
    prices: list[ModelPrice]  # every model the trials used, priced or not
    unpriced: list[str]  # models without a price: their trials' dollars are unknown


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
    left_out_older: int  # every sample of a fingerprint group no figure uses
    cells_with_older: int
    current_conditions: bool  # with the bench known: figures use the current conditions and scoring only
    left_out_stale_scoring: int  # of left_out_older: judged under an older scoring (--bench-rescore)
    left_out_other_conditions: int  # of left_out_older: other conditions (bench known) or older fingerprints


@dataclass(frozen=True)
class HostRow:
    """One arm's trials on one machine: provenance.host, "unknown" for samples stored before hosts were
    recorded. Over the samples every figure uses (each cell's reported group), bonus tasks included."""

    host: str
    arm: str
    gateways: list[str]  # the xdist workers among them (gw0, ...); trials run in the controller's process have none
    samples: int
    scored: int
    passed: int
    success_rate: float | None
    cost_equivalent_median: float | None  # scored trials with known usage
    duration_s_median: float | None  # scored trials


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
    horizon_pairs: int | None = None  # [bench] horizon_pairs: claims from the group-sequential test; None: anytime


@dataclass(frozen=True)
class TaskEntry:
    task: str
    tier: str
    bonus: bool
    arms: list[str] = field(default_factory=list)  # arms that can do it; [] = every arm
    excluded: str = ""  # why this bench leaves the task out; "" = it counts


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
    cost_per_success: CostPerSuccessTable
    # Where trials ran, per host and arm; empty unless the samples used ran on more than one host.
    hosts: list[HostRow] = field(default_factory=list)
    # Per arm with samples of more than one definition: each one's figures, what changed, and the
    # current one against an earlier one (figures/definitions.py); empty when no arm has two.
    definitions: list[ArmDefinitions] = field(default_factory=list)
    dollars: DollarsTable | None = None  # US dollars per trial and per verified success (figures/dollars.py)

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



def settings_for_bench(bench: Any, *, model_kind: str = "real") -> ReportSettings:
    """Report settings from a loaded bench.toml (config.Bench): floor, weights, arms, task catalogue."""
    return ReportSettings(
        floor=bench.floor,
        weights={name: float(bench.weights[name]) for name in TOKEN_COMPONENTS},
        model_kind=model_kind,
        arms=list(bench.arms),
        # An arm whose binaries this machine lacks has no current definition here: its newest fingerprint.
        definitions={
            (arm, task): bench.definition(arm, task) for arm in bench.arms if bench.binaries_found(arm) for task in bench.tasks
        },
        comparisons=list(bench.compared_pairs()),
        smallest_effect=dict(bench.smallest_effect),
        prices=bench.price_table,
        horizon_pairs=bench.horizon_pairs,
        tasks={
            task_id: TaskInfo(tier=task.tier, bonus=task.bonus, arms=tuple(task.arms))
            for task_id, task in bench.tasks.items()
        },
    )



def plural(count: int, noun: str, nouns: str = "") -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {nouns or noun + 's'}"


def names_in_prose(names: Sequence[str]) -> str:
    if len(names) <= _NAMES_IN_PROSE:
        return ", ".join(names)
    return f"{', '.join(names[:_NAMES_IN_PROSE])} and {len(names) - _NAMES_IN_PROSE} more"


def p_text(value: float) -> str:
    """A p-value as prose: "= 0.031", or "< 0.001"."""
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"
