"""The summary sections: the header, headline, cost per verified success, coverage, per tier, per token
component, outcomes and pass^k."""

from __future__ import annotations

from ....sample import TOKEN_COMPONENTS
from ....statistics import MIN_TASKS_FOR_INTERVAL
from ...model import COMPONENT_LABELS, COVERED, PARTIAL, CostPerSuccessRow, Report, plural
from .blocks import (
    DASH,
    HEADLINE_PLOTS,
    Block,
    Bullets,
    Heading,
    Plots,
    Table,
    Text,
    _figure_text,
    _mean_median,
    _percent,
    _rate_text,
    _seconds,
    _tokens,
    _turns,
    _usd,
)


def _header(report: Report) -> list[Block]:
    settings = report.settings
    scored = sum(1 for t in report.tasks if not t.bonus and not t.excluded)
    bonus = sum(1 for t in report.tasks if t.bonus and not t.excluded)
    weights = settings.weights
    return [
        Text(
            f"{plural(len(report.arms), 'arm')}, {plural(scored, 'task')}" + (f" (+{bonus} bonus)" if bonus else "")
            + f"; floor {settings.floor} scored trials per cell; {report.store.samples_used:,} samples used of "
            f"{report.store.samples_read:,} read."
        ),
        Text(
            "Cost-equivalent tokens = "
            + " + ".join(f"{weights[name]:g} \u00d7 {COMPONENT_LABELS[name]}" for name in TOKEN_COMPONENTS)
            + " (weights relative to fresh input; hung trials count with the usage they had)."
        ),
        Text(
            f"Intervals: {100 * settings.confidence:g}%, about tasks like these, from {MIN_TASKS_FOR_INTERVAL} tasks on "
            "(fewer tasks get none: no interval can be honest): success t over task rates widened to the pooled "
            "Wilson interval; costs, tokens, turns and times the lognormal generalized interval over task means "
            f"({settings.resamples} draws, seed {settings.seed}). Per-cell success: Wilson. Only scored trials "
            "enter the figures."
        ),
    ]  # fmt: skip


def _headline_blocks(report: Report) -> list[Block]:
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
    blocks: list[Block] = [Heading("Headline"), Text(note[0].upper() + note[1:] + ".")]
    if report.headline.tasks:
        blocks.append(Text(f"Tasks used: {', '.join(report.headline.tasks)}."))
    blocks += [Table(headers, rows), Plots(HEADLINE_PLOTS)]
    return blocks


# Printed instead of an interval that is a single point: no trial of any task differed from another of
# its task in tokens or outcome (a scripted model), so the trials give no spread to make an interval of.
NO_SPREAD = "no interval: the trials of each task were alike"


def _cost_per_success_blocks(report: Report) -> list[Block]:
    table = report.cost_per_success
    if not table.tasks:
        return []
    level = f"{100 * report.settings.confidence:g}%"

    def upper(value: float | None) -> str:
        return "unbounded" if value is None else _tokens(value)

    def per_success(row: CostPerSuccessRow) -> str:
        if row.tokens_per_success is None:
            return DASH
        if row.low is None:
            return _tokens(row.tokens_per_success)
        if row.low == row.high:
            return f"{_tokens(row.tokens_per_success)} ({NO_SPREAD})"
        return f"{_tokens(row.tokens_per_success)} [{_tokens(row.low)}\u2013{upper(row.high)}]"

    rows = [
        [
            row.arm,
            per_success(row),
            _tokens(row.tokens_per_trial),
            _percent(row.success_rate),
            str(row.trials),
        ]
        for row in table.rows
    ]  # fmt: skip
    ratios = [
        f"{pair.arm_a} / {pair.arm_b} = {pair.ratio:.2f}x"
        + (f" ({NO_SPREAD})" if pair.low is not None and pair.low == pair.high
           else f" [{pair.low:.2f}x\u2013{pair.high:.2f}x]" if pair.low is not None and pair.high is not None else "")
        for pair in table.pairs
        if pair.ratio is not None
    ]
    blocks: list[Block] = [
        Heading("Cost per verified success"),
        Text(
            "Cost-equivalent tokens per trial / success rate over the headline tasks (each task weighs the same): "
            f"what one verified success costs. The {level} interval is for these tasks (their trials are the "
            f"replicates; Fieller's interval for a ratio), from {MIN_TASKS_FOR_INTERVAL} tasks on."
        ),
        Table(["arm", f"tokens per success [{level} CI]", "tokens per trial", "success", "trials"], rows),
    ]
    if ratios:
        blocks.append(Bullets(ratios))
    return blocks


