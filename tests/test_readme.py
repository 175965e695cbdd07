"""Every example of the documentation is executed or checked, so a wrong statement fails CI.

The documentation is README.md (the front page) and the pages of the site, docs/index.md's toctree
(tests/docs_text.py lists them); blocks are run page after page in the site's order. Blocks are found
by the parser the site itself uses (markdown-it, through MyST), fences nested in lists included, so
text other people add is covered without touching this file:
- ```toml blocks are validated: one with a [bench] table by the real bench.toml parser (as if it
  were the repo's bench.toml, so its relative paths must exist), any other as TOML;
- ```python blocks are executed in order, in a scratch copy of the example bench where the pages'
  commands ran before them (so `results.json` exists); functions named like bench hooks are called
  (hooks.md's minimal conftest must provision, tear down and script with tool names the bench has);
- every other block holds commands (one per line, `#` comments, `&&` chains); each is run in that
  copy and must exit 0, and every option is checked against the real `pytest --help` or
  `benchcell report --help`, every pip extra against pyproject.toml.

A block that must not run is marked on the line before its fence:
    <!-- readme-test: no-run: WHY -->     commands checked, not run (real tokens, a fresh machine)
    <!-- readme-test: run-last: WHY -->   only the last command of each && chain runs (installs before it)
    <!-- readme-test: output -->          sample output, not commands
An unmarked block whose commands fail (a real-model command without credentials exits 4) fails
here with a hint to mark it. Inline `--bench-*` options in the text are checked against --help too.
A block whose info string is a MyST directive (```{toctree}) is the site's, not an example.

Why markdown-it here rather than sybil or pytest-examples: docs/design.md, "The documentation site".
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docs_text
import pytest
from markdown_it import MarkdownIt
from sample_factory import cell_samples, write_samples

from pytest_benchcell import TrialInfo
from pytest_benchcell.config import BUILTIN_TOOLS, load_bench, parse_bench
from pytest_benchcell.scripted import ToolUse

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!--\s*readme-test:\s*(no-run|run-last|output)\b[^>]*-->")
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repo
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language or 'commands'})"


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or not token.map or token.info.startswith("{"):
            continue
        start = token.map[0]
        before = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.search(before)
        language = token.info.split()[0] if token.info.strip() else ""
        blocks.append(Block(docs_text.where(path), start + 1, language, token.content.rstrip("\n"), marker.group(1) if marker else None))
    return blocks


def doc_blocks() -> list[Block]:
    """Every code block of the documentation, page after page in the site's order."""
    return [block for path in docs_text.pages() for block in page_blocks(path)]


def commands(text: str) -> list[list[list[str]]]:
    """Each line's && chain, each command as argv (comments and blank lines dropped; a line ending in
    `\\` goes on in the next, as in a shell)."""
    chains = []
    for line in docs_text.logical_lines(text):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        chain, current = [], []
        for word in words:
            if word in ("&&", "||", ";", "|"):
                chain.append(current)
                current = []
            else:
                current.append(word)
        chain.append(current)
        chains.append(chain)
    return chains


