"""Records: parsing one `strace -f` log into the programs that ran (with each one's place in the
process tree), the opens, connects and failed execs they made, and how each process ended."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ExecRecord:
    index: int  # position in its log
    pid: int
    path: str  # the file executed, as passed to execve
    argv: tuple[str, ...]
    parent: int | None  # index of the record above it in the chain (None: the root)
    truncated: bool = False  # strace cut a string or the argv list short
    log: str = ""  # the log it came from


@dataclass(frozen=True)
class Access:
    """One open, connect or failed exec of a traced process: what it tried to reach, and how it went."""

    pid: int
    call: str  # open, openat, connect, execve, execveat
    target: str  # a path as given; for connect HOST:PORT, [ADDRESS]:PORT or unix:PATH
    result: str  # "ok", or the error's name (ENOENT, ECONNREFUSED, EINPROGRESS...)
    record: int | None  # the record of the program the process ran at the call (None: before any)

    @property
    def failed(self) -> bool:
        return self.result != "ok"


@dataclass(frozen=True)
class StraceLog:
    """Everything one command's log holds: the programs, what they opened and reached, how they ended."""

    records: list[ExecRecord]
    accesses: list[Access]
    exits: dict[int, str]  # pid -> "exited with N" / "killed by SIGNAL", as strace said it

    def failed_exit(self, pid: int) -> str | None:
        """How a process ended when that was a failure ("exited with 2", "killed by SIGKILL"), else None."""
        ended = self.exits.get(pid)
        return None if ended is None or ended == "exited with 0" else ended


_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(execve|execveat|fork|vfork|clone|clone3|open|openat|connect)\(")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>")
# The end of a completed call: `) = 3`, `) = -1 ENOENT (No such file or directory)`, `) = ?`
_RESULT = re.compile(r"\)\s+=\s+(-?\d+|\?)(?:\s+(E[A-Z0-9]+)(?:\s+\([^()]*\))?)?")
_EXIT = re.compile(r"^\+\+\+ (exited with \d+|killed by SIG\w+)")
# --pidns-translation: `= 2 /* 30122 in strace's PID NS */`, the child's pid as the log shows it
_TRANSLATED = re.compile(r"/\* (\d+) in strace's PID NS \*/")
_INET = re.compile(r"sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\(\"([0-9.]+)\"\)")
_INET6 = re.compile(r"sa_family=AF_INET6, sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, \"([0-9a-fA-F:.]+)\"")
_UNIX = re.compile(r"sa_family=AF_UNIX, sun_path=(@?)\"")


def parse_strace_log(text: str, log: str = "") -> list[ExecRecord]:
    """Successful program starts from one `strace -f` log, with each one's place in the tree."""
    return parse_strace(text, log).records


def parse_strace(text: str, log: str = "") -> StraceLog:
    """One `strace -f` log: the successful program starts with each one's place in the tree, the
    opens and connects (and failed execs) with the program that made them, and how processes ended.

    Lines of different processes interleave; a call interrupted by another process's output is
    printed as `<unfinished ...>` and completed by a `<... NAME resumed>` line, which is joined here.
    A child's first line can come before its parent's fork returns, so parents are resolved after
    the whole log is read.
    """
    pending: dict[int, str] = {}
    calls: list[tuple[int, str]] = []  # (pid, the whole call text), in order of completion
    exits: dict[int, str] = {}
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match is None:
            continue
        pid, rest = int(match.group(1)), match.group(2)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            rest = pending.pop(pid, f"{resumed.group(1)}(") + rest[resumed.end() :]
        if _CALL.match(rest):
            calls.append((pid, rest))
            continue
        ended = _EXIT.match(rest)
        if ended is not None:
            exits[pid] = ended.group(1)

    # A process cannot exec while its own fork is in progress, so the image a child starts with is
    # its parent's latest image before the fork returned, wherever the child's own lines fall.
    execs: list[tuple[int, int, str, tuple[str, ...], bool]] = []  # (position, pid, path, argv, truncated)
    forks: dict[int, tuple[int, int]] = {}  # child pid -> (parent pid, position of the fork)
    reached: list[tuple[int, int, str, str, str]] = []  # (position, pid, call, target, result)
    for position, (pid, call) in enumerate(calls):
        name = call.split("(", 1)[0]
        result = _outcome(call)
        value = int(result.group(1)) if result and result.group(1) != "?" else -1
        translated = _TRANSLATED.search(call, result.end()) if result else None
        if translated is not None:
            value = int(translated.group(1))
        failure = (result.group(2) or "failed") if result and value < 0 else "ok"
        if name in ("execve", "execveat"):
            if value == 0:
                parsed = _exec_arguments(call, name)
                if parsed is not None:
                    execs.append((position, pid, *parsed))
            elif result is not None:  # a failed exec (a PATH search, or a hidden file): its path is enough
                path = _exec_path(call, name)
                if path is not None:
                    reached.append((position, pid, name, path, failure))
        elif name in ("open", "openat", "connect"):
            target = _access_target(call, name)
            if target is not None and result is not None:
                reached.append((position, pid, name, target, failure))
        elif value > 0:
            forks.setdefault(value, (pid, position))
    by_pid: dict[int, list[tuple[int, int]]] = {}  # pid -> [(position, record index)]
    for index, (position, pid, *_rest) in enumerate(execs):
        by_pid.setdefault(pid, []).append((position, index))

    def image_at(pid: int, position: int, depth: int = 0) -> int | None:
        before = [index for at, index in by_pid.get(pid, []) if at < position]
        if before:
            return before[-1]
        fork = forks.get(pid)
        if fork is None or depth > len(calls):
            return None
        return image_at(fork[0], fork[1], depth + 1)

    records = [
        ExecRecord(index, pid, path, argv, image_at(pid, position), truncated, log)
        for index, (position, pid, path, argv, truncated) in enumerate(execs)
    ]
    accesses = [
        Access(pid, name, target, outcome, image_at(pid, position))
        for position, pid, name, target, outcome in reached
    ]
    return StraceLog(records, accesses, exits)


