"""What the agent leaves behind, handled as hostile input: removed, read and printed safely.

After a trial the harness deletes the trial's folders, reads the execution audit's logs and prints
reasons that quote what the agent made. Everything in those folders was under the agent's control:
a folder nested thousands deep (shutil.rmtree recurses and raises RecursionError on Python 3.11), a
symbolic or hard link to a file outside (bench.toml), a FIFO (a reader blocks for ever), a device, a
sparse file of a terabyte, a name full of terminal escape sequences. So:

- `remove_tree` deletes a folder without ever following a link out of it: every step is relative
  to an open handle of the folder being emptied (so no path is ever too long and a symlink swapped
  in mid-way is removed, not followed), it never crosses onto another file system, never opens
  anything but folders, keeps one folder handle open however deep the tree, makes a folder the
  agent locked (chmod 000) its own again, stops at a time limit and reports what it left;
- `read_regular` / `read_folder` read only regular files with one name, refusing links, FIFOs,
  sockets and devices before opening them, and nothing over a size limit;
- `printable` writes every control character, terminal escape and bidirectional override of a
  text as a visible escape, for the places text is shown (the store keeps the JSON as it is).

Pure standard library; knows nothing of pytest or of trials.
"""

from __future__ import annotations

import errno
import os
import stat
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "REMOVAL_TIME_LIMIT_S",
    "Removal",
    "remove_tree",
    "Refused",
    "read_regular",
    "read_folder",
    "printable",
]

REMOVAL_TIME_LIMIT_S = 30.0  # per trial: a tree the agent grew faster than this is left, and said so
LEFT_SHOWN = 20  # paths named in a Removal's report (the count covers all)
PATH_SHOWN = 200  # characters of one left path shown (its end: the deepest names say most)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FOLDER_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
# Relative-to-a-handle calls (openat, unlinkat, fstatat, fdopendir): Linux, macOS and the BSDs.
_BY_HANDLE = (
    {os.open, os.stat, os.unlink, os.rmdir} <= os.supports_dir_fd and os.scandir in os.supports_fd and bool(_DIRECTORY)
)


# --------------------------------------------------------------------------------------------
# Removal
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Removal:
    """What `remove_tree` did: `complete` when nothing of the folder is left."""

    root: str
    removed: int  # entries removed (files, links, FIFOs... and folders)
    left: tuple[str, ...] = ()  # up to LEFT_SHOWN paths left behind, relative to root, each with why
    left_count: int = 0
    timed_out: bool = False
    time_limit_s: float = REMOVAL_TIME_LIMIT_S

    @property
    def complete(self) -> bool:
        return not self.left_count and not self.timed_out

    def describe(self) -> str:
        """One line for the sample: what was left of the trial's folders and why."""
        if self.complete:
            return f"removed {self.root} ({self.removed} entries)"
        parts = []
        if self.timed_out:
            parts.append(f"the time limit of {self.time_limit_s:g} s was reached")
        if self.left_count:
            more = f" (+{self.left_count - len(self.left)} more)" if self.left_count > len(self.left) else ""
            parts.append(f"{self.left_count} entries could not be removed: {'; '.join(self.left)}{more}")
        return f"{self.root} was not removed entirely ({self.removed} entries removed): {', '.join(parts)}"

    def as_dict(self) -> dict[str, object]:
        return {
            "root": self.root,
            "removed": self.removed,
            "left": list(self.left),
            "left_count": self.left_count,
            "timed_out": self.timed_out,
            "time_limit_s": self.time_limit_s,
            "description": self.describe(),
        }


