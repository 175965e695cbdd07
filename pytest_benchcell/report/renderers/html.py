"""The report as one self-contained HTML file with inline SVG plots (matplotlib, imported lazily)."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...leftovers import printable
from ...statistics import EQUIVALENT
from ..model import SCOPE_THESE_TASKS, SCOPE_TASKS_LIKE_THESE, Comparison, HeadlineRow, PairComparison, Report
from .document import (
    COMPARISON_PLOT,
    DASH,
    HEADLINE_PLOTS,
    Block,
    Bullets,
    Command,
    Heading,
    Plots,
    Table,
    Text,
    claim_text,
    document,
)

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.6em; margin-bottom: .3em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { vertical-align: top; padding: .25em .55em; border-bottom: 1px solid #e6e6e6; white-space: nowrap; font-size: 13px; }
th { background: #f5f5f7; text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; }
td.wrap { white-space: normal; min-width: 10em; max-width: 40em; }
figure.forest { margin: .6em 0 1em; } .forest svg { width: 100%; max-width: 1000px; height: auto; }
ul { padding-left: 1.3em; } li { margin: .2em 0; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plot { flex: 1 1 480px; }
.plot svg { width: 100%; height: auto; }
.scroll { overflow-x: auto; }
h3 { font-size: 1.05em; margin: 1.2em 0 .2em; }
pre { background: #f5f5f7; padding: .4em .6em; overflow-x: auto; font-size: 12px; margin: .3em 0; }
"""


def _html_block(block: Block, plots: Mapping[str, Sequence[str]]) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Text):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Command):
        return f"<pre><code>{html.escape(block.text)}</code></pre>"
    if isinstance(block, Table):
        def cells(values: Sequence[str], tag: str, row: int = -1) -> str:
            kinds = {
                i: ' class="wrap"' if i in block.wrap else "" if i < block.left else ' class="num"'
                for i in range(len(values))
            }
            return "".join(
                f"<{tag}{kinds[i]}>{_linked(v, block.links.get((row, i)))}</{tag}>" for i, v in enumerate(values)
            )

        body = "".join(f"<tr>{cells(row, 'td', r)}</tr>" for r, row in enumerate(block.rows))
        head = f"<thead><tr>{cells(block.headers, 'th')}</tr></thead>"
        return f'<div class="scroll"><table>{head}<tbody>{body}</tbody></table></div>'
    if isinstance(block, Plots) and block.kind == COMPARISON_PLOT and plots.get(COMPARISON_PLOT):
        (svg,) = plots[COMPARISON_PLOT]
        return f'<figure class="forest" id="forest-plot">{svg}</figure>'
    if isinstance(block, Plots) and plots.get(block.kind):
        return '<div class="plots">' + "".join(f'<div class="plot">{svg}</div>' for svg in plots[block.kind]) + "</div>"
    return ""


def _linked(text: str, href: str | None) -> str:
    return html.escape(text) if href is None else f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def render_html(report: Report) -> str:
    """One self-contained HTML file: the Markdown report's content plus plots, SVG inline, no URLs."""
    plots = _plots(report)
    body = "\n".join(_html_block(block, plots) for block in document(report, detail=True))
    title = html.escape(f"benchcell report \u2014 {report.settings.model_kind} model")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _import_matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure as MplFigure
    except ImportError as exc:
        raise ImportError("HTML reports draw their plots with matplotlib: pip install pytest-benchcell[html]") from exc
    return matplotlib, MplFigure


def _plots(report: Report) -> dict[str, list[str]]:
    """The plots as inline SVG strings, by where they go (none when there is nothing to plot yet)."""
    rows = [r for r in report.headline.rows if r.cost_equivalent.mean is not None and r.success.rate is not None]
    compared = [c for c in report.comparisons if any(pair.within_tasks.estimate is not None for pair in c.pairs)]
    if not rows and not compared:
        return {}
    matplotlib, MplFigure = _import_matplotlib()
    # A Figure with no pyplot never touches the global backend (the Agg/SVG canvases draw headless),
    # and a fixed hash salt plus no date make the SVG bytes reproducible.
    style = {"svg.hashsalt": "pytest-benchcell", "svg.fonttype": "path", "font.size": 10, "axes.spines.top": False,
             "axes.spines.right": False}  # fmt: skip
    plots: dict[str, list[str]] = {}
    with matplotlib.rc_context(style):
        if rows:
            plots[HEADLINE_PLOTS] = [_svg(_scatter(MplFigure, report, rows)), _svg(_tier_bars(MplFigure, report))]
        if compared:
            plots[COMPARISON_PLOT] = [_svg(_forest(MplFigure, report, compared))]
    return plots


def _error_bar(value: float, low: float | None, high: float | None) -> tuple[float, float]:
    return (value - low if low is not None else 0.0, high - value if high is not None else 0.0)


