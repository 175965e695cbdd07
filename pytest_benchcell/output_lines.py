"""The lines of a program's output that say what went wrong, for a message that quotes it.

The last lines of a failed program's output are often not its cause: Node prints
`Error: Cannot find module '../lib/inventory'` and then a dozen lines of stack; a Python traceback
puts its error last but a warning or a usage line may follow. `lines_naming_the_error` picks the
lines that name an error (a line with `error`, `Traceback`, `not found`, `denied`, `No such file`,
`cannot` or `can't`, in any case), each with one line of context around it, in their order,
within a bound; where no line names an error it falls back to the tail. Pure: text in, lines out.
"""

from __future__ import annotations

import re

__all__ = ["lines_naming_the_error", "names_an_error", "bounded", "ERROR_WORDS", "GAP"]

ERROR_WORDS = re.compile(r"error|traceback|not found|denied|no such file|cannot|can't", re.IGNORECASE)
# An error's own statement ("ModuleNotFoundError: ...", "Error: Cannot find module ...",
# "Error [ERR_MODULE_NOT_FOUND]: ...", "error: ..."): picked before any other line naming an error.
_STATEMENT = re.compile(r"^\s*(?:[\w.]*(?:Error|Exception)|error|fatal)\b(?:\s*\[[^\]]*\])?:", re.IGNORECASE)
# A frame of a stack (Node's "    at f (file:1:2)", Python's '  File "x", line 3, in f'): the path in
# it may spell "error" (node:internal/errors) without naming one.
_FRAME = re.compile(r'^\s+at\s|^\s*File ".*", line \d+')
_NODE_FRAME = re.compile(r"^\s+at\s")  # as context says nothing: Python's frame lines do (the file and line)
_MARKER = re.compile(r"^\s*[\^~]+\s*$")  # Python's and Node's carets under the failing expression
_PATH = re.compile(r"[^\s'\"]*/[^\s'\"]*")
GAP = "..."  # stands for lines left out between two picked ones


def lines_naming_the_error(text: str, *, limit: int = 6, width: int = 300) -> list[str]:
    """Up to `limit` lines of `text` (each cut to `width` characters) that name the error, each with
    a line of context before and after (blank lines skipped, the carets under the line before kept
    with it, a context line ending in ':' brings the line after it), in their order, GAP where lines were left out between them;
    the error's own statement first when the bound is reached. Without such a line: the last
    `limit` non-blank lines."""
    lines = [line.rstrip() for line in text.splitlines()]
    naming = [at for at, line in enumerate(lines) if names_an_error(line)]
    if not naming:
        tail = [line for line in lines if line.strip()][-limit:]
        return [_cut(line, width) for line in tail]
    ordered = sorted(naming, key=lambda at: (not _STATEMENT.match(lines[at]), at))
    picked: set[int] = set()
    for at in ordered:
        group = [*_before(lines, at), at, *_after(lines, at)]
        new = [index for index in group if index not in picked]
        if len(picked) + len(new) > limit:
            new = [at] if at not in picked and len(picked) < limit else []
        picked.update(new)
        if len(picked) >= limit:
            break
    shown: list[str] = []
    previous = None
    for at in sorted(picked):
        between: list[str] = lines[previous + 1 : at] if previous is not None else []
        if between and all(_MARKER.match(line) for line in between):
            shown += between  # the carets under a picked line: part of it
        elif between:
            shown.append(GAP)
        shown.append(_cut(lines[at], width))
        previous = at
    return shown


def names_an_error(line: str) -> bool:
    """Whether a line names an error in its words (not in a path it quotes: a folder may be called
    `test_cannot_find_0`), and is not a stack frame's line."""
    return bool(ERROR_WORDS.search(_PATH.sub(" ", line))) and not _FRAME.match(line)


def _context(line: str) -> bool:
    return bool(line.strip()) and not _MARKER.match(line) and not _NODE_FRAME.match(line)


def _before(lines: list[str], at: int) -> list[int]:
    """The line before, over the caret markers under it (the failing expression they point at)."""
    before = at - 1
    while before >= 0 and _MARKER.match(lines[before]):
        before -= 1
    return [before] if before >= 0 and _context(lines[before]) else []


def _after(lines: list[str], at: int) -> list[int]:
    if at + 1 >= len(lines) or not _context(lines[at + 1]):
        return []
    if lines[at + 1].endswith(":") and at + 2 < len(lines) and _context(lines[at + 2]):
        return [at + 1, at + 2]
    return [at + 1]


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def bounded(text: str, limit: int) -> str:
    """`text` within `limit` characters: its start and its end, the middle left out and said."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n... ({len(text) - limit} characters left out) ...\n{text[-tail:]}"
