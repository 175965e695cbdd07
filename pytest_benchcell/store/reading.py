"""Reading one or several stores as one, through the checked index: a cell's rows, the latest
rescore applied over each verdict, a sample id counted once; counted against a definition (floor
and fill), reduced to summaries (reports), and a few samples read back whole by byte range."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness_broke import judge
from ..sample import CHECKER_OUTCOMES, STATUS_ERROR, STATUS_RESCORE, STATUS_SCORED, Definition, effective_samples
from .index import F_BROKE, F_CONDITIONS, F_END, F_ID, F_OUTCOME, F_RESCORE_OF, F_SCORING, F_START, F_STATUS, IndexReader, summary_of
from .layout import DUPLICATE, Cell, Layout, Problem


def cell_rows(
    layout: Layout, cell: Cell, problems: list[Problem], seen: dict[str, tuple[Path, int]] | None = None
) -> list[list[str]]:
    """The cell's samples as checked index rows in file order, each sample id once (the one reader
    behind counting, fill, summaries and reports; see index.IndexReader)."""
    reader = IndexReader(layout.samples_path(cell), layout.index_path(cell), problems, {} if seen is None else seen)
    return reader.rows()


@dataclass
class CellCount:
    """A cell's samples as the floor and fill see them (Store.count_current)."""

    current: int = 0  # scored samples of the current conditions and (for checker verdicts) scoring
    stale_scoring: int = 0  # scored under the current conditions, but judged by an older scoring: rescore them
    other_conditions: int = 0  # scored samples of other conditions (never pooled)
    duplicates: list[str] = field(default_factory=list)  # sample ids seen more than once (counted once)
    problems: list[Problem] = field(default_factory=list)


STALE_PREFIX = "stale-scoring:"  # a report pool key for samples judged by an older scoring definition


def effective(rows: Sequence[list[str]]) -> Sequence[list[str]] | Iterator[list[str]]:
    """The trial rows of a cell as their verdicts stand: the latest rescore of each applied (outcome
    and scoring), and a scored trial the harness broke (the row's `broke` flag) an `error` whatever
    its verdict or rescore (harness_broke.py: the rule a live trial follows, applied to what an
    older plugin stored as scored)."""
    latest: dict[str, tuple[str, str]] = {}
    broke = False
    for fields in rows:
        if fields[F_STATUS] == STATUS_RESCORE:
            latest[fields[F_RESCORE_OF]] = (fields[F_OUTCOME], fields[F_SCORING])
        elif fields[F_BROKE] and fields[F_STATUS] == STATUS_SCORED:
            broke = True
    return _overridden(rows, latest) if latest or broke else rows


def _overridden(rows: Sequence[list[str]], latest: Mapping[str, tuple[str, str]]) -> Iterator[list[str]]:
    for fields in rows:
        if fields[F_STATUS] == STATUS_RESCORE:
            continue
        if fields[F_BROKE] and fields[F_STATUS] == STATUS_SCORED:
            fields = list(fields)
            fields[F_STATUS], fields[F_OUTCOME] = STATUS_ERROR, ""
        else:
            override = latest.get(fields[F_ID])
            if override is not None:
                fields = list(fields)
                fields[F_OUTCOME], fields[F_SCORING] = override
        yield fields


def count_rows(rows: Sequence[list[str]], definition: Definition | None, problems: Sequence[Problem]) -> CellCount:
    """Tally a cell's rows (cell_rows) against its current definition (Definition.is_current,
    written out here because collection counts every sample of a sweep)."""
    count = CellCount(problems=list(problems))
    count.duplicates = [p.sample_id for p in problems if p.kind == DUPLICATE]
    if definition is None:
        count.current = sum(1 for fields in effective(rows) if fields[F_STATUS] == STATUS_SCORED)
        return count
    pooled = {definition.conditions} | ({definition.legacy} if definition.legacy else set())
    scorings = {definition.scoring} | ({definition.legacy} if definition.legacy else set())
    current = stale = other = 0
    for fields in effective(rows):
        if fields[F_STATUS] != STATUS_SCORED:
            continue
        if fields[F_CONDITIONS] not in pooled:
            other += 1
        elif fields[F_OUTCOME] not in CHECKER_OUTCOMES or fields[F_SCORING] in scorings:
            current += 1
        else:
            stale += 1
    count.current, count.stale_scoring, count.other_conditions = current, stale, other
    return count


