"""The report as one document: its sections in order, each from its own module."""

from __future__ import annotations

from ...model import Report
from .blocks import Block, Bullets, Heading, Table, Text, _printable
from .cells import _bonus_blocks, _cell_detail_blocks, _host_blocks, _provenance_blocks
from .comparisons import _comparison_blocks
from .definitions import _definition_blocks
from .dollars import _dollar_blocks
from .failures import _failure_blocks
from .skill_use import _skill_use_blocks
from .summary import (
    _component_blocks,
    _cost_per_success_blocks,
    _coverage_blocks,
    _header,
    _headline_blocks,
    _outcome_blocks,
    _pass_k_blocks,
    _tier_blocks,
)


def document(report: Report, *, detail: bool) -> list[Block]:
    blocks: list[Block] = [Heading(f"benchcell report \u2014 {report.settings.model_kind} model", 1)]
    blocks += _header(report)
    if report.notices:
        blocks += [Heading("Notes"), Bullets(report.notices)]
    blocks += _headline_blocks(report)
    blocks += _cost_per_success_blocks(report)
    blocks += _dollar_blocks(report)
    blocks += _comparison_blocks(report, detail=detail)
    blocks += _skill_use_blocks(report, detail=detail)
    blocks += _definition_blocks(report)
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
    blocks += _host_blocks(report)
    blocks += _provenance_blocks(report, detail=detail)
    if report.store.problems:
        blocks += [
            Heading("Problems"),
            Text("Lines of the store that could not be read (skipped, kept on disk as they are):"),
            Bullets(report.store.problems),
        ]
    # A table with no rows says nothing: name the absence instead of printing a bare header.
    return [_printable(Text("Nothing to show yet.") if isinstance(b, Table) and not b.rows else b) for b in blocks]
