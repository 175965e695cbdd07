"""One document model (headings, text, tables, lists) that feeds every text format, so the terminal,
Markdown and HTML reports always say the same things. The renderers lay it out; this module decides
what is said and how each figure is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...leftovers import printable
from ...sample import TOKEN_COMPONENTS
from ...statistics import MIN_TASKS_FOR_INTERVAL
from ...store import STALE_PREFIX
from ..model import (
    COMPONENT_LABELS,
    COVERED,
    PARTIAL,
    CellFigure,
    CellSummary,
    Figure,
    Rate,
    Report,
    p_text,
    plural,
)

@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    left: int = 1  # how many leading columns are left-aligned (names); the rest are numbers


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Plots:
    """Where the HTML report places its plots; the text formats skip it."""


Block = Heading | Text | Table | Bullets | Plots
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


def document(report: Report, *, detail: bool) -> list[Block]:
    blocks: list[Block] = [Heading(f"benchcell report \u2014 {report.settings.model_kind} model", 1)]
    blocks += _header(report)
    if report.notices:
        blocks += [Heading("Notes"), Bullets(report.notices)]
    blocks += _headline_blocks(report)
    blocks += _cost_per_success_blocks(report)
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
            Heading("Per cell"),
            Text("Per-cell figures (Wilson intervals, medians) are in the Markdown, JSON and HTML reports."),
        ]
    blocks += _bonus_blocks(report)
    blocks += _provenance_blocks(report, detail=detail)
    if report.store.problems:
        blocks += [
            Heading("Problems"),
            Text("Lines of the store that could not be read (skipped, kept on disk as they are):"),
            Bullets(report.store.problems),
        ]
    # A table with no rows says nothing: name the absence instead of printing a bare header.
    return [_printable(Text("Nothing to show yet.") if isinstance(b, Table) and not b.rows else b) for b in blocks]


def _printable(block: Block) -> Block:
    """The block with control characters and terminal escapes written visibly: names and problems
    come from a store's folders and lines, which a report may read from anyone (the JSON report
    keeps them as they are)."""
    if isinstance(block, Heading):
        return Heading(printable(block.text), block.level)
    if isinstance(block, Text):
        return Text(printable(block.text))
    if isinstance(block, Bullets):
        return Bullets([printable(item) for item in block.items])
    if isinstance(block, Table):
        return Table([printable(h) for h in block.headers], [[printable(c) for c in row] for row in block.rows], block.left)
    return block


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
    blocks += [Table(headers, rows), Plots()]
    return blocks


def _cost_per_success_blocks(report: Report) -> list[Block]:
    table = report.cost_per_success
    if not table.tasks:
        return []
    level = f"{100 * report.settings.confidence:g}%"

    def upper(value: float | None) -> str:
        return "unbounded" if value is None else _tokens(value)

    rows = [
        [
            row.arm,
            DASH if row.tokens_per_success is None else (
                _tokens(row.tokens_per_success) if row.low is None
                else f"{_tokens(row.tokens_per_success)} [{_tokens(row.low)}\u2013{upper(row.high)}]"
            ),
            _tokens(row.tokens_per_trial),
            _percent(row.success_rate),
            str(row.trials),
        ]
        for row in table.rows
    ]  # fmt: skip
    ratios = [
        f"{pair.arm_a} / {pair.arm_b} = {pair.ratio:.2f}x [{pair.low:.2f}x\u2013{pair.high:.2f}x]"
        for pair in table.pairs
        if pair.ratio is not None and pair.low is not None and pair.high is not None
    ]
    blocks: list[Block] = [
        Heading("Cost per verified success"),
        Text(
            "Cost-equivalent tokens per trial / success rate over the headline tasks (each task weighs the same): "
            f"what one verified success costs. The {level} interval is for these tasks (their trials are the "
            "replicates; Fieller's interval for a ratio)."
        ),
        Table(["arm", f"tokens per success [{level} CI]", "tokens per trial", "success", "trials"], rows),
    ]
    if ratios:
        blocks.append(Bullets(ratios))
    return blocks


def _signed(spec_key: str, value: float) -> str:
    return f"{100 * value:+.1f} pp" if spec_key == "success" else f"{value:+,.0f}"


def _comparison_blocks(report: Report) -> list[Block]:
    if not report.comparisons:
        return [Heading("Comparisons"), Text("Pairwise comparisons need at least two arms.")]
    family = report.comparisons[0].family_size
    alpha = 1.0 - report.settings.confidence
    blocks: list[Block] = [
        Heading("Comparisons"),
        Text(
            "Each claim names its scope. For these tasks: the k-th trials of the two arms on a shared task are "
            "paired, and an e-process over the pairs in the order they ran (success: the sign e-process; tokens: "
            "a betting e-process on the paired log-ratios, mixed with the sign e-process) must reach "
            f"{plural(family, 'hypothesis', 'hypotheses')} / {alpha:g} = {family / alpha:,.0f} (Holm across every "
            f"pair and metric), which keeps the chance of any wrong claim below {alpha:g} however often the report "
            "is read. For tasks like these: additionally the sign-flip test over the per-task differences "
            f"(Holm-adjusted) and their t interval must exclude zero. Differences are a \u2212 b over the tasks "
            "where both arms meet the floor."
        ),
    ]
    for comparison in report.comparisons:
        items = []
        for pair in comparison.pairs:
            head = f"{pair.arm_a} vs {pair.arm_b} ({plural(pair.n_tasks, 'shared task')})"
            if pair.estimate is None:
                items.append(f"{head}: {pair.verdict}.")
                continue
            figures = f"{pair.arm_a} \u2212 {pair.arm_b} = {_signed(comparison.metric, pair.estimate)}"
            if pair.relative is not None and comparison.metric != "success":
                figures += f" ({100 * pair.relative:+.1f}%)"
            within = pair.within_tasks
            figures += f"; these tasks: e = {_e_text(within.e_max)} over {plural(within.pairs, 'paired trial')}"
            if pair.low is not None and pair.high is not None:
                figures += (
                    f"; tasks like these: [{_signed(comparison.metric, pair.low)} to "
                    f"{_signed(comparison.metric, pair.high)}]"
                )
            if pair.p_value is not None:
                figures += f", p {p_text(pair.p_value)}"
                if comparison.holm_adjusted and pair.p_adjusted is not None:
                    figures += f" (Holm {p_text(pair.p_adjusted)})"
            items.append(f"{head}: {figures}: {pair.verdict}.")
        unit = comparison.unit[0].upper() + comparison.unit[1:]
        blocks += [Text(f"{unit} ({comparison.better} is better):"), Bullets(items)]
    return blocks


def _e_text(value: float) -> str:
    if value >= 1e6:
        return f"{value:.1e}".replace("e+0", "e+")  # 1.9e+9: the digits beyond would be noise
    return f"{value:,.0f}" if value >= 100 else f"{value:.2g}" if value < 10 else f"{value:.1f}"


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
            "errors are never scored; they are counted here so that no attempt disappears."
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

