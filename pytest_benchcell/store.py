"""The append-only sample store.

Layout (see docs/architecture.md)::

    <root>/<model_kind>/<arm>/<task>.jsonl   one complete sample per line, append-only
    <root>/<model_kind>/<arm>/<task>.trials  one JSON line per trial-number reservation
    <root>/definitions/<fingerprint>.toml    resolved arm + task definitions, once per fingerprint
    <root>/.lock                             the store-wide filelock
    <root>/transcripts/...                   each trial's transcript (transcript.py): never read here

Guarantees:
- Nothing is ever rewritten or deleted. The only write operations are appends and the creation of a
  definitions file that does not exist yet.
- Every append and every reservation happens under one cross-process filelock, is written with a
  single O_APPEND write, flushed and fsynced before the lock is released.
- Trial numbers are handed out under the same lock, from the highest number ever reserved or stored
  for the cell, so two sittings of one cell never get the same number. Gaps are normal.
- An append that fails (disk full, read-only, folder gone) raises StoreError naming the store and
  the cause; bytes it did write are cut back under the lock (they were never a sample), so the
  file is as before. A store folder that vanishes mid-sitting is never silently recreated.
- A torn last line (a crash mid-write) never breaks reading: it is reported as a problem with its line
  number. The next append first terminates the torn fragment with a newline (appending, not
  rewriting), so the new sample always starts on a line of its own.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import tomli_w

from . import transcript
from .names import NAME_RULE, name_problem
from .sample import (
    CHECKER_OUTCOMES,
    MODEL_KINDS,
    STATUS_RESCORE,
    STATUS_SCORED,
    STATUSES,
    TOKEN_COMPONENTS,
    Definition,
    conditions_of,
    effective_samples,
    scoring_of,
)

SAMPLES_SUFFIX = ".jsonl"
RESERVATIONS_SUFFIX = ".trials"
# A cache of one checked row per sample (see _Reader). Plugins before schema 2 kept `.index` files;
# they are left where they are and never read.
INDEX_SUFFIX = ".idx"
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


UNREADABLE = "unreadable"
DUPLICATE = "duplicate"


@dataclass(frozen=True)
class Problem:
    """A line of the store that could not be read as a sample, or repeats a sample id (kind)."""

    path: Path
    line: int
    message: str
    kind: str = UNREADABLE
    sample_id: str = ""  # for a duplicate: the repeated id

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


def _decode(path: Path, number: int, raw: bytes, terminated: bool, problems: list[Problem]) -> dict[str, Any] | None:
    """One stripped line as a sample, or None with the reason added to problems."""
    try:
        value = json.loads(raw)
    except ValueError:
        why = "torn last line (a write was interrupted)" if not terminated else "unreadable line"
        problems.append(Problem(path, number, f"{why}; {len(raw)} bytes kept as they are"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(path, number, "line is JSON but not an object"))
        return None
    return value


def _parse_jsonl(path: Path, problems: list[Problem], seen: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Every sample of a samples file, parsed line by line; a sample id already in `seen` is
    reported as a duplicate and skipped (pass a dict to share it across files or stores)."""
    seen = {} if seen is None else seen
    for number, raw, terminated in _read_lines(path):
        sample = _decode(path, number, raw, terminated, problems)
        if sample is None:
            continue
        sample_id = sample.get("id")
        if isinstance(sample_id, str) and sample_id:
            first = seen.get(sample_id)
            if first is not None:
                problems.append(
                    Problem(path, number, f"duplicate of sample {sample_id} first read at {first}; counted once",
                            kind=DUPLICATE, sample_id=sample_id)
                )  # fmt: skip
                continue
            seen[sample_id] = f"{path}:{number}"
        yield sample


RESERVATION_TAIL_BYTES = 64 * 1024


