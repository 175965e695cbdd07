"""The mounts: what one trial's commands may see and change (`SandboxPlan`), as bwrap's options,
and the host's places they must cover too (every other mount of a hidden folder, world-writable
folders, root's own files under /etc, the user's credential files)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .network import Endpoint
from .tool import _user_options

# Files and folders of the user's home that hold credentials of other tools.
HOME_CREDENTIALS = (
    ".claude", ".claude.json", ".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".kube", ".docker",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".gnupg", ".password-store", ".local/share/keyrings",
)  # fmt: skip


@dataclass(frozen=True)
class SandboxPlan:
    """What one trial's commands may see and change (all paths absolute)."""

    writable: tuple[str, ...]  # the agent's cwd, the environment's workdir
    readable: tuple[str, ...]  # shown read-only inside hidden folders (PATH folder, snapshots, the arm's files)
    hidden: tuple[str, ...]  # never readable (folders become empty, files /dev/null)
    home: str  # the trial's HOME: an empty tmpfs per command
    endpoints: tuple[Endpoint, ...] = ()
    never: tuple[str, ...] = field(default=())  # hidden again even inside writable or readable paths


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def bwrap_arguments(
    plan: SandboxPlan, *, user_namespace: bool = False, identity: Path | None = None, with_aliases: bool = True
) -> list[str]:
    """bwrap's options for a plan. Order matters: bwrap applies mounts in order, so folders are
    hidden first (at every place the host shows them), then what the arm may read is shown inside
    them, then the writable folders, and last what must never be seen is hidden again wherever it
    is. `user_namespace`: run the command in a user namespace of its own; `identity`: a folder with
    the passwd and group files naming SANDBOX_UID (as root); `with_aliases`: hide the other mounts
    of the hidden folders here (write_prefix hides them itself, only those still there when each
    command starts)."""
    args = [
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]  # fmt: skip
    if user_namespace:
        args.extend(_user_options())
    private = {"/", "/tmp", "/run", "/dev", "/proc"}
    for folder in world_writable_folders():
        if folder not in private:
            args.extend(["--tmpfs", folder])
            private.add(folder)
    if identity is not None:
        for name in ("passwd", "group"):
            args.extend(["--ro-bind", str(identity / name), f"/etc/{name}"])

    def hide(paths: Iterable[str]) -> None:
        for path in sorted(set(paths), key=_depth):
            if not _exists(path) or path in private:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                args.extend(["--tmpfs", path])
            else:
                args.extend(["--ro-bind", "/dev/null", path])

    hidden = [*plan.hidden, *(root_only_files() if os.geteuid() == 0 else ())]
    hide([*hidden, *(mount_aliases(hidden) if with_aliases else ())])
    for path in sorted(set(plan.readable), key=_depth):
        if _exists(path):
            args.extend(["--ro-bind", path, path])
    if plan.home:
        args.extend(["--tmpfs", plan.home])
    for path in sorted(set(plan.writable), key=_depth):
        args.extend(["--bind", path, path])
    hide([*plan.never, *(mount_aliases(plan.never) if with_aliases else ())])
    return args


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# --------------------------------------------------------------------------------------------
# The host: other mounts of a folder, world-writable folders, root's own files
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    device: str  # "major:minor" of the file system
    root: str  # the folder of that file system the mount shows
    point: str  # where it shows it


def read_mounts(text: str) -> list[Mount]:
    """The mounts of a /proc/PID/mountinfo text, in mount order."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            mounts.append(Mount(fields[2], _unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _unescape(field_text: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field_text)


def aliases(path: str, mounts: Sequence[Mount]) -> list[tuple[str, bool]]:
    """Other places where the host shows `path` (an absolute path without symlinks), each with
    whether it is the same file or folder: each other mount of its file system whose folder holds
    it (a bind mount of a parent, a container volume) shows it at the matching place (True), and a
    mount whose folder lies inside it shows a part of it (False)."""
    home = _mount_of(path, mounts)
    if home is None:
        return []
    inside_fs = _join(home.root, os.path.relpath(path, home.point))
    found: dict[str, bool] = {}
    for mount in mounts:
        if mount.device != home.device or mount == home:
            continue
        if _inside(inside_fs, mount.root):
            found.setdefault(_join(mount.point, os.path.relpath(inside_fs, mount.root)), True)
        elif _inside(mount.root, inside_fs):
            found.setdefault(mount.point, False)
    return [(alias, same) for alias, same in found.items() if alias != path]


def _mount_of(path: str, mounts: Sequence[Mount]) -> Mount | None:
    """The mount `path` is on: the deepest mount point above it, the last mounted of equals."""
    best = None
    for mount in mounts:
        if _inside(path, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


def _join(folder: str, relative: str) -> str:
    return os.path.normpath(folder if relative == "." else os.path.join(folder, relative))


def mount_aliases(paths: Iterable[str]) -> list[str]:
    """Other mounts of these files and folders on this host (read from /proc/self/mountinfo), each
    confirmed by device and inode: a place a later mount covers shows something else and is left."""
    try:
        mounts = read_mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            target = os.stat(path)
        except OSError:
            continue
        for alias, same in aliases(os.path.realpath(path), mounts):
            try:
                seen = os.stat(alias)
            except OSError:
                continue
            # A mount showing a part of the folder is a mount point by construction (os.path.ismount
            # cannot tell a bind mount of the same file system from a folder).
            if not same or (seen.st_dev, seen.st_ino) == (target.st_dev, target.st_ino):
                found.append(alias)
    return found


# Where world-writable folders usually are; each one found is made private (an empty tmpfs).
WORLD_WRITABLE_PLACES = ("/var", "/var/lib", "/var/spool", "/var/cache", "/srv", "/opt", "/usr/local", "/home", "/mnt", "/media")


@functools.lru_cache(maxsize=1)
def world_writable_folders() -> tuple[str, ...]:
    """World-writable folders of the host outside /tmp, /run and /dev (each already private): read
    once per process from the usual places and one level below them (/var/tmp, /var/crash,
    /var/lib/php/sessions...). Another user's file or socket left there stays out of reach."""
    found = []
    for place in WORLD_WRITABLE_PLACES:
        for folder in (place, *_subfolders(place)):
            try:
                mode = os.lstat(folder).st_mode
            except OSError:
                continue
            if os.path.isdir(folder) and not os.path.islink(folder) and mode & 0o002:
                found.append(folder)
    return tuple(dict.fromkeys(found))


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


@functools.lru_cache(maxsize=1)
def root_only_files() -> tuple[str, ...]:
    """Files and folders under /etc that other users may not read (shadow, ssh host keys, TLS
    private keys). Started as root, a command is their owner on disk even without capabilities."""
    found = []
    for folder, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not (mode & 0o004) and not os.path.islink(path):
                found.append(path)
        dirs[:] = [name for name in dirs if os.path.join(folder, name) not in found]
    return tuple(found)


def home_credentials(home: str | None = None) -> list[str]:
    """The user's credential files and folders that exist (hidden in the sandbox)."""
    base = home or os.path.expanduser("~")
    return [os.path.join(base, name) for name in HOME_CREDENTIALS if os.path.lexists(os.path.join(base, name))]
