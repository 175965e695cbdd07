"""Merging stores: every sample of the sources DEST lacks (by sample id), appended under DEST's lock
with a trial number of DEST's, its transcript and definitions copied beside it; and the check that
warns before a merge pools samples of other conditions."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import transcript
from ..sample import STATUS_RESCORE
from .appending import write_lines
from .index import F_CONDITIONS, F_REST, F_STATUS, R_MODEL
from .layout import DEFINITIONS_DIR, Cell, Problem, StoreError, validate_sample
from .lines import json_line
from .lock import record_reservation, reserved_unused
from .stores import Store

MERGE_BATCH_BYTES = 4 * 1024 * 1024


def other_conditions(sources: Sequence[Store], dest: Store) -> list[str]:
    """One line per cell where the sources hold trial samples DEST lacks whose conditions DEST does not
    have: another bench, another model, or other definitions of these cells. Judged per cell against
    DEST's samples of that cell, and by model against every model DEST holds (for cells DEST lacks).
    Empty when DEST has no samples at all (a new store takes whatever it is given)."""
    models: set[str] = set()
    conditions_held: dict[Cell, set[str]] = {}  # a sample DEST holds already has its conditions in here
    for cell in dest.cells():
        held = conditions_held[cell] = set()
        for fields in dest.cell_rows(cell, []):
            if fields[F_STATUS] != STATUS_RESCORE:
                held.add(fields[F_CONDITIONS])
                models.add(fields[F_REST].split("\t")[R_MODEL])
    if not models:
        return []
    found: list[str] = []
    for cell in sorted({cell for source in sources for cell in source.cells()}):
        held = conditions_held.get(cell, set())
        foreign: dict[str, int] = {}
        for source in sources:
            for fields in source.cell_rows(cell, []):
                if fields[F_STATUS] == STATUS_RESCORE:
                    continue
                conditions, model = fields[F_CONDITIONS], fields[F_REST].split("\t")[R_MODEL]
                if (held and conditions not in held) or (not held and model not in models):
                    label = f"model {model or 'unrecorded'}, conditions {conditions or 'unrecorded'}"
                    foreign[label] = foreign.get(label, 0) + 1
        if foreign:
            mine = f"DEST has conditions {', '.join(sorted(held))}" if held else (
                f"DEST has no sample of this cell; its models: {', '.join(sorted(m or 'unrecorded' for m in models))}"
            )
            listed = "; ".join(f"{count} of {label}" for label, count in foreign.items())
            found.append(f"{cell} ({cell.model_kind}): {listed} ({mine})")
    return found


@dataclass
class MergeResult:
    """What became of every sample read from the sources: read = appended + already_there + refused."""

    read: int = 0  # readable sample lines of the sources (rescore records included)
    appended: int = 0
    already_there: int = 0  # samples DEST held already, or an earlier source gave it (same id)
    refused: int = 0  # samples that cannot have a place in DEST (validate_sample): each one is in problems
    renumbered: int = 0
    problems: list[Problem] = field(default_factory=list)
    definitions: int = 0  # definitions files copied
    transcripts: dict[str, int] = field(default_factory=dict)  # merged samples' transcripts, by transcript status


def merge_stores(sources: Sequence[Store], dest: Store, *, sitting: str) -> MergeResult:
    """Append to DEST every sample of the sources it lacks (by sample id), under DEST's lock.

    A merged trial gets the next free trial number of its cell in DEST (reserved like a sitting's,
    so later sittings continue past it), except a trial whose number DEST reserved for the sample's
    own sitting and holds no sample under (a worker's spool after its controller died): it keeps it.
    The sample keeps its id, and `merged_from` records the source store and its original trial
    number. Rescore records follow their sample's new number.
    Each merged sample's transcript is copied to the same path in DEST (transcript.copy_transcript).
    Nothing in DEST is rewritten; the sources are only read."""
    result = MergeResult()
    dest.root.mkdir(parents=True, exist_ok=True)
    cells = sorted({cell for source in sources for cell in source.cells()})
    with dest._locked():
        for cell in cells:
            seen: dict[str, tuple[Path, int]] = {}
            rows = dest.cell_rows(cell, result.problems, seen)  # the ids DEST holds
            reserved_for = reserved_unused(dest, cell, rows)
            next_trial = dest.highest_trial(cell) + 1
            renumbered: dict[str, int] = {}
            batch: list[tuple[Mapping[str, Any], bytes]] = []
            numbers: list[int] = []
            pending = 0
            for source in sources:
                origin = str(source.root.resolve())
                for sample, _raw in source.iter_raw(cell, result.problems):
                    result.read += 1
                    sample_id = str(sample.get("id") or "")
                    if sample_id in seen:
                        result.already_there += 1
                        continue
                    seen[sample_id] = (source.samples_path(cell), 0)
                    merged = dict(sample)
                    if sample.get("status") == STATUS_RESCORE:
                        target = renumbered.get(str(sample.get("rescore_of")))
                        if target is not None:
                            merged["trial"] = target
                    elif reserved_for.get(sample.get("trial")) == sample.get("sitting"):
                        del reserved_for[sample["trial"]]  # its own reservation: the number stays
                        renumbered[sample_id] = sample["trial"]
                    else:
                        merged["trial"] = next_trial
                        renumbered[sample_id] = next_trial
                        numbers.append(next_trial)
                        next_trial += 1
                        result.renumbered += merged["trial"] != sample.get("trial")
                    merged["merged_from"] = {"store": origin, "trial": sample.get("trial")}
                    try:
                        validate_sample(merged)
                    except StoreError as exc:
                        result.problems.append(Problem(source.samples_path(cell), 0, f"not merged: {exc}"))
                        result.refused += 1
                        continue
                    # Before its sample: DEST never holds a sample whose transcript was not yet there.
                    carried = transcript.copy_transcript(merged, source.root, dest.root)
                    if carried != transcript.NONE:
                        result.transcripts[carried] = result.transcripts.get(carried, 0) + 1
                    line = json_line(merged)
                    batch.append((merged, line))
                    result.appended += 1
                    pending += len(line)
                    if pending >= MERGE_BATCH_BYTES:
                        _merge_batch(dest, cell, batch, numbers, sitting)
                        batch, numbers, pending = [], [], 0
            if batch:
                _merge_batch(dest, cell, batch, numbers, sitting)
        result.definitions = _merge_definitions(sources, dest)
    return result



def _merge_batch(
    dest: Store, cell: Cell, batch: list[tuple[Mapping[str, Any], bytes]], numbers: list[int], sitting: str
) -> None:
    # Reserve first (as a sitting does), so a crash between the two writes only leaves a gap.
    if numbers:
        record_reservation(dest, cell, numbers, sitting)
    write_lines(dest, cell, batch)



def _merge_definitions(sources: Sequence[Store], dest: Store) -> int:
    copied = 0
    for source in sources:
        folder = source.root / DEFINITIONS_DIR
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            target = dest.root / DEFINITIONS_DIR / path.name
            if target.exists():
                continue
            target.parent.mkdir(exist_ok=True)
            temporary = target.with_suffix(f".tmp-{os.getpid()}")
            try:
                temporary.write_bytes(path.read_bytes())
                os.replace(temporary, target)
            finally:
                with contextlib.suppress(OSError):
                    temporary.unlink()
            copied += 1
    return copied