def _tail(path: Path, limit: int) -> tuple[int, bytes]:
    """(file size, its last `limit` bytes); (0, b"") for a missing file."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            return size, handle.read()
    except FileNotFoundError:
        return 0, b""


def _last_reserved(path: Path) -> int:
    """The highest number in the last readable line of a reservations file (0 if none)."""
    _, tail = _tail(path, RESERVATION_TAIL_BYTES)
    for raw in reversed(tail.splitlines()):
        try:
            return max(int(n) for n in json.loads(raw)["trials"])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a torn or partial line (the tail may start mid-line): try the one before
    return 0


def _cause(exc: OSError) -> str:
    return f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc.strerror or exc)


def _append_bytes(path: Path, payload: bytes, *, sync: bool = True) -> int:
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
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if sync:
                os.fsync(fd)
        except OSError:
            # A full disk can take part of the payload: cut it back to where this append began, so
            # a failed append leaves the file as it was and the space for an `error` sample.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
        end = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created and sync:
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


# -- the index: a cache that only accelerates ----------------------------------------------------
# One tab-separated row per appended sample, beside the samples file: what counting and reports need
# of the sample, the byte range of its line and the line's CRC-32, then:
#   chain  CRC-32 of the samples file from its first byte to the end of this row's line,
#   prior  CRC-32 of the index file before this row,
#   seen   the samples file's size, inode and change time (ctime, which no user can set) after the
#          append that wrote this row,
#   own    CRC-32 of the row's text.
# Reading first checks the last row: when its prior checksum matches the index and either the samples
# file is the one it saw (same size, inode and ctime: nothing touched it since) or its chain
# checksum matches the samples file (one C-speed pass), every row before it describes the very bytes
# that are there, and only complete rows are used (a torn fragment is skipped, its sample parsed).
# When that fails (a hand edit, a truncated or copied file, a lost row), every row is checked on its
# own: its own checksum, a range that starts at a line start and ends at a newline, and the CRC-32 of
# the line it names. The next append restarts the chain over the samples file when its last row no
# longer ends where the file does (a lost row after a crash, a truncated or edited samples file), so
# the fast check holds again; an index edited by hand in its middle stays on the row-by-row check
# (correct, about twice as slow) until it is removed: the next append then writes a complete one.
# Whatever no valid row covers is parsed from the samples file itself, and rows and parsed samples
# are encoded the same way (_row_of), so an answer never depends on the index.
_ROW_TAG = "b3"
_ROW_FIELDS = (
    "tag", "id", "start", "end", "crc", "status", "conditions", "scoring", "outcome", "rescore_of",
    "tokens", "turns", "duration_ms", "cost_usd", "model", "tier", "bonus", "started_at", "trial", "sitting",
)  # fmt: skip
(_F_TAG, _F_ID, _F_START, _F_END, _F_CRC, _F_STATUS, _F_CONDITIONS, _F_SCORING, _F_OUTCOME, _F_RESCORE_OF,
 _F_REST) = range(11)  # fmt: skip
# A row is kept split only as far as counting needs (_F_REST holds the rest, split for reports).
(_R_TOKENS, _R_TURNS, _R_DURATION, _R_COST, _R_MODEL, _R_TIER, _R_BONUS, _R_STARTED, _R_TRIAL, _R_SITTING) = range(10)
_ROW_LENGTH = len(_ROW_FIELDS) + 4  # plus chain, prior, seen, own
_TABS_IN_REST = _ROW_LENGTH - 1 - _F_REST  # tabs in the unsplit rest of a complete index line
INDEX_TAIL_BYTES = 16 * 1024


def _clean(value: Any) -> str:
    return "" if value is None else str(value).replace("\t", " ").replace("\n", " ").replace("\r", " ")


def _tokens_text(sample: Mapping[str, Any]) -> str:
    """'a,b,c,d' for the four token components, '' when the usage is unknown (null or absent)."""
    usage = sample.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return ""
    values = []
    for name in TOKEN_COMPONENTS:
        value = total.get(name, 0)
        values.append(str(value if isinstance(value, int) and not isinstance(value, bool) else 0))
    return ",".join(values)


def agent_ms(sample: Mapping[str, Any]) -> Any:
    """The agent's time: the trial's duration_ms less the model API's retry waits (api_wait_ms). The
    index keeps this as the row's duration (a sample without api_wait_ms, from before it existed,
    keeps its duration), so every report leaves the API's waits out."""
    duration, waited = sample.get("duration_ms"), sample.get("api_wait_ms")
    if type(duration) is int and type(waited) is int and 0 < waited <= duration:
        return duration - waited
    return duration


def _row_of(sample: Mapping[str, Any], start: int, end: int, crc: int) -> str:
    """One index row (without its own checksum): what counting and reports need of a sample."""
    fields = (
        _ROW_TAG, sample.get("id"), start, end, f"{crc:08x}", sample.get("status"), conditions_of(sample),
        scoring_of(sample), sample.get("outcome"), sample.get("rescore_of"), _tokens_text(sample), sample.get("turns"),
        agent_ms(sample), sample.get("cost_usd"), sample.get("model"), sample.get("tier"),
        "1" if sample.get("bonus") is True else "", sample.get("started_at") or sample.get("ended_at"),
        sample.get("trial"), sample.get("sitting"),
    )  # fmt: skip
    return "\t".join(_clean(value) for value in fields)


def _seen(stat: os.stat_result) -> str:
    return f"{stat.st_size}:{stat.st_ino}:{stat.st_ctime_ns}"


def _signed(row: str, chain: int, prior: int, seen: str) -> bytes:
    text = f"{row}\t{chain:08x}\t{prior:08x}\t{seen}"
    return f"{text}\t{zlib.crc32(text.encode()):08x}\n".encode()


