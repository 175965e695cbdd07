"""The store-wide lock, and the trial numbers handed out under it.

Every append and every reservation happens under one cross-process filelock (`<root>/.lock`). Trial
numbers are reserved from the highest number ever reserved or stored for the cell, so two sittings
of one cell never get the same number; gaps are normal. A store folder that vanishes mid-sitting is
never silently recreated."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock

from ..sample import STATUS_RESCORE
from .appending import append_bytes, cause
from .index import F_REST, F_STATUS, R_TRIAL
from .layout import LOCK_NAME, Cell, Layout, StoreError, check_cell_names
from .lines import json_line, parse_jsonl, read_lines, tail

LOCK_TIMEOUT_S = 60.0
RESERVATION_TAIL_BYTES = 64 * 1024


class StoreLock:
    """The lock of the store rooted at one folder, and whether that folder was seen: once it was,
    its disappearing (deleted, an unmounted disk) is an error for writes, not a new store."""

    def __init__(self, root: Path, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.root = root
        self.timeout = timeout
        self.root_seen = False

    def expect_root(self) -> None:
        self.root_seen = self.root_seen or self.root.is_dir()

    def vanished(self) -> bool:
        return self.root_seen and not self.root.is_dir()

    @contextlib.contextmanager
    def held(self, *, create: bool = True) -> Iterator[None]:
        """The store-wide lock. A store folder that vanished after it was seen (a sitting's
        reservations, expect_root) is an error for writes, never silently started afresh."""
        if self.root.is_dir():
            self.root_seen = True
        elif not create and self.root_seen:
            raise StoreError(f"could not write to the store {self.root}: the store folder is gone")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(str(self.root / LOCK_NAME), timeout=self.timeout)
        except OSError as exc:
            raise StoreError(f"could not lock the store {self.root}: {cause(exc)}") from exc
        try:
            # filelock polls a held lock every 50 ms by default, which caps a contended store at
            # about 20 hand-offs a second; 3 ms keeps the lock busy without the waiters' polling
            # eating the CPU the holder needs (1 ms was slower with 8 writers on 2 cores).
            lock.acquire(poll_interval=0.003)
        except OSError as exc:
            raise StoreError(f"could not lock the store {self.root}: {cause(exc)}") from exc
        except filelock.Timeout as exc:
            raise StoreError(
                f"could not lock the store {self.root} within {self.timeout:.0f} s "
                f"(another sitting holds {self.root / LOCK_NAME})"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def last_reserved(path: Path) -> int:
    """The highest number in the last readable line of a reservations file (0 if none)."""
    _, end = tail(path, RESERVATION_TAIL_BYTES)
    for raw in reversed(end.splitlines()):
        try:
            return max(int(n) for n in json.loads(raw)["trials"])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a torn or partial line (the tail may start mid-line): try the one before
    return 0


def highest_trial(layout: Layout, cell: Cell) -> int:
    """The highest trial number ever reserved or stored for the cell (0 if none).

    Reservations are appended under the lock with ever higher numbers, so the last readable
    line of the reservations file holds the highest: only the file's tail is read, and
    numbering stays constant-time however deep the cell grows. Falls back to scanning the
    samples when the file is missing or unreadable (a store written by hand, or copied).
    """
    highest = last_reserved(layout.reservations_path(cell))
    if highest:
        return highest
    for sample in parse_jsonl(layout.samples_path(cell), []):
        trial = sample.get("trial")
        if isinstance(trial, int):
            highest = max(highest, trial)
    return highest


def preview_trials(layout: Layout, cell: Cell, count: int) -> list[int]:
    start = highest_trial(layout, cell) + 1
    return list(range(start, start + count))


def reserve(layout: Layout, lock: StoreLock, cell: Cell, count: int, *, sitting: str) -> list[int]:
    if count < 0:
        raise StoreError(f"cannot reserve {count} trials")
    if count == 0:
        return []
    check_cell_names(cell.arm, cell.task)
    with lock.held():
        numbers = preview_trials(layout, cell, count)
        record_reservation(layout, cell, numbers, sitting)
    return numbers


def reserve_previewed(layout: Layout, lock: StoreLock, cell: Cell, previewed: Sequence[int], *, sitting: str) -> list[int]:
    if not previewed:
        return []
    with lock.held():
        start = highest_trial(layout, cell) + 1
        numbers = list(previewed) if min(previewed) >= start else list(range(start, start + len(previewed)))
        record_reservation(layout, cell, numbers, sitting)
    return numbers


def record_reservation(layout: Layout, cell: Cell, numbers: Sequence[int], sitting: str) -> None:
    """Append one reservation line (the caller holds the lock)."""
    append_bytes(layout.reservations_path(cell), json_line({"trials": list(numbers), "sitting": sitting}))


def reserved_unused(layout: Layout, cell: Cell, rows: Sequence[list[str]]) -> dict[Any, str]:
    """Trial number -> the sitting the store reserved it for, for numbers no sample of the cell
    holds (`rows`: the cell's index rows)."""
    held = {fields[F_REST].split("\t")[R_TRIAL] for fields in rows if fields[F_STATUS] != STATUS_RESCORE}
    reserved: dict[Any, str] = {}
    for _, raw, _ in read_lines(layout.reservations_path(cell)):
        try:
            line = json.loads(raw)
            for number in line["trials"]:
                if isinstance(number, int) and str(number) not in held:
                    reserved[number] = str(line["sitting"])
        except (ValueError, TypeError, KeyError):
            continue  # a torn reservation line reserves nothing anyone can claim
    return reserved