def remove_tree(root: Path, *, time_limit_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> Removal:
    """Delete `root` and everything in it, never following a link; never raises (see the module
    docstring). `root` itself may be a link or a file: then only that name is removed. The time
    limit is REMOVAL_TIME_LIMIT_S unless given."""
    limit = REMOVAL_TIME_LIMIT_S if time_limit_s is None else time_limit_s
    remover = _Remover(Path(root), clock() + limit, clock)
    try:
        if _BY_HANDLE:
            remover.by_handle()
        else:
            remover.by_path()
    except Exception as exc:  # noqa: BLE001 - a removal must never cost the trial its sample
        remover.leave("", f"removal stopped: {type(exc).__name__}: {exc}")
    return Removal(str(root), remover.removed, tuple(remover.left), remover.left_count, remover.timed_out, limit)


@dataclass
class _Folder:
    """A folder being emptied: how to find it again from below, and what is still to visit in it."""

    name: str
    identity: tuple[int, int]  # (st_dev, st_ino): checked when climbing back up to it
    subfolders: list[str] = field(default_factory=list)
    revisits: dict[str, int] = field(default_factory=dict)
    incomplete: bool = False  # something below could not be removed: do not try to remove this folder


class _Remover:
    def __init__(self, root: Path, deadline: float, clock: Callable[[], float]) -> None:
        self.root = root
        self.deadline = deadline
        self.clock = clock
        self.removed = 0
        self.left: list[str] = []
        self.left_count = 0
        self.timed_out = False
        self.device: int | None = None  # the root's file system: never left
        self.fd = -1  # the folder open now (by handle)

    def leave(self, path: str, why: str) -> None:
        self.left_count += 1
        if len(self.left) < LEFT_SHOWN:
            shown = path if len(path) <= PATH_SHOWN else "..." + path[-PATH_SHOWN:]
            self.left.append(f"{shown or '.'}: {why}")

    def out_of_time(self) -> bool:
        if not self.timed_out and self.clock() > self.deadline:
            self.timed_out = True
        return self.timed_out

    # -- by handle: openat/unlinkat relative to the folder being emptied -------------------------

    def by_handle(self) -> None:
        try:
            self.fd = os.open(self.root.parent, os.O_RDONLY | _DIRECTORY | _CLOEXEC)  # the harness's own folder
        except FileNotFoundError:
            return
        try:
            start = os.fstat(self.fd)
            self._walk([_Folder("", (start.st_dev, start.st_ino), [self.root.name])])
        finally:
            os.close(self.fd)  # whichever folder is open now, also when something raised mid-way

    def _walk(self, stack: list[_Folder]) -> None:
        """Empty and remove every folder on the stack, deepest first, with one folder open at a
        time (self.fd: the deepest one on the stack)."""
        fd = self.fd
        while stack:
            here = stack[-1]
            if self.out_of_time():
                self.leave(self._path(stack), "left when the time limit was reached")
                return
            if here.subfolders:
                name = here.subfolders.pop()
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    self.leave(self._path(stack, name), _why(exc))
                    here.incomplete = True
                    continue
                if not stat.S_ISDIR(info.st_mode):  # a link or file (the root itself, or replaced since listed)
                    self._unlink(fd, name, stack)
                    continue
                if self.device is None:
                    self.device = info.st_dev
                if info.st_dev != self.device:
                    self.leave(self._path(stack, name), "another file system is mounted here; not entered")
                    here.incomplete = True
                    continue
                try:
                    child = self._open_folder(fd, name, (info.st_dev, info.st_ino))
                except OSError as exc:
                    self.leave(self._path(stack, name), _why(exc))
                    here.incomplete = True
                    continue
                os.close(fd)
                self.fd = fd = child
                stack.append(_Folder(name, (info.st_dev, info.st_ino)))
                try:
                    self._clear(fd, stack)
                except OSError as exc:
                    self.leave(self._path(stack), _why(exc))
                    stack[-1].incomplete = True
                continue
            if len(stack) == 1:
                return  # the root's parent: done
            try:
                up = os.open("..", _FOLDER_FLAGS, dir_fd=fd)
            except OSError as exc:
                self.leave(self._path(stack), f"cannot return to its parent folder: {_why(exc)}")
                return
            parent_info = os.fstat(up)
            if (parent_info.st_dev, parent_info.st_ino) != stack[-2].identity:
                os.close(up)
                self.leave(self._path(stack), "moved out of the tree while being removed; stopped")
                return
            os.close(fd)
            self.fd = fd = up
            done = stack.pop()
            parent = stack[-1]
            if done.incomplete:
                parent.incomplete = True
                continue
            self._rmdir(fd, done.name, stack)

    def _clear(self, fd: int, stack: list[_Folder]) -> None:
        """Unlink every entry of the folder open as `fd` that is not a folder; list its subfolders."""
        here = stack[-1]
        with os.scandir(fd) as entries:
            for count, entry in enumerate(entries):
                if count % 256 == 255 and self.out_of_time():
                    return
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_folder = False
                if is_folder:
                    here.subfolders.append(entry.name)
                else:
                    self._unlink(fd, entry.name, stack)

    def _unlink(self, fd: int, name: str, stack: list[_Folder]) -> None:
        here = stack[-1]
        try:
            _retry_writable(fd, lambda: os.unlink(name, dir_fd=fd), ours=len(stack) > 1)
            self.removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno == errno.EISDIR:  # became a folder since it was listed
                here.subfolders.append(name)
                return
            self.leave(self._path(stack, name), _why(exc))
            here.incomplete = True

    def _rmdir(self, fd: int, name: str, stack: list[_Folder]) -> None:
        parent = stack[-1]
        try:
            _retry_writable(fd, lambda: os.rmdir(name, dir_fd=fd), ours=len(stack) > 1)
            self.removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            revisits = parent.revisits.get(name, 0)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and revisits < 3:
                parent.revisits[name] = revisits + 1  # something still running added entries: empty it again
                parent.subfolders.append(name)
                return
            self.leave(self._path(stack, name), _why(exc))
            parent.incomplete = True

    def _open_folder(self, fd: int, name: str, identity: tuple[int, int]) -> int:
        try:
            child = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
        except PermissionError:
            _make_ours(fd, name)  # a folder the agent locked (chmod 000)
            child = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
        info = os.fstat(child)
        if (info.st_dev, info.st_ino) != identity:
            os.close(child)
            raise OSError(errno.ESTALE, "replaced while being removed")
        return child

    def _path(self, stack: list[_Folder], name: str = "") -> str:
        if len(stack) == 1:
            return ""  # the root itself
        names = [folder.name for folder in stack[2:]]  # below the root's parent and the root
        return "/".join([*names, name] if name else names)

    # -- by path: where the system has no handle-relative calls (Windows) ----------------------

    def by_path(self) -> None:
        root = str(self.root)
        try:
            info = os.lstat(root)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode) or _is_junction(root):
            self._remove_path(os.unlink, root, "")
            return
        pending: list[tuple[str, bool]] = [(root, False)]  # (folder, already emptied)
        while pending:
            if self.out_of_time():
                self.leave("", "left when the time limit was reached")
                return
            folder, emptied = pending.pop()
            relative = os.path.relpath(folder, root) if folder != root else ""
            if emptied:
                self._remove_path(os.rmdir, folder, relative)
                continue
            pending.append((folder, True))
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                self.leave(relative, _why(exc))
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and not _is_junction(entry.path):
                    pending.append((entry.path, False))
                else:
                    self._remove_path(os.unlink, entry.path, os.path.join(relative, entry.name))

    def _remove_path(self, remove: Callable[[str], None], path: str, relative: str) -> None:
        try:
            remove(path)
            self.removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            if isinstance(exc, PermissionError):
                try:
                    os.chmod(path, stat.S_IWRITE | stat.S_IREAD | stat.S_IEXEC)  # Windows: read-only flag
                    remove(path)
                    self.removed += 1
                    return
                except OSError:
                    pass
            self.leave(relative, _why(exc))


