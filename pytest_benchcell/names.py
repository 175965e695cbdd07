"""Names of arms, tasks and MCP servers: one rule for bench.toml, the command line and the store.

An arm's name is a folder of the store and a task's id a file name in it, so a name must be a file
name on every filesystem the store may be copied to: ASCII letters, digits, '.', '_' and '-',
starting with a letter or digit (no '..', no hidden file, no newline), and at most 64 characters
(with the longest suffix the store adds, well under the 255 bytes of ext4, APFS and NTFS), not
ending in '.' and not a Windows device name (CON, NUL, COM1, ...).
macOS and Windows fold case, so two names of a kind that differ only in case would share a file
there: they are refused everywhere, so a store means the same on every machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NAME_MAX = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_WINDOWS_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(10)), *(f"LPT{n}" for n in range(10))}
)
NAME_RULE = (
    f"1 to {NAME_MAX} characters: ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, "
    f"not ending in '.', not a Windows device name such as CON or NUL (it becomes a file name of the store)"
)


def name_problem(name: object) -> str | None:
    """Why `name` cannot be an arm, task or server name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "it is empty" if name == "" else "it is not a string"
    if len(name) > NAME_MAX:
        return f"it has {len(name)} characters"
    if not _NAME.fullmatch(name):  # fullmatch: `$` would let a trailing newline through
        first_ok = name[0].isascii() and name[0].isalnum()
        return "it has a character outside the allowed ones" if first_ok else "it does not start with a letter or digit"
    if name.endswith("."):
        return "it ends in '.' (Windows drops it)"
    if name.split(".")[0].upper() in _WINDOWS_DEVICES:
        return "it is a Windows device name"
    return None


def case_clashes(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of names that differ only in case (the first declared, then the later one)."""
    first: dict[str, str] = {}
    clashes = []
    for name in names:
        folded = name.casefold()
        if folded in first:
            clashes.append((first[folded], name))
        else:
            first[folded] = name
    return clashes


# A program an arm may run (binaries, helpers, guard_exempt) is looked up by name and linked or
# wrapped under that name in the trial's own PATH folder: a '/' or '..' would reach outside it.
PROGRAM_RULE = "a bare program name: no '/' or '\\', not '.' or '..', no whitespace or control characters"


def program_problem(name: str) -> str | None:
    """Why `name` cannot be a program name of an arm, or None when it can."""
    if name in (".", ".."):
        return "it names a folder"
    if "/" in name or "\\" in name:
        return "it is a path (put folders in 'path')"
    if any(char.isspace() or not char.isprintable() for char in name):
        return "it has whitespace or a control character"
    return None
