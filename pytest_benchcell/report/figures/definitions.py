"""Definitions side by side: per arm, each definition it has samples of (its conditions with the task's
part aside, so one definition spans the arm's tasks), with its own figures, what changed from the one
before it, and the current definition compared with the most recent other one, unpaired
(statistics.unpaired). Only arms with samples of more than one definition are listed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import statistics as stats
from ...prices import PriceTable
from ...sample import OUTCOME_PASS
from ...store import STALE_PREFIX
from ..definition_model import (
    DRIFT_NOTE,
    INTERVALS_PER_ARM,
    UNPAIRED_METHOD,
    ArmDefinition,
    ArmDefinitions,
    DefinitionComparison,
)
from ..model import ReportSettings
from ..reading import Trial, _Group
from ..stored_definitions import StoredConditions, arm_definition_id, arm_part
from .definition_changes import changes_between
from .dollars import report_prices, trial_dollars

UNRECORDED = "unrecorded:"  # an arm definition whose conditions the store has no definitions file for


@dataclass
class _Found:
    """One definition of an arm as found in its cells: the conditions stored for it and its groups per task."""

    key: str
    conditions: dict[str, Any] | None
    groups: dict[str, _Group] = field(default_factory=dict)  # task -> the cell's group of this definition
    # task -> each trial's dollars at the report's prices, one for one with trials(task) (None: unknown)
    dollars: dict[str, list[float | None]] = field(default_factory=dict)

    @property
    def first_seen(self) -> str:
        return min(group.first_seen for group in self.groups.values())

    @property
    def last_seen(self) -> str:
        return max(group.last_seen for group in self.groups.values())

    def trials(self, task: str) -> list[Trial]:
        group = self.groups.get(task)
        return group.trials if group is not None else []

    def price(self, table: PriceTable) -> None:
        """Each trial priced as the Dollars section prices it (figures/dollars.py), task by task."""
        self.dollars = {
            task: [trial_dollars(trial, table).dollars for trial in group.priced] for task, group in self.groups.items()
        }


def arm_definitions(
    groups: Mapping[tuple[str, str], Mapping[str, _Group]], arms: Sequence[str], settings: ReportSettings,
    stored: StoredConditions, z: float, scored_tasks: Sequence[str],
) -> list[ArmDefinitions]:  # fmt: skip
    """Each arm with samples of more than one definition, its definitions in the order first seen, over
    the scored tasks (bonus tasks and those the bench leaves out take no part, as in every scored table)."""
    counted = set(scored_tasks)
    current_conditions = {definition.conditions for definition in (settings.definitions or {}).values()}
    found_per_arm: dict[str, dict[str, _Found]] = {}
    stale: dict[str, int] = {}
    older_task: dict[str, int] = {}
    for (arm, task), cell_groups in sorted(groups.items()):
        if task not in counted:
            continue
        for pool_key, group in cell_groups.items():
            if pool_key.startswith(STALE_PREFIX):
                stale[arm] = stale.get(arm, 0) + group.samples
                continue
            conditions = stored.conditions(pool_key)
            key = arm_definition_id(conditions) if conditions is not None else UNRECORDED + pool_key
            definition = found_per_arm.setdefault(arm, {}).setdefault(key, _Found(key, conditions))
            kept = definition.groups.get(task)
            if kept is not None:  # one arm definition, two of the task's own: the current (else newest) one counts
                dropped, group = sorted((kept, group), key=lambda one: _task_rank(one, current_conditions))
                older_task[arm] = older_task.get(arm, 0) + dropped.samples
            definition.groups[task] = group
    compared = [arm for arm in arms if len(found_per_arm.get(arm, {})) > 1]
    alpha = (1.0 - settings.confidence) / max(1, INTERVALS_PER_ARM * len(compared))  # Bonferroni over arms x metrics
    table = report_prices(settings)
    out = []
    for arm in compared:
        found = sorted(found_per_arm[arm].values(), key=lambda one: (one.first_seen, one.key))
        for one in found:
            one.price(table)
        current = _current(arm, found, settings)
        definitions = [
            _figures(one, f"v{number}", one is current, found[number - 2] if number > 1 else None, z)
            for number, one in enumerate(found, start=1)
        ]
        comparison = None
        if current is not None:
            others = [one for one in found if one is not current]
            earlier = max(others, key=lambda one: (one.last_seen, one.key))
            labels = {one.key: figures.label for one, figures in zip(found, definitions)}
            comparison = _compare(earlier, current, labels, alpha, settings.confidence, len(compared))
        out.append(ArmDefinitions(arm, definitions, comparison, stale.get(arm, 0), older_task.get(arm, 0)))
    return out


def _task_rank(group: _Group, current_conditions: set[str]) -> tuple[bool, str, str]:
    """Sorts last the group a definition keeps for a task: of the bench's current conditions, else the newest."""
    return (group.fingerprint in current_conditions, group.last_seen, group.fingerprint)


def _current(arm: str, found: Sequence[_Found], settings: ReportSettings) -> _Found | None:
    """The bench's current definition of the arm (None: no sample of it yet); without the bench (or its
    definitions for this arm) the one seen most recently."""
    current_conditions = {
        definition.conditions for (each, _), definition in (settings.definitions or {}).items() if each == arm
    }
    if not current_conditions:
        return max(found, key=lambda one: (one.last_seen, one.key))
    matching = [one for one in found if any(group.fingerprint in current_conditions for group in one.groups.values())]
    return matching[0] if matching else None


