"""Appending to the store's files: one O_APPEND write, flushed and fsynced (the caller holds the
store lock), a torn last line terminated first; a sample's line, then its index rows."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from .index import index_rows_for, older_format, whole_index
from .layout import Cell, Layout, StoreError


def cause(exc: OSError) -> str:
    return f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc.strerror or exc)


def append_bytes(path: Path, payload: bytes, *, sync: bool = True) -> int:
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
        fsync_directory(path.parent)
    return end


def fsync_directory(directory: Path) -> None:
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


def write_lines(store: Layout, cell: Cell, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
    """Append sample lines to the cell in one write, then their index rows (the caller holds the lock;
    an OSError means the samples file did not take them, a failing index write loses nothing)."""
    payload = b"".join(line for _, line in lines)
    end = append_bytes(store.samples_path(cell), payload)
    append_index(store, cell, end - len(payload), lines)


def append_index(store: Layout, cell: Cell, start: int, lines: Sequence[tuple[Mapping[str, Any], bytes]]) -> None:
    """Index rows for lines appended at `start` (under the lock). The index is a cache: written
    without fsync, and a failure to write it loses nothing (reading parses what it lacks). A cell
    without an index (a store written by an earlier plugin, or an index removed by hand) gets one
    for all its samples first, once; so does one written in an older row format (replaced whole, so a
    reader sees the old index or the new one, never half of each)."""
    samples, index = store.samples_path(cell), store.index_path(cell)
    try:
        if start and older_format(index):
            rebuilt = index.with_suffix(f".tmp-{os.getpid()}")
            rebuilt.write_bytes(whole_index(samples, start))
            os.replace(rebuilt, index)
        elif start and not index.exists():
            append_bytes(index, whole_index(samples, start), sync=False)
        append_bytes(index, index_rows_for(samples, index, start, lines), sync=False)
    except OSError:
        pass


def write_definitions_file(path: Path, definitions: Mapping[str, Any], root: Path) -> None:
    """Write a definitions file whole (under the lock): through a temporary file, fsynced, then renamed
    into place, so no reader ever sees half of one."""
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
        raise StoreError(f"could not write to the store {root}: {cause(exc)}") from exc
    fsync_directory(path.parent)
