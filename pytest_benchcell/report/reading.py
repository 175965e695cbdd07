"""Reading the store for a report: one cell at a time, each sample reduced at once to a few numbers.

Only this module knows the sample record's fields; it hands figures/ one CellSummary per
(arm, task), built from the cell's newest fingerprint. Never holds a transcript: of the trials that
did not pass it keeps where they lie, and reads back in full only the few a report lists.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import statistics as stats
from ..isolation.blocked import describe_record
from .. import transcript as transcripts
from ..sample import (
    OUTCOME_CONFUSED,
    OUTCOME_HUNG,
    OUTCOME_INCORRECT,
    OUTCOME_PASS,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_SCORED,
    TOKEN_COMPONENTS,
)
from ..sample import Definition
from ..store import STALE_PREFIX, Cell, Problem, SampleLine, Store, StoreSet, samples_at, store_root_of
from .model import (
    COVERED,
    MISSING,
    PARTIAL,
    TRANSCRIPT_KEPT,
    TRANSCRIPT_NOT_WRITTEN,
    TRANSCRIPT_OLDER,
    TRANSCRIPT_PRUNED,
    CellFigure,
    CellSummary,
    FailedTrial,
    FingerprintGroup,
    Rate,
    SkillShare,
    TaskInfo,
)

_OUTCOME_NAMES = (OUTCOME_PASS, OUTCOME_INCORRECT, OUTCOME_CONFUSED, OUTCOME_HUNG)
_NUMBERS = (int, float)  # matched with type(), not isinstance(): True is an int but never a count
_take_tokens = operator.itemgetter(*TOKEN_COMPONENTS)

# What the report keeps of one sample: plain values only (see _reduce). Positions in the tuple:
(_SEEN, _STATUS, _OUTCOME, _TOKENS, _TURNS, _DURATION, _COST, _MODEL, _TIER, _BONUS, _HOST, _GATEWAY, _SITTING,
 _SKILL, _PRICING) = range(15)  # fmt: skip
_Row = tuple[Any, ...]
# started_at, passed, cost-equivalent tokens (None: usage unknown), the sitting that ran it ("": not recorded)
Trial = tuple[str, bool, "float | None", str]
# A scored trial as dollars are priced from it: passed, its four token components (None: unknown), its
# index row's pricing text, its model, the CLI's own estimate (cost_usd).
TrialUsage = tuple[bool, "tuple[int, ...] | None", str, "str | None", Any]
# A trial that did not pass, as read: started_at, trial number, sample id, verdict, where its lines lie.
_Failure = tuple[str, int, str, str, tuple[SampleLine, ...]]

# A report lists at most this many failed trials per cell (the newest) and counts the rest: each listed
# one is read back from the store in full, and a long list helps nobody. Reasons are cut at REASON_CHARS.
FAILURES_PER_CELL = 10
REASON_CHARS = 500


_SAMPLE_FIELDS = ("provenance", "started_at", "status", "outcome", "usage", "turns", "duration_ms", "cost_usd",
                  "model", "tier", "bonus", "sitting", "skill_use")  # fmt: skip
_take_fields = operator.itemgetter(*_SAMPLE_FIELDS)


def _failure(sample: Mapping[str, Any]) -> _Failure:
    """Where a trial that did not pass lies, to read it back if the report lists it."""
    status, outcome = sample["status"], sample["outcome"]
    trial = sample["trial"]
    verdict = str(outcome or status) if status == STATUS_SCORED else str(status)
    return (sample["started_at"] or "", trial if type(trial) is int else 0, sample["id"], verdict, sample["lines"])


def _reduce(sample: Mapping[str, Any]) -> tuple[str, _Row]:
    """(fingerprint, row): the few values the report needs.

    Samples come from the store's reader (store.summary_of), which gives every field, usage.total as
    the four components in order or None when the usage is unknown, and the pool key as
    provenance.fingerprint. Rows hold only atomic values (tokens become a tuple of ints), which keeps
    them cheap for the garbage collector: surviving nested dicts would be rescanned again and again.
    """
    provenance, seen, status, outcome, usage, turns, duration, cost, model, tier, bonus, sitting, skill = _take_fields(sample)
    total = usage["total"]
    tokens = None if total is None else _take_tokens(total)  # None: unknown, left out of token figures
    host, gateway = provenance.get("host") or UNKNOWN_HOST, provenance.get("gateway") or ""
    return provenance["fingerprint"], (
        seen or "", status, outcome, tokens, turns, duration, cost, model, tier, bonus, host, gateway, str(sitting or ""),
        (skill["delivery"], skill["used"]) if skill else None,
        usage.get("pricing") or "",
    )


# Samples stored before hosts were recorded (provenance.host absent) are grouped under this name.
UNKNOWN_HOST = "unknown"


@dataclass
class PlaceTally:
    """The trials of one cell's group that ran on one host through one xdist gateway ("": none)."""

    samples: int = 0
    scored: int = 0
    passes: int = 0
    cost_equivalent: list[float] = field(default_factory=list)  # scored trials with known usage
    duration_s: list[float] = field(default_factory=list)  # scored trials

    def add(self, row: _Row, cost: float | None) -> None:
        self.samples += 1
        if row[_STATUS] != STATUS_SCORED:
            return
        self.scored += 1
        self.passes += row[_OUTCOME] == OUTCOME_PASS
        if cost is not None:
            self.cost_equivalent.append(cost)
        if type(row[_DURATION]) in _NUMBERS:
            self.duration_s.append(row[_DURATION] / 1000.0)


