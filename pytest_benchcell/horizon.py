"""[bench] horizon_pairs as the store records it: fixed before the first pair, never changed after.

A declared horizon changes which test makes each comparison's claims (statistics/group_sequential.py),
so it is part of the analysis the samples were gathered for: every trial records it in its sample's
provenance (`horizon_pairs`, absent without one), and a sitting or a report whose horizon differs from
the one the stored samples recorded is refused, because a new horizon is a new analysis. Pure: reads
the newest sample of each cell only (by induction it speaks for the cell: each sample recorded after
the first carried the same horizon, or the sitting that would have changed it was refused).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .sample import STATUS_RESCORE

HORIZON_KEY = "horizon_pairs"  # in a sample's provenance
_TAIL = 1 << 16  # bytes read from the end of a cell's file: a sample without its transcript fits


def newest_sample(path: Path) -> dict[str, Any] | None:
    """The newest trial of a cell's samples file: its last complete, readable line that is a trial's
    sample, not a rescore record, which records no horizon (None: no file, or no trial read). The
    file's end is read first; the whole file only when its end holds no trial."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            for start in dict.fromkeys((max(0, size - _TAIL), 0)):
                handle.seek(start)
                found = _newest_trial(handle.read())
                if found is not None:
                    return found
    except OSError:
        return None
    return None


def _newest_trial(chunk: bytes) -> dict[str, Any] | None:
    for line in reversed(chunk.split(b"\n")):
        try:
            found = json.loads(line)
        except ValueError:  # a torn last line, or the cut first one: the one before
            continue
        if isinstance(found, dict) and found.get("status") != STATUS_RESCORE:
            return found
    return None


def recorded_horizons(stores: Iterable[Any], model_kind: str) -> dict[str, int | None]:
    """cell name -> the horizon its newest sample recorded, over every cell of ``model_kind`` that holds a sample."""
    found: dict[str, int | None] = {}
    for store in stores:
        for cell in store.cells():
            if cell.model_kind != model_kind:
                continue
            sample = newest_sample(store.samples_path(cell))
            if sample is None:
                continue
            provenance = given if isinstance(given := sample.get("provenance"), dict) else {}
            value = provenance.get(HORIZON_KEY)
            found[str(cell)] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return found


def the_recorded_horizon(stores: Iterable[Any], model_kind: str) -> int | None:
    """The horizon the samples recorded, for a store read without its bench (None: none, or cells disagree,
    which the report then refuses by naming the first cell that differs)."""
    values = set(recorded_horizons(stores, model_kind).values())
    return values.pop() if len(values) == 1 else None


def horizon_conflict(declared: int | None, recorded: Mapping[str, int | None]) -> str | None:
    """Why ``declared`` cannot read these samples (their cell and recorded horizon), or None when it can."""
    for cell, value in sorted(recorded.items()):
        if value != declared:
            said = f"horizon_pairs = {value}" if value is not None else "no horizon"
            return f"the store's samples were recorded with {said} (newest trial of {cell})"
    return None


def describe(value: int | None) -> str:
    return f"horizon_pairs = {value}" if value is not None else "no horizon_pairs"
