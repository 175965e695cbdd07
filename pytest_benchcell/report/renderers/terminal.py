"""The report as plain aligned lines, for pytest's TerminalReporter or stdout."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Report
from .document import Bullets, Command, Heading, Table, Text, document

def _aligned(table: Table, gap: str = "  ") -> list[str]:
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if table.aligned_left(i) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return gap.join(parts).rstrip()

    return [line(table.headers), gap.join("-" * w for w in widths), *(line(row) for row in table.rows)]


def render_terminal(report: Report) -> list[str]:
    """Plain aligned lines (no trailing newlines), for pytest's TerminalReporter or stdout."""
    lines: list[str] = []
    for block in document(report, detail=False):
        if isinstance(block, Heading):
            if lines:
                lines.append("")
            lines += [block.text, ("=" if block.level == 1 else "-") * len(block.text)]
        elif isinstance(block, Text):
            lines.append(block.text)
        elif isinstance(block, Bullets):
            lines += [f"  * {item}" for item in block.items]
        elif isinstance(block, Table):
            lines += [f"  {line}" if line else line for line in _aligned(block)]
        elif isinstance(block, Command):
            lines.append(f"  $ {block.text}")
    return lines

