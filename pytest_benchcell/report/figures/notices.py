"""Provenance (which samples each figure uses and which are left out) and the notices a reader must see first."""

from __future__ import annotations

from collections import Counter

from ...store import STALE_PREFIX
from ..model import CellSummary, Provenance, Report, names_in_prose, plural
from ..skill_use import rarely_used_notes
from .context import _Context, _every_headline_arm, _headline_arms
from .headline import MIN_TASKS


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
    if provenance.left_out_older:  # the whole first, so the reasons below add up to what was read
        used = sum(provenance.models.values())
        other = "of other conditions" if provenance.current_conditions else "of older fingerprints"
        notes.append(
            f"Of the {plural(used + provenance.left_out_older, 'sample')} read, {used} used and "
            f"{provenance.left_out_older} left out: {provenance.left_out_stale_scoring} judged under an older scoring "
            f"definition and {provenance.left_out_other_conditions} {other} (below)."
        )
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
        if cell.harness_broke:
            notes.append(harness_broke_notice(cell))
    return notes + rarely_used_notes(report)


def harness_broke_notice(cell: CellSummary) -> str:
    """The note naming every trial of a cell the harness broke, with what it kept where a listed trial says."""
    numbers = [f"#{number}" if number else "#?" for number in cell.harness_broke]
    kept = next((failure.sandbox_blocked[0] for failure in cell.failures if failure.sandbox_blocked), None)
    what = (
        f": the sandbox kept the arm's own program from what it needs ({kept})" if kept
        else ": the sandbox kept the arm's own program from what it needs, or its MCP server failed"
    )  # fmt: skip
    return (
        f"{cell.arm} \u00d7 {cell.task}: the harness broke {plural(len(numbers), 'trial')} ({', '.join(numbers)}), "
        f"counted as errors, never for or against the arm{what}."
    )