def _own_check(line: str) -> list[str] | None:
    """The fields of a complete index line whose own checksum holds, else None."""
    text, _, own = line.rpartition("\t")
    if len(own) != 8 or f"{zlib.crc32(text.encode()):08x}" != own:
        return None
    fields = text.split("\t")
    return fields if len(fields) == _ROW_LENGTH - 1 and fields[0] == _ROW_TAG else None


def _index_rows_for(samples: Path, index: Path, start: int, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> bytes:
    """The index rows for lines just appended at `start` of the samples file (under the lock).

    The chain continues from the index's last row when that row ends where the new lines begin
    (the common case: reading a small tail of the index); otherwise the samples file before `start`
    is read once to restart it, which heals the chain after any damage."""
    index_size, tail = _tail(index, INDEX_TAIL_BYTES)
    last = None
    damaged_last = False
    if tail.endswith(b"\n"):
        lines_in_tail = tail[:-1].rsplit(b"\n", 1)
        last_bytes = lines_in_tail[-1] + b"\n"
        fields = _own_check(lines_in_tail[-1].decode("utf-8", "replace"))
        if fields is not None and (len(lines_in_tail) == 2 or index_size <= INDEX_TAIL_BYTES):
            last = fields
        damaged_last = fields is None
    if last is not None:
        prior = zlib.crc32(last_bytes, int(last[-2], 16))  # the index before the last row, plus it
    else:
        prior = _crc_of_file(index, index_size)
        if index_size and not tail.endswith(b"\n"):
            prior = zlib.crc32(b"\n", prior)  # _append_bytes terminates a torn row first
        elif damaged_last:
            # A complete last line that fails its own checksum is a damaged row, which would look
            # like any other row once more follow it: the new rows must not vouch for it, so their
            # prior is deliberately not the index's checksum and readers check this index row by row.
            prior ^= 1
    if last is not None and int(last[_F_END]) == start:
        chain = int(last[-3], 16)
    else:
        chain = _crc_of_file(samples, start)
    out = []
    position = start
    seen = _seen(os.stat(samples))
    for sample, line in lines:
        chain = zlib.crc32(line, chain)
        signed = _signed(_row_of(sample, position, position + len(line), zlib.crc32(line)), chain, prior, seen)
        prior = zlib.crc32(signed, prior)
        out.append(signed)
        position += len(line)
    return b"".join(out)


def _crc_of_file(path: Path, size: int) -> int:
    crc = 0
    try:
        with path.open("rb") as handle:
            remaining = size
            while remaining > 0:
                block = handle.read(min(remaining, 1 << 20))
                if not block:
                    break
                crc = zlib.crc32(block, crc)
                remaining -= len(block)
    except FileNotFoundError:
        pass
    return crc


def _number(text: str, kind: type) -> Any:
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        return None


def summary_of(fields: Sequence[str], cell: Cell, pool_key: str | None = None) -> dict[str, Any]:
    """A sample reduced to the fields a report reads, from its index row."""
    rest = fields[_F_REST].split("\t")
    tokens_text = rest[_R_TOKENS]
    total = dict(zip(TOKEN_COMPONENTS, map(int, tokens_text.split(",")))) if tokens_text else None
    summary: dict[str, Any] = {
        "id": fields[_F_ID],
        "arm": cell.arm,
        "task": cell.task,
        "model_kind": cell.model_kind,
        "trial": _number(rest[_R_TRIAL], int),
        "sitting": rest[_R_SITTING] or None,
        "status": fields[_F_STATUS],
        "outcome": fields[_F_OUTCOME] or None,
        "usage": {"total": total},
        "turns": _number(rest[_R_TURNS], int),
        "duration_ms": _number(rest[_R_DURATION], int),  # the agent's time (agent_ms): the API's retry waits left out
        "cost_usd": _number(rest[_R_COST], float),
        "model": rest[_R_MODEL] or None,
        "tier": rest[_R_TIER] or None,
        "bonus": rest[_R_BONUS] == "1",
        "started_at": rest[_R_STARTED] or None,
        "provenance": {
            "fingerprint": pool_key if pool_key is not None else fields[_F_CONDITIONS],
            "conditions": fields[_F_CONDITIONS],
            "scoring": fields[_F_SCORING],
        },
    }
    if fields[_F_RESCORE_OF]:
        summary["rescore_of"] = fields[_F_RESCORE_OF]
    return summary


@dataclass
class CellCount:
    """A cell's samples as the floor and fill see them (Store.count_current)."""

    current: int = 0  # scored samples of the current conditions and (for checker verdicts) scoring
    stale_scoring: int = 0  # scored under the current conditions, but judged by an older scoring: rescore them
    other_conditions: int = 0  # scored samples of other conditions (never pooled)
    duplicates: list[str] = field(default_factory=list)  # sample ids seen more than once (counted once)
    problems: list[Problem] = field(default_factory=list)


STALE_PREFIX = "stale-scoring:"  # a report pool key for samples judged by an older scoring definition


def _effective(rows: Sequence[list[str]]) -> Sequence[list[str]] | Iterator[list[str]]:
    """The trial rows of a cell with the latest rescore of each applied (outcome and scoring)."""
    latest: dict[str, tuple[str, str]] = {}
    for fields in rows:
        if fields[_F_STATUS] == STATUS_RESCORE:
            latest[fields[_F_RESCORE_OF]] = (fields[_F_OUTCOME], fields[_F_SCORING])
    return _overridden(rows, latest) if latest else rows


def _overridden(rows: Sequence[list[str]], latest: Mapping[str, tuple[str, str]]) -> Iterator[list[str]]:
    for fields in rows:
        if fields[_F_STATUS] == STATUS_RESCORE:
            continue
        override = latest.get(fields[_F_ID])
        if override is not None:
            fields = list(fields)
            fields[_F_OUTCOME], fields[_F_SCORING] = override
        yield fields


class _Reader:
    """Reads one cell of one store through its index (see the comment above _ROW_TAG): rows are
    used only where they check out, and whatever no valid row covers is parsed from the samples."""

    def __init__(self, samples: Path, index: Path, problems: list[Problem], seen: dict[str, tuple[Path, int]]) -> None:
        self.samples_path = samples
        self.index_path = index
        self.problems = problems
        self.seen = seen  # sample id -> (samples file, line) where first read, shared across stores
        self.parsed = 0  # samples parsed because no valid index row described them
        self.trusted = False  # whether the last row's chain vouched for every row before it

    def rows(self) -> list[list[str]]:
        """The cell's samples as index rows (field lists), in file order, each sample id once."""
        try:
            with self.samples_path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_size == 0:
                    return []
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    return self._rows(data, stat)
        except FileNotFoundError:
            return []

    def _trust(self, index: bytes, data: mmap.mmap, stat: os.stat_result) -> bool:
        """Whether the last complete row vouches for every row and sample byte before it."""
        if b"\n" not in index:
            return False
        body = index[:-1] if index.endswith(b"\n") else index[: index.rfind(b"\n")]
        cut = body.rfind(b"\n") + 1
        fields = _own_check(body[cut:].decode("utf-8", "replace"))
        if fields is None or not fields[_F_END].isdigit() or int(fields[_F_END]) > stat.st_size:
            return False
        if zlib.crc32(index[:cut]) != int(fields[-2], 16):
            return False
        if fields[-1] == _seen(stat):
            return True  # the samples file is untouched since this row was written
        with memoryview(data) as view:
            return zlib.crc32(view[: int(fields[_F_END])]) == int(fields[-3], 16)

    def _rows(self, data: mmap.mmap, stat: os.stat_result) -> list[list[str]]:
        size = stat.st_size
        try:
            index = self.index_path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            index = b""
        self.trusted = bool(index) and self._trust(index, data, stat)
        if self.trusted:
            problems_before, parsed_before = len(self.problems), self.parsed
            rows = self._read(index, data, size, trusted=True)
            if rows is not None:
                return rows
            # A row the chain vouched for does not sit on line boundaries (an index whose damaged
            # row an earlier plugin chained over): forget this pass and check every row on its own.
            del self.problems[problems_before:]
            self.parsed, self.trusted = parsed_before, False
        rows = self._read(index, data, size, trusted=False)
        assert rows is not None  # only a trusted pass gives up
        return rows

    def _read(self, index: bytes, data: mmap.mmap, size: int, *, trusted: bool) -> list[list[str]] | None:
        """One pass over the index rows and the gaps between them; None when a trusted row turns
        out not to start and end at line boundaries (nothing this pass added to `seen` is kept)."""
        rows: list[list[str]] = []
        position, line = 0, 1  # byte offset and line number of the first byte not yet accounted for
        seen, width, tabs, tag = self.seen, _F_REST + 1, _TABS_IN_REST, _ROW_TAG
        seen_before = len(seen)
        with memoryview(data) as view:
            for text in index.decode("utf-8", "replace").split("\n"):
                fields = text.split("\t", _F_REST)
                if len(fields) != width or fields[0] != tag or fields[-1].count("\t") != tabs or text[-9:-8] != "\t":
                    continue  # not a complete row (a torn fragment): its sample is parsed below
                if not trusted and _own_check(text) is None:
                    continue
                try:
                    start, end = int(fields[_F_START]), int(fields[_F_END])
                except ValueError:
                    continue
                if start < position or end > size or end <= start:
                    continue  # overlaps what was read already, or lies past the end of the file
                if not (data[end - 1] == 10 and (start == 0 or data[start - 1] == 10)):
                    if trusted:
                        for sample_id in list(seen)[seen_before:]:  # dicts keep insertion order
                            del seen[sample_id]
                        return None
                    continue  # not a whole line
                if not trusted and zlib.crc32(view[start:end]) != int(fields[_F_CRC], 16):
                    continue  # the bytes there are not the line the row describes
                if start > position:
                    line = self._parse(data, position, start, line, rows)
                sample_id = fields[_F_ID]
                if sample_id in seen:
                    self._duplicate(sample_id, line)
                else:
                    seen[sample_id] = (self.samples_path, line)
                    rows.append(fields)
                position, line = end, line + 1
        if position < size:
            self._parse(data, position, size, line, rows)
        return rows

    def _duplicate(self, sample_id: str, line: int) -> None:
        path, first = self.seen[sample_id]
        self.problems.append(
            Problem(self.samples_path, line, f"duplicate of sample {sample_id} first read at {path}:{first}; "
                    "counted once", kind=DUPLICATE, sample_id=sample_id)
        )  # fmt: skip

    def _parse(self, data: mmap.mmap, begin: int, stop: int, line: int, rows: list[list[str]]) -> int:
        """Parse the whole lines in data[begin:stop] (begin is a line start); returns the next line number."""
        position = begin
        while position < stop:
            newline = data.find(b"\n", position, stop)
            end = stop if newline == -1 else newline + 1
            raw = data[position:end]
            stripped = raw.strip()
            if stripped:
                sample = _decode(self.samples_path, line, stripped, raw.endswith(b"\n"), self.problems)
                if sample is not None:
                    self.parsed += 1
                    fields = _row_of(sample, position, end, zlib.crc32(raw)).split("\t", _F_REST)
                    sample_id = fields[_F_ID]
                    if sample_id and sample_id in self.seen:
                        self._duplicate(sample_id, line)
                    else:
                        if sample_id:
                            self.seen[sample_id] = (self.samples_path, line)
                        rows.append(fields)
            position, line = end, line + 1
        return line


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
    _check_cell_names(sample["arm"], sample["task"])


def _check_cell_names(arm: Any, task: Any) -> None:
    """Arm and task become a folder and a file name: the one name rule (names.py) guards them here
    too, before any folder or lock is made for a cell."""
    for kind, name in (("arm", arm), ("task", task)):
        problem = name_problem(name)
        if problem:
            raise StoreError(f"sample {kind} {str(name)[:80]!r} is not a valid {kind} name ({problem}); allowed: {NAME_RULE}")


class Store:
    """The sample store rooted at one folder. Cheap to construct; touches disk only when used."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.root = Path(root)
        self._lock_timeout = lock_timeout
        self._root_seen = False  # once the folder was seen, its disappearing is an error (see _locked)

    def expect_root(self) -> None:
        """Note whether the store folder exists now: if it does and later vanishes (deleted, an
        unmounted disk), writes fail with a clear error instead of silently starting a new store."""
        self._root_seen = self._root_seen or self.root.is_dir()

    def vanished(self) -> bool:
        """Whether the store folder was seen and is gone now (deleted, an unmounted disk): nothing
        may then recreate it (see _locked)."""
        return self._root_seen and not self.root.is_dir()

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

    def cell_rows(
        self, cell: Cell, problems: list[Problem], seen: dict[str, tuple[Path, int]] | None = None
    ) -> list[list[str]]:
        """The cell's samples as checked index rows in file order, each sample id once (the one
        reader behind counting, fill, summaries and reports; see _Reader)."""
        reader = _Reader(self.samples_path(cell), self.index_path(cell), problems, {} if seen is None else seen)
        return reader.rows()

    def count_current(self, cell: Cell, definition: Definition | None = None) -> CellCount:
        """How the cell's scored samples stand against the current definition (floor and fill):
        rescores applied, duplicates counted once. Without a definition every scored sample counts."""
        return count_rows(self.cell_rows(cell, problems := []), definition, problems)

    def count_scored(self, cell: Cell, definition: Definition | None = None) -> int:
        return self.count_current(cell, definition).current

    def iter_summaries(
        self, problems: list[Problem], *, cells: Sequence[Cell] | None = None,
        definitions: Mapping[tuple[str, str], Definition] | None = None,
    ) -> Iterator[dict[str, Any]]:  # fmt: skip
        """Every trial sample of the given cells reduced to the fields reports need, with the latest
        rescore applied; see read_summaries."""
        return read_summaries([self], problems, cells=cells, definitions=definitions)

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
        _check_cell_names(cell.arm, cell.task)
        with self._locked():
            numbers = self.preview_trials(cell, count)
            line = {"trials": numbers, "sitting": sitting}
            _append_bytes(self.reservations_path(cell), _json_line(line))
        return numbers

    def reserve_previewed(self, cell: Cell, previewed: Sequence[int], *, sitting: str) -> list[int]:
        """Reserve the numbers preview_trials gave earlier (of them, those that will run), under the
        store lock: the same numbers while no other sitting reserved past them meanwhile, else as
        many fresh ones. The numbers previewed but not passed here stay free."""
        if not previewed:
            return []
        with self._locked():
            start = self.highest_trial(cell) + 1
            numbers = list(previewed) if min(previewed) >= start else list(range(start, start + len(previewed)))
            _append_bytes(self.reservations_path(cell), _json_line({"trials": numbers, "sitting": sitting}))
        return numbers

    # -- samples -----------------------------------------------------------------------------
    def append(self, sample: Mapping[str, Any]) -> Path:
        """Append one complete sample to its cell file, under the lock, flushed and fsynced.

        Raises StoreError naming the store and the cause when the sample cannot be written (disk
        full, folder gone or read-only); a partly written line is then a torn line, which reading
        reports and the next append terminates."""
        validate_sample(sample)
        cell = Cell(sample["model_kind"], sample["arm"], sample["task"])
        line = _json_line(sample)  # serialized before taking the lock: the lock guards the disk only
        self._append_lines(cell, [(sample, line)])
        return self.samples_path(cell)

    def append_line(self, line: bytes) -> dict[str, Any]:
        """Append a sample that arrives as its store line (sample_line of it, as a worker's spool wrote
        it), byte for byte; return the sample. Raises StoreError as append does, and for a line that
        is not one JSON object on one line."""
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise StoreError("a sample line must be one line ending in a newline")
        try:
            sample = json.loads(line)
        except ValueError as exc:
            raise StoreError(f"a sample line is not JSON ({exc})") from None
        if not isinstance(sample, dict):
            raise StoreError("a sample line is not a JSON object")
        validate_sample(sample)
        self._append_lines(Cell(sample["model_kind"], sample["arm"], sample["task"]), [(sample, line)])
        return sample

    def _append_lines(self, cell: Cell, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
        with self._locked(create=False):
            try:
                _write_lines(self, cell, lines)
            except OSError as exc:
                raise StoreError(f"could not write to the store {self.root}: {_cause(exc)}") from exc

    def read_cell(self, cell: Cell) -> CellContents:
        """Every sample of the cell, fully parsed (a sample id seen before is a duplicate problem)."""
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

    def iter_raw(self, cell: Cell, problems: list[Problem]) -> Iterator[tuple[dict[str, Any], bytes]]:
        """(sample, its line) for every readable line of the cell, duplicates included (merge)."""
        path = self.samples_path(cell)
        for number, raw, terminated in _read_lines(path):
            sample = _decode(path, number, raw, terminated, problems)
            if sample is not None:
                yield sample, raw

    # -- definitions -------------------------------------------------------------------------
    def write_definitions(self, fingerprint: str, definitions: Mapping[str, Any]) -> Path:
        """Write the resolved definitions for a fingerprint once; an existing file is kept as is."""
        path = self.definitions_path(fingerprint)
        if path.exists():
            return path
        with self._locked(create=False):
            if path.exists():
                return path
            temporary = path.with_suffix(f".tmp-{os.getpid()}")
            try:
                path.parent.mkdir(exist_ok=True)
                with temporary.open("wb") as handle:
                    tomli_w.dump(dict(definitions), handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, path)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    temporary.unlink()  # never leave a half-written definitions file behind
                raise StoreError(f"could not write to the store {self.root}: {_cause(exc)}") from exc
            _fsync_directory(path.parent)
        return path

    @contextlib.contextmanager
    def _locked(self, *, create: bool = True) -> Iterator[None]:
        """The store-wide lock. A store folder that vanished after it was seen (a sitting's
        reservations, expect_root) is an error for writes, never silently started afresh."""
        if self.root.is_dir():
            self._root_seen = True
        elif not create and self._root_seen:
            raise StoreError(f"could not write to the store {self.root}: the store folder is gone")
        try:
            lock = self._lock()
        except OSError as exc:
            raise StoreError(f"could not lock the store {self.root}: {_cause(exc)}") from exc
        try:
            # filelock polls a held lock every 50 ms by default, which caps a contended store at
            # about 20 hand-offs a second; 3 ms keeps the lock busy without the waiters' polling
            # eating the CPU the holder needs (1 ms was slower with 8 writers on 2 cores).
            lock.acquire(poll_interval=0.003)
        except OSError as exc:
            raise StoreError(f"could not lock the store {self.root}: {_cause(exc)}") from exc
        except filelock.Timeout as exc:
            raise StoreError(
                f"could not lock the store {self.root} within {self._lock_timeout:.0f} s "
                f"(another sitting holds {self.root / LOCK_NAME})"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def count_rows(rows: Sequence[list[str]], definition: Definition | None, problems: Sequence[Problem]) -> CellCount:
    """Tally a cell's rows (Store.cell_rows) against its current definition (Definition.is_current,
    written out here because collection counts every sample of a sweep)."""
    count = CellCount(problems=list(problems))
    count.duplicates = [p.sample_id for p in problems if p.kind == DUPLICATE]
    if definition is None:
        count.current = sum(1 for fields in _effective(rows) if fields[_F_STATUS] == STATUS_SCORED)
        return count
    pooled = {definition.conditions} | ({definition.legacy} if definition.legacy else set())
    scorings = {definition.scoring} | ({definition.legacy} if definition.legacy else set())
    current = stale = other = 0
    for fields in _effective(rows):
        if fields[_F_STATUS] != STATUS_SCORED:
            continue
        if fields[_F_CONDITIONS] not in pooled:
            other += 1
        elif fields[_F_OUTCOME] not in CHECKER_OUTCOMES or fields[_F_SCORING] in scorings:
            current += 1
        else:
            stale += 1
    count.current, count.stale_scoring, count.other_conditions = current, stale, other
    return count


def _pool_key(fields: Sequence[str], definition: Definition | None) -> str:
    """What a report pools a sample by: its conditions, the current ones for a schema-1 sample of
    the current definition, and apart (STALE_PREFIX) a verdict of an older scoring definition."""
    conditions = fields[_F_CONDITIONS]
    if definition is None or not definition.pools(conditions):
        return conditions
    if (
        fields[_F_STATUS] == STATUS_SCORED
        and not definition.is_current(STATUS_SCORED, fields[_F_OUTCOME], conditions, fields[_F_SCORING])
    ):
        return STALE_PREFIX + fields[_F_SCORING]
    return definition.conditions


def read_summaries(
    stores: Sequence[Store], problems: list[Problem], *, cells: Sequence[Cell] | None = None,
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
        rows = _rows_across(stores, cell, problems, seen)
        definition = (definitions or {}).get((cell.arm, cell.task))
        rescores = {fields[_F_RESCORE_OF]: fields for fields in rows if fields[_F_STATUS] == STATUS_RESCORE}
        for fields in _effective(rows):
            summary = summary_of(fields, cell, _pool_key(fields, definition))
            summary["lines"] = _lines_of(fields, seen, rescores)
            yield summary


# Where a summary's sample lies: its samples file and byte range, then (when rescored) its latest
# rescore record's; read back with samples_at, for the few samples a report shows in full.
SampleLine = tuple[Path, str, str]


def _lines_of(
    fields: Sequence[str], seen: Mapping[str, tuple[Path, int]], rescores: Mapping[str, Sequence[str]]
) -> tuple[SampleLine, ...]:
    first = seen.get(fields[_F_ID])
    if first is None:
        return ()  # a sample without an id cannot be found again
    lines = ((first[0], fields[_F_START], fields[_F_END]),)
    rescore = rescores.get(fields[_F_ID]) if rescores else None
    if rescore is not None and rescore[_F_ID] in seen:
        lines += ((seen[rescore[_F_ID]][0], rescore[_F_START], rescore[_F_END]),)
    return lines


def samples_at(wanted: Iterable[tuple[Sequence[SampleLine], str]]) -> list[dict[str, Any] | None]:
    """The full samples some summaries describe ((their `lines`, their id) each), read by byte range
    with the latest rescore applied; None for one whose bytes are no longer that sample (the store
    was edited since). Each samples file is opened once."""
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
            found.append(effective_samples(parsed)[0] if matches else None)
    return found


def store_root_of(line: SampleLine) -> Path:
    """The store folder a sample line lies in (<root>/<model_kind>/<arm>/<task>.jsonl)."""
    return line[0].parents[2]


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
                yield from _parse_jsonl(store.samples_path(cell), problems, seen)

    def count_current(self, cell: Cell, definition: Definition | None = None) -> CellCount:
        problems: list[Problem] = []
        return count_rows(_rows_across(self.stores, cell, problems), definition, problems)


def _rows_across(
    stores: Sequence[Store], cell: Cell, problems: list[Problem], seen: dict[str, tuple[Path, int]] | None = None
) -> list[list[str]]:
    """One cell's rows over several stores read as one: a sample id counts once (later copies, in
    the same store or another, are `duplicate` problems). `seen` gets each id's samples file."""
    seen = {} if seen is None else seen
    return [row for store in stores for row in store.cell_rows(cell, problems, seen)]