def _figures(one: _Found, label: str, current: bool, before: _Found | None, z: float) -> ArmDefinition:
    groups = list(one.groups.values())
    scored = sum(group.scored for group in groups)
    passes = sum(group.outcomes[OUTCOME_PASS] for group in groups)
    costs = [cost for group in groups for cost in group.cost_equivalent]
    dollars = [value for values in one.dollars.values() for value in values]
    priced = [value for value in dollars if value is not None]
    models: dict[str, int] = {}
    for group in groups:
        for model, count in group.models.items():
            models[model] = models.get(model, 0) + count
    low, high = stats.wilson_interval(passes, scored, z) if scored else (None, None)
    changes = []
    if before is not None and before.conditions is not None and one.conditions is not None:
        changes = changes_between(arm_part(before.conditions), arm_part(one.conditions))
    return ArmDefinition(
        definition=one.key, label=label, current=current, recorded=one.conditions is not None,
        model=str((one.conditions or {}).get("model", "")), models=dict(sorted(models.items())),
        tasks=sorted(one.groups), sittings=len({trial[3] for group in groups for trial in group.trials if trial[3]}),
        first_seen=one.first_seen, last_seen=one.last_seen, samples=sum(group.samples for group in groups),
        scored=scored, passes=passes, success_rate=passes / scored if scored else None, success_low=low,
        success_high=high, cost_equivalent_mean=stats.mean(costs) if costs else None,
        cost_equivalent_median=stats.median(costs) if costs else None,
        usage_unknown=sum(group.usage_unknown for group in groups), changes=changes,
        dollars_per_trial=stats.mean(priced) if priced else None, dollars_unknown=len(dollars) - len(priced),
    )  # fmt: skip


def in_counting_order(one: _Found, other: _Found, tasks: Sequence[str]) -> list[tuple[str, Trial]]:
    """One's trials on the shared tasks in the order a reading could first count them: a trial counts from
    its start, but never before its task joined the comparison (the later of the two definitions' first
    trials of it). A later reading then only appends to what an earlier one counted."""
    return [(task, one.trials(task)[at]) for task, at in _counting_positions(one, other, tasks)]


def _counting_positions(one: _Found, other: _Found, tasks: Sequence[str]) -> list[tuple[str, int]]:
    """(task, position in one.trials(task)) in counting order (in_counting_order)."""
    keyed = []
    for task in tasks:
        joined = max(one.trials(task)[0][0], other.trials(task)[0][0])
        keyed += [(max(joined, trial[0]), trial[0], task, at) for at, trial in enumerate(one.trials(task))]
    keyed.sort(key=lambda item: item[:3])
    return [(task, at) for _, _, task, at in keyed]


def _priced_in_counting_order(one: _Found, other: _Found, tasks: Sequence[str]) -> list[tuple[str, float]]:
    """One's trials with known dollars as (task, dollars), in counting order."""
    return [
        (task, dollars) for task, at in _counting_positions(one, other, tasks)
        if (dollars := one.dollars.get(task, [])[at]) is not None
    ]  # fmt: skip


def _compare(
    earlier: _Found, current: _Found, labels: Mapping[str, str], alpha: float, confidence: float, arms: int
) -> DefinitionComparison | None:  # fmt: skip
    tasks = sorted(task for task in current.groups if current.trials(task) and earlier.trials(task))
    if not tasks:
        return None
    old, new = in_counting_order(earlier, current, tasks), in_counting_order(current, earlier, tasks)
    success = stats.success_difference([trial[1] for _, trial in old], [trial[1] for _, trial in new], alpha=alpha)
    tokens = stats.token_ratio(
        [(task, trial[2]) for task, trial in old if trial[2] is not None],
        [(task, trial[2]) for task, trial in new if trial[2] is not None], alpha=alpha,
    )  # fmt: skip
    dollars = stats.dollar_ratio(
        _priced_in_counting_order(earlier, current, tasks), _priced_in_counting_order(current, earlier, tasks), alpha=alpha
    )
    rate = lambda trials: sum(trial[1] for _, trial in trials) / len(trials)  # noqa: E731
    return DefinitionComparison(
        earlier=labels[earlier.key], current=labels[current.key], tasks=tasks, note=DRIFT_NOTE,
        method=UNPAIRED_METHOD, confidence=confidence, family_size=INTERVALS_PER_ARM * arms,
        success_earlier=rate(old), success_current=rate(new), success_difference=success.estimate,
        success_low=success.low, success_high=success.high, success_trials_earlier=len(old),
        success_trials_current=len(new), tokens_ratio=tokens.estimate, tokens_low=tokens.low,
        tokens_high=tokens.high, tokens_trials_earlier=tokens.n_earlier, tokens_trials_current=tokens.n_current,
        dollars_ratio=dollars.estimate, dollars_low=dollars.low, dollars_high=dollars.high,
        dollars_trials_earlier=dollars.n_earlier, dollars_trials_current=dollars.n_current,
    )  # fmt: skip
