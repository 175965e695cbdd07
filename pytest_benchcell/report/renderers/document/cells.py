"""The per-cell sections: the cells in detail, the bonus tasks, and provenance (which samples each
figure uses)."""

from __future__ import annotations

from ....store import STALE_PREFIX
from ...model import CellSummary, Report, plural
from .blocks import (
    DASH, Block, Bullets, Heading, Table, Text, _mean_median, _percent, _rate_text, _seconds, _tokens, _turns,
)  # fmt: skip


def _cell_detail_blocks(report: Report) -> list[Block]:
    rows = [_cell_row(cell) for cell in report.cells]
    return [
        Heading("Per cell"),
        Text("Success with its Wilson interval; means with medians in parentheses; scored trials only."),
        Table(
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


def _bonus_blocks(report: Report) -> list[Block]:
    blocks: list[Block] = [Heading("Bonus tasks")]
    if not report.bonus.tasks:
        return blocks + [Text("No bonus tasks.")]
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
        Text("Outside the scored comparison: bonus tasks never enter the headline, tiers or comparisons."),
        Table(["task", "arm", "scored", "success [Wilson]", "cost-eq (median)", "invalid", "error"], rows, left=2),
    ]


def _left_out_item(cell: CellSummary) -> str:
    unused = [g for g in cell.groups if not g.used]
    left_out = f"left out {plural(cell.left_out_older, 'sample')} of {plural(len(unused), 'other fingerprint')}"
    listed = ", ".join(g.fingerprint or "unrecorded" for g in unused)
    if cell.fingerprint is None:
        return f"{cell.arm} \u00d7 {cell.task}: no sample used; {left_out} ({listed})"
    return f"{cell.arm} \u00d7 {cell.task}: used {cell.fingerprint} ({plural(cell.samples, 'sample')}); {left_out} ({listed})"


def _provenance_blocks(report: Report, *, detail: bool) -> list[Block]:
    provenance = report.provenance
    models = ", ".join(f"{m or 'unrecorded'} ({n})" for m, n in provenance.models.items()) or "none"
    blocks: list[Block] = [
        Heading("Provenance"),
        Text(
            f"Model kind: {report.settings.model_kind} (real and scripted samples are never pooled). "
            f"Models (samples used): {models}. Fingerprint policy: {provenance.policy}; every figure uses each "
            + ("cell's samples of the current conditions and scoring." if provenance.current_conditions
               else "cell's newest fingerprint.")
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
            Text("Every fingerprint group of every cell, newest first:"),
            Table(["arm", "task", "fingerprint", "used", "samples", "scored", "passed", "cost-eq mean",
                    "first seen", "last seen"], rows, left=4),
        ]  # fmt: skip
    elif older:
        items = [_left_out_item(c) for c in older]
        blocks += [
            Text("Cells with samples no figure uses (left out; --fingerprints group shows them; "
                 f"{STALE_PREFIX}... marks verdicts of an older scoring, which --bench-rescore brings up to date):"),
            Bullets(items),
        ]
    else:
        blocks.append(Text("No cell has samples of more than one fingerprint."))
    return blocks


def _host_blocks(report: Report) -> list[Block]:
    """Where trials ran, per machine and arm: only when the samples used ran on more than one host."""
    if not report.hosts:
        return []
    rows = [
        [row.host, row.arm, ", ".join(row.gateways) or DASH, str(row.samples), str(row.scored),
         f"{row.passed}/{row.scored} {_percent(row.success_rate)}" if row.scored else DASH,
         _tokens(row.cost_equivalent_median), _seconds(row.duration_s_median)]
        for row in report.hosts
    ]  # fmt: skip
    return [
        Heading("Where trials ran"),
        Text(
            "The samples every figure uses, by the machine that ran them (provenance.host; unknown: stored before "
            "hosts were recorded) and arm, with the xdist workers among them; medians over scored trials. A machine "
            "whose pass rate, tokens or times stand apart is worth a look before its trials are trusted."
        ),
        Table(["host", "arm", "gateways", "samples", "scored", "pass", "cost-eq median", "duration median"], rows, left=3),
    ]
