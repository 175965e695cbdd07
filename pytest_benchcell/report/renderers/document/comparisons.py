"""The Comparisons section: what each claim means, then the verdicts: a compact table (claim, estimate
and interval per metric) in the terminal, one row per metric and pair with the full sentence in
Markdown and HTML."""

from __future__ import annotations

from ...model import SCOPE_TASKS_LIKE_THESE, Comparison, PairComparison, Report, p_text, plural
from .blocks import COMPARISON_PLOT, DASH, Block, Heading, Plots, Table, Text


def _signed(spec_key: str, value: float) -> str:
    return f"{100 * value:+.1f} pp" if spec_key == "success" else f"{value:+,.0f}"


def _comparison_blocks(report: Report, *, detail: bool = True) -> list[Block]:
    if not report.comparisons:
        return [Heading("Comparisons"), Text("Pairwise comparisons need at least two arms." if len(report.arms) < 2 else "No declared comparison among these arms.")]
    family = report.comparisons[0].family_size
    alpha = 1.0 - report.settings.confidence
    margins = [
        f"{c.unit} within {margin_text(c)}" for c in report.comparisons if c.margin is not None
    ]
    equivalence = (
        f" Equivalent: the whole anytime interval lies inside the smallest effect ({'; '.join(margins)})."
        if margins else " No [bench.smallest_effect] is declared, so no equivalence is claimed."
    )  # fmt: skip
    blocks: list[Block] = [
        Heading("Comparisons"),
        Text(
            "For these tasks: the k-th trials of the two arms on a shared task are paired, and an e-process over "
            "the pairs in the order they ran (success: the sign e-process; tokens: a betting e-process on the "
            f"paired log-ratios, mixed with the sign e-process) must reach {plural(family, 'comparison')} / "
            f"{alpha:g} = {family / alpha:,.0f} (Bonferroni over the declared comparisons, the same bar at every "
            f"reading and in `--bench-fill decide`), which keeps the chance of any wrong claim below {alpha:g} "
            "however often the report is read. Intervals are anytime-valid at the same level, withheld below 3 "
            f"shared tasks.{equivalence} For tasks like these: additionally the sign-flip test over the per-task "
            "differences (Bonferroni-adjusted) and their t interval must exclude zero. Differences are a \u2212 b, "
            "token ratios a/b."
        ),
    ]
    table = _comparison_table(report) if detail else _compact_table(report)
    return blocks + [Plots(COMPARISON_PLOT), table]


def margin_text(comparison: Comparison) -> str:
    """The comparison's margin as a band: "±15 pp", "±20%"."""
    assert comparison.margin is not None
    if comparison.metric == "success":
        return f"\u00b1{100 * comparison.margin:.0f} pp"
    return f"\u00b1{100 * (comparison.margin - 1):.0f}%"


def claim_text(comparison: Comparison, pair: PairComparison) -> str:
    """The claim in a few words, the same everywhere: who is better and for which scope, equivalent, or undecided."""
    if pair.scope is not None:
        return f"{pair.claim} for {pair.scope}"
    return pair.claim


def _short_claim(pair: PairComparison) -> str:
    """The claim for the terminal's narrow table: the scope shortened to a mark."""
    if pair.scope == SCOPE_TASKS_LIKE_THESE:
        return f"{pair.claim} (generalizes)"
    return pair.claim


def paired_text(comparison: Comparison, pair: PairComparison, *, compact: bool = False) -> str:
    """The paired trials' estimate with its anytime interval: "+12.5 pp [-3.0, +28.0]", "0.83x [0.70x, 0.98x]"."""
    within = pair.within_tasks
    if within.estimate is None:
        return DASH

    def show(value: float) -> str:
        return f"{100 * value:+.1f}" if within.scale == "difference" else f"{value:.2f}x"

    text = show(within.estimate) + (" pp" if within.scale == "difference" else "")
    if within.statement is not None and compact:  # the sign count, short: 14 of the 16 pairs that differ agree
        agreeing = within.positives if (within.estimate or 0.0) > 0 else within.nonzero - within.positives
        return f"{text} ({agreeing}/{within.nonzero} signs)"
    if within.statement is not None:
        return f"{text} ({within.statement})"
    if within.low is None or within.high is None:
        return text
    return f"{text} [{show(within.low)}, {show(within.high)}]"


def _compact_table(report: Report) -> Table:
    """One row per pair and metric, narrow enough for a terminal: claim, estimate and interval."""
    rows = []
    for index in range(len(report.comparisons[0].pairs)):
        for number, comparison in enumerate(report.comparisons):
            pair = comparison.pairs[index]
            rows.append([
                "" if number else f"{pair.arm_a} vs {pair.arm_b}", "success" if comparison.metric == "success" else "tokens",
                _short_claim(pair), paired_text(comparison, pair, compact=True), str(pair.n_tasks), str(pair.within_tasks.pairs),
            ])  # fmt: skip
    return Table(["pair", "metric", "claim", "a \u2212 b or a/b [anytime interval]", "tasks", "pairs"], rows, left=4)


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
            if within.pairs:
                these = f"{paired_text(comparison, pair)}, e = {_e_text(within.e_max)} over {plural(within.pairs, 'paired trial')}"
            if pair.estimate is not None:
                parts = []
                if pair.low is not None and pair.high is not None:
                    parts.append(f"[{_signed(comparison.metric, pair.low)} to {_signed(comparison.metric, pair.high)}]")
                if pair.p_value is not None:
                    adjusted = f" (Bonferroni {p_text(pair.p_adjusted)})" if comparison.family_size > 1 and pair.p_adjusted is not None else ""
                    parts.append(f"p {p_text(pair.p_value)}{adjusted}")
                like_these = " ".join(parts) or DASH
            rows.append(
                [label, f"{pair.arm_a} vs {pair.arm_b}", claim_text(comparison, pair), str(pair.n_tasks), difference,
                 these, like_these, pair.verdict]
            )  # fmt: skip
            label = ""
    headers = ["metric", "pair", "claim", "tasks", "a \u2212 b", "these tasks", "tasks like these", "verdict"]
    return Table(headers, rows, left=3, wrap=(0, 5, 6, 7))


def _e_text(value: float) -> str:
    if value >= 1e6:
        return f"{value:.1e}".replace("e+0", "e+")  # 1.9e+9: the digits beyond would be noise
    return f"{value:,.0f}" if value >= 100 else f"{value:.2g}" if value < 10 else f"{value:.1f}"