def options_in(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the example bench with a small real-model store, where the documentation's commands run."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("bench.toml", "conftest.py"):
        shutil.copy(REPO / name, folder / name)
    shutil.copytree(REPO / "bench", folder / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    bench = load_bench(folder / "bench.toml")
    samples = [
        sample
        for arm in bench.arms
        for task in ("count-open", "close-export")
        for sample in cell_samples(arm, task, 3, tier=bench.tasks[task].tier)
    ]
    write_samples(bench.store, samples)
    return folder


@pytest.fixture(scope="module")
def known_options(scratch: Path) -> dict[str, set[str]]:
    def help_of(*argv: str) -> str:
        return subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=True, env=docs_text.newcomers_environment()).stdout

    return {
        "pytest": options_in(help_of(sys.executable, "-m", "pytest", "--help")),
        "benchcell": options_in(help_of(str(BIN / "benchcell"), "report", "--help")),
        "benchcell merge": options_in(help_of(str(BIN / "benchcell"), "merge", "--help")),
        "benchcell export inspect": options_in(help_of(str(BIN / "benchcell"), "export", "inspect", "--help")),
        "benchcell transcripts prune": options_in(help_of(str(BIN / "benchcell"), "transcripts", "prune", "--help")),
        "benchcell init": options_in(help_of(str(BIN / "benchcell"), "init", "--help")),
    }


def program(argv: list[str]) -> str:
    return Path(argv[0]).name


def check_command(argv: list[str], known: dict[str, set[str]], where: str) -> None:
    name = program(argv)
    if name in ("pytest", "py.test"):
        unknown = {word.split("=", 1)[0] for word in argv[1:] if word.startswith("-")} - known["pytest"]
        assert not unknown, f"{where}: `{shlex.join(argv)}` uses options pytest --help does not list: {unknown}"
    elif name == "benchcell":
        commands = {("report",): "benchcell", ("merge",): "benchcell merge", ("transcripts", "prune"): "benchcell transcripts prune",
                    ("export", "inspect"): "benchcell export inspect", ("init",): "benchcell init"}  # fmt: skip
        command = next((words for words in commands if tuple(argv[1 : 1 + len(words)]) == words), None)
        assert command is not None, f"{where}: benchcell has these commands: {', '.join(' '.join(c) for c in commands)}"
        help_key = commands[command]
        unknown = {word.split("=", 1)[0] for word in argv[1 + len(command) :] if word.startswith("-")} - known[help_key]
        assert not unknown, f"{where}: `{shlex.join(argv)}` uses options benchcell {argv[1]} --help does not list: {unknown}"
    elif name in ("pip", "pip3") and "install" in argv:
        extras = {
            extra.strip()
            for word in argv
            for group in re.findall(r"\[([^\]]+)\]", word)
            for extra in group.split(",")
        }
        declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
        assert extras <= declared, f"{where}: pip extras {extras - declared} are not declared in pyproject.toml"


def run_command(argv: list[str], cwd: Path, where: str) -> None:
    name = program(argv)
    if name in ("pytest", "py.test"):
        argv = [sys.executable, "-m", "pytest", *argv[1:]]
    elif name == "benchcell":
        argv = [str(BIN / "benchcell"), *argv[1:]]
    elif name in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=docs_text.newcomers_environment(), timeout=600)
    assert done.returncode == 0, (
        f"{where}: `{shlex.join(argv)}` exited {done.returncode}; fix the page, or mark the block "
        f"<!-- readme-test: no-run: WHY --> if it must not run here\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def call_hooks(namespace: dict[str, Any], tmp_path: Path, where: str) -> None:
    """Exercise a documented conftest: provision, script for every arm, tear down."""
    bench = load_bench(REPO / "bench.toml")
    servers = {server.name for arm in bench.arms.values() for server in arm.mcp_servers}
    for arm_name in bench.arms:
        info = TrialInfo(arm=arm_name, task="count-open", tier="read", trial=1, model_kind="scripted",
                         workdir=tmp_path / arm_name / "environment", agent_cwd=tmp_path / arm_name / "cwd")  # fmt: skip
        info.workdir.mkdir(parents=True)
        info.agent_cwd.mkdir()
        environment = namespace["pytest_benchcell_provision"](trial=info) if "pytest_benchcell_provision" in namespace else None
        if "pytest_benchcell_script" in namespace:
            for step in namespace["pytest_benchcell_script"](trial=info, environment=environment):
                if not isinstance(step, ToolUse):
                    continue
                if step.name.startswith("mcp__"):  # the name Claude Code gives an MCP tool
                    _, server, tool = step.name.split("__", 2)
                    assert server in servers, f"{where}: the example bench declares no MCP server {server!r}"
                    assert f"def {tool}(" in (REPO / "bench" / "tracker_mcp.py").read_text(), f"{where}: no MCP tool {tool!r}"
                else:
                    assert step.name in BUILTIN_TOOLS, f"{where}: {step.name!r} is not a Claude Code built-in tool"
        if "pytest_benchcell_teardown" in namespace:
            namespace["pytest_benchcell_teardown"](trial=info, environment=environment)


def test_the_documentation_has_blocks_of_every_kind_and_each_names_its_language() -> None:
    blocks = doc_blocks()
    kinds = {(block.language, block.marker) for block in blocks}
    assert {("toml", None), ("python", None), ("bash", None), ("bash", "no-run"), ("text", "output")} <= kinds
    unnamed = [str(block) for block in blocks if not block.language]
    assert not unnamed, f"these code blocks name no language (a reader's page highlights them as Python): {unnamed}"
    output = [str(block) for block in blocks if block.marker == "output" and block.language not in ("text", "json", "toml")]
    assert not output, f"output blocks are text (or the format they show): {output}"


COLUMNS = 90  # what a page's code column shows without scrolling, on GitHub and on the site


def test_commands_configuration_and_code_fit_in_90_columns() -> None:
    """Output blocks are exempt: they wrap on the page (docs/_static/output.css). A long command goes
    on in the next line after a `\\`; a long comment goes on its own line above, or into the prose."""
    wide = [
        f"{block.page}:{block.line + number} ({len(line)} columns)"
        for block in doc_blocks()
        if block.marker != "output"
        for number, line in enumerate(block.text.splitlines(), 1)
        if len(line) > COLUMNS
    ]
    assert not wide, f"these lines of code blocks are wider than {COLUMNS} columns: {wide}"


@pytest.mark.slow
def test_every_block_of_every_page(scratch: Path, known_options: dict[str, set[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the site's order, so a later block can use what an earlier command wrote."""
    monkeypatch.chdir(scratch)
    page, cwd = "", scratch
    for block in doc_blocks():
        where = str(block)
        if block.page != page:  # a page's `cd` holds for the rest of that page, as in a reader's shell
            page, cwd = block.page, scratch
        if block.marker == "output":
            continue
        if block.language == "toml":
            document = tomllib.loads(block.text)
            if "bench" in document:
                parse_bench(REPO / "bench.toml", document)  # relative paths resolve from the repo root
            continue
        if block.language == "python":
            name = f"{Path(block.page).stem.replace('-', '_')}_{block.line}"
            namespace: dict[str, Any] = {"__name__": name}
            exec(compile(block.text, where, "exec"), namespace)  # noqa: S102 - the documentation's own examples
            call_hooks(namespace, tmp_path / f"hooks-{name}", where)
            continue
        assert block.language in ("bash", "sh", "console"), f"{where}: block language {block.language!r} is neither toml, python nor a shell"
        for chain in commands(block.text):
            for argv in chain:
                check_command(argv, known_options, where)
            if block.marker == "no-run":
                continue
            for argv in chain[-1:] if block.marker == "run-last" else chain:
                if program(argv) == "cd":
                    cwd = (cwd / argv[1]).resolve()
                    assert cwd.is_dir(), f"{where}: `cd {argv[1]}`: no such folder"
                    continue
                run_command(argv, cwd, where)


def test_inline_bench_options_exist(known_options: dict[str, set[str]]) -> None:
    text = docs_text.text()
    mentioned = set(re.findall(r"(--bench-[a-z-]+)", text))
    assert mentioned, "the documentation names no --bench-* option"
    assert mentioned <= known_options["pytest"], mentioned - known_options["pytest"]
    # and the options table lists every one the plugin has
    in_table = set(re.findall(r"^\| `(--bench-[a-z-]+)", text, flags=re.M)) | set(re.findall(r"`(--bench-report-[a-z]+) PATH`", text))
    assert {option for option in known_options["pytest"] if option.startswith("--bench-")} <= in_table


def test_inline_commands_and_scripts_exist(known_options: dict[str, set[str]]) -> None:
    text = docs_text.text()
    for script in re.findall(r"`\.venv/bin/python (benchmarks/[\w./-]+\.py)`", text):
        assert (REPO / script).is_file(), script
    # A quoted message ("benchcell pre-flight: ...") is no command: its first word ends in a colon.
    for command in re.findall(r"`((?:pytest|benchcell|pip install) (?![\w-]+:)[^`]*)`", text):
        check_command(shlex.split(command), known_options, f"the documentation's inline `{command}`")