def _scatter(MplFigure: Any, report: Report, rows: Sequence[HeadlineRow]) -> Any:
    figure = MplFigure(figsize=(6.2, 4.6))
    axes = figure.add_subplot()
    colours = _colours(report.arms)
    for row in rows:
        x, y = row.cost_equivalent.mean, row.success.rate
        assert x is not None and y is not None
        xerr = _error_bar(x, row.cost_equivalent.low, row.cost_equivalent.high)
        yerr = _error_bar(y, row.success.low, row.success.high)
        axes.errorbar(
            [x], [100 * y], xerr=[[xerr[0]], [xerr[1]]], yerr=[[100 * yerr[0]], [100 * yerr[1]]],
            fmt="o", capsize=4, color=colours[row.arm], label=printable(row.arm),
        )  # fmt: skip
    axes.set_xlabel("cost-equivalent tokens per trial (mean over tasks)")
    axes.set_ylabel("success (%)")
    axes.set_title(
        f"Cost against success ({len(report.headline.tasks)} headline tasks, "
        f"{100 * report.settings.confidence:g}% intervals)",
        fontsize=10,
    )
    axes.xaxis.set_major_formatter(matplotlib_thousands())
    axes.set_ylim(-2, 102)  # the whole 0-100% scale: a cut axis would exaggerate gaps
    axes.grid(alpha=0.3)
    _legend_below(axes, len(rows))
    figure.tight_layout()
    return figure


def _legend_below(axes: Any, entries: int) -> None:
    # Below the axes, so it never hides a point or a bar (arms at the same spot would overlap labels).
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(entries, 4), fontsize=9, frameon=False)


def matplotlib_thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:,.0f}")


def _tier_bars(MplFigure: Any, report: Report) -> Any:
    figure = MplFigure(figsize=(6.2, 4.6))
    axes = figure.add_subplot()
    tiers = [s for s in report.tiers if s.tasks]
    colours = _colours(report.arms)
    width = 0.8 / max(1, len(report.arms))
    for i, arm in enumerate(report.arms):
        xs: list[float] = []
        heights: list[float] = []
        errors: tuple[list[float], list[float]] = ([], [])
        for j, section in enumerate(tiers):
            row = next(r for r in section.rows if r.arm == arm)
            if row.cost_equivalent.mean is None:
                continue
            low, high = _error_bar(row.cost_equivalent.mean, row.cost_equivalent.low, row.cost_equivalent.high)
            xs.append(j + (i - (len(report.arms) - 1) / 2) * width)
            heights.append(row.cost_equivalent.mean)
            errors[0].append(low)
            errors[1].append(high)
        if xs:
            axes.bar(xs, heights, width=width, yerr=errors, capsize=3, color=colours[arm], label=printable(arm))
    axes.set_xticks(range(len(tiers)), [f"{printable(s.tier) or DASH}\n({len(s.tasks)} tasks)" for s in tiers])
    axes.set_ylabel("cost-equivalent tokens per trial")
    axes.set_title("Per tier: mean over the tier's headline tasks", fontsize=10)
    axes.yaxis.set_major_formatter(matplotlib_thousands())
    axes.grid(axis="y", alpha=0.3)
    if report.arms:
        _legend_below(axes, len(report.arms))
    figure.tight_layout()
    return figure


# How the forest plot draws a pair by its verdict: label, colour, marker, filled.
_CLAIM_STYLES: dict[str | None, tuple[str, str, str, bool]] = {
    SCOPE_TASKS_LIKE_THESE: ("differs, also for tasks like these", "#1f4e99", "o", True),
    SCOPE_THESE_TASKS: ("differs for these tasks", "#d9822b", "D", True),
    EQUIVALENT: ("equivalent: inside the margin", "#2e8b57", "s", True),
    None: ("undecided", "#8c8c8c", "o", False),
}
_CLAIM_IDS = {SCOPE_TASKS_LIKE_THESE: "tasks-like-these", SCOPE_THESE_TASKS: "these-tasks", EQUIVALENT: "equivalent", None: "none"}


def _style_key(pair: PairComparison) -> str | None:
    return EQUIVALENT if pair.decision == EQUIVALENT else pair.scope


def forest_row_id(comparison: Comparison, index: int) -> str:
    """The SVG id of a pair's point in the forest plot: metric, pair number and claim (tests find rows by it)."""
    pair = comparison.pairs[index]
    claim = "not-compared" if pair.within_tasks.estimate is None else _CLAIM_IDS.get(_style_key(pair), "none")
    return f"forest-{re.sub(r'[^A-Za-z0-9_-]', '_', comparison.metric)}-{index}-{claim}"


