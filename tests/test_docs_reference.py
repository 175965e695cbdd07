"""The generated reference: the `benchcell` commands from their parsers (docs/cli.md), the hooks and
the Python names the pages use from their docstrings (docs/api.md). Every name a page imports, or
says is imported from a module, is exported there and documented in the reference under that module;
every hook a page names exists."""

from __future__ import annotations

import argparse
import importlib
import re

import docs_text
from markdown_it import MarkdownIt

from pytest_benchcell import hookspecs
from pytest_benchcell.cli import build_parser

API = docs_text.DOCS / "api.md"
CLI = docs_text.DOCS / "cli.md"


def documented() -> set[str]:
    """The dotted names docs/api.md has sphinx autodoc document (one `.. autoX:: path` each)."""
    return set(re.findall(r"^\.\. auto(?:class|function|data|module):: ([\w.]+)$", API.read_text(encoding="utf-8"), flags=re.M))


def imported_in_the_pages() -> set[tuple[str, str, str]]:
    """(module, name, page) of every `from pytest_benchcell... import name` in a page's Python blocks,
    and of every "`A`, `B` and `C` are imported from `module`" in its prose."""
    found = set()
    for path in docs_text.pages():
        text = path.read_text(encoding="utf-8")
        for token in MarkdownIt("commonmark").parse(text):
            if token.type == "fence" and token.info.startswith("python"):
                for module, names in re.findall(r"^from (pytest_benchcell[\w.]*) import ([\w, ]+)$", token.content, flags=re.M):
                    found |= {(module, name.strip(), docs_text.where(path)) for name in names.split(",")}
        prose = " ".join(text.split())
        for names, module in re.findall(r"((?:`\w+`(?:, | and ))*`\w+`) (?:are|is) imported from `(pytest_benchcell[\w.]*)`", prose):
            found |= {(module, name, docs_text.where(path)) for name in re.findall(r"`(\w+)`", names)}
    return found


def test_every_name_a_page_imports_is_exported_there_and_in_the_python_reference() -> None:
    imports = imported_in_the_pages()
    assert {("pytest_benchcell", "Environment"), ("pytest_benchcell.checker", "diff_states")} <= {i[:2] for i in imports}
    reference = documented()
    for module_name, name, page in sorted(imports):
        module = importlib.import_module(module_name)
        assert hasattr(module, name), f"{page}: `from {module_name} import {name}` fails"
        exported = getattr(module, "__all__", None)
        assert exported is None or name in exported, f"{page} imports {name} from {module_name}, which does not export it (__all__)"
        assert f"{module_name}.{name}" in reference, f"{page} imports {module_name}.{name}: docs/api.md must document it under that name"


def test_every_name_the_python_reference_documents_is_importable_where_it_says() -> None:
    reference = documented()
    assert "pytest_benchcell.hookspecs" in reference
    for dotted in sorted(reference):
        module_name, _, name = dotted.rpartition(".")
        try:
            importlib.import_module(dotted)
        except ModuleNotFoundError:
            module = importlib.import_module(module_name)
            assert hasattr(module, name), f"docs/api.md documents {dotted}, which does not exist"
            exported = getattr(module, "__all__", None)
            assert exported is None or name in exported, f"docs/api.md documents {dotted}, which {module_name} does not export"


def test_every_hook_a_page_names_exists_and_has_an_example() -> None:
    hooks = {name for name in dir(hookspecs) if name.startswith("pytest_benchcell_")}
    named = set(re.findall(r"\b(pytest_benchcell_[a-z_]+)\b", docs_text.text()))
    assert named, "no page names a hook"
    assert named <= hooks, f"the pages name hooks that do not exist: {sorted(named - hooks)}"
    for hook in sorted(hooks):
        assert "Example::" in (getattr(hookspecs, hook).__doc__ or ""), f"{hook}'s docstring shows no example implementation"


def test_the_cli_reference_is_generated_from_the_parser_of_every_command() -> None:
    text = CLI.read_text(encoding="utf-8")
    directive = re.search(r"```\{argparse\}\n:module: ([\w.]+)\n:func: (\w+)\n:prog: (\w+)\n```", text)
    assert directive, "docs/cli.md generates the reference with sphinx-argparse's argparse directive"
    module, function, prog = directive.groups()
    parser = getattr(importlib.import_module(module), function)()
    assert isinstance(parser, argparse.ArgumentParser) and parser.prog == prog == build_parser().prog == "benchcell"


def named_in_user_pages() -> set[tuple[str, str]]:
    """(dotted name, page) of every `module.name` in a user page's prose that is a name of one of the
    package's modules (`statistics.decide`), whatever the page calls the module by."""
    found = set()
    for path in docs_text.user_pages():
        for module_name, name in re.findall(r"`((?:pytest_benchcell\.)?[a-z_]+(?:\.[a-z_]+)*)\.(\w+)(?:\(\))?`", path.read_text(encoding="utf-8")):
            full = module_name if module_name.startswith("pytest_benchcell") else f"pytest_benchcell.{module_name}"
            try:
                module = importlib.import_module(full)
            except ModuleNotFoundError:
                continue  # a field of a record (`provenance.host`), not a module
            if callable(getattr(module, name, None)):
                found.add((f"{full}.{name}", docs_text.where(path)))
    return found


def test_every_function_a_user_page_names_by_its_module_is_in_the_python_reference() -> None:
    named = named_in_user_pages()
    assert ("pytest_benchcell.statistics.decide", "docs/statistics.md") in named
    missing = sorted(f"{page}: `{dotted}`" for dotted, page in named if dotted not in documented())
    assert not missing, f"these pages name functions that docs/api.md does not document: {missing}"