def _coverage_legend(floor: int) -> str:
    """What covered, partial and missing mean at this floor (at a floor of 1 no cell is partial)."""
    partial = {1: "", 2: "1 (partial), "}.get(floor, f"1 to {floor - 1} (partial), ")
    return f"Cells with >= {floor} scored trial{'s' if floor != 1 else ''} (covered), {partial}none (missing)."


def _coverage_blocks(report: Report) -> list[Block]:
    floor = report.settings.floor
    per_arm = [
        [row.arm, str(row.covered), str(row.partial), str(row.missing), str(row.total),
         "complete" if row.covered == row.total else "incomplete"]
        for row in report.coverage
    ]  # fmt: skip
    blocks: list[Block] = [
        Heading("Coverage"),
        Text(_coverage_legend(floor)),
        Table(["arm", "covered", "partial", "missing", "tasks", "status"], per_arm),
    ]
    by_cell = {(c.arm, c.task): c for c in report.cells}
    matrix = []
    for entry in report.tasks:
        if entry.bonus or entry.excluded:
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
        blocks += [Text("Scored trials per cell:"), Table(["task", "tier", *report.arms], matrix, left=2)]
    excluded = [f"{entry.task}: {entry.excluded}" for entry in report.tasks if entry.excluded]
    if excluded:
        blocks += [Text("Not part of this bench's comparison (never counted as missing):"), Bullets(excluded)]
    return blocks


def _tier_blocks(report: Report) -> list[Block]:
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
        Heading("Per tier"),
        Text("Over each tier's headline tasks (every arm at the floor); coverage counts all the tier's tasks."),
        Table(["tier", "arm", "cost-eq tokens [CI]", "success [CI]", "coverage"], rows, left=2),
    ]


def _component_blocks(report: Report) -> list[Block]:
    rows = [
        [row.arm, *(_figure_text(getattr(row, name), _tokens) for name in TOKEN_COMPONENTS)]
        for row in report.components
    ]
    return [
        Heading("Per token component"),
        Text("Mean tokens per trial (unweighted) over the headline tasks, with intervals."),
        Table(["arm", *(COMPONENT_LABELS[name] for name in TOKEN_COMPONENTS)], rows),
    ]


def _outcome_blocks(report: Report) -> list[Block]:
    rows = [
        [row.arm, str(row.samples), str(row.scored), str(row.passed), str(row.incorrect), str(row.confused),
         str(row.hung), str(row.invalid), str(row.error)]
        for row in report.outcomes
    ]  # fmt: skip
    return [
        Heading("Outcomes"),
        Text(
            "Counts over every scored task of the catalogue. Invalid trials (a tool outside the arm ran) and harness "
            "errors are never scored; they are counted here so that no attempt disappears, and each trial that did not "
            "pass is named under Trials that did not pass."
        ),
        Table(["arm", "samples", "scored", "pass", "incorrect", "confused", "hung", "invalid", "error"], rows),
    ]


def _pass_k_blocks(report: Report) -> list[Block]:
    k_all = max((p.k_max for p in report.pass_hat_k), default=0)
    blocks: list[Block] = [
        Heading("pass^k"),
        Text(
            "Chance that k fresh trials of a task all pass, C(c, k) / C(n, k) averaged over the headline tasks; "
            "k goes up to each arm's smallest cell."
        ),
    ]
    if k_all == 0:
        return blocks + [Text("No headline task yet.")]
    shown = sorted({*range(1, min(k_all, 5) + 1), k_all})
    rows = []
    for entry in report.pass_hat_k:
        values = {v.k: v.value for v in entry.values}
        rows.append([entry.arm, str(entry.n_tasks), *(_percent(values.get(k)) for k in shown)])
    return blocks + [Table(["arm", "tasks", *(f"k={k}" for k in shown)], rows)]
