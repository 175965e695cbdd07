"""The bytes and entries under a trial's writable folders, kept current as they change (inotify).

A count by walking the folders is exact but late: a program creates tens of thousands of files a
second, so a walk every second let one command make twice the files its limit allows. Here every
folder under the writable ones is watched (the ones created later as soon as their creation is
read, and what they already hold counted then), and each creation, deletion, move and write
updates the figures: an entry added or removed, the file's size on disk read again (its size at the
last full count is kept, so rewriting a file that was there adds only what it grew by).

A full count (`recount`) still walks everything, as limits.usage does and with the same result:
at the start, after the kernel dropped events (its queue is full), after a folder moved (the paths
of the watches under it changed), and now and then to correct what the events cannot tell (a folder
moved out takes its entries along unseen). Where inotify is missing or no watch could be added, the
counts come from the walks alone (`available`, `complete`).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Container, Iterable, Iterator

__all__ = ["FileEvents"]

IN_MODIFY = 0x2
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
WATCHED = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
READ_SIZE = 32 * 1024  # about a thousand events


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch  # noqa: B018  (present where inotify is)
    except (OSError, AttributeError):
        return None
    libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    return libc


def entries_below(top: str, device: int, skip: Container[str]) -> Iterator[tuple[str, int, bool, bool]]:
    """Every file, folder and link below `top`: (path, bytes on disk, is a folder, entered), never
    following a link, never entering another file system (`device` is top's) nor a folder in `skip`.
    A folder is listed after the caller has seen it (entered: it will be)."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    is_folder = entry.is_dir(follow_symlinks=False)
                    entered = is_folder and info.st_dev == device and entry.path not in skip
                    yield entry.path, info.st_blocks * 512, is_folder, entered
                    if entered:
                        stack.append(entry.path)
        except OSError:
            continue

class FileEvents:
    """Bytes on disk and entries under `folders` (never following a link, never entering another
    file system nor a folder in `skip`), kept current by inotify between full counts."""

    def __init__(self, folders: Iterable[str], skip: Iterable[str] = ()) -> None:
        self.folders = list(dict.fromkeys(os.path.realpath(folder) for folder in folders))
        self.skip = {os.path.realpath(path) for path in skip}
        self.bytes = 0
        self.entries = 0
        self.complete = True  # every folder is watched (else only the walks count)
        self.stale = True  # the figures need a full count before they can be trusted
        self.overflows = 0  # times the kernel's queue of events overflowed
        self._sizes: dict[str, int] = {}  # file -> bytes on disk as last read
        self._watches: dict[int, str] = {}  # watch descriptor -> folder
        self._watched: set[str] = set()  # the folders watched (counted) so far
        self._devices: dict[str, int] = {}  # each top folder's file system
        self._libc = _libc()
        self.fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC) if self._libc is not None else -1

    @property
    def available(self) -> bool:
        return self.fd >= 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def recount(self) -> tuple[int, int]:
        """Walk every folder (watching each one), and start the figures again from what is there."""
        self.bytes = self.entries = 0
        self._sizes.clear()
        self._watched.clear()
        self.complete = True
        for top in self.folders:
            if top in self.skip:
                continue
            try:
                self._devices[top] = os.lstat(top).st_dev
            except OSError:
                continue
            self._watch(top)
            self._walk(top, self._devices[top])
        self.stale = False  # events that follow and the walk saw are not counted twice (see _apply)
        return self.bytes, self.entries

    def read(self) -> bool:
        """Apply the next batch of events that arrived (at most READ_SIZE bytes of them, so the
        figures can be judged between batches); True when there was one."""
        if self.fd < 0:
            return False
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            self.stale = True
            return False
        self._apply(data)
        return bool(data)

    def _apply(self, data: bytes) -> None:
        at = 0
        resized: dict[str, None] = {}  # files written to: read once per batch of events
        while at + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
            name = data[at + _EVENT.size : at + _EVENT.size + length].split(b"\0", 1)[0]
            at += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                self.stale = True
                self.overflows += 1
                continue
            if mask & IN_IGNORED:
                self._watched.discard(self._watches.pop(wd, ""))
                continue
            folder = self._watches.get(wd)
            if folder is None or not name:
                continue
            path = f"{folder}/{os.fsdecode(name)}"
            if mask & (IN_CREATE | IN_MOVED_TO):
                if path in self._watched:  # a folder the walk under way already counted
                    continue
                if path in self._sizes:  # a file it counted
                    self._resize(path)
                    continue
                self.entries += 1
                if mask & IN_ISDIR:
                    self._added_folder(path, folder)
                elif mask & IN_MOVED_TO:  # a file moved in brings its bytes; a created one has none yet
                    resized[path] = None
                else:
                    self._sizes[path] = 0
            elif mask & (IN_DELETE | IN_MOVED_FROM):
                resized.pop(path, None)
                self.entries -= 1
                self.bytes -= self._sizes.pop(path, 0)
                if mask & IN_ISDIR and mask & IN_MOVED_FROM:
                    self.stale = True  # its watches now name the wrong paths, and its entries left unseen
            elif mask & (IN_MODIFY | IN_CLOSE_WRITE):
                resized[path] = None
        for path in resized:
            self._resize(path)

    def _added_folder(self, path: str, parent: str) -> None:
        """A folder created or moved in: watched from now on, and what it already holds counted."""
        if path in self.skip:
            return
        device = next((dev for top, dev in self._devices.items() if parent == top or parent.startswith(top + "/")), None)
        try:
            info = os.lstat(path)
        except OSError:
            return
        self.bytes += info.st_blocks * 512
        if device is not None and info.st_dev == device:
            self._watch(path)
            self._walk(path, device)

    def _resize(self, path: str) -> None:
        try:
            size = os.lstat(path).st_blocks * 512
        except OSError:
            return
        self.bytes += size - self._sizes.get(path, 0)
        self._sizes[path] = size

    def _watch(self, folder: str) -> None:
        if self._libc is None or self.fd < 0:
            self.complete = False
            return
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), WATCHED | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
        if wd < 0:
            self.complete = False  # no watches left (fs.inotify.max_user_watches), or it went away
            return
        self._watches[wd] = folder
        self._watched.add(folder)

    def _walk(self, top: str, device: int) -> None:
        """Count (and watch) what `top` holds, below it too."""
        for path, size, is_folder, entered in entries_below(top, device, self.skip):
            self.entries += 1
            self.bytes += size
            if entered:
                self._watch(path)  # before the walk lists it, so nothing made meanwhile is missed
            elif not is_folder:
                self._sizes[path] = size
