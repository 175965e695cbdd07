"""The Definitions section: per arm with samples of more than one definition, a row of figures per
definition, what changed from the one before, and the current definition against an earlier one
(unpaired, with the drift between sittings said beside it). Absent when no arm has two definitions."""

from __future__ import annotations

from ....statistics import MIN_TASKS_FOR_INTERVAL  # an interval needs this many shared tasks, as everywhere
from ...definition_model import ArmDefinition, ArmDefinitions, DefinitionComparison
from ...model import Report, names_in_prose, plural
from .blocks import DASH, Block, Bullets, Heading, Table, Text, _percent, _tokens, _with_interval
from .dollars import _dollars


def _definition_blocks(report: Report) -> list[Block]:
    if not report.definitions:
        return []
    blocks: list[Block] = [
        Heading("Definitions"),
        Text(
            "Arms whose samples ran under more than one definition (a definition: everything the agent meets, "
            "the task aside: the model, the prompts, the skill's text, what each binary is, the declared paths and "
            "bounds). Every other section uses the current definition only; here each one has its own figures, "
            "never pooled, and the current one is compared with the one seen most recently before it. A second "
            "model is one more definition."
        ),
    ]
    for arm in report.definitions:
        blocks += _arm_blocks(arm)
    return blocks


def _arm_blocks(arm: ArmDefinitions) -> list[Block]:
    rows = [_row(one) for one in arm.definitions]
    blocks: list[Block] = [
        Heading(arm.arm, 3),
        Table(
            ["definition", "model", "first seen", "last seen", "sittings", "tasks", "trials", "success [Wilson]",
             "cost-eq (median)", "$ per trial"],
            rows, left=4,
        ),  # fmt: skip
    ]
    changes = [_changes_item(one, arm.definitions[index - 1]) for index, one in enumerate(arm.definitions) if index]
    if changes:
        blocks += [Text("What changed:"), Bullets(changes)]
    if arm.comparison is not None:
        blocks += [Text(comparison_text(arm.comparison))]
    else:
        current = [one.label for one in arm.definitions if one.current]
        blocks += [Text(
            "No comparison: the current definition has no scored trial of a task an earlier one has."
            if current else "No comparison: the current definition has no sample yet."
        )]  # fmt: skip
    if arm.left_out_stale_scoring:
        blocks += [Text(f"Left out: {plural(arm.left_out_stale_scoring, 'sample')} judged under an older scoring "
                        "(`--bench-rescore` brings them up to date).")]  # fmt: skip
    if arm.left_out_older_task_definitions:
        blocks += [Text(f"Left out: {plural(arm.left_out_older_task_definitions, 'sample')} of an earlier definition "
                        "of a task itself (its intent or tier), under the same definition of the arm.")]  # fmt: skip
    return blocks


def _row(one: ArmDefinition) -> list[str]:
    label = f"{one.label} (current)" if one.current else one.label
    success = DASH
    if one.scored:
        success = f"{one.passes}/{one.scored} {_with_interval(one.success_rate, one.success_low, one.success_high, _percent)}"
    cost = DASH if one.cost_equivalent_mean is None else f"{_tokens(one.cost_equivalent_mean)} ({_tokens(one.cost_equivalent_median)})"
    return [
        label, one.model or "not recorded", one.first_seen[:16].replace("T", " "), one.last_seen[:16].replace("T", " "),
        str(one.sittings), str(len(one.tasks)), str(one.scored), success, cost, _dollars_cell(one),
    ]  # fmt: skip


def _dollars_cell(one: ArmDefinition) -> str:
    """Dollars per trial at the report's prices, as the Dollars section shows them; unknown, never 0."""
    if not one.scored:
        return DASH
    unknown = f" ({one.dollars_unknown} unknown)" if one.dollars_unknown and one.dollars_per_trial is not None else ""
    return _dollars(one.dollars_per_trial) + unknown


def _changes_item(one: ArmDefinition, before: ArmDefinition) -> str:
    head = f"{before.label} \u2192 {one.label}: "
    if not one.recorded or not before.recorded:
        return head + "not known (a definition's conditions are not in the store's definitions files)"
    named = "; ".join(
        f"{change.what} ({change.before or 'absent'} \u2192 {change.after or 'absent'})" for change in one.changes
    )
    return head + (named or "no difference in the stored conditions")


def comparison_text(comparison: DefinitionComparison) -> str:
    """The comparison as one paragraph: both figures with their intervals, how they were made, the drift."""
    shown = len(comparison.tasks) >= MIN_TASKS_FOR_INTERVAL
    success = f"success {_percent(comparison.success_current)} against {_percent(comparison.success_earlier)}"
    if comparison.success_difference is not None:
        difference = f"{100 * comparison.success_difference:+.0f} pp"
        if shown and comparison.success_low is not None and comparison.success_high is not None:
            difference += f" [{100 * comparison.success_low:+.0f} to {100 * comparison.success_high:+.0f} pp]"
        success += f", a difference of {difference}"
    success += f" ({comparison.success_trials_current} against {comparison.success_trials_earlier} trials)"
    tokens = _ratio_text(
        comparison, "tokens", "cost-equivalent tokens", "no trial with known usage on both sides", shown
    )
    dollars = _ratio_text(comparison, "dollars", "dollars", "no trial priced on both sides", shown)
    level = f"{100 * comparison.confidence:.0f}%"
    intervals = (
        f"Intervals: {level} for the section's {plural(comparison.family_size, 'interval')} together, "
        "valid however often the report is read"
        if shown else f"Intervals are withheld below {MIN_TASKS_FOR_INTERVAL} shared tasks, as everywhere in the report"
    )
    return (
        f"{comparison.current} against {comparison.earlier}, over {plural(len(comparison.tasks), 'shared task')} "
        f"({names_in_prose(comparison.tasks)}): {success}; {tokens}; {dollars}. "
        f"{comparison.note[0].upper()}{comparison.note[1:]}. {intervals} ({comparison.method})."
    )


def _ratio_text(comparison: DefinitionComparison, metric: str, label: str, none: str, shown: bool) -> str:
    """One ratio of the comparison (`metric` names its fields: tokens or dollars), current / earlier,
    with its interval where intervals are shown and the trials on each side."""
    ratio, low, high = (getattr(comparison, f"{metric}_{part}") for part in ("ratio", "low", "high"))
    if ratio is None:
        return f"{label}: {none}"
    text = f"{label} \u00d7{ratio:.2f}"
    if shown and low is not None and high is not None:
        text += f" [{low:.2f}\u2013{high:.2f}]"
    current, earlier = (getattr(comparison, f"{metric}_trials_{side}") for side in ("current", "earlier"))
    return text + f" ({current} against {earlier} trials)"
