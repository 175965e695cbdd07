"""The append-only sample store.

Layout (see docs/architecture.md)::

    <root>/<model_kind>/<arm>/<task>.jsonl   one complete sample per line, append-only
    <root>/<model_kind>/<arm>/<task>.trials  one JSON line per trial-number reservation
    <root>/definitions/<fingerprint>.toml    resolved arm + task definitions, once per fingerprint
    <root>/.lock                             the store-wide filelock

Guarantees:
- Nothing is ever rewritten or deleted. The only write operations are appends and the creation of a
  definitions file that does not exist yet.
- Every append and every reservation happens under one cross-process filelock, is written with a
  single O_APPEND write, flushed and fsynced before the lock is released.
- Trial numbers are handed out under the same lock, from the highest number ever reserved or stored
  for the cell, so two sittings of one cell never get the same number. Gaps are normal.
- A torn last line (a crash mid-write) never breaks reading: it is reported as a problem with its line
  number. The next append first terminates the torn fragment with a newline (appending, not
  rewriting), so the new sample always starts on a line of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import tomli_w

from .sample import MODEL_KINDS, STATUS_SCORED, STATUSES

SAMPLES_SUFFIX = ".jsonl"
RESERVATIONS_SUFFIX = ".trials"
INDEX_SUFFIX = ".index"  # a rebuildable cache of (status, fingerprint, end offset) per sample
DEFINITIONS_DIR = "definitions"
LOCK_NAME = ".lock"
LOCK_TIMEOUT_S = 60.0

REQUIRED_SAMPLE_KEYS = ("schema", "id", "arm", "task", "trial", "status", "model_kind")


class StoreError(Exception):
    """The store cannot do what was asked (bad sample, lock timeout, unreadable folder)."""


@dataclass(frozen=True, order=True)
class Cell:
    """One (arm, task) cell of one model kind: a file of samples."""

    model_kind: str
    arm: str
    task: str

    def __str__(self) -> str:
        return f"{self.arm} x {self.task}"


@dataclass(frozen=True)
class Problem:
    """A line of the store that could not be read as a sample."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class CellContents:
    samples: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _read_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """Yield (line number, raw line, terminated) for every non-empty line of a file."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            terminated = raw.endswith(b"\n")
            stripped = raw.strip()
            if stripped:
                yield number, stripped, terminated


def _decode_lines(
    path: Path, lines: Iterable[tuple[int, bytes, bool]], problems: list[Problem]
) -> Iterator[dict[str, Any]]:
    """Decode (line number, raw line, terminated) triples into samples, reporting the rest."""
    for number, raw, terminated in lines:
        try:
            value = json.loads(raw)
        except ValueError:
            why = "torn last line (a write was interrupted)" if not terminated else "unreadable line"
            problems.append(Problem(path, number, f"{why}; {len(raw)} bytes kept as they are"))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(path, number, "line is JSON but not an object"))
            continue
        yield value


def _parse_jsonl(path: Path, problems: list[Problem]) -> Iterator[dict[str, Any]]:
    return _decode_lines(path, _read_lines(path), problems)


RESERVATION_TAIL_BYTES = 64 * 1024


def _last_reserved(path: Path) -> int:
    """The highest number in the last readable line of a reservations file (0 if none)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - RESERVATION_TAIL_BYTES))
            tail = handle.read()
    except FileNotFoundError:
        return 0
    for raw in reversed(tail.splitlines()):
        try:
            return max(int(n) for n in json.loads(raw)["trials"])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a torn or partial line (the tail may start mid-line): try the one before
    return 0


def _append_bytes(path: Path, payload: bytes) -> int:
    """Append payload with one O_APPEND write, terminating a torn fragment first, then fsync.

    Returns the file's size after the write."""
    created = not path.exists()
    if created:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload  # a torn last line stays as it is, on a line of its own
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        end = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        _fsync_directory(path.parent)
    return end


def _fsync_directory(directory: Path) -> None:
    # A new file's directory entry is only durable once the directory itself is synced.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_INDEX_FIELDS = (
    "status", "fingerprint", "end", "start", "id", "outcome", "fresh_input", "cache_write", "cache_read",
    "output", "turns", "duration_ms", "cost_usd", "model", "tier", "bonus", "started_at", "rescore_of",
)  # fmt: skip


