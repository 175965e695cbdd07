"""The store's line format: one sample a line of JSON, and reading such files line by line.

A line that is not a JSON object is a Problem with its line number, never an exception, so a torn
write never hides the rest of the store; a sample id read before is a `duplicate` problem."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layout import DUPLICATE, Problem, StoreError


def json_line(value: Mapping[str, Any]) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:  # an unpaired surrogate (a file name that is not UTF-8): kept, as a \u escape
        return (json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=False) + "\n").encode()


def sample_line(sample: Mapping[str, Any]) -> bytes:
    """The sample as the store writes it: one line of JSON (what Store.append_line takes)."""
    return json_line(sample)


@dataclass(frozen=True)
class StoreLine:
    """A sample together with its store line, one made from the other, so that neither is encoded
    or parsed twice on the way into the store (a worker's spool writes it, the controller appends it)."""

    sample: Mapping[str, Any]
    line: bytes

    @classmethod
    def of(cls, sample: Mapping[str, Any]) -> StoreLine:
        return cls(sample, sample_line(sample))

    @classmethod
    def parse(cls, line: bytes) -> StoreLine:
        """A line as it arrives (a worker's spool wrote it); StoreError for anything but one JSON
        object on one line ending in a newline."""
        if not isinstance(line, bytes):
            raise StoreError(f"a sample line must be bytes, got {type(line).__name__}")
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise StoreError("a sample line must be one line ending in a newline")
        try:
            sample = json.loads(line)
        except ValueError as exc:
            raise StoreError(f"a sample line is not JSON ({exc})") from None
        if not isinstance(sample, dict):
            raise StoreError("a sample line is not a JSON object")
        return cls(sample, line)


def read_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
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


def decode(path: Path, number: int, raw: bytes, terminated: bool, problems: list[Problem]) -> dict[str, Any] | None:
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


def parse_jsonl(path: Path, problems: list[Problem], seen: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Every sample of a samples file, parsed line by line; a sample id already in `seen` is
    reported as a duplicate and skipped (pass a dict to share it across files or stores)."""
    seen = {} if seen is None else seen
    for number, raw, terminated in read_lines(path):
        sample = decode(path, number, raw, terminated, problems)
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


def raw_samples(path: Path, problems: list[Problem]) -> Iterator[tuple[dict[str, Any], bytes]]:
    """(sample, its line) for every readable line of a samples file, duplicates included (merge)."""
    for number, raw, terminated in read_lines(path):
        sample = decode(path, number, raw, terminated, problems)
        if sample is not None:
            yield sample, raw


def tail(path: Path, limit: int) -> tuple[int, bytes]:
    """(file size, its last `limit` bytes); (0, b"") for a missing file."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            return size, handle.read()
    except FileNotFoundError:
        return 0, b""
