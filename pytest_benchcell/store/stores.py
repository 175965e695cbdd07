"""The objects callers hold: `Store`, the sample store rooted at one folder, and `StoreSet`, several
stores read as one. Each method hands its work to the module of its responsibility (layout, lock,
appending, index, reading)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..sample import MODEL_KINDS, Definition
from .appending import cause, write_definitions_file, write_lines
from .layout import Cell, CellContents, Layout, Problem, StoreError, cell_of, validate_sample
from .lines import StoreLine, parse_jsonl, raw_samples
from .lock import LOCK_TIMEOUT_S, StoreLock, highest_trial, preview_trials, reserve, reserve_previewed
from .reading import CellCount, cell_rows, count_rows, read_summaries, rows_across


class Store(Layout):
    """The sample store rooted at one folder. Cheap to construct; touches disk only when used."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        super().__init__(root)
        self._lock = StoreLock(self.root, lock_timeout)

    def expect_root(self) -> None:
        """Note whether the store folder exists now: if it does and later vanishes (deleted, an
        unmounted disk), writes fail with a clear error instead of silently starting a new store."""
        self._lock.expect_root()

    def vanished(self) -> bool:
        """Whether the store folder was seen and is gone now (deleted, an unmounted disk): nothing
        may then recreate it (see lock.StoreLock)."""
        return self._lock.vanished()

    def _locked(self, *, create: bool = True) -> contextlib.AbstractContextManager[None]:
        return self._lock.held(create=create)

    # -- trial numbers -----------------------------------------------------------------------
    def highest_trial(self, cell: Cell) -> int:
        """The highest trial number ever reserved or stored for the cell (0 if none)."""
        return highest_trial(self, cell)

    def preview_trials(self, cell: Cell, count: int) -> list[int]:
        """The numbers a reservation would get now, without writing anything (--collect-only)."""
        return preview_trials(self, cell, count)

    def reserve_trials(self, cell: Cell, count: int, *, sitting: str) -> list[int]:
        """Hand out `count` fresh trial numbers for the cell, under the store lock."""
        return reserve(self, self._lock, cell, count, sitting=sitting)

    def reserve_previewed(self, cell: Cell, previewed: Sequence[int], *, sitting: str) -> list[int]:
        """Reserve the numbers preview_trials gave earlier (of them, those that will run), under the
        store lock: the same numbers while no other sitting reserved past them meanwhile, else as
        many fresh ones. The numbers previewed but not passed here stay free."""
        return reserve_previewed(self, self._lock, cell, previewed, sitting=sitting)

    # -- samples -----------------------------------------------------------------------------
    def append(self, sample: Mapping[str, Any]) -> Path:
        """Append one complete sample to its cell file, under the lock, flushed and fsynced.

        Raises StoreError naming the store and the cause when the sample cannot be written (disk
        full, folder gone or read-only); a partly written line is then a torn line, which reading
        reports and the next append terminates."""
        validate_sample(sample)
        # Serialized before taking the lock: the lock guards the disk only.
        return self._append_one(StoreLine.of(sample))

    def append_line(self, line: bytes) -> dict[str, Any]:
        """Append a sample that arrives as its store line (sample_line of it, as a worker's spool wrote
        it), byte for byte; return the sample. Raises StoreError as append does, and for a line that
        is not one JSON object on one line."""
        parsed = StoreLine.parse(line)
        self.append_store_line(parsed)
        return dict(parsed.sample)

    def append_store_line(self, stored: StoreLine) -> Path:
        """Append a sample together with its line (encoded or parsed once, on its way in: StoreLine)."""
        validate_sample(stored.sample)
        return self._append_one(stored)

    def _append_one(self, stored: StoreLine) -> Path:
        cell = cell_of(stored.sample)
        self._append_lines(cell, [(stored.sample, stored.line)])
        return self.samples_path(cell)

    def _append_lines(self, cell: Cell, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
        with self._locked(create=False):
            try:
                write_lines(self, cell, lines)
            except OSError as exc:
                raise StoreError(f"could not write to the store {self.root}: {cause(exc)}") from exc

    def write_definitions(self, fingerprint: str, definitions: Mapping[str, Any]) -> Path:
        """Write the resolved definitions for a fingerprint once; an existing file is kept as is."""
        path = self.definitions_path(fingerprint)
        if path.exists():
            return path
        with self._locked(create=False):
            if not path.exists():
                write_definitions_file(path, definitions, self.root)
        return path

    # -- reading -----------------------------------------------------------------------------
    def cell_rows(
        self, cell: Cell, problems: list[Problem], seen: dict[str, tuple[Path, int]] | None = None
    ) -> list[list[str]]:
        """The cell's samples as checked index rows in file order, each sample id once (the one
        reader behind counting, fill, summaries and reports; see index.IndexReader)."""
        return cell_rows(self, cell, problems, seen)

    def count_current(self, cell: Cell, definition: Definition | None = None) -> CellCount:
        """How the cell's scored samples stand against the current definition (floor and fill):
        rescores applied, duplicates counted once. Without a definition every scored sample counts."""
        problems: list[Problem] = []
        return count_rows(self.cell_rows(cell, problems), definition, problems)

    def count_scored(self, cell: Cell, definition: Definition | None = None) -> int:
        return self.count_current(cell, definition).current

    def iter_summaries(
        self, problems: list[Problem], *, cells: Sequence[Cell] | None = None,
        definitions: Mapping[tuple[str, str], Definition] | None = None,
    ) -> Iterator[dict[str, Any]]:  # fmt: skip
        """Every trial sample of the given cells reduced to the fields reports need, with the latest
        rescore applied; see reading.read_summaries."""
        return read_summaries([self], problems, cells=cells, definitions=definitions)

    def read_cell(self, cell: Cell) -> CellContents:
        """Every sample of the cell, fully parsed (a sample id seen before is a duplicate problem)."""
        contents = CellContents()
        contents.samples.extend(parse_jsonl(self.samples_path(cell), contents.problems))
        return contents

    def iter_samples(
        self, problems: list[Problem], *, cells: Sequence[Cell] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Stream every sample of the given cells (default: all), one line at a time.

        Unreadable lines are appended to `problems` rather than raised, so a torn write never
        hides the rest of the store.
        """
        for cell in self.cells() if cells is None else cells:
            yield from parse_jsonl(self.samples_path(cell), problems)

    def iter_raw(self, cell: Cell, problems: list[Problem]) -> Iterator[tuple[dict[str, Any], bytes]]:
        """(sample, its line) for every readable line of the cell, duplicates included (merge)."""
        return raw_samples(self.samples_path(cell), problems)


class StoreSet:
    """Several stores read as one (reports over machines that ran their own sittings). Read only:
    it has the reading methods of Store, de-duplicated by sample id across the stores."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        if not roots:
            raise StoreError("a store set needs at least one store")
        self.stores = [Store(root) for root in roots]
        self.root = self.stores[0].root  # problems are shown relative to the first store

    def cells(self, model_kinds: Iterable[str] = MODEL_KINDS) -> list[Cell]:
        kinds = tuple(model_kinds)
        return sorted({cell for store in self.stores for cell in store.cells(kinds)})

    def iter_summaries(
        self, problems: list[Problem], *, cells: Sequence[Cell] | None = None,
        definitions: Mapping[tuple[str, str], Definition] | None = None,
    ) -> Iterator[dict[str, Any]]:  # fmt: skip
        return read_summaries(self.stores, problems, cells=cells, definitions=definitions)

    def iter_samples(self, problems: list[Problem], *, cells: Sequence[Cell] | None = None) -> Iterator[dict[str, Any]]:
        for cell in self.cells() if cells is None else cells:
            seen: dict[str, str] = {}
            for store in self.stores:
                yield from parse_jsonl(store.samples_path(cell), problems, seen)

    def count_current(self, cell: Cell, definition: Definition | None = None) -> CellCount:
        problems: list[Problem] = []
        return count_rows(rows_across(self.stores, cell, problems), definition, problems)