def _clean(value: Any) -> str:
    return "" if value is None else str(value).replace("\t", " ").replace("\n", " ")


def _index_entry(sample: Mapping[str, Any], start: int, end: int) -> bytes:
    """One index line: what counting and reports need of a sample, tab-separated."""
    usage = sample.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    total = total if isinstance(total, dict) else {}
    fields = {
        **{name: sample.get(name) for name in _INDEX_FIELDS},
        **{name: total.get(name, 0) for name in ("fresh_input", "cache_write", "cache_read", "output")},
        "fingerprint": _fingerprint_of(sample),
        "start": start,
        "end": end,
        "bonus": "1" if sample.get("bonus") is True else "",
        "started_at": sample.get("started_at") or sample.get("ended_at"),  # when the sample was seen
    }
    return ("\t".join(_clean(fields[name]) for name in _INDEX_FIELDS) + "\n").encode()


def _number(text: str, kind: type) -> Any:
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        return None


def _summary_from_index(row: list[str], cell: Cell) -> dict[str, Any]:
    """A sample reduced to the fields a report reads, rebuilt from its index line."""
    value = dict(zip(_INDEX_FIELDS, row))
    tokens = {name: _number(value[name], int) or 0 for name in ("fresh_input", "cache_write", "cache_read", "output")}
    summary: dict[str, Any] = {
        "id": value["id"],
        "arm": cell.arm,
        "task": cell.task,
        "model_kind": cell.model_kind,
        "status": value["status"],
        "outcome": value["outcome"] or None,
        "usage": {"total": tokens},
        "turns": _number(value["turns"], int),
        "duration_ms": _number(value["duration_ms"], int),
        "cost_usd": _number(value["cost_usd"], float),
        "model": value["model"] or None,
        "tier": value["tier"] or None,
        "bonus": value["bonus"] == "1",
        "started_at": value["started_at"] or None,
        "provenance": {"fingerprint": value["fingerprint"]},
    }
    if value["rescore_of"]:
        summary["rescore_of"] = value["rescore_of"]
    return summary


def _parse_chunk(path: Path, chunk: bytes, first_line: int, problems: list[Problem], *, final: bool) -> Iterator[dict[str, Any]]:
    """Parse a piece of a samples file that the index does not describe."""
    lines = chunk.split(b"\n")
    numbered = (
        (first_line + offset + 1, raw.strip(), offset < len(lines) - 1 or not final)
        for offset, raw in enumerate(lines)
        if raw.strip()
    )
    return _decode_lines(path, numbered, problems)


def _fingerprint_of(sample: Mapping[str, Any]) -> str:
    provenance = sample.get("provenance")
    value = provenance.get("fingerprint") if isinstance(provenance, dict) else None
    return str(value or "").replace("\t", " ")


def _counts(status: Any, sample_fingerprint: str, wanted: str | None) -> bool:
    return status == STATUS_SCORED and (wanted is None or sample_fingerprint == wanted)


def validate_sample(sample: Mapping[str, Any]) -> None:
    missing = [key for key in REQUIRED_SAMPLE_KEYS if key not in sample]
    if missing:
        raise StoreError(f"sample lacks required field(s): {', '.join(missing)}")
    if sample["status"] not in STATUSES:
        raise StoreError(f"sample status {sample['status']!r} is not one of {', '.join(STATUSES)}")
    if sample["model_kind"] not in MODEL_KINDS:
        raise StoreError(f"sample model_kind {sample['model_kind']!r} is not one of {', '.join(MODEL_KINDS)}")
    trial = sample["trial"]
    if not isinstance(trial, int) or isinstance(trial, bool) or trial < 1:
        raise StoreError(f"sample trial must be a positive integer, got {trial!r}")