def _retry_writable(fd: int, action: Callable[[], None], *, ours: bool) -> None:
    """Run `action` (an unlink or rmdir in the folder open as fd); if the folder was made read-only,
    make it writable by its handle and try once more. Only a folder of the tree (`ours`): the
    root's parent is the harness's, and is never changed."""
    try:
        action()
    except PermissionError as refused:
        if not ours:
            raise
        try:
            os.fchmod(fd, 0o700)
        except OSError:
            raise refused from None  # the folder is not ours to change: report the first refusal
        action()


def _make_ours(fd: int, name: str) -> None:
    """chmod 0700 on the folder `name` without following a link that may have replaced it."""
    path_flag = getattr(os, "O_PATH", 0)
    if path_flag and os.path.isdir("/proc/self/fd"):
        handle = os.open(name, path_flag | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # this exact folder, whatever its name now holds
        finally:
            os.close(handle)
    else:
        os.chmod(name, 0o700, dir_fd=fd, follow_symlinks=False)


def _is_junction(path: str) -> bool:
    is_junction = getattr(os.path, "isjunction", None)  # Python 3.12+ (Windows junctions)
    return bool(is_junction(path)) if is_junction else False


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


class Refused(Exception):
    """A file the harness will not read: the message says why (a link, a FIFO, too large...)."""


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def read_regular(path: str | Path, *, limit: int, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file with one name, at most `limit` of them; raise Refused otherwise.

    Looked at before it is opened (a FIFO or device is never opened), opened without following a
    link and without blocking, and checked again once open (the same file, still regular)."""
    try:
        before = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise Refused(_why(exc)) from None
    _check_regular(before, limit)
    try:
        fd = os.open(path, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise Refused(_why(exc)) from None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise Refused("replaced while being read")
        _check_regular(opened, limit)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Refused(f"grew over the limit of {limit} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_regular(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise Refused(f"{kind}, not a regular file")
    if info.st_nlink != 1:
        raise Refused(f"a file with {info.st_nlink} names (a hard link may lead outside the trial's folders)")
    if info.st_size > limit:
        raise Refused(f"{info.st_size} bytes, over the limit of {limit}")


def read_folder(
    folder: str | Path, *, suffix: str, limit: int, count_limit: int, total_limit: int | None = None
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The files named `*suffix` directly in `folder` (the folder itself not reached through a link):
    ({name: bytes} of those read, {name: why} of those refused; "." when the folder itself is refused).
    At most `count_limit` files are read, each at most `limit` bytes (read_regular), and no file once
    `total_limit` bytes have been read (by default count_limit * limit)."""
    budget = count_limit * limit if total_limit is None else total_limit
    read: dict[str, bytes] = {}
    refused: dict[str, str] = {}
    try:
        if os.path.islink(folder):
            raise OSError(errno.ELOOP, "a symbolic link, not a folder")
        fd = os.open(folder, _FOLDER_FLAGS) if _BY_HANDLE else None
    except OSError as exc:
        return read, {".": "a symbolic link, not a folder" if exc.errno == errno.ELOOP else _why(exc)}
    try:
        with os.scandir(fd if fd is not None else folder) as entries:
            names = sorted(entry.name for entry in entries if entry.name.endswith(suffix))
        for name in names:
            if len(read) >= count_limit:
                refused[name] = f"over the limit of {count_limit} files"
                continue
            try:
                data = read_regular(name if fd is not None else os.path.join(folder, name), limit=min(limit, budget), dir_fd=fd)
            except Refused as exc:
                refused[name] = str(exc) if budget >= limit else f"{exc} (what is left of the total limit of {total_limit} bytes)"
                continue
            read[name] = data
            budget -= len(data)
    finally:
        if fd is not None:
            os.close(fd)
    return read, refused


# --------------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------------

# Format characters that are visible in no text but reorder or hide what follows (bidirectional
# overrides and isolates, zero-width spaces). The zero-width joiner stays: emoji are built with it.
_KEPT_FORMAT = {"\u200d"}


def printable(text: str, *, newlines: bool = False) -> str:
    """`text` with every character a terminal or viewer would act on instead of showing written as
    an escape: control characters (ESC, BEL, CR, backspace, DEL, the C1 range), line and paragraph
    separators, bidirectional and other invisible format characters, unpaired surrogates. Tabs stay;
    newlines stay only when `newlines` is true. Escapes look like Python's: \\x1b, \\u202e."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable() or char == "\t" or (newlines and char == "\n") or char in _KEPT_FORMAT:
            out.append(char)
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)  # other spaces (no-break, ideographic), private-use and unassigned: shown as they are
    return "".join(out)
