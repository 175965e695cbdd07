"""The checked index: one row per appended sample beside its samples file, a cache that only
accelerates (counting, fill and reports read rows instead of parsing samples).

`index_rows_for` and `whole_index` make rows (appending.py writes them under the lock); `IndexReader`
reads a cell through them, using a row only where it checks out and parsing what no valid row covers;
`summary_of` turns a row into the fields a report reads."""

from __future__ import annotations

import json
import mmap
import os
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import skill_use
from ..harness_broke import harness_broke
from ..prices import pricing_text
from ..sample import TOKEN_COMPONENTS, conditions_of, scoring_of
from .layout import DUPLICATE, Cell, Problem
from .lines import decode, tail

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
# The tag names the row format: rows of another tag are not rows (their samples are parsed), and an
# index written in an older format is rebuilt whole at the cell's next append (appending.append_index).
# `broke` is "1" when the harness broke the trial (harness_broke.py): the row keeps the stored verdict,
# and readers judge it (store/reading.effective), as they would the sample itself.
# `pricing` is what prices.py needs of the usage beyond its total (per-model totals, each request with
# its cache-write split), as compact JSON: a report prices the row at the prices in force (b7 on).
_ROW_TAG = "b7"
_ROW_FIELDS = (
    "tag", "id", "start", "end", "crc", "status", "conditions", "scoring", "outcome", "rescore_of", "broke",
    "tokens", "turns", "duration_ms", "cost_usd", "model", "tier", "bonus", "started_at", "trial", "sitting",
    "host", "gateway", "skill", "pricing",
)  # fmt: skip
(F_TAG, F_ID, F_START, F_END, F_CRC, F_STATUS, F_CONDITIONS, F_SCORING, F_OUTCOME, F_RESCORE_OF, F_BROKE,
 F_REST) = range(12)  # fmt: skip
# `skill` is skill_use.index_text: whether the trial used its arm's skill, and how it was delivered.
# A row is kept split only as far as counting needs (F_REST holds the rest, split for reports).
(R_TOKENS, R_TURNS, R_DURATION, R_COST, R_MODEL, R_TIER, R_BONUS, R_STARTED, R_TRIAL, R_SITTING, R_HOST,
 R_GATEWAY, R_SKILL, R_PRICING) = range(14)  # fmt: skip
_ROW_LENGTH = len(_ROW_FIELDS) + 4  # plus chain, prior, seen, own
_TABS_IN_REST = _ROW_LENGTH - 1 - F_REST  # tabs in the unsplit rest of a complete index line
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


def _where(sample: Mapping[str, Any]) -> tuple[Any, Any]:
    """(host, gateway) from the sample's provenance: where it ran; None for what it does not record."""
    provenance = sample.get("provenance")
    if not isinstance(provenance, dict):
        return None, None
    return provenance.get("host"), provenance.get("gateway")


def older_format(index: Path) -> bool:
    """Whether the index's first row is of an earlier row format (b1, b2...): one to rebuild whole."""
    try:
        with index.open("rb") as handle:
            tag = handle.read(8).split(b"\t", 1)[0]
    except OSError:
        return False
    return tag[:1] == b"b" and tag[1:].isdigit() and tag.decode() != _ROW_TAG