def _outcome(call: str) -> re.Match[str] | None:
    """The call's result (the last `) = ...` of its line: strings before it may hold one too)."""
    last = None
    for last in _RESULT.finditer(call):  # noqa: B007 - the loop keeps the last match
        pass
    return last


def _access_target(call: str, name: str) -> str | None:
    """The path an open names (absolute, or relative to its folder), or where a connect goes."""
    at = call.index("(") + 1
    if name == "connect":
        inet = _INET.search(call, at)
        if inet is not None:
            return f"{inet.group(2)}:{inet.group(1)}"
        inet6 = _INET6.search(call, at)
        if inet6 is not None:
            return f"[{inet6.group(2)}]:{inet6.group(1)}"
        unix = _UNIX.search(call, at)
        if unix is not None:
            path, _ = _Reader(call, unix.end() - 1).string()
            return None if path is None else f"unix:{unix.group(1)}{path}"
        return None
    if name == "openat":
        comma = call.find(",", at)
        if comma < 0:
            return None
        folder = call[at:comma].strip()
        at = comma + 1
    else:
        folder = "AT_FDCWD"
    path, _ = _Reader(call, at).string()
    if path is None or (folder != "AT_FDCWD" and not path.startswith("/")):
        return None  # relative to an open folder: where it points is not in the log
    return path


def _exec_arguments(call: str, name: str) -> tuple[str, tuple[str, ...], bool] | None:
    """(path, argv, truncated) from `execve("/p", ["a", "b"], ...)` or `execveat(fd, "p", [...], ...)`."""
    reader = _exec_reader(call, name)
    path, truncated = reader.string() if reader is not None else (None, False)
    if reader is None or path is None:
        return None
    reader.expect(",")
    argv, cut = reader.string_list()
    return path, tuple(argv), truncated or cut


def _exec_path(call: str, name: str) -> str | None:
    """The path an exec names (without reading its argv)."""
    reader = _exec_reader(call, name)
    return reader.string()[0] if reader is not None else None


def _exec_reader(call: str, name: str) -> _Reader | None:
    """A reader at an exec's path argument (execveat's comes after its folder)."""
    at = call.index("(") + 1
    if name == "execveat":
        comma = call.find(",", at)
        if comma < 0:
            return None
        at = comma + 1
    return _Reader(call, at)


class _Reader:
    """Reads strace's C-like string and array syntax."""

    _ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "\\": "\\", '"': '"'}

    def __init__(self, text: str, at: int) -> None:
        self.text = text
        self.at = at

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] == " ":
            self.at += 1

    def expect(self, char: str) -> None:
        self.skip()
        if self.text.startswith(char, self.at):
            self.at += 1

    def string(self) -> tuple[str | None, bool]:
        self.skip()
        if not self.text.startswith('"', self.at):
            return None, False
        text = self.text
        end = text.find('"', self.at + 1)
        if end >= 0 and text.find("\\", self.at + 1, end) < 0:  # no escape: the text as it stands (most strings)
            value = text[self.at + 1 : end]
            self.at = end + 1
            truncated = text.startswith("...", self.at)
            if truncated:
                self.at += 3
            return value, truncated
        out = bytearray()
        i = self.at + 1
        while i < len(text) and text[i] != '"':
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                if nxt in "01234567":
                    digits = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
                    assert digits is not None
                    out.append(int(digits.group(0), 8) & 0xFF)
                    i += 1 + len(digits.group(0))
                    continue
                if nxt == "x" and re.match(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
                    out.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                    continue
                out.extend(self._ESCAPES.get(nxt, nxt).encode())
                i += 2
                continue
            out.extend(char.encode())
            i += 1
        self.at = i + 1
        truncated = text.startswith("...", self.at)
        if truncated:
            self.at += 3
        return out.decode("utf-8", errors="replace"), truncated

    def string_list(self) -> tuple[list[str], bool]:
        self.skip()
        items: list[str] = []
        truncated = False
        if not self.text.startswith("[", self.at):
            return items, True  # an address: strace could not read the array
        self.at += 1
        while self.at < len(self.text):
            self.skip()
            if self.text.startswith("]", self.at):
                self.at += 1
                break
            if self.text.startswith("...", self.at):
                truncated = True
                self.at += 3
                continue
            value, cut = self.string()
            if value is None:
                truncated = True
                break
            items.append(value)
            truncated = truncated or cut
            self.expect(",")
        return items, truncated
