"""The documentation site: it builds with every warning an error, holds every page, keeps the front
page short with the two commands on top, and its bench.toml reference says what the loader accepts.

Every code block of every page is run or checked by tests/test_readme.py.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import docs_text
import pytest
from markdown_it import MarkdownIt

from pytest_benchcell import hookspecs

REPO = docs_text.REPO
# .ci/run and every fresh machine depend on these two lines, word for word.
FRESH_MACHINE_COMMANDS = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
    ".venv/bin/pytest --bench-arm cli-skill --bench-task close-export --bench-scripted",
    "python3 -m venv .venv && .venv/bin/pip install -q uv && .venv/bin/uv pip install -q -p .venv -e '.[test]' && "
    ".venv/bin/pytest -n auto",
)
KEYS_TABLE = docs_text.KEYS_TABLE


@pytest.mark.slow
def test_the_site_builds_with_every_warning_an_error(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(REPO / "docs"), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert not built.stderr.strip(), built.stderr
    front = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "Two commands on a fresh machine" in front  # the front page is the README itself
    for page in docs_text.pages()[1:]:
        assert (tmp_path / page.with_suffix(".html").name).is_file(), page
    assert 'href="docs/' not in front, "a link of the front page still points at docs/ on the site"
    # Output wider than the page wraps instead of scrolling: the tutorial's text blocks get the rule.
    tutorial = (tmp_path / "tutorial.html").read_text(encoding="utf-8")
    assert 'class="highlight-text' in tutorial and "_static/output.css" in tutorial
    assert "copybutton.js" in tutorial, "every code block has a copy button (sphinx-copybutton)"
    assert "2026, the pytest-benchcell authors" in tutorial
    rule = (tmp_path / "_static" / "output.css").read_text(encoding="utf-8")
    assert re.search(r"div\.highlight-text pre \{[^}]*white-space: pre-wrap", rule)
    # The generated reference: every command's usage from its parser, every hook from its docstring.
    commands = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "cli.html").read_text(encoding="utf-8")))
    for command in ("report", "merge", "transcripts prune", "export inspect", "init"):
        assert f"benchcell {command} [-h]" in commands, f"cli.html lacks `benchcell {command}`"
    api = (tmp_path / "api.html").read_text(encoding="utf-8")
    hooks = [name for name in dir(hookspecs) if name.startswith("pytest_benchcell_")]
    missing = [hook for hook in hooks if f'id="pytest_benchcell.hookspecs.{hook}"' not in api]
    assert hooks and not missing, f"api.html documents no {missing}"


def test_every_page_under_docs_is_in_the_site() -> None:
    written = {path.name for path in (REPO / "docs").glob("*.md")} - {"index.md"}
    assert written == {path.name for path in docs_text.pages()[1:]}


def test_no_user_page_speaks_of_the_projects_own_history() -> None:
    """History lives in CHANGELOG.md: a reader's page says what is, not which issue changed it. The
    Contributing pages (benchmarks, architecture) may name the work their figures came from."""
    history = re.compile(r"\bissues? #?\d+|\bseed benchmark|\bearlier session|\bthis stop\b", re.IGNORECASE)
    for path in docs_text.user_pages():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = history.search(line)
            assert not found, f"{docs_text.where(path)}:{number} speaks of the project's history ({found.group(0)!r}): move it to CHANGELOG.md"


def test_the_front_page_opens_with_the_two_commands_and_fits_in_200_lines() -> None:
    text = docs_text.FRONT_PAGE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first = docs_text.headings(docs_text.FRONT_PAGE)[1]
    assert first[:2] == (2, "Two commands on a fresh machine")
    commands = [line for line in docs_text.logical_lines(docs_text.section(first[1])) if line.startswith("python3 -m venv")]
    assert tuple(commands) == FRESH_MACHINE_COMMANDS


def test_ci_runs_the_readmes_test_command_word_for_word() -> None:
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert lines[-1] == FRESH_MACHINE_COMMANDS[1], "the test command is .ci/run's last step: its exit status is CI's"


def test_the_test_commands_auto_starts_a_worker_a_core_and_one_more() -> None:
    """What the contributors' page says of `-n auto` in the test command (tests/conftest.py's xdist hook)."""
    assert "`-n auto`: a worker a core and one more" in docs_text.section("Set up and run the suite")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider", "-p", "no:randomly",
         "tests/test_architecture.py", "-k", "no_import_cycle"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=docs_text.newcomers_environment(),
    )  # fmt: skip
    workers = (os.cpu_count() or 1) + 1
    assert done.returncode == 0 and f"created: {workers}/{workers} workers" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_the_first_command_runs_where_only_the_plugin_is_installed(tmp_path: Path) -> None:
    """The first command installs the plugin alone, without pytest-xdist, and its pytest loads this
    suite's tests/conftest.py too (testpaths): a hook there that names xdist must be optional (it was
    not, and the command stopped with an INTERNALERROR on a fresh clone). The plain install is
    played here by the plugin alone, every other plugin left unloaded and xdist unimportable."""
    (tmp_path / "xdist.py").write_text('raise ImportError("pytest-xdist is not installed here")\n')
    environment = docs_text.newcomers_environment()
    environment.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=os.pathsep.join(filter(None, (str(tmp_path), environment.get("PYTHONPATH")))))
    pytest_argv = shlex.split(FRESH_MACHINE_COMMANDS[0].split(" && ")[-1])[1:]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_argv, "-p", "pytest_benchcell.plugin", "-p", "no:cacheprovider",
         "--bench-trials", "1", "--bench-store", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=environment,
    )  # fmt: skip
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


def keys_table() -> dict[str, tuple[str, ...]]:
    rows = re.findall(r"^\| `([^`]+)` \| (.*) \|$", docs_text.section(KEYS_TABLE), flags=re.M)
    return {table: tuple(re.findall(r"`([^`]+)`", keys)) for table, keys in rows}


def test_the_bench_toml_reference_lists_exactly_the_keys_the_loader_accepts() -> None:
    documented, accepted = keys_table(), docs_text.accepted_bench_keys()
    assert documented.keys() == accepted.keys()
    for table, keys in accepted.items():
        assert set(documented[table]) == set(keys), (
            f"{table}: the loader accepts {sorted(set(keys) - set(documented[table]))} that the reference's table lacks, "
            f"and the table lists {sorted(set(documented[table]) - set(keys))} that the loader refuses "
            f"(docs/bench-toml.md, {KEYS_TABLE!r})"
        )


@pytest.mark.slow
def test_every_key_the_loader_accepts_is_described_outside_the_table() -> None:
    """Named in a TOML example (`key =` commented or not, or `[arms.a.key.b]`) or in the prose (`key`) of some page."""
    documents = [(docs_text.where(path), path.read_text(encoding="utf-8")) for path in docs_text.pages()]
    keys = {key for keys in docs_text.accepted_bench_keys().values() for key in keys}
    undescribed = sorted(key for key in keys if not docs_text.key_mentions(key, documents))
    assert not undescribed, f"keys the loader accepts that no page describes: {undescribed}"


def test_every_commented_key_of_the_reference_examples_is_accepted() -> None:
    """The reference shows optional keys as comments (`# helpers = ...`); each must still exist."""
    accepted = {key for keys in docs_text.accepted_bench_keys().values() for key in keys}
    reference = next(path for path in docs_text.pages() if KEYS_TABLE in path.read_text(encoding="utf-8"))
    commented = set()
    for token in MarkdownIt("commonmark").parse(reference.read_text(encoding="utf-8")):
        if token.type == "fence" and token.info.startswith("toml"):
            for line in token.content.splitlines():
                match = re.match(r"#\s*([a-z_]+)\s*=\s*(.+)", line)
                if match and tomllib.loads(f"{match.group(1)} = {match.group(2).split('  #')[0]}"):
                    commented.add(match.group(1))
    assert commented, "the reference shows no optional key as a comment"
    assert commented <= accepted, commented - accepted
