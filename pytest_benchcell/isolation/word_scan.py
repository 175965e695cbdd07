"""Reading one word of a bash line as bash does, next to bashlex's list of its expansions: the
word's value when it is known, the expansions bash really performs and the ones bashlex missed
(see parser.py for the bashlex defects this cross-checks)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .words import unparsable


def _without_quoting(text: str) -> str:
    """Text without quote characters, backslashes and newlines: a word as written and bashlex's
    reading of it agree on the rest, unless bashlex's positions have drifted from the source."""
    return re.sub(r"['\"\\\n]", "", text)


_SINGLE, _ANSI, _PLAIN, _DOUBLE, _HEREDOC = range(5)
_PART_KINDS = {
    "parameter": "uses a variable",
    "commandsubstitution": "uses command substitution",
    "processsubstitution": "uses process substitution",
    "tilde": "starts with ~",
}


@dataclass
class _Scan:
    """What `_scan_word` learned about one word."""

    chars: list[str] = field(default_factory=list)  # the value, while it is known
    dynamic: str = ""
    prefix: str = ""
    kept: list[Any] = field(default_factory=list)  # bashlex parts that bash really expands
    hidden: list[str] = field(default_factory=list)  # expansions bashlex did not report
    brace_marks: list[str] = field(default_factory=list)  # unquoted { } , and .. in order

    def mark(self, why: str) -> None:
        if not self.dynamic:
            self.dynamic = why
            self.prefix = "".join(self.chars)


def _scan_word(raw: str, parts: Sequence[Any], start: int, heredoc: bool = False) -> _Scan:
    """Read one word as bash does, next to bashlex's list of its expansions (`parts`).

    Returns the word's value when it is known, the parts bash really expands (bashlex also reports
    `$(...)` inside single quotes, which bash does not run) and the expansions bashlex missed.
    `start` is the word's offset in the source the part positions refer to. In `heredoc` mode the
    word is an unquoted here-document body: quotes are ordinary characters there.
    """
    at = {part.pos[0] - start: part for part in reversed(parts)}
    scan = _Scan()
    state = _HEREDOC if heredoc else _PLAIN
    i = 0
    while i < len(raw):
        char = raw[i]
        following = raw[i + 1] if i + 1 < len(raw) else ""
        if state == _SINGLE:
            if char == "'":
                state = _PLAIN
            else:
                scan.chars.append(char)
            i += 1
            continue
        if state == _ANSI:  # $'...': backslash escapes, no expansions
            i += 2 if char == "\\" else 1
            if char == "'":
                state = _PLAIN
            continue
        if state == _PLAIN and char == "$" and following in ("'", '"'):
            # bashlex reads $'...' and $"..." as a parameter `$`: skip its bogus part
            if following == "'":
                state = _ANSI
                scan.mark("uses $'...' quoting")
            else:
                state = _DOUBLE
            i += 2
            continue
        part = at.get(i)
        if part is not None:
            scan.kept.append(part)
            scan.mark(_PART_KINDS.get(part.kind, "uses an expansion"))
            if part.kind in ("commandsubstitution", "processsubstitution"):
                end = _substitution_end(raw, part, start)
            else:
                end = part.pos[1] - start
            i = end if end > i else i + 1
            continue
        if state == _PLAIN and char == "'":
            state = _SINGLE
            i += 1
        elif state in (_PLAIN, _DOUBLE) and char == '"':
            state = _DOUBLE if state == _PLAIN else _PLAIN
            i += 1
        else:
            i = _scan_character(raw, i, state, scan)
    if _has_brace_expansion(scan.brace_marks):
        scan.mark("uses brace expansion")
    return scan


def _substitution_end(raw: str, part: Any, start: int) -> int:
    """Where the $(...), `...`, <(...) or >(...) starting at part.pos ends in raw (relative).

    bashlex parses only the first line of commands inside a substitution (`$(true` newline
    `curl x)` showed true alone), and parses backtick text without the unescaping bash does first
    (`\\$(...)` inside backticks runs). So the guard accepts only what bashlex read completely:
    after its parsed commands, nothing but blanks, newlines and comments may come before the
    closing parenthesis or backtick.
    """
    begin = part.pos[0] - start
    parsed_end = part.command.pos[1] - start
    one_line = (
        "Put the commands inside $(...) on one line, joined with ; or && (and no here-documents there)."
    )
    if raw.startswith("`", begin):
        close = part.pos[1] - start - 1  # bashlex found the closing backtick itself
        if raw[close : close + 1] != "`" or re.search(r'\\[$`\\"]', raw[begin + 1 : close]):
            raise unparsable("backticks with backslash escapes or nested backticks", "Use $(...) instead.")
        if _skip_blanks_and_comments(raw, parsed_end) < close:
            raise unparsable("several lines of commands inside backticks", one_line)
        return close + 1
    close = _skip_blanks_and_comments(raw, parsed_end)
    if raw[close : close + 1] != ")":
        raise unparsable("several lines of commands inside a substitution", one_line)
    return close + 1


def _skip_blanks_and_comments(text: str, i: int) -> int:
    while i < len(text):
        if text[i] in " \t\n":
            i += 1
        elif text[i] == "#":
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline + 1
        else:
            break
    return i


def _scan_character(raw: str, i: int, state: int, scan: _Scan) -> int:
    """Handle raw[i] (not a quote character) outside single quotes when no bashlex part starts
    there; return the next i."""
    char = raw[i]
    following = raw[i + 1] if i + 1 < len(raw) else ""
    if char == "\\":
        escapable = {_PLAIN: None, _DOUBLE: '$`"\\\n', _HEREDOC: "$`\\\n"}[state]
        if following == "\n":
            return i + 2  # line continuation
        if following and (escapable is None or following in escapable):
            scan.chars.append(following)
            return i + 2
        scan.chars.append(char)
        return i + 1
    if char == "$":
        if following == "(" or following == "[" or following == "{":
            arithmetic = following == "[" or raw[i + 1 : i + 3] == "(("
            scan.hidden.append("arithmetic" if arithmetic else f"${following}")
            scan.mark("uses an expansion")
            return i + 2
        if following and (following.isalnum() or following in "_@*#?-$!"):
            scan.mark("uses a variable")
            return i + 2
    if char == "`":
        scan.hidden.append("`")
        scan.mark("uses command substitution")
        return i + 1
    if state == _PLAIN:
        if char in "<>" and following == "(":
            scan.hidden.append(f"{char}(")
            scan.mark("uses process substitution")
            return i + 2
        if char in "*?" or (char == "[" and "]" in raw[i + 1 :]):
            scan.mark("contains a wildcard")
        if char in "{},":
            scan.brace_marks.append(char)
        elif char == "." and following == ".":
            scan.brace_marks.append("..")
    scan.chars.append(char)
    return i + 1


def _has_brace_expansion(marks: list[str]) -> bool:
    """An unquoted `{` followed by `,` or `..` and then `}`, as in {a,b} or {1..3}."""
    seen_open = seen_separator = False
    for mark in marks:
        if mark == "{":
            seen_open, seen_separator = True, False
        elif mark in (",", "..") and seen_open:
            seen_separator = True
        elif mark == "}" and seen_separator:
            return True
    return False
