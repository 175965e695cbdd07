"""The Comparisons section: what each claim means, and one row per metric and pair with its verdict."""

from __future__ import annotations

from ...model import Comparison, PairComparison, Report, p_text, plural
from .blocks import COMPARISON_PLOT, DASH, Block, Heading, Plots, Table, Text


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
