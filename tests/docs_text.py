"""The documentation as tests read it: README.md (the front page) and the pages under docs/.

Tests that keep a statement of the documentation true (a figure, a rule, an example) find it here by
its heading or its words, never by the file that holds it today, so moving text between pages does
not break them. The pages come in the site's order: README.md, then docs/index.md's toctree.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
FRONT_PAGE = REPO / "README.md"


def newcomers_environment() -> dict[str, str]:
    """This process's environment without what the suite's own pytest sets for itself, so a documented
    command runs, and its options are listed, as a newcomer's shell would have them: a caller's
    `PYTEST_ADDOPTS="-p no:randomly"` once hid pytest-randomly's options from `pytest --help` and failed
    the README's `--randomly-seed` (seen in a profiling run)."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER")}


def benchmark_script(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module, loaded as when it runs: its folder on sys.path while it loads (it
    imports its sibling harness.py), and itself in sys.modules (its dataclasses look their module up there)."""
    folder = str(REPO / "benchmarks")
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules[name] = script
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(script)
    finally:
        sys.path.remove(folder)
    return script


def pages() -> list[Path]:
    """README.md, then every page of the site's tables of contents (one a sidebar caption), in their order."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    toctrees = re.findall(r"^```\{toctree\}\n(.*?)^```", index, flags=re.M | re.S)
    assert toctrees, "docs/index.md has no toctree"
    names = [line.strip() for tree in toctrees for line in tree.splitlines() if line.strip() and not line.lstrip().startswith(":")]
    return [FRONT_PAGE, *(DOCS / (name if name.endswith(".md") else f"{name}.md") for name in names)]


def logical_lines(commands: str) -> list[str]:
    """A shell block's lines as the shell reads them: a line ending in `\\` goes on in the next one."""
    return re.sub(r"[ \t]*\\\n\s*", " ", commands).splitlines()


def contributing_pages() -> set[Path]:
    """The pages under the Contributing caption of the sidebar: the project's own, not a user's."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    contributing = re.search(r"^```\{toctree\}\n(?:.*\n)*?:caption: Contributing\n(.*?)^```", index, flags=re.M | re.S)
    assert contributing, "docs/index.md has no Contributing caption"
    return {DOCS / f"{line.strip()}.md" for line in contributing.group(1).splitlines() if line.strip() and not line.startswith(":")}


def user_pages() -> list[Path]:
    """Every page a user reads (README.md included), in the site's order: all but the Contributing ones."""
    theirs = contributing_pages()
    return [path for path in pages() if path not in theirs]


def first_block(text: str) -> str:
    """The content of the first fenced code block in `text`, whatever language its fence names."""
    found = re.search(r"^(`{3,})[\w-]*\n(.*?)^\1", text, flags=re.M | re.S)
    assert found, "no code block follows"
    return found.group(2)


def where(path: Path) -> str:
    return str(path.relative_to(REPO))


def slug(title: str) -> str:
    """A heading's anchor, by GitHub's rule (as MyST's github_slugify applies it on the site)."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.strip().lower().replace(" ", "-"))


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def text() -> str:
    """Every page, in the site's order."""
    return "\n\n".join(_read(path) for path in pages())


@cache
def headings(path: Path) -> list[tuple[int, str, int]]:
    """(level, title, 0-based line) of every heading of a page, code blocks excluded."""
    tokens = MarkdownIt("commonmark").parse(_read(path))
    found = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            found.append((int(token.tag[1]), tokens[index + 1].content.strip(), token.map[0]))
    return found


def section(title: str) -> str:
    """The text under the one heading titled so (any page, any level), its subsections included: up
    to the next heading of its own level or above, or the page's end."""
    found = [(path, level, line) for path in pages() for level, name, line in headings(path) if name == title]
    assert len(found) == 1, f"the documentation has {len(found)} headings titled {title!r} (expected exactly one)"
    path, own, line = found[0]
    lines = _read(path).splitlines()
    end = next((other for level, _, other in headings(path) if other > line and level <= own), len(lines))
    return "\n".join(lines[line + 1 : end]) + "\n"


def table_row(fragment: str) -> str:
    """The one table row (a line starting with `|`) of the documentation that contains this text."""
    rows = [line for line in text().splitlines() if line.startswith("|") and fragment in line]
    assert len(rows) == 1, f"{len(rows)} table rows of the documentation contain {fragment!r} (expected exactly one)"
    return rows[0]


def paragraph(start: str) -> str:
    """The paragraph that begins with this text, its lines joined by single spaces."""
    whole = text()
    begin = whole.index(start)
    end = whole.find("\n\n", begin)
    return " ".join(whole[begin : end if end >= 0 else len(whole)].split())


# -- bench.toml: the keys the loader accepts, table by table -----------------------------------------

_PROBE = "zz_probe_key"
# A minimal bench with one of every table, and where in it each kind of table sits.
_MINIMAL_BENCH: dict[str, Any] = {
    "bench": {"model": "m", "smallest_effect": {"success": 0.1}},
    "pricing": {},
    "prices": {"m": {"input": 1, "output": 2, "long_context": {"above": 10, "input": 2, "output": 4}}},
    "checker": {},
    "arms": {"a": {"tools": ["Bash"], "binaries": ["b"], "mcp_servers": {"s": {"command": "x"}},
                   "arguments": {"b": {"deny_options": ["-x"]}}}},
    "tasks": {"t": {"tier": "read", "intent": "i", "required_facts": [{"description": "d", "any_of": ["x"]}]},
              "u": {"tier": "single-mutation", "intent": "i", "changes": [{"op": "set", "path": "a", "value": 1}]}},
}  # fmt: skip
KEYS_TABLE = "Every key, table by table"  # the section of the reference that lists them
BENCH_TABLES: dict[str, tuple[str | int, ...]] = {
    "[bench]": ("bench",),
    "[bench] smallest_effect": ("bench", "smallest_effect"),
    "[pricing]": ("pricing",),
    "[prices.MODEL]": ("prices", "m"),
    "[prices.MODEL] long_context": ("prices", "m", "long_context"),
    "[checker]": ("checker",),
    "[arms.NAME]": ("arms", "a"),
    "[arms.NAME.mcp_servers.NAME]": ("arms", "a", "mcp_servers", "s"),
    "[arms.NAME.arguments.BINARY]": ("arms", "a", "arguments", "b"),
    "[tasks.ID]": ("tasks", "t"),
    "[tasks.ID] required_facts, forbidden_facts": ("tasks", "t", "required_facts", 0),
    "[tasks.ID] changes": ("tasks", "u", "changes", 0),
}


@cache
def accepted_bench_keys() -> dict[str, tuple[str, ...]]:
    """Per kind of table, the keys the real loader accepts: asked of the loader itself, by giving it
    an unknown key in that table and reading the allowed keys its refusal names."""
    from pytest_benchcell.config import BenchConfigError, parse_bench

    accepted = {}
    for table, path in BENCH_TABLES.items():
        document = copy.deepcopy(_MINIMAL_BENCH)
        node: Any = document
        for step in path:
            node = node[step]
        node[_PROBE] = 1
        try:
            parse_bench(REPO / "bench.toml", document)
        except BenchConfigError as refusal:
            lists = re.findall(r"allowed(?: keys)?: ((?:[a-z_0-9]+, )*[a-z_0-9]+)", str(refusal))
            assert lists, f"the loader's refusal of an unknown key in {table} names no allowed keys: {refusal}"
            accepted[table] = tuple(lists[-1].split(", "))
        else:
            raise AssertionError(f"the loader accepted an unknown key in {table}")
    return accepted


def key_mentions(key: str, documents: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(page, anchor of its section, "" for the page's top) of every section of these (name, text)
    pages that describes a bench.toml key: in a TOML example (`key =`, commented or not, or a table
    `[arms.a.key.b]`) or in the prose (`key`, `key = ...` in backticks). The keys table is no description."""
    in_toml = re.compile(rf"(?<![\w-]){key}\s*=|\.{key}\.")
    in_prose = re.compile(rf"`{key}(?: = [^`]*)?`")
    found: list[tuple[str, str]] = []
    for name, text in documents:
        anchor, skipping, heading_level = "", False, 0
        for token in MarkdownIt("commonmark").parse(text):
            if token.type == "heading_open":
                heading_level = int(token.tag[1])
            elif heading_level:  # the heading's own text: a new section starts
                plain = "".join(child.content for child in token.children or () if child.type in ("text", "code_inline"))
                anchor = "" if heading_level == 1 else slug(plain)
                skipping, heading_level = token.content.strip() == KEYS_TABLE, 0
            elif skipping:
                continue
            elif (token.type == "fence" and token.info.startswith("toml") and in_toml.search(token.content)) or (
                token.type == "inline" and in_prose.search(token.content)
            ):
                if (name, anchor) not in found:
                    found.append((name, anchor))
    return found