class _Group:
    """The samples of one fingerprint in one cell, reduced to columns of numbers.

    Built from the rows _reduce() keeps per sample; the numbers of scored samples are kept (the
    medians need them), the samples themselves are not.
    """

    def __init__(
        self, fingerprint: str, rows: Sequence[_Row], weights: Sequence[float], failures: Sequence[_Failure] = (),
        broken: Sequence[int] = (),
    ) -> None:  # fmt: skip
        columns = list(zip(*rows))
        seen = columns[_SEEN]
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
        w0, w1, w2, w3 = weights
        # Hung trials are scored: they count here with whatever usage they had; unknown usage is no figure.
        costs = [
            None if row[_TOKENS] is None else w0 * row[_TOKENS][0] + w1 * row[_TOKENS][1] + w2 * row[_TOKENS][2] + w3 * row[_TOKENS][3]
            for row in scored
        ]  # fmt: skip
        tokens = [row[_TOKENS] for row in scored if row[_TOKENS] is not None]
        self.usage_unknown = len(scored) - len(tokens)
        self.cost_equivalent = [cost for cost in costs if cost is not None]
        # The scored trials in the order they started, with their sittings (the within-task comparison
        # pairs trials of one sitting first).
        order = sorted(range(len(scored)), key=lambda at: (str(scored[at][_SEEN]), scored[at][_OUTCOME] == OUTCOME_PASS))
        self.trials: list[Trial] = [
            (str(scored[at][_SEEN]), scored[at][_OUTCOME] == OUTCOME_PASS, costs[at], scored[at][_SITTING]) for at in order
        ]
        self.places: dict[tuple[str, str], PlaceTally] = {}
        scored_costs = iter(costs)
        for row in rows:
            place = self.places.setdefault((row[_HOST], row[_GATEWAY]), PlaceTally())
            place.add(row, next(scored_costs) if row[_STATUS] == STATUS_SCORED else None)
        self.components: list[tuple[int, ...]] = list(zip(*tokens)) if tokens else [(), (), (), ()]
        self.turns = [float(row[_TURNS]) for row in scored if type(row[_TURNS]) in _NUMBERS]
        self.duration_s = [row[_DURATION] / 1000.0 for row in scored if type(row[_DURATION]) in _NUMBERS]
        self.cost_usd = [float(row[_COST]) for row in scored if type(row[_COST]) in _NUMBERS]
        # What the dollars are priced from, per scored trial (figures/dollars.py prices them at the report's
        # prices), one for one with `trials` (the Definitions section compares dollars trial by trial).
        self.priced: list[TrialUsage] = [
            (row[_OUTCOME] == OUTCOME_PASS, row[_TOKENS], row[_PRICING], row[_MODEL], row[_COST])
            for row in (scored[at] for at in order)
        ]
        newest_first = sorted(failures, key=lambda failure: failure[:3], reverse=True)
        self.failures = sorted(newest_first[:FAILURES_PER_CELL], key=lambda failure: (failure[1], failure[0]))
        self.failures_left_out = len(failures) - len(self.failures)
        self.harness_broke = sorted(broken)  # trial numbers: every one, listed or not
        self.skill = _skill_share([row[_SKILL] for row in scored if row[_SKILL] is not None])

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


def read_cell(
    store: Store | StoreSet, cell: Cell, weights: Sequence[float], problems: list[Problem],
    definitions: Mapping[tuple[str, str], Definition] | None = None,
) -> dict[str, _Group]:  # fmt: skip
    """Stream one cell's samples and split them, reduced, by fingerprint.

    Through the store's one reader (store.read_summaries): the checked index where it can, else the
    samples; the latest rescore is applied and duplicate ids are dropped there, so every row here is
    one trial sample with its current verdict.
    """
    by_fingerprint: dict[str, list[_Row]] = {}
    failures: dict[str, list[_Failure]] = {}
    broken: dict[str, list[int]] = {}  # trials the harness broke (the reader judged them errors)
    for sample in store.iter_summaries(problems, cells=[cell], definitions=definitions):
        fingerprint, row = _reduce(sample)
        by_fingerprint.setdefault(fingerprint, []).append(row)
        if row[_OUTCOME] != OUTCOME_PASS or row[_STATUS] != STATUS_SCORED:
            failures.setdefault(fingerprint, []).append(_failure(sample))
        if sample.get("harness_broke"):
            broken.setdefault(fingerprint, []).append(sample["trial"] if type(sample["trial"]) is int else 0)
    return {
        fingerprint: _Group(fingerprint, rows, weights, failures.get(fingerprint, ()), broken.get(fingerprint, ()))
        for fingerprint, rows in by_fingerprint.items()
    }