MERGE_BATCH_BYTES = 4 * 1024 * 1024


def looks_like_store(root: Path) -> bool:
    """Whether a folder is a sample store (what a sitting or a merge leaves): its lock file, a
    real/ or scripted/ folder of cells, or a definitions/ folder."""
    return (root / LOCK_NAME).is_file() or any((root / name).is_dir() for name in (*MODEL_KINDS, DEFINITIONS_DIR))


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
            if fields[_F_STATUS] != STATUS_RESCORE:
                held.add(fields[_F_CONDITIONS])
                models.add(fields[_F_REST].split("\t")[_R_MODEL])
    if not models:
        return []
    found: list[str] = []
    for cell in sorted({cell for source in sources for cell in source.cells()}):
        held = conditions_held.get(cell, set())
        foreign: dict[str, int] = {}
        for source in sources:
            for fields in source.cell_rows(cell, []):
                if fields[_F_STATUS] == STATUS_RESCORE:
                    continue
                conditions, model = fields[_F_CONDITIONS], fields[_F_REST].split("\t")[_R_MODEL]
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
    appended: int = 0
    already_there: int = 0  # samples DEST held already (same id)
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
            reserved_for = _reserved_unused(dest, cell, rows)
            next_trial = dest.highest_trial(cell) + 1
            renumbered: dict[str, int] = {}
            batch: list[tuple[Mapping[str, Any], bytes]] = []
            numbers: list[int] = []
            pending = 0
            for source in sources:
                origin = str(source.root.resolve())
                for sample, raw in source.iter_raw(cell, result.problems):
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
                        continue
                    # Before its sample: DEST never holds a sample whose transcript was not yet there.
                    carried = transcript.copy_transcript(merged, source.root, dest.root)
                    if carried != transcript.NONE:
                        result.transcripts[carried] = result.transcripts.get(carried, 0) + 1
                    line = _json_line(merged)
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


