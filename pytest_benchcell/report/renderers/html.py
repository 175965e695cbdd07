"""The report as one self-contained HTML file with inline SVG plots (matplotlib, imported lazily)."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from typing import Any

from ...leftovers import printable
from ..model import HeadlineRow, Report
from .document import DASH, Block, Bullets, Command, Heading, Table, Text, document

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.6em; margin-bottom: .3em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .55em; border-bottom: 1px solid #e6e6e6; white-space: nowrap; font-size: 13px; }
th { background: #f5f5f7; text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; }
ul { padding-left: 1.3em; } li { margin: .2em 0; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plot { flex: 1 1 480px; }
.plot svg { width: 100%; height: auto; }
.scroll { overflow-x: auto; }
h3 { font-size: 1.05em; margin: 1.2em 0 .2em; }
pre { background: #f5f5f7; padding: .4em .6em; overflow-x: auto; font-size: 12px; margin: .3em 0; }
"""


def _html_block(block: Block, plots: Sequence[str]) -> str:
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
            numeric = ' class="num"'
            return "".join(
                f"<{tag}{'' if i < block.left else numeric}>{_linked(v, block.links.get((row, i)))}</{tag}>"
                for i, v in enumerate(values)
            )

        body = "".join(f"<tr>{cells(row, 'td', r)}</tr>" for r, row in enumerate(block.rows))
        head = f"<thead><tr>{cells(block.headers, 'th')}</tr></thead>"
        return f'<div class="scroll"><table>{head}<tbody>{body}</tbody></table></div>'
    if plots:
        return '<div class="plots">' + "".join(f'<div class="plot">{svg}</div>' for svg in plots) + "</div>"
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


def _plots(report: Report) -> list[str]:
    """The two plots as inline SVG strings ([] when there is nothing to plot yet)."""
    rows = [r for r in report.headline.rows if r.cost_equivalent.mean is not None and r.success.rate is not None]
    if not rows:
        return []
    matplotlib, MplFigure = _import_matplotlib()
    # A Figure with no pyplot never touches the global backend (the Agg/SVG canvases draw headless),
    # and a fixed hash salt plus no date make the SVG bytes reproducible.
    style = {"svg.hashsalt": "pytest-benchcell", "svg.fonttype": "path", "font.size": 10, "axes.spines.top": False,
             "axes.spines.right": False}  # fmt: skip
    with matplotlib.rc_context(style):
        return [_svg(_scatter(MplFigure, report, rows)), _svg(_tier_bars(MplFigure, report))]


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
        xs, heights, errors = [], [], ([], [])
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
