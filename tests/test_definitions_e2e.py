"""docs/how-to.md, "Find out whether your change helped", end to end: the section's own commands run in a
copy of the example bench (real sittings through the SDK and CLI, the scripted model), the skill file of
`cli-skill` edited between two sittings, and the report compares the two definitions as the page shows,
in the terminal, Markdown, JSON (against its schema) and HTML."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
from docs_text import logical_lines

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
BENCHCELL = Path(sys.executable).parent / "benchcell"
SECTION = "## Find out whether your change helped"
SCHEMA = json.loads((ROOT / "pytest_benchcell/data/report.schema.json").read_text())
# The edit the page's output was made with: four lines added to the skill's text.
SKILL_EDIT = "\n## Tips\n\nPrefer `tracker list --json` when you need to filter by more than one field.\n"


def how_to_blocks() -> tuple[list[list[str]], list[str]]:
    """The section's commands (one argv a line of its bash blocks) and the lines of its output block."""
    page = (ROOT / "docs" / "how-to.md").read_text(encoding="utf-8")
    section = page.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    commands = [shlex.split(line) for language, text in blocks if language == "bash" for line in logical_lines(text) if line.strip()]
    [output] = [text for language, text in blocks if language == "text"]
    return commands, [line.strip() for line in output.splitlines() if line.strip()]


def as_pattern(line: str) -> str:
    """A line of the page's output as an fnmatch pattern: its figures, times, widths and elisions open."""
    escaped = re.sub(r"([\[\]*?])", r"[\1]", line)
    escaped = escaped.replace("(...)", "*")
    escaped = re.sub(r"\d[\d,.:-]*", "*", escaped)
    return "*" + re.sub(r" {2,}", "*", escaped) + "*"


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    for name in ("bench.toml", "conftest.py"):
        shutil.copy(ROOT / name, pytester.path / name)
    shutil.copytree(ROOT / "bench", pytester.path / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    (pytester.path / "pytest.ini").write_text("[pytest]\n")  # the rootdir is the copy, not the repository
    return pytester


def test_editing_the_skill_file_gives_a_report_comparing_the_two_definitions(example: pytest.Pytester) -> None:
    commands, output = how_to_blocks()
    sitting, report = commands
    assert sitting[0] == "pytest" and report[:2] == ["benchcell", "report"]
    first = example.runpytest_subprocess(*sitting[1:], "-p", "no:randomly")
    first.assert_outcomes(passed=9)

    skill = example.path / "bench" / "skills" / "tracker" / "SKILL.md"
    skill.write_text(skill.read_text() + SKILL_EDIT)
    second = example.runpytest_subprocess(*sitting[1:], "-p", "no:randomly")
    second.assert_outcomes(passed=9)
    # the sitting counts the new definition from zero: the old samples stop counting
    second.stdout.fnmatch_lines(["*scored samples of the current definition: 0 -> 3*"])

    done = example.run(BENCHCELL, *report[1:], "--md", "report.md", "--json", "report.json", "--html", "report.html")
    assert done.ret == 0, done.stderr.str()
    done.stdout.fnmatch_lines([as_pattern(line) for line in output])

    markdown = (example.path / "report.md").read_text()
    assert "## Definitions" in markdown and "| v2 (current) |" in markdown
    assert "v1 \u2192 v2: the skill's text (" in markdown
    page = (example.path / "report.html").read_text()
    assert "<h2>Definitions</h2>" in page and "part of the difference" in page
    document = json.loads((example.path / "report.json").read_text())
    jsonschema.validate(document, SCHEMA)
    [arm] = document["definitions"]
    assert arm["arm"] == "cli-skill"
    assert [(one["label"], one["current"], one["scored"]) for one in arm["definitions"]] == [("v1", False, 9), ("v2", True, 9)]
    assert [change["key"] for change in arm["definitions"][1]["changes"]] == ["arm.skill"]
    comparison = arm["comparison"]
    assert (comparison["earlier"], comparison["current"], comparison["success_difference"]) == ("v1", "v2", 0.0)
    assert comparison["tokens_low"] < comparison["tokens_ratio"] < comparison["tokens_high"]
    # dollars from the package's price table, each definition's and their ratio, in the same family
    assert all(one["dollars_per_trial"] > 0 and one["dollars_unknown"] == 0 for one in arm["definitions"])
    assert comparison["dollars_low"] < comparison["dollars_ratio"] < comparison["dollars_high"]
    assert comparison["family_size"] == 3
    # every other section reads the current definition only
    assert document["headline"]["rows"][0]["success"]["n_samples"] == 9


def test_the_pattern_of_an_output_line_opens_its_figures_and_keeps_its_words() -> None:
    import fnmatch

    pattern = as_pattern("v1 → v2: the skill's text (1,777 characters → 1,864 characters: 4 lines added, 0 removed)")
    assert fnmatch.fnmatch("  * v1 → v2: the skill's text (1,790 characters → 1,877 characters: 4 lines added, 0 removed)", pattern)
    assert not fnmatch.fnmatch("  * v1 → v2: the model (a → b)", pattern)
