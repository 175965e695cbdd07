"""The trials that did not pass: each with its reason, its transcript and the command that opens the
cell's trials in Inspect's viewer."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

from ...model import TRANSCRIPT_KEPT, TRANSCRIPT_NOT_WRITTEN, TRANSCRIPT_PRUNED, CellSummary, Report, plural
from .blocks import DASH, Block, Command, Heading, Table, Text

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
                    f"from what it needs (errors, never counted for or against the arm): {'; '.join(blocked[:3])}."
                )
            )
        if cell.failures_left_out:
            blocks.append(
                Text(f"Listed: the newest {len(cell.failures)}; {cell.failures_left_out} older ones are in the viewer.")
            )
    return blocks
