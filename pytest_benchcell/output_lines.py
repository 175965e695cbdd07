"""The lines of a program's output that name its error, for a message that must carry the cause.

The last lines of a failing program's output are often the wrong end: a Python traceback ends with
its error, but Node prints `Error: Cannot find module ...` first and the stack after it, and a server
may log a while after the line that matters. So a message quotes the lines that name an error (one
with `Error`, `error`, `Traceback`, `not found` or `denied`), each with a line of context, and falls
back on the tail only where no line names one. Pure: text in, lines out.
"""

from __future__ import annotations

import re

__all__ = ["lines_naming_the_error", "bounded"]

ERROR_WORDS = re.compile(r"error|traceback|not found|denied", re.IGNORECASE)
DEFAULT_LIMIT = 8  # lines quoted at most
LINE_CHARS = 300  # characters of one quoted line at most


def lines_naming_the_error(text: str, context: int = 1, limit: int = DEFAULT_LIMIT) -> list[str]:
    """The lines of `text` that name an error, with `context` lines around each, in their order and
    at most `limit` of them (the last ones when more: a traceback names its error last); where no
    line names one, the last `limit` lines. A gap between quoted stretches shows as "...". """
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    hits = [index for index, line in enumerate(lines) if ERROR_WORDS.search(line)]
    if not hits:
        return [_clip(line) for line in lines[-limit:]]
    wanted: set[int] = set()
    for index in hits:
        wanted.update(range(max(0, index - context), min(len(lines), index + context + 1)))
    chosen = sorted(wanted)[-limit:]
    out: list[str] = []
    for position, index in enumerate(chosen):
        if position and index != chosen[position - 1] + 1:
            out.append("...")
        out.append(_clip(lines[index]))
    return out


def bounded(text: str, limit: int) -> str:
    """`text` within `limit` characters: its start and its end, the middle left out and said."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n... ({len(text) - limit} characters left out) ...\n{text[-tail:]}"


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."
