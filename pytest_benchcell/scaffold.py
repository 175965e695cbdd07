"""`benchcell init`: a new bench in a folder, runnable at once with `--bench-scripted`.

It writes bench.toml and conftest.py (the hooks and the scripted model's steps), and in bench/ a
stand-in for the reader's tool: a to-do list CLI with its skill file and an MCP server over the same
list. Three arms compare them (the CLI with the skill, the CLI alone, the MCP server) on three tasks
(one read, two changes scored on the end state). The reader then replaces the stand-ins with their
own tool, tasks and scripts. Nothing is ever overwritten: the command refuses when any file it would
write exists. Pure: no pytest, no SDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .names import PROGRAM_RULE, name_problem, program_problem

__all__ = ["ScaffoldError", "planned_files", "scaffold"]

PLACEHOLDER = "@TOOL@"


class ScaffoldError(Exception):
    """The bench cannot be written as asked (a bad name, a file already there)."""


@dataclass(frozen=True)
class _File:
    template: str  # a file of pytest_benchcell/data/scaffold/
    destination: str  # relative to the bench folder; may hold the tool's name
    executable: bool = False


_FILES = (
    _File("bench.toml.tmpl", "bench.toml"),
    _File("conftest.py.tmpl", "conftest.py"),
    _File("cli.tmpl", f"bench/bin/{PLACEHOLDER}", executable=True),
    _File("SKILL.md.tmpl", f"bench/skills/{PLACEHOLDER}/SKILL.md"),
    _File("mcp_server.py.tmpl", f"bench/{PLACEHOLDER}_mcp.py"),
)


def _check_name(tool: str) -> None:
    problem = name_problem(tool) or program_problem(tool)
    if problem is None and "." in tool:
        problem = "it has a '.' (it also names an MCP server's tools)"
    if problem is not None or len(tool) > 40:
        why = problem or "it is longer than 40 characters (arms are named after it)"
        raise ScaffoldError(
            f"--tool {tool!r}: {why}; allowed: the program name of your CLI, 1 to 40 ASCII letters, digits, '_' and "
            f"'-', starting with a letter or digit ({PROGRAM_RULE})"
        )


def planned_files(folder: Path, tool: str) -> list[Path]:
    """The files `scaffold` would write for this tool, in order."""
    _check_name(tool)
    return [folder / entry.destination.replace(PLACEHOLDER, tool) for entry in _FILES]


def scaffold(folder: Path, tool: str) -> list[Path]:
    """Write a new bench for `tool` into `folder` (made if missing); return the files written.
    Refuses (ScaffoldError, nothing written) when any of them exists."""
    paths = planned_files(folder, tool)
    present = [path for path in paths if os.path.lexists(path)]
    if present:
        shown = ", ".join(str(path) for path in present)
        raise ScaffoldError(
            f"{shown} already exist{'s' if len(present) == 1 else ''}; `benchcell init` never overwrites a file: "
            "give it an empty folder (for a project that already has a conftest.py, a folder of its own such as "
            "agent-bench/)"
        )
    templates = resources.files("pytest_benchcell") / "data" / "scaffold"
    for entry, path in zip(_FILES, paths):
        text = (templates / entry.template).read_text(encoding="utf-8").replace(PLACEHOLDER, tool)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as handle:  # "x": never over a file made meanwhile
            handle.write(text)
        if entry.executable:
            path.chmod(0o755)
    return paths