def _skill_share(uses: Sequence[tuple[str, bool]]) -> SkillShare | None:
    """The scored trials' (delivery, used) records as one share (the newest delivery names it)."""
    if not uses:
        return None
    used = sum(1 for _, was_used in uses if was_used)
    return SkillShare(delivery=uses[-1][0], trials=len(uses), used=used, share=used / len(uses))


def _failed_trials(failures: Sequence[_Failure]) -> list[FailedTrial]:
    """The listed failures read back in full, for their reasons and transcripts (the only full reads
    a report does)."""
    if not failures:
        return []
    samples = samples_at((lines, sample_id) for _, _, sample_id, _, lines in failures)
    files = {lines[0][0]: lines[0] for *_, lines in failures if lines}  # usually one: the cell's samples file
    roots = {path: store_root_of(line).absolute() for path, line in files.items()}
    out = []
    for (started, trial, sample_id, verdict, lines), sample in zip(failures, samples):
        root = roots[lines[0][0]] if lines else None
        if sample is None:
            reason = "(the sample could not be read back: the store changed while the report read it)"
        else:
            reason = str(sample.get("reason") or "")
            if len(reason) > REASON_CHARS:
                reason = f"{reason[:REASON_CHARS]}... ({len(reason) - REASON_CHARS:,} more characters in the store)"
        transcript, status = _transcript(sample, root)
        blocked = sample.get("sandbox_blocked") if sample is not None else None
        out.append(
            FailedTrial(
                id=sample_id, trial=trial or None, started_at=started, verdict=verdict, reason=reason,
                transcript=transcript, transcript_status=status, store=str(root) if root is not None else "",
                sandbox_blocked=[describe_record(entry) for entry in blocked if isinstance(entry, dict)]
                if isinstance(blocked, list) else [],
            )  # fmt: skip
        )
    return out


def _transcript(sample: Mapping[str, Any] | None, root: Path | None) -> tuple[str | None, str]:
    """(the path the sample names for its transcript, relative to the store, or None; where it stands)."""
    if sample is None or "transcript" not in sample:
        return None, TRANSCRIPT_OLDER
    ref = transcripts.reference(sample)  # only a path inside the store's transcripts folder
    if ref is None:
        return None, TRANSCRIPT_NOT_WRITTEN
    path = str(ref["path"])
    return path, TRANSCRIPT_KEPT if root is not None and Path(root, *path.split("/")).is_file() else TRANSCRIPT_PRUNED


def _cell_figure(values: Sequence[float]) -> CellFigure:
    if not values:
        return CellFigure(None, None, 0)
    return CellFigure(stats.mean(values), stats.median(values), len(values))


def newest(groups: Mapping[str, _Group]) -> _Group | None:
    """The group a cell reports: the fingerprint seen most recently, ties broken by name so it is stable.
    Verdicts of an older scoring definition are never the ones used (a rescore brings them up to date)."""
    usable = [group for group in groups.values() if not group.fingerprint.startswith(STALE_PREFIX)]
    return max(usable, key=lambda g: (g.last_seen, g.fingerprint)) if usable else None


def summarize_cell(
    arm: str, task: str, groups: Mapping[str, _Group], used: _Group | None, floor: int, z: float
) -> CellSummary:
    """Summarize the group the cell reports (`used`, from newest(groups)); the others are only counted."""
    if not groups:
        return empty_cell(arm, task, TaskInfo(""))
    if used is None:  # only other conditions or verdicts of an older scoring: shown as groups, none used
        any_group = next(iter(groups.values()))
        empty = empty_cell(arm, task, TaskInfo(any_group.tier, any_group.bonus))
        summaries = [group.summary(False) for group in groups.values()]
        return dataclasses.replace(empty, left_out_older=sum(g.samples for g in groups.values()), groups=summaries)
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
        failures=_failed_trials(used.failures),
        failures_left_out=used.failures_left_out,
        harness_broke=used.harness_broke,
        skill=used.skill,
    )


def empty_cell(arm: str, task: str, info: TaskInfo) -> CellSummary:
    nothing = CellFigure(None, None, 0)
    return CellSummary(
        arm=arm, task=task, tier=info.tier, bonus=info.bonus, coverage=MISSING, samples=0, scored=0,
        invalid=0, error=0, outcomes=dict.fromkeys(_OUTCOME_NAMES, 0),
        success=Rate(None, None, None, 0, 0, 0, "wilson"), cost_equivalent=nothing, raw_tokens=nothing,
        turns=nothing, duration_s=nothing, imputed_cost_usd=nothing,
        components=dict.fromkeys(TOKEN_COMPONENTS, nothing), fingerprint=None, left_out_older=0, groups=[],
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