def _forest(MplFigure: Any, report: Report, comparisons: Sequence[Comparison]) -> Any:
    """Per metric (one panel each), every pair's paired estimate with the anytime interval its verdict
    rests on (success a - b, tokens a/b on a log scale) and the margin band of [bench.smallest_effect],
    drawn by the verdict: read at a glance which pairs differ, which way, which are equivalent."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    heights = [len(c.pairs) + 1.8 for c in comparisons]
    figure = MplFigure(figsize=(8.4, 0.3 * sum(heights) + 0.9))
    grid = figure.add_gridspec(len(comparisons), 1, height_ratios=heights)
    for number, comparison in enumerate(comparisons):
        _forest_panel(figure.add_subplot(grid[number]), comparison)
    handles: list[Any] = [
        Line2D([], [], color=colour, marker=marker, markerfacecolor=colour if filled else "white", label=label)
        for label, colour, marker, filled in _CLAIM_STYLES.values()
    ]
    if any(c.margin is not None for c in comparisons):
        handles.append(Patch(color=_MARGIN_COLOUR, alpha=0.35, label="smallest effect (margin)"))
    figure.legend(handles=handles, loc="lower center", ncol=3, fontsize=9, frameon=False)
    figure.suptitle(
        "Paired trials: a \u2212 b (tokens a/b), with the anytime interval at the family's level",
        fontsize=10,
    )
    figure.tight_layout(rect=(0, 0.7 / (0.3 * sum(heights) + 0.9), 1, 1))
    return figure


_MARGIN_COLOUR = "#9fd3b0"


def _forest_panel(axes: Any, comparison: Comparison) -> None:
    # Success differences are fractions: drawn in percentage points; token ratios on a log scale.
    ratio = comparison.metric != "success"
    scale = 1.0 if ratio else 100.0
    rows = len(comparison.pairs)
    centre = 1.0 if ratio else 0.0
    extent = [centre]
    if comparison.margin is not None:
        band = (1.0 / comparison.margin, comparison.margin) if ratio else (-scale * comparison.margin, scale * comparison.margin)
        axes.axvspan(*band, color=_MARGIN_COLOUR, alpha=0.35, zorder=0, linewidth=0).set_gid(f"forest-margin-{comparison.metric}")
        extent += list(band)
    for index, pair in enumerate(comparison.pairs):
        within = pair.within_tasks
        if within.estimate is None:
            continue
        y = rows - 1 - index  # the first pair on top, in the order of the table below
        _, colour, marker, filled = _CLAIM_STYLES.get(_style_key(pair), _CLAIM_STYLES[None])
        x = scale * within.estimate
        extent.append(x)
        if within.low is not None and within.high is not None:
            low, high = scale * within.low, scale * within.high
            axes.plot([low, high], [y, y], color=colour, linewidth=1.8, solid_capstyle="butt")
            axes.plot([low, low, float("nan"), high, high], [y - 0.15, y + 0.15, float("nan"), y - 0.15, y + 0.15],
                      color=colour, linewidth=1.2)  # fmt: skip
            extent += [low, high]
        (point,) = axes.plot([x], [y], marker=marker, markersize=7, color=colour,
                             markerfacecolor=colour if filled else "white", markeredgewidth=1.5, linestyle="none")  # fmt: skip
        point.set_gid(forest_row_id(comparison, index))
    axes.axvline(centre, color="#444444", linewidth=0.9, zorder=0)
    if ratio:
        axes.set_xscale("log")
        low, high = min(extent), max(extent)
        axes.set_xlim(low / 1.08, high * 1.08)
    else:
        span = (max(extent) - min(extent)) or 10.0
        axes.set_xlim(min(extent) - 0.08 * span, max(extent) + 0.08 * span)
    axes.set_ylim(-0.7, rows - 0.3)
    ticks = [rows - 1 - i for i in range(rows)]
    axes.set_yticks(ticks, [f"{printable(p.arm_a)} \u2212 {printable(p.arm_b)}" for p in comparison.pairs])
    # The claim in words on the right, in its colour: the figure reads without the table.
    claims = axes.twinx()
    claims.set_ylim(axes.get_ylim())
    claims.set_yticks(ticks, [printable(claim_text(comparison, p)) for p in comparison.pairs])
    for tick, pair in zip(claims.get_yticklabels(), comparison.pairs):
        tick.set_color(_CLAIM_STYLES.get(_style_key(pair), _CLAIM_STYLES[None])[1])
    claims.tick_params(length=0)
    claims.spines[["top", "right", "left", "bottom"]].set_visible(False)
    side = "left" if comparison.better == "lower" else "right"
    what = "a/b of tokens per trial" if ratio else "a \u2212 b, percentage points"
    axes.set_xlabel(f"{what} ({side} of {centre:g}: a is better)", fontsize=9)
    axes.set_title(f"{comparison.unit[0].upper()}{comparison.unit[1:]} ({comparison.better} is better)", fontsize=10)
    axes.grid(axis="x", alpha=0.3)


def _colours(arms: Sequence[str]) -> dict[str, str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
    return {arm: palette[i % len(palette)] for i, arm in enumerate(arms)}


_SVG_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.DOTALL)
_SVG_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    # Inline SVG needs no XML prologue or DOCTYPE; the RDF metadata block only carries external URLs.
    return _SVG_METADATA.sub("", _SVG_PROLOGUE.sub("", buffer.getvalue(), count=1))