def _row_of(sample: Mapping[str, Any], start: int, end: int, crc: int) -> str:
    """One index row (without its own checksum): what counting and reports need of a sample."""
    fields = (
        _ROW_TAG, sample.get("id"), start, end, f"{crc:08x}", sample.get("status"), conditions_of(sample),
        scoring_of(sample), sample.get("outcome"), sample.get("rescore_of"), "1" if harness_broke(sample) else "",
        _tokens_text(sample), sample.get("turns"),
        agent_ms(sample), sample.get("cost_usd"), sample.get("model"), sample.get("tier"),
        "1" if sample.get("bonus") is True else "", sample.get("started_at") or sample.get("ended_at"),
        sample.get("trial"), sample.get("sitting"), *_where(sample), skill_use.index_text(sample),
        pricing_text(sample.get("usage")),
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


def index_rows_for(samples: Path, index: Path, start: int, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> bytes:
    """The index rows for lines just appended at `start` of the samples file (under the lock).

    The chain continues from the index's last row when that row ends where the new lines begin
    (the common case: reading a small tail of the index); otherwise the samples file before `start`
    is read once to restart it, which heals the chain after any damage."""
    index_size, index_tail = tail(index, INDEX_TAIL_BYTES)
    last = None
    damaged_last = False
    if index_tail.endswith(b"\n"):
        lines_in_tail = index_tail[:-1].rsplit(b"\n", 1)
        last_bytes = lines_in_tail[-1] + b"\n"
        fields = _own_check(lines_in_tail[-1].decode("utf-8", "replace"))
        if fields is not None and (len(lines_in_tail) == 2 or index_size <= INDEX_TAIL_BYTES):
            last = fields
        damaged_last = fields is None
    if last is not None:
        prior = zlib.crc32(last_bytes, int(last[-2], 16))  # the index before the last row, plus it
    else:
        prior = _crc_of_file(index, index_size)
        if index_size and not index_tail.endswith(b"\n"):
            prior = zlib.crc32(b"\n", prior)  # appending.append_bytes terminates a torn row first
        elif damaged_last:
            # A complete last line that fails its own checksum is a damaged row, which would look
            # like any other row once more follow it: the new rows must not vouch for it, so their
            # prior is deliberately not the index's checksum and readers check this index row by row.
            prior ^= 1
    if last is not None and int(last[F_END]) == start:
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
    rest = fields[F_REST].split("\t")
    tokens_text = rest[R_TOKENS]
    total = dict(zip(TOKEN_COMPONENTS, map(int, tokens_text.split(",")))) if tokens_text else None
    summary: dict[str, Any] = {
        "id": fields[F_ID],
        "arm": cell.arm,
        "task": cell.task,
        "model_kind": cell.model_kind,
        "trial": _number(rest[R_TRIAL], int),
        "sitting": rest[R_SITTING] or None,
        "status": fields[F_STATUS],
        "outcome": fields[F_OUTCOME] or None,
        "usage": {"total": total, "pricing": rest[R_PRICING]},
        "turns": _number(rest[R_TURNS], int),
        "duration_ms": _number(rest[R_DURATION], int),
        "cost_usd": _number(rest[R_COST], float),
        "model": rest[R_MODEL] or None,
        "tier": rest[R_TIER] or None,
        "bonus": rest[R_BONUS] == "1",
        "started_at": rest[R_STARTED] or None,
        "provenance": {
            "fingerprint": pool_key if pool_key is not None else fields[F_CONDITIONS],
            "conditions": fields[F_CONDITIONS],
            "scoring": fields[F_SCORING],
            "host": rest[R_HOST] or None,
            "gateway": rest[R_GATEWAY] or None,
        },
    }
    skill = skill_use.from_index_text(rest[R_SKILL])
    summary["skill_use"] = None if skill is None else {"delivery": skill[0], "used": skill[1]}
    if fields[F_RESCORE_OF]:
        summary["rescore_of"] = fields[F_RESCORE_OF]
    if fields[F_BROKE]:
        summary["harness_broke"] = True
    return summary



class IndexReader:
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
        if fields is None or not fields[F_END].isdigit() or int(fields[F_END]) > stat.st_size:
            return False
        if zlib.crc32(index[:cut]) != int(fields[-2], 16):
            return False
        if fields[-1] == _seen(stat):
            return True  # the samples file is untouched since this row was written
        with memoryview(data) as view:
            return zlib.crc32(view[: int(fields[F_END])]) == int(fields[-3], 16)

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
        seen, width, tabs, tag = self.seen, F_REST + 1, _TABS_IN_REST, _ROW_TAG
        seen_before = len(seen)
        with memoryview(data) as view:
            for text in index.decode("utf-8", "replace").split("\n"):
                fields = text.split("\t", F_REST)
                if len(fields) != width or fields[0] != tag or fields[-1].count("\t") != tabs or text[-9:-8] != "\t":
                    continue  # not a complete row (a torn fragment): its sample is parsed below
                if not trusted and _own_check(text) is None:
                    continue
                try:
                    start, end = int(fields[F_START]), int(fields[F_END])
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
                if not trusted and zlib.crc32(view[start:end]) != int(fields[F_CRC], 16):
                    continue  # the bytes there are not the line the row describes
                if start > position:
                    line = self._parse(data, position, start, line, rows)
                sample_id = fields[F_ID]
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
                sample = decode(self.samples_path, line, stripped, raw.endswith(b"\n"), self.problems)
                if sample is not None:
                    self.parsed += 1
                    fields = _row_of(sample, position, end, zlib.crc32(raw)).split("\t", F_REST)
                    sample_id = fields[F_ID]
                    if sample_id and sample_id in self.seen:
                        self._duplicate(sample_id, line)
                    else:
                        if sample_id:
                            self.seen[sample_id] = (self.samples_path, line)
                        rows.append(fields)
            position, line = end, line + 1
        return line


def whole_index(samples: Path, stop: int) -> bytes:
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