def _pool_key(fields: Sequence[str], definition: Definition | None) -> str:
    """What a report pools a sample by: its conditions, the current ones for a schema-1 sample of
    the current definition, and apart (STALE_PREFIX) a verdict of an older scoring definition."""
    conditions = fields[F_CONDITIONS]
    if definition is None or not definition.pools(conditions):
        return conditions
    if (
        fields[F_STATUS] == STATUS_SCORED
        and not definition.is_current(STATUS_SCORED, fields[F_OUTCOME], conditions, fields[F_SCORING])
    ):
        return STALE_PREFIX + fields[F_SCORING]
    return definition.conditions


def read_summaries(
    stores: Sequence[Layout], problems: list[Problem], *, cells: Sequence[Cell] | None = None,
    definitions: Mapping[tuple[str, str], Definition] | None = None,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Every trial sample of the given cells (default: all) of one or several stores, read as one
    store: the latest rescore applied over each verdict, a sample id counted once (later copies are
    `duplicate` problems), each reduced to the fields a report reads. With the bench's current
    definitions, provenance.fingerprint is the pool key (_pool_key); otherwise the conditions."""
    if cells is None:
        cells = sorted({cell for store in stores for cell in store.cells()})
    for cell in cells:
        seen: dict[str, tuple[Path, int]] = {}
        rows = rows_across(stores, cell, problems, seen)
        definition = (definitions or {}).get((cell.arm, cell.task))
        rescores = {fields[F_RESCORE_OF]: fields for fields in rows if fields[F_STATUS] == STATUS_RESCORE}
        for fields in effective(rows):
            summary = summary_of(fields, cell, _pool_key(fields, definition))
            summary["lines"] = _lines_of(fields, seen, rescores)
            yield summary


# Where a summary's sample lies: its samples file and byte range, then (when rescored) its latest
# rescore record's; read back with samples_at, for the few samples a report shows in full.
SampleLine = tuple[Path, str, str]


def _lines_of(
    fields: Sequence[str], seen: Mapping[str, tuple[Path, int]], rescores: Mapping[str, Sequence[str]]
) -> tuple[SampleLine, ...]:
    first = seen.get(fields[F_ID])
    if first is None:
        return ()  # a sample without an id cannot be found again
    lines: tuple[tuple[Path, str, str], ...] = ((first[0], fields[F_START], fields[F_END]),)
    rescore = rescores.get(fields[F_ID]) if rescores else None
    if rescore is not None and rescore[F_ID] in seen:
        lines += ((seen[rescore[F_ID]][0], rescore[F_START], rescore[F_END]),)
    return lines


def samples_at(wanted: Iterable[tuple[Sequence[SampleLine], str]]) -> list[dict[str, Any] | None]:
    """The full samples some summaries describe ((their `lines`, their id) each), read by byte range
    with the latest rescore applied and judged as their summaries are (harness_broke.judge); None for
    one whose bytes are no longer that sample (the store was edited since). Each samples file is
    opened once."""
    found: list[dict[str, Any] | None] = []
    with contextlib.ExitStack() as stack:
        handles: dict[Path, Any] = {}

        def line_at(path: Path, start: str, end: str) -> Any:
            if path not in handles:
                handles[path] = stack.enter_context(path.open("rb"))
            handle = handles[path]
            handle.seek(int(start))
            return json.loads(handle.read(int(end) - int(start)))

        for lines, sample_id in wanted:
            try:
                parsed = [line_at(*line) for line in lines]
            except (OSError, ValueError):
                parsed = []
            matches = (
                bool(parsed) and all(isinstance(value, dict) for value in parsed) and parsed[0].get("id") == sample_id
                and all(value.get("rescore_of") == sample_id for value in parsed[1:])
            )  # fmt: skip
            sample = effective_samples(parsed)[0] if matches else None
            if sample is not None:
                judge(sample)  # as its summary was judged: a trial the harness broke is an error
            found.append(sample)
    return found


def store_root_of(line: SampleLine) -> Path:
    """The store folder a sample line lies in (<root>/<model_kind>/<arm>/<task>.jsonl)."""
    return line[0].parents[2]



def rows_across(
    stores: Sequence[Layout], cell: Cell, problems: list[Problem], seen: dict[str, tuple[Path, int]] | None = None
) -> list[list[str]]:
    """One cell's rows over several stores read as one: a sample id counts once (later copies, in
    the same store or another, are `duplicate` problems). `seen` gets each id's samples file."""
    seen = {} if seen is None else seen
    return [row for store in stores for row in cell_rows(store, cell, problems, seen)]

