"""bench.toml loading: defaults, resolution, fingerprints and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_benchcell.config import BenchConfigError, fill_placeholders, load_bench

MINIMAL = """
[bench]
model = "claude-sonnet-4-5"

[arms.cli]
binaries = ["tracker"]

[tasks.count]
tier = "read"
intent = "How many?"
required_facts = ["5"]
"""


def write(tmp_path: Path, text: str, name: str = "bench.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults(tmp_path: Path) -> None:
    bench = load_bench(write(tmp_path, MINIMAL))
    assert (bench.trials, bench.floor, bench.turn_cap, bench.wall_clock_ms) == (5, 3, 40, 300_000)
    assert bench.store == tmp_path / "bench" / "results"
    assert bench.weights == {"fresh_input": 1.0, "cache_write": 1.25, "cache_read": 0.1, "output": 5.0}
    assert bench.arms["cli"].tools == ("Bash",)
    assert bench.tasks["count"].check_state is False
    assert bench.name == tmp_path.name


def test_mutation_tiers_check_state_by_default(tmp_path: Path) -> None:
    text = MINIMAL + '\n[tasks.close]\ntier = "single-mutation"\nintent = "Close it."\n'
    assert load_bench(write(tmp_path, text)).tasks["close"].check_state is True


def test_skill_body_is_charged_without_frontmatter_and_changes_the_fingerprint(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text("---\nname: tracker\ndescription: x\n---\n\n# Tracker guide\nUse it well.\n")
    text = MINIMAL.replace('binaries = ["tracker"]', 'binaries = ["tracker"]\nskill = "SKILL.md"\nbootstrap = "Hi."')
    bench = load_bench(write(tmp_path, text))
    assert bench.arms["cli"].system_prompt_addition == "Hi.\n\n# Tracker guide\nUse it well."
    before = bench.fingerprint("cli", "count")
    skill.write_text("---\nname: tracker\n---\n# Tracker guide\nUse it better.\n")
    assert load_bench(tmp_path / "bench.toml").fingerprint("cli", "count") != before
    assert bench.fingerprint("cli", "count") == before  # stable for the same definitions


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MINIMAL.replace('model = "claude-sonnet-4-5"', ""), "[bench] lacks the required key 'model'"),
        (MINIMAL + "\n[extra]\n", "unknown top-level table [extra]"),
        (MINIMAL.replace('binaries = ["tracker"]', 'binaries = ["/usr/bin/tracker"]'), "[arms.cli] binaries has value '/usr/bin/tracker'"),
        (MINIMAL.replace('binaries = ["tracker"]', 'tools = []\nbinaries = ["tracker"]'), "binaries only with \"Bash\" in tools"),
        (MINIMAL.replace('binaries = ["tracker"]', "tools = []"), "the arm would have no tools"),
        (MINIMAL.replace('binaries = ["tracker"]', 'skill = "nope.md"'), "[arms.cli] skill has value 'nope.md'"),
        (MINIMAL.replace('binaries = ["tracker"]', 'path = ["nope"]'), "[arms.cli] path has value"),
        (MINIMAL.replace("[arms.cli]", "[arms.'bad name']"), "has the arm name 'bad name', refused because"),
        (MINIMAL.replace('required_facts = ["5"]', ""), "the task could never fail"),
        (MINIMAL.replace('required_facts = ["5"]', "required_facts = [3]"), "[tasks.count] required_facts (fact 1) has value 3"),
        (MINIMAL + "\n[pricing]\noutput = -1\n", "[pricing] output has value -1; allowed: a number >= 0"),
        (MINIMAL.replace('binaries = ["tracker"]', 'binaries = ["tracker"]\ndeny_subcommands = { curl = ["x"] }'),
         "one of this arm's binaries (tracker)"),
    ],
)
def test_errors_name_file_key_value_and_what_is_allowed(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BenchConfigError) as excinfo:
        load_bench(path)
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BenchConfigError, match="no such bench file"):
        load_bench(tmp_path / "absent.toml")


def test_placeholders_fill_known_names_and_leave_other_braces() -> None:
    text = 'db={db} json={"a": 1} shell=${HOME} {db}'
    assert fill_placeholders(text, {"db": "/x.db"}, where="w") == 'db=/x.db json={"a": 1} shell=${HOME} /x.db'
    with pytest.raises(BenchConfigError, match=r"w uses the placeholder \{dbb\}, but the environment supplies only: db"):
        fill_placeholders("{dbb}", {"db": "x"}, where="w")
