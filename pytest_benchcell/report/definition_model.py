"""The report's data for its Definitions section: per arm, each definition it has samples of, what
changed between consecutive ones, and the current one compared with an earlier one. Plain dataclasses
whose field names are the JSON keys (data/report.schema.json, `definitions`); figures/definitions.py
computes them, renderers/document/definitions.py writes them."""

from __future__ import annotations

from dataclasses import dataclass, field

# What is said beside every comparison of two definitions (their trials never share a sitting).
DRIFT_NOTE = (
    "unpaired: the two definitions' trials ran in different sittings, so whatever changed between those "
    "sittings (the model behind the API, the machine, the service) is part of the difference"
)
UNPAIRED_METHOD = (
    "each definition's own empirical-Bernstein confidence sequence at half the level, joined; tokens and dollars "
    "as clipped log-ratios to each task's first trial under the earlier definition, dollars priced at the "
    "report's prices"
)
# Intervals per arm compared (success, tokens, dollars): the section's Bonferroni family is this many per arm.
INTERVALS_PER_ARM = 3


@dataclass(frozen=True)
class DefinitionChange:
    """One difference between a definition's stored conditions and the one before it."""

    what: str  # named for a reader: "the skill's text", "tracker's version", "the model"
    key: str  # where it is in the stored conditions (definitions/*.toml, [conditions]): "arm.skill"
    before: str  # the value, or for a long text its size ("" when absent)
    after: str


@dataclass(frozen=True)
class ArmDefinition:
    """One definition of an arm (its conditions, the task aside) and the figures of its samples."""

    definition: str  # the arm's conditions without the task, hashed; "unrecorded:<conditions>" without a definitions file
    label: str  # "v1", "v2", ... in the order it was first seen
    current: bool  # the bench's current definition (without the bench: the one seen most recently)
    recorded: bool  # its conditions are in the store's definitions files (else no change can be named)
    model: str  # the model its conditions name ("" when unrecorded)
    models: dict[str, int]  # model -> samples, as the samples record it
    tasks: list[str]  # tasks it has samples of
    sittings: int  # sittings its samples ran in
    first_seen: str
    last_seen: str
    samples: int
    scored: int
    passes: int
    success_rate: float | None
    success_low: float | None  # Wilson, over its scored trials (every task pooled)
    success_high: float | None
    cost_equivalent_mean: float | None  # per scored trial with known usage
    cost_equivalent_median: float | None
    usage_unknown: int  # scored trials whose usage is unknown (left out of the token figures)
    changes: list[DefinitionChange]  # from the definition before it in this list; [] for the first
    # Dollars per scored trial, each priced from its own usage at the report's prices as the Dollars
    # section prices it (mean over the trials priced); None: no trial could be priced. The CLI's own
    # imputed cost_usd is not this figure.
    dollars_per_trial: float | None
    dollars_unknown: int  # scored trials whose dollars are unknown (no usage, or a model without a price)


@dataclass(frozen=True)
class DefinitionComparison:
    """The current definition against an earlier one, over the tasks both have scored trials of."""

    earlier: str  # labels ("v1") of the two definitions
    current: str
    tasks: list[str]
    note: str  # DRIFT_NOTE
    method: str  # UNPAIRED_METHOD
    confidence: float  # of every interval of the section together (Bonferroni over family_size)
    family_size: int  # intervals judged together: the arms compared x INTERVALS_PER_ARM
    success_earlier: float | None  # success rates over the shared tasks
    success_current: float | None
    success_difference: float | None  # current - earlier
    success_low: float | None
    success_high: float | None
    success_trials_earlier: int
    success_trials_current: int
    tokens_ratio: float | None  # cost-equivalent tokens current / earlier (per task, geometric)
    tokens_low: float | None
    tokens_high: float | None
    tokens_trials_earlier: int  # trials used (each task's anchor trial and unknown usage not counted)
    tokens_trials_current: int
    dollars_ratio: float | None  # dollars current / earlier (per task, geometric), at the report's prices
    dollars_low: float | None
    dollars_high: float | None
    dollars_trials_earlier: int  # trials used (each task's anchor trial and unknown dollars not counted)
    dollars_trials_current: int


@dataclass(frozen=True)
class ArmDefinitions:
    arm: str
    definitions: list[ArmDefinition] = field(default_factory=list)  # in the order first seen
    comparison: DefinitionComparison | None = None  # None: no current definition, or no task both have
    left_out_stale_scoring: int = 0  # samples judged under an older scoring (a rescore brings them in)
    # samples of an earlier definition of a task itself (its intent or tier) under the same arm definition:
    # a definition counts one definition of each task, the current one (else the newest)
    left_out_older_task_definitions: int = 0