def _reserved_unused(dest: Store, cell: Cell, rows: Sequence[list[str]]) -> dict[Any, str]:
    """Trial number -> the sitting DEST reserved it for, for numbers no sample of the cell holds."""
    held = {fields[_F_REST].split("\t")[_R_TRIAL] for fields in rows if fields[_F_STATUS] != STATUS_RESCORE}
    reserved: dict[Any, str] = {}
    for _, raw, _ in _read_lines(dest.reservations_path(cell)):
        try:
            line = json.loads(raw)
            for number in line["trials"]:
                if isinstance(number, int) and str(number) not in held:
                    reserved[number] = str(line["sitting"])
        except (ValueError, TypeError, KeyError):
            continue  # a torn reservation line reserves nothing anyone can claim
    return reserved


def _merge_batch(
    dest: Store, cell: Cell, batch: list[tuple[Mapping[str, Any], bytes]], numbers: list[int], sitting: str
) -> None:
    # Reserve first (as a sitting does), so a crash between the two writes only leaves a gap.
    if numbers:
        _append_bytes(dest.reservations_path(cell), _json_line({"trials": numbers, "sitting": sitting}))
    _write_lines(dest, cell, batch)


def _write_lines(store: Store, cell: Cell, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
    """Append sample lines to the cell in one write, then their index rows (the caller holds the lock;
    an OSError means the samples file did not take them, a failing index write loses nothing)."""
    payload = b"".join(line for _, line in lines)
    end = _append_bytes(store.samples_path(cell), payload)
    _append_index(store, cell, end - len(payload), lines)


def _append_index(store: Store, cell: Cell, start: int, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
    """Index rows for lines appended at `start` (under the lock). The index is a cache: written
    without fsync, and a failure to write it loses nothing (reading parses what it lacks). A cell
    without an index (a store written by an earlier plugin, or an index removed by hand) gets one
    for all its samples first, once."""
    samples, index = store.samples_path(cell), store.index_path(cell)
    try:
        if start and not index.exists():
            _append_bytes(index, _whole_index(samples, start), sync=False)
        _append_bytes(index, _index_rows_for(samples, index, start, lines), sync=False)
    except OSError:
        pass


def _whole_index(samples: Path, stop: int) -> bytes:
    """Index rows for every readable line in the first `stop` bytes of a samples file."""
    chain = prior = position = 0
    out = []
    seen = _seen(os.stat(samples))
    with samples.open("rb") as handle:
        for raw in handle:
            end = position + len(raw)
            if end > stop:
                break
            chain = zlib.crc32(raw, chain)
            try:
                sample = json.loads(raw)
            except ValueError:
                sample = None
            if isinstance(sample, dict):
                row = _signed(_row_of(sample, position, end, zlib.crc32(raw)), chain, prior, seen)
                prior = zlib.crc32(row, prior)
                out.append(row)
            position = end
    return b"".join(out)


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


def sample_line(sample: Mapping[str, Any]) -> bytes:
    """The sample as the store writes it: one line of JSON (what Store.append_line takes)."""
    return _json_line(sample)


def _json_line(value: Mapping[str, Any]) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:  # an unpaired surrogate (a file name that is not UTF-8): kept, as a \u escape
        return (json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=False) + "\n").encode()
