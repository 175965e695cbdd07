"""The report as paste-ready Markdown (GitHub-flavoured pipe tables)."""

from __future__ import annotations

from ..model import Report
from .document import Bullets, Command, Heading, Table, Text, document

def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_link(text: str, href: str | None) -> str:
    if href is None:
        return _md_cell(text)
    label = _md_cell(text).replace("[", "\\[").replace("]", "\\]")
    return f"[{label}](<{_md_cell(href).replace('<', '%3C').replace('>', '%3E')}>)"


def _md_table(table: Table) -> list[str]:
    rule = ["---" if table.aligned_left(i) else "---:" for i in range(len(table.headers))]
    return [
        "| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
        "| " + " | ".join(rule) + " |",
        *(
            "| " + " | ".join(_md_link(c, table.links.get((r, i))) for i, c in enumerate(row)) + " |"
            for r, row in enumerate(table.rows)
        ),
    ]


def render_markdown(report: Report) -> str:
    """Paste-ready Markdown (GitHub-flavoured pipe tables)."""
    out: list[str] = []
    for block in document(report, detail=True):
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Text):
            out += [block.text, ""]
        elif isinstance(block, Bullets):
            out += [*(f"- {item}" for item in block.items), ""]
        elif isinstance(block, Table):
            out += [*_md_table(block), ""]
        elif isinstance(block, Command):
            out += ["```sh", block.text, "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"

