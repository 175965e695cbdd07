"""The document model (headings, text, tables, lists, commands, plot places) and how each figure is
written; every block made printable before any format lays it out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ....leftovers import printable
from ...model import CellFigure, Figure, Rate


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
    return _with_interval(figure.mean, figure.low, figure.high, show)


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
