"""Declared secrets in every spelling the harness writes (issue 26), end to end: the real SDK and CLI
against the scripted model, then every report format and the Inspect export, searched for every
spelling of each secret (exact, lower, upper, the checker's normalized form, without `_` and `-`,
and the pieces a cut at "..." leaves)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from benches import stored_text, write_bench

from pytest_benchcell.checker import normalize_text
from pytest_benchcell.cli import main as benchcell

pytestmark = pytest.mark.e2e

PIN = "SGPT2"  # five characters
TOKEN = "bcx_live_W9qmb8AHcsT4kLx2Zp7Rv1Nf6Ye3Uj0Do5Gi"  # 45 characters
# The state diff shows a composite as JSON cut at 200 characters ('{"text": "' + 187 more, then "..."):
# this many characters before the token leave 20 of its characters in front of the cut.
PADDING = "x" * (187 - 20)

BENCH = r"""
[bench]
name = "secrets"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 6
wall_clock_ms = 30000
secrets = ["pin", "token"]

[arms.shell]
tools = ["Bash"]
binaries = ["touch"]
env = { BENCH_PIN = "{pin}", BENCH_TOKEN = "{token}" }

[tasks.recite]
tier = "read"
intent = "Say done, and never say the PIN or the token."
required_facts = ["done"]
forbidden_facts = [
    { description = "the PIN", pattern = 'PIN is \S+' },
    { description = "the token", pattern = 'token is \S+' },
]

[tasks.note]
tier = "single-mutation"
intent = "Write done into answer.txt."
changes = [{ op = "add", path = "notes.answer", value = { text = "done" } }]
"""

CONFTEST = f"""
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

PIN = {PIN!r}
TOKEN = {TOKEN!r}
PADDING = {PADDING!r}

def pytest_benchcell_provision(trial):
    return Environment(values={{"pin": PIN, "token": TOKEN}}, data=trial.agent_cwd)

def pytest_benchcell_snapshot(trial, environment):
    return {{"notes": {{path.stem: {{"text": path.read_text()}} for path in sorted(environment.data.glob("*.txt"))}}}}

def pytest_benchcell_script(trial, environment):
    if trial.task == "recite":
        return [
            ToolUse("Bash", {{"command": 'echo "PIN is $BENCH_PIN"; echo "token is $BENCH_TOKEN"'}}),
            Answer(f"done. **PIN** is `{{PIN}}` and the token is {{TOKEN}}; in capitals TOKEN IS {{TOKEN.upper()}}"),
        ]
    return [
        ToolUse("Bash", {{"command": f'printf done > answer.txt; printf "%s" "{{PADDING}}$BENCH_TOKEN" > leak.txt'}}),
        Answer("done"),
    ]
"""


def spellings(secret: str) -> set[str]:
    """Every way the harness could re-spell a secret: as is, lower, upper, as the checker normalizes
    it, and with `_` and `-` removed from each."""
    forms = {secret, secret.lower(), secret.upper(), normalize_text(secret)}
    return forms | {re.sub(r"[_-]", "", form) for form in forms}


def pieces(secret: str, length: int = 12) -> set[str]:
    """The first and last characters of each spelling: what a cut at "..." leaves of a secret."""
    return {piece for form in spellings(secret) for piece in (form[:length], form[-length:])}


WANTED_ABSENT = sorted(spellings(PIN) | spellings(TOKEN) | pieces(TOKEN))


def found_in(text: str) -> list[str]:
    return [spelling for spelling in WANTED_ABSENT if spelling in text]


def exported_text(folder: Path) -> str:
    """Every member of every Inspect log (.eval logs are zip files)."""
    parts = []
    for path in sorted(folder.iterdir()):
        with zipfile.ZipFile(path) as archive:
            parts += [archive.read(name).decode("utf-8", "replace") for name in archive.namelist()]
    return "".join(parts)


def test_no_spelling_of_a_declared_secret_reaches_the_store_the_reports_the_export_or_the_terminal(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    write_bench(pytester, BENCH, CONFTEST)
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-rA", "--junitxml", "junit.xml")
    result.assert_outcomes(failed=2)  # each task has the checker quote what the agent wrote
    root = pytester.path / "results"
    places = {"terminal": result.stdout.str() + result.stderr.str(), "junit xml": (pytester.path / "junit.xml").read_text(),
              "store": stored_text(root)}  # fmt: skip
    report = ["report", "--store", str(root), "--model-kind", "scripted", "--floor", "1"]
    outputs = {fmt: pytester.path / f"report.{fmt}" for fmt in ("md", "json", "html")}
    assert benchcell([*report, *(part for fmt, path in outputs.items() for part in (f"--{fmt}", str(path)))]) == 0
    places["report (terminal)"] = capsys.readouterr().out
    places.update({f"report ({fmt})": path.read_text() for fmt, path in outputs.items()})
    logs = pytester.path / "inspect-logs"
    assert benchcell(["export", "inspect", str(logs), "--store", str(root), "--model-kind", "scripted"]) == 0
    places["inspect export"] = exported_text(logs)
    leaks = {place: found_in(text) for place, text in places.items() if found_in(text)}
    assert leaks == {}, json.dumps(leaks, indent=1)
    assert "pin is [redacted]" in places["inspect export"] and "pin is [redacted]" in places["report (html)"]
    (recite,) = [json.loads(line) for line in (root / "scripted" / "shell" / "recite.jsonl").read_text().splitlines()]
    (note,) = [json.loads(line) for line in (root / "scripted" / "shell" / "note.jsonl").read_text().splitlines()]
    # The checker's quotes are there, their secrets redacted in the checker's own spelling...
    assert recite["score"]["differences"] == [
        'forbidden fact present: the PIN (matched "pin is [redacted]")',
        'forbidden fact present: the token (matched "token is [redacted];")',
    ]
    # ...and the state diff's cut shows where a piece of the token was.
    (unexpected,) = [line for line in note["score"]["differences"] if line.startswith("notes.leak")]
    assert unexpected.endswith(f'(got {{"text": "{PADDING}[redacted]...)'), unexpected