class Store:
    """The sample store rooted at one folder. Cheap to construct; touches disk only when used."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.root = Path(root)
        self._lock_timeout = lock_timeout

    # -- paths -------------------------------------------------------------------------------
    def samples_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{SAMPLES_SUFFIX}"

    def index_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{INDEX_SUFFIX}"

    def reservations_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{RESERVATIONS_SUFFIX}"

    def definitions_path(self, fingerprint: str) -> Path:
        return self.root / DEFINITIONS_DIR / f"{fingerprint}.toml"

    def _lock(self) -> filelock.FileLock:
        self.root.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(str(self.root / LOCK_NAME), timeout=self._lock_timeout)

    # -- trial numbers -----------------------------------------------------------------------
    def highest_trial(self, cell: Cell) -> int:
        """The highest trial number ever reserved or stored for the cell (0 if none).

        Reservations are appended under the lock with ever higher numbers, so the last readable
        line of the reservations file holds the highest: only the file's tail is read, and
        numbering stays constant-time however deep the cell grows. Falls back to scanning the
        samples when the file is missing or unreadable (a store written by hand, or copied).
        """
        highest = _last_reserved(self.reservations_path(cell))
        if highest:
            return highest
        return self._highest_in_samples(cell)

    def _highest_in_samples(self, cell: Cell) -> int:
        highest = 0
        for sample in _parse_jsonl(self.samples_path(cell), []):
            trial = sample.get("trial")
            if isinstance(trial, int):
                highest = max(highest, trial)
        return highest

    def count_scored(self, cell: Cell, fingerprint: str | None = None) -> int:
        """How many scored samples the cell holds (floor and fill decisions), optionally only those
        of one fingerprint: samples of an older definition are not pooled by the report either.

        Reads the cell's small index (one short line per sample: status, fingerprint, and where
        the samples file ended after that append) and parses only the samples written after the
        last indexed one, so counting stays cheap however deep the cell grows. The index is a
        cache, never the record: when it is missing or does not match the samples file, the
        samples themselves are counted.
        """
        counted, indexed_end = self._count_from_index(cell, fingerprint)
        path = self.samples_path(cell)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return 0
        if indexed_end > size:  # the index describes another file: trust only the samples
            counted, indexed_end = 0, 0
        if indexed_end == size:
            return counted
        with path.open("rb") as handle:
            handle.seek(indexed_end)
            tail = handle.read()
        for raw in tail.splitlines():
            try:
                sample = json.loads(raw)
            except ValueError:
                continue
            if isinstance(sample, dict) and _counts(sample.get("status"), _fingerprint_of(sample), fingerprint):
                counted += 1
        return counted

    def _count_from_index(self, cell: Cell, fingerprint: str | None) -> tuple[int, int]:
        counted, end = 0, 0
        try:
            data = self.index_path(cell).read_bytes()
        except FileNotFoundError:
            return 0, 0
        for line in data.decode("utf-8", "replace").splitlines():
            parts = line.split("\t")
            if len(parts) < 3 or not parts[2].isdigit():
                return 0, 0  # a damaged index: count from the samples instead
            status, sample_fingerprint, line_end = parts[:3]
            if int(line_end) < end:
                return 0, 0
            end = int(line_end)
            counted += _counts(status, sample_fingerprint, fingerprint)
        return counted, end

    def iter_summaries(self, problems: list[Problem], *, cells: Sequence[Cell] | None = None) -> Iterator[dict[str, Any]]:
        """Like iter_samples, but each sample reduced to the fields reports need, read from the
        per-cell index where it is complete and consistent (no JSON parse of transcripts), and
        from the samples file itself everywhere else: before the index begins, in any gap the
        index does not cover (a torn fragment is reported there as it would be by iter_samples),
        and after the last indexed sample."""
        for cell in self.cells() if cells is None else cells:
            rows = self._index_rows(cell)
            if rows is None:
                yield from _parse_jsonl(self.samples_path(cell), problems)
                continue
            yield from self._summaries_of(cell, rows, problems)

    def _index_rows(self, cell: Cell) -> list[list[str]] | None:
        try:
            data = self.index_path(cell).read_bytes()
        except FileNotFoundError:
            return None
        rows = [line.split("\t") for line in data.decode("utf-8", "replace").splitlines()]
        if not rows or any(len(row) != len(_INDEX_FIELDS) for row in rows):
            return None
        return rows

    def _summaries_of(self, cell: Cell, rows: list[list[str]], problems: list[Problem]) -> Iterator[dict[str, Any]]:
        path = self.samples_path(cell)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        position, line_number = 0, 0
        with path.open("rb") as handle:
            for row in rows:
                start, end = int(row[3]), int(row[2])
                if start < position or end > size:  # the index describes another file
                    handle.seek(0)
                    yield from _parse_jsonl(path, problems)
                    return
                if start > position:
                    handle.seek(position)
                    gap = handle.read(start - position)
                    yield from _parse_chunk(path, gap, line_number, problems, final=False)
                    line_number += gap.count(b"\n")
                yield _summary_from_index(row, cell)
                position, line_number = end, line_number + 1
            if position < size:
                handle.seek(position)
                yield from _parse_chunk(path, handle.read(), line_number, problems, final=True)

    def preview_trials(self, cell: Cell, count: int) -> list[int]:
        """The numbers a reservation would get now, without writing anything (--collect-only)."""
        start = self.highest_trial(cell) + 1
        return list(range(start, start + count))

    def reserve_trials(self, cell: Cell, count: int, *, sitting: str) -> list[int]:
        """Hand out `count` fresh trial numbers for the cell, under the store lock."""
        if count < 0:
            raise StoreError(f"cannot reserve {count} trials")
        if count == 0:
            return []
        with self._locked():
            numbers = self.preview_trials(cell, count)
            line = {"trials": numbers, "sitting": sitting}
            _append_bytes(self.reservations_path(cell), _json_line(line))
        return numbers

    # -- samples -----------------------------------------------------------------------------
    def append(self, sample: Mapping[str, Any]) -> Path:
        """Append one complete sample to its cell file, under the lock, flushed and fsynced."""
        validate_sample(sample)
        cell = Cell(sample["model_kind"], sample["arm"], sample["task"])
        path = self.samples_path(cell)
        line = _json_line(sample)  # serialized before taking the lock: the lock guards the disk only
        with self._locked():
            end = _append_bytes(path, line)
            # The index is a cache (see count_scored): written without fsync, checked on reading.
            with self.index_path(cell).open("ab") as index:
                index.write(_index_entry(sample, end - len(line), end))
        return path

    def read_cell(self, cell: Cell) -> CellContents:
        contents = CellContents()
        contents.samples.extend(_parse_jsonl(self.samples_path(cell), contents.problems))
        return contents

    def cells(self, model_kinds: Iterable[str] = MODEL_KINDS) -> list[Cell]:
        """Every cell that has a samples file, sorted."""
        found: list[Cell] = []
        for kind in model_kinds:
            kind_dir = self.root / kind
            if not kind_dir.is_dir():
                continue
            for arm_dir in kind_dir.iterdir():
                if not arm_dir.is_dir():
                    continue
                for path in arm_dir.glob(f"*{SAMPLES_SUFFIX}"):
                    found.append(Cell(kind, arm_dir.name, path.name[: -len(SAMPLES_SUFFIX)]))
        return sorted(found)

    def iter_samples(
        self, problems: list[Problem], *, cells: Sequence[Cell] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Stream every sample of the given cells (default: all), one line at a time.

        Unreadable lines are appended to `problems` rather than raised, so a torn write never
        hides the rest of the store.
        """
        for cell in self.cells() if cells is None else cells:
            yield from _parse_jsonl(self.samples_path(cell), problems)

    # -- definitions -------------------------------------------------------------------------
    def write_definitions(self, fingerprint: str, definitions: Mapping[str, Any]) -> Path:
        """Write the resolved definitions for a fingerprint once; an existing file is kept as is."""
        path = self.definitions_path(fingerprint)
        if path.exists():
            return path
        with self._locked():
            if path.exists():
                return path
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".tmp-{os.getpid()}")
            with temporary.open("wb") as handle:
                tomli_w.dump(dict(definitions), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            _fsync_directory(path.parent)
        return path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self._lock()
        try:
            # filelock polls a held lock every 50 ms by default, which caps a contended store at
            # about 20 hand-offs a second; 3 ms keeps the lock busy without the waiters' polling
            # eating the CPU the holder needs (1 ms was slower with 8 writers on 2 cores).
            lock.acquire(poll_interval=0.003)
        except filelock.Timeout as exc:
            raise StoreError(
                f"could not lock the store {self.root} within {self._lock_timeout:.0f} s "
                f"(another sitting holds {self.root / LOCK_NAME})"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def _json_line(value: Mapping[str, Any]) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n").encode()
