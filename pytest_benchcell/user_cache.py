"""The plugin's folder in the user's cache: what is worth keeping between sittings on this machine
and is safe to lose (the exec notifier's build, the pre-flights that passed, what the arms'
binaries' start-ups ran).

`$XDG_CACHE_HOME/pytest-benchcell`, else `~/.cache/pytest-benchcell`, else, where HOME cannot be
written, `pytest-benchcell-UID` in the temporary folder, made by and for this user alone. A folder
that another user could write is not used: what the plugin reads back from it (a program it runs,
a pre-flight it skips) must be its own. Knows nothing of pytest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

KEPT_S = 24 * 3600  # how long a kept record is trusted without a change its key sees


def cache_folders() -> list[Path]:
    """Where the cache may be, in order: the user's cache folder, else a folder of this user's own
    in the temporary folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [Path(base) / "pytest-benchcell", Path(tempfile.gettempdir()) / f"pytest-benchcell-{os.geteuid()}"]


def cache_folder() -> Path | None:
    """The first of cache_folders() that is this user's own (made here when missing), else None."""
    return next((folder for folder in cache_folders() if own_folder(folder)), None)


def own_folder(folder: Path) -> bool:
    """Whether `folder` exists or was made here, is this user's and writable by no one else."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = folder.stat()
    except OSError:
        return False
    return status.st_uid == os.geteuid() and not status.st_mode & 0o022 and os.access(folder, os.W_OK)


def files_digest(root: Path, *, skip_names: frozenset[str] = frozenset(), skip_paths: frozenset[str] = frozenset(),
                 limit: int | None = None) -> str:
    """The files below `root` by relative name, size and modification time, as one hash: a file
    added, removed, replaced or edited changes it. Folders named in `skip_names`, or whose real path
    is in `skip_paths`, are not entered; after `limit` files the rest is not read ("+more")."""
    digest = hashlib.sha256()
    count = 0
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(
            name for name in folders
            if name not in skip_names and os.path.realpath(os.path.join(folder, name)) not in skip_paths
        )  # fmt: skip
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                status = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, root)}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
            count += 1
            if limit is not None and count >= limit:
                return digest.hexdigest() + "+more"
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def plugin_digest() -> str:
    """The plugin's own files (its sandbox, its audit, its pre-flight): a plugin installed or edited
    anew checks again."""
    return files_digest(Path(__file__).resolve().parent, skip_names=frozenset({"__pycache__"}))


@functools.lru_cache(maxsize=1)
def machine() -> list[str]:
    """This machine as far as a kept record may depend on it: host, kernel, architecture, boot."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return [socket.gethostname(), platform.release(), platform.machine(), boot]


class Records:
    """Small JSON records in `folder` (None: nothing is kept), each trusted for KEPT_S after it was
    written. Each is written whole and renamed into place, so concurrent processes and a torn write
    leave either a complete record or none; one that cannot be read is no record."""

    def __init__(self, folder: Path | None, *, now: float | None = None) -> None:
        self.folder = folder
        self.now = time.time() if now is None else now

    @classmethod
    def in_cache(cls, name: str) -> Self:
        """The records of the subfolder `name` of the user's cache (none kept without a cache of our own)."""
        base = cache_folder()
        return cls(base / name if base is not None else None)

    def recall(self, key: str) -> dict[str, Any] | None:
        """The record kept under `key` when it is younger than KEPT_S (and not from the future), else None."""
        if self.folder is None:
            return None
        try:
            record = json.loads((self.folder / f"{key}.json").read_text())
            kept_at = float(record["kept_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not 0 <= self.now - kept_at <= KEPT_S:
            return None
        return dict(record)

    def remember(self, key: str, record: Mapping[str, Any]) -> None:
        """Keep a record (best effort: a cache that cannot be written only means the work is done again)."""
        if self.folder is None:
            return
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.folder, prefix=".record-", delete=False) as handle:
                json.dump({**record, "kept_at": self.now}, handle)
            os.replace(handle.name, self.folder / f"{key}.json")
        except OSError:
            return
        _prune_once(self.folder, self.now)

    def forget(self, key: str) -> None:
        if self.folder is not None:
            try:
                (self.folder / f"{key}.json").unlink()
            except OSError:
                pass


_PRUNED: set[Path] = set()


def _prune_once(folder: Path, now: float) -> None:
    """Delete the records too old to be trusted (and leftovers of an interrupted write), once per
    process and folder, so the cache does not grow with every binary ever probed."""
    if folder in _PRUNED:
        return
    _PRUNED.add(folder)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > KEPT_S:
                os.unlink(entry.path)
        except OSError:
            pass
