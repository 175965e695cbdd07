"""One document model (headings, text, tables, lists) that feeds every text format, so the terminal,
Markdown and HTML reports always say the same things. The renderers lay it out; this module decides
what is said and how each figure is written.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ...leftovers import printable
from ...sample import TOKEN_COMPONENTS
from ...statistics import MIN_TASKS_FOR_INTERVAL
from ...store import STALE_PREFIX
from ..model import (
    COMPONENT_LABELS,
    COVERED,
    PARTIAL,
    TRANSCRIPT_KEPT,
    TRANSCRIPT_NOT_WRITTEN,
    TRANSCRIPT_PRUNED,
    CellFigure,
    CellSummary,
    Comparison,
    Figure,
    PairComparison,
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
    # (row, column) -> where the cell's text links to, for the formats that have links (HTML, Markdown)
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    wrap: tuple[int, ...] = ()  # columns of prose: left-aligned, and the HTML report lets them wrap

    def aligned_left(self, column: int) -> bool:
        return column < self.left or column in self.wrap


@dataclass(frozen=True)
class Command:
    """A command line for the reader to run, shown as code."""

    text: str


@dataclass(frozen=True)
class Bullets:
    items: list[str]


HEADLINE_PLOTS, COMPARISON_PLOT = "headline", "comparisons"


@dataclass(frozen=True)
class Plots:
    """Where the HTML report places its plots (HEADLINE_PLOTS or COMPARISON_PLOT); the text formats skip it."""

    kind: str = HEADLINE_PLOTS


Block = Heading | Text | Table | Bullets | Command | Plots
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
    blocks += _failure_blocks(report, detail=detail)
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
        return Table(
            [printable(h) for h in block.headers], [[printable(c) for c in row] for row in block.rows], block.left,
            block.links, block.wrap,
        )  # fmt: skip
    if isinstance(block, Command):
        return Command(printable(block.text))
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
    blocks += [Table(headers, rows), Plots(HEADLINE_PLOTS)]
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
    return blocks + [Plots(COMPARISON_PLOT), _comparison_table(report)]


def claim_text(comparison: Comparison, pair: PairComparison) -> str:
    """The claim in a few words: who is better and for which scope, or that none is claimed."""
    if pair.estimate is None:
        return "not compared"
    if pair.scope is None:
        return "not distinguishable"
    a_better = (pair.estimate < 0) == (comparison.better == "lower")
    return f"{pair.arm_a if a_better else pair.arm_b} better for {pair.scope}"


def _comparison_table(report: Report) -> Table:
    """One row per metric and pair: the figures behind each claim, then the verdict in words."""
    rows = []
    for comparison in report.comparisons:
        label = f"{comparison.unit[0].upper()}{comparison.unit[1:]} ({comparison.better} is better)"
        for pair in comparison.pairs:
            within = pair.within_tasks
            difference = these = like_these = DASH
            if pair.estimate is not None:
                difference = _signed(comparison.metric, pair.estimate)
                if pair.relative is not None and comparison.metric != "success":
                    difference += f" ({100 * pair.relative:+.1f}%)"
                these = f"e = {_e_text(within.e_max)} over {plural(within.pairs, 'paired trial')}"
                parts = []
                if pair.low is not None and pair.high is not None:
                    parts.append(f"[{_signed(comparison.metric, pair.low)} to {_signed(comparison.metric, pair.high)}]")
                if pair.p_value is not None:
                    holm = f" (Holm {p_text(pair.p_adjusted)})" if comparison.holm_adjusted and pair.p_adjusted is not None else ""
                    parts.append(f"p {p_text(pair.p_value)}{holm}")
                like_these = " ".join(parts) or DASH
            rows.append(
                [label, f"{pair.arm_a} vs {pair.arm_b}", claim_text(comparison, pair), str(pair.n_tasks), difference,
                 these, like_these, pair.verdict]
            )  # fmt: skip
            label = ""
    headers = ["metric", "pair", "claim", "tasks", "a \u2212 b", "these tasks", "tasks like these", "verdict"]
    return Table(headers, rows, left=3, wrap=(0, 6, 7))


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


# -- the trials that did not pass ---------------------------------------------------------------------
INSPECT_LOG_DIR = "inspect-logs"
_TRANSCRIPT_ABSENT = {
    TRANSCRIPT_NOT_WRITTEN: "none kept (the trial ended before the agent started, or writing it failed)",
}
_NO_TRANSCRIPT = "none (older sample): its tool calls are in the store"


def viewer_command(report: Report, cell: CellSummary, stores: Sequence[str]) -> str:
    """The commands that open a cell's trials in Inspect's viewer (benchcell export inspect)."""
    words = ["benchcell", "export", "inspect", INSPECT_LOG_DIR]
    for store in stores:
        words += ["--store", store]
    if report.settings.model_kind != "real":
        words += ["--model-kind", report.settings.model_kind]
    words += ["--arm", cell.arm, "--task", cell.task]
    return f"{shlex.join(words)} && inspect view --log-dir {INSPECT_LOG_DIR}"


def transcript_uri(store: str, path: str) -> str:
    """A file: URI for a transcript (the store folder is absolute, the path relative and checked by reading)."""
    return PurePosixPath(store, *path.split("/")).as_uri()


def _failed_cells(report: Report) -> list[CellSummary]:
    return [cell for cell in [*report.cells, *report.bonus.cells] if cell.failures]


def _failure_blocks(report: Report, *, detail: bool) -> list[Block]:
    cells = _failed_cells(report)
    listed = sum(len(cell.failures) for cell in cells)
    left_out = sum(cell.failures_left_out for cell in cells)
    blocks: list[Block] = [Heading("Trials that did not pass")]
    if not cells:
        return blocks + [Text("No reported trial failed, was invalid or errored.")]
    total = plural(listed + left_out, "trial")
    if not detail:
        return blocks + [
            Text(
                f"{total} did not pass (incorrect, confused, hung, invalid or errored); the Markdown, JSON and HTML "
                "reports name each with its reason and how to open its transcript."
            )
        ]
    blocks.append(
        Text(
            f"{total} in {plural(len(cells), 'cell')} did not pass, each with its reason. A transcript (every message, "
            "tool call and result, and each model request's usage) is a gzip JSON-lines file beside the store, its "
            "path relative to the store; the command under each cell writes the cell's trials as Inspect AI logs and "
            "opens them in Inspect's viewer (`pip install pytest-benchcell[inspect]`), transcripts or not."
        )
    )
    for cell in cells:
        failed = len(cell.failures) + cell.failures_left_out
        blocks += [
            Heading(f"{cell.arm} \u00d7 {cell.task}: {failed} of {plural(cell.samples, 'trial')}", 3),
            Command(viewer_command(report, cell, sorted({failure.store for failure in cell.failures}))),
        ]
        rows, links = [], {}
        for i, failure in enumerate(cell.failures):
            if failure.transcript is None:
                where = _TRANSCRIPT_ABSENT.get(failure.transcript_status, _NO_TRANSCRIPT)
            elif failure.transcript_status == TRANSCRIPT_PRUNED:
                where = f"{failure.transcript} (pruned: the file is gone)"
            else:
                where = failure.transcript
                if failure.transcript_status == TRANSCRIPT_KEPT:
                    links[(i, 3)] = transcript_uri(failure.store, failure.transcript)
            trial = DASH if failure.trial is None else f"#{failure.trial}"
            rows.append([trial, failure.verdict, failure.reason or DASH, where])
        blocks.append(Table(["trial", "verdict", "reason", "transcript"], rows, left=4, links=links, wrap=(2,)))
        blocked = list(dict.fromkeys(line for failure in cell.failures for line in failure.sandbox_blocked))
        if blocked:
            broken = sum(1 for failure in cell.failures if failure.sandbox_blocked)
            blocks.append(
                Text(
                    f"In {plural(broken, 'of these trials', 'of these trials')} the sandbox kept the arm's own program "
                    f"from what it needs (never scored against the arm): {'; '.join(blocked[:3])}."
                )
            )
        if cell.failures_left_out:
            blocks.append(
                Text(f"Listed: the newest {len(cell.failures)}; {cell.failures_left_out} older ones are in the viewer.")
            )
    return blocks
