"""The shape docs/architecture.md promises, read from the source with `ast` (never imported, so a
lazy import inside a function counts as much as one at the top):

- no import cycle among pytest_benchcell's modules: nothing imports upward;
- no module over MAX_LINES lines, but for the ones ALLOWANCE names, each with the reason;
- only the pytest-facing package (plugin/) imports pytest, only agent.py imports claude_agent_sdk, only
  preflight_mcp.py imports the `mcp` package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_benchcell"
TOP = PACKAGE.name
MAX_LINES = 600
# Modules other branches are still editing, over MAX_LINES or close to it; the lead splits them once
# those branches are merged. Remove a name once its module fits (one that no longer exists fails
# test_the_allowance_names_only_modules_that_exist).
ALLOWANCE = {
}
PYTEST_FACING = f"{TOP}.plugin"  # the package plugin/: its __init__ (the entry point) and its modules
SDK_MODULE = f"{TOP}.agent"
MCP_CLIENT_MODULE = f"{TOP}.preflight_mcp"  # the pre-flight's MCP client; the SDK pulls `mcp` in for trials


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str) -> Iterator[tuple[str, int]]:
    """(absolute module, line) for every import statement of a module, wherever it stands."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield (submodule if submodule in MODULES else source), node.lineno


def internal_imports(name: str) -> set[str]:
    return {target for target, _ in imported(name) if target in MODULES and target != name}


def find_cycle() -> list[str] | None:
    """One import cycle among the package's modules, as the path that closes it, or None."""
    graph = {name: sorted(internal_imports(name)) for name in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in graph[name]:
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in graph:
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def importers_of(top_level: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for name in MODULES:
        lines = [line for target, line in imported(name) if target == top_level or target.startswith(top_level + ".")]
        if lines:
            found[name] = lines
    return found


def relative(name: str) -> str:
    return str(MODULES[name].relative_to(PACKAGE))


def test_no_import_cycle_among_the_packages_modules() -> None:
    cycle = find_cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_over_the_line_limit_but_the_allowed_ones() -> None:
    over = {relative(name): len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    over = {module: lines for module, lines in over.items() if lines > MAX_LINES and module not in ALLOWANCE}
    assert not over, f"modules over {MAX_LINES} lines (split them by responsibility): {over}"


def test_the_allowance_names_only_modules_that_exist() -> None:
    present = {relative(name) for name in MODULES}
    assert set(ALLOWANCE) <= present, set(ALLOWANCE) - present


def test_only_the_pytest_facing_package_imports_pytest() -> None:
    for top_level in ("pytest", "_pytest"):
        outside = {
            relative(name): lines for name, lines in importers_of(top_level).items()
            if name != PYTEST_FACING and not name.startswith(PYTEST_FACING + ".")
        }  # fmt: skip
        assert not outside, f"{top_level} is imported outside the pytest-facing package ({PYTEST_FACING}): {outside}"
    assert MODULES[PYTEST_FACING].name == "__init__.py"  # the entry point is the package's __init__
    assert PYTEST_FACING in importers_of("pytest")  # the rule reads the imports it means to


def test_only_agent_imports_the_sdk() -> None:
    outside = {relative(name): lines for name, lines in importers_of("claude_agent_sdk").items() if name != SDK_MODULE}
    assert not outside, f"claude_agent_sdk is imported outside agent.py: {outside}"
    assert SDK_MODULE in importers_of("claude_agent_sdk")  # the rule reads the imports it means to


def test_only_the_mcp_pre_flight_imports_the_mcp_package() -> None:
    outside = {relative(name): lines for name, lines in importers_of("mcp").items() if name != MCP_CLIENT_MODULE}
    assert not outside, f"mcp is imported outside preflight_mcp.py: {outside}"
    assert MCP_CLIENT_MODULE in importers_of("mcp")  # the rule reads the imports it means to


@pytest.mark.parametrize(
    "name, source, expected",
    [
        ("remote", "from . import transcript\n", {"pytest_benchcell.transcript"}),
        ("remote", "from .store import Store\n", {"pytest_benchcell.store"}),
        ("remote", "def lazy():\n    from .config import load_bench\n", {"pytest_benchcell.config"}),
        ("report.figures", "from .. import statistics as stats\n", {"pytest_benchcell.statistics"}),
        ("store.lines", "from ..sample import STATUSES\nfrom .layout import Cell\n",
         {"pytest_benchcell.sample", "pytest_benchcell.store.layout"}),
        ("store", "from .merge import merge_stores\n", {"pytest_benchcell.store.merge"}),
    ],
)  # fmt: skip
def test_imports_are_read_as_python_resolves_them(
    name: str, source: str, expected: set[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The reader the rules rely on, given one module written for it in a module's place in the package.
    module = tmp_path / ("__init__.py" if name == "store" else name.rpartition(".")[2] + ".py")
    module.write_text(source)
    monkeypatch.setitem(MODULES, f"{TOP}.{name}", module)
    assert internal_imports(f"{TOP}.{name}") == expected
