"""The files a failed program's error output says it could not find, as paths of the host.

The execution audit sees a program fail to open a file, but not every lookup is an open: Python
looks for a module with `stat` and the listing of each folder on its path, Node resolves a
`require` the same way, so an import from a folder the sandbox hides fails without a failed open.
Their error output names what they looked for, and this module turns that into the files outside
the sandbox it would have been:

- Python's `No module named 'shop.db'`: the package or module `shop/db` (`shop/db.py`) in the bench
  folder or a folder below it (up to two levels down: `lib/shop`, `src/pkg/shop`);
- Node's `Cannot find module '../lib/inventory'`: resolved against the requiring file (its
  `Require stack:` or `imported from ...`, else the program's own script) as Node would
  (`inventory`, `inventory.js`, `.json`, `.cjs`, `.mjs`, `.node`, `inventory/index.js`), a bare name
  in the `node_modules` folders above it;
- any absolute path on a line naming an error (`No such file or directory: '/b/x.toml'`, `ENOENT:
  ... open '/b/x.toml'`, `can't open file '/b/tool.py'`), but on a stack frame's line (a file that ran).

Only paths that exist here are returned; whether the sandbox hides them is the judge's question
(isolation/blocked.py). Pure but for looking at the file system.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from ..output_lines import names_an_error

__all__ = ["paths_named_missing", "SEARCH_DEPTH", "SEARCH_FOLDERS"]

SEARCH_DEPTH = 2  # folders below the bench folder where a missing Python module is looked for
SEARCH_FOLDERS = 400  # at most this many folders looked into (a bench with a large data tree)
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})
_PYTHON_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")
_NODE_MODULE = re.compile(r"Cannot find (?:module|package) '([^']+)'(?: imported from (\S+))?")
_REQUIRE_STACK = re.compile(r"^- (/\S.*)$")
_ABSOLUTE = re.compile(r"(?<![\w.:/-])(/[^\s'\"`:,;()\[\]{}<>]+)")
_NODE_SUFFIXES = ("", ".js", ".json", ".cjs", ".mjs", ".node", "/index.js", "/index.json", "/index.cjs")


def paths_named_missing(output: str, *, bench_root: str, program: str = "") -> list[tuple[str, str]]:
    """(path, the line that named it) for each file of this machine the output says its program
    could not find, in the order the output names them, each once. `program`: the program's own
    file, that a relative `require` is resolved against when Node names no requiring file."""
    lines = output.splitlines()
    found: dict[str, str] = {}
    for at, line in enumerate(lines):
        for path in _named_on(line, lines, at, bench_root, program):
            found.setdefault(os.path.normpath(path), line.strip())
    return list(found.items())


def _named_on(line: str, lines: list[str], at: int, bench_root: str, program: str) -> Iterator[str]:
    python = _PYTHON_MODULE.search(line)
    if python:
        yield from _python_module(python.group(1), bench_root)
        return
    node = _NODE_MODULE.search(line)
    if node:
        requirer = node.group(2) or _require_stack(lines, at) or program
        found = _node_module(node.group(1), requirer)
        if found:
            yield found
        return
    if names_an_error(line):
        for match in _ABSOLUTE.finditer(line):
            path = match.group(1).rstrip(".")
            if os.path.lexists(path):
                yield path


def _python_module(name: str, bench_root: str) -> Iterator[str]:
    parts = name.split(".")
    for folder in _folders(bench_root):
        base = os.path.join(folder, *parts)
        if os.path.isdir(base):
            yield base
        elif os.path.isfile(base + ".py"):
            yield base + ".py"


def _folders(root: str) -> Iterator[str]:
    """The bench folder and its folders down to SEARCH_DEPTH, breadth first, within SEARCH_FOLDERS."""
    level = [root] if os.path.isdir(root) else []
    seen = 0
    for _ in range(SEARCH_DEPTH + 1):
        below: list[str] = []
        for folder in level:
            if seen >= SEARCH_FOLDERS:
                return
            seen += 1
            yield folder
            try:
                entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
            except OSError:
                continue
            below += [
                entry.path for entry in entries
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".") and entry.name not in _SKIPPED
            ]  # fmt: skip
        level = below


def _require_stack(lines: list[str], at: int) -> str:
    """The first file of the `Require stack:` that follows Node's error line, if any."""
    for line in lines[at + 1 : at + 4]:
        match = _REQUIRE_STACK.match(line.strip())
        if match:
            return match.group(1)
    return ""


def _node_module(spec: str, requirer: str) -> str | None:
    if spec.startswith("file://"):
        spec = spec[len("file://") :]
    if spec.startswith("/"):
        bases = [spec]
    elif spec.startswith((".", "..")) and requirer:
        bases = [os.path.join(os.path.dirname(requirer), spec)]
    elif requirer:
        folder, bases = os.path.dirname(requirer), []
        while True:
            bases.append(os.path.join(folder, "node_modules", spec))
            if folder == os.path.dirname(folder):
                break
            folder = os.path.dirname(folder)
    else:
        return None
    for base in bases:
        for suffix in _NODE_SUFFIXES:
            if os.path.lexists(base + suffix) and not (suffix == "" and os.path.isdir(base) and not _has_index(base)):
                return os.path.normpath(base + suffix)
    return None


def _has_index(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in ("package.json", "index.js", "index.json", "index.cjs"))
