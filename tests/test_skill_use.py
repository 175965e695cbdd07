"""Whether and when the agent used its skill, from a trial's transcript events (skill_use.py), and how
an arm's skill is delivered (skill_delivery.py, `skill_delivery` in bench.toml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_benchcell.config import BenchConfigError, load_bench
from pytest_benchcell.skill_delivery import frontmatter, install, skill_files, skill_name, skill_view
from pytest_benchcell.skill_use import SkillView, measure

FOLDER = "/bench/skills/tracker"
INSTALLED = "/trial/claude-config/skills/tracker"
NATIVE = SkillView("native", "tracker", ("SKILL.md", "reference.md", "scripts/count.py"), (FOLDER, INSTALLED))


def reply(tokens: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "model_response", "usage": {"fresh_input": tokens, "cache_write": 0, "cache_read": 0, "output": 0}, **extra}


def call(name: str, tool_id: str, **input_: Any) -> dict[str, Any]:
    return {"kind": "tool_use", "id": tool_id, "name": name, "input": input_}


def result(tool_id: str, is_error: bool = False) -> dict[str, Any]:
    return {"kind": "tool_result", "tool_use_id": tool_id, "is_error": is_error}


def test_a_skill_loaded_by_the_skill_tool_at_the_second_turn_splits_the_tokens_at_that_reply() -> None:
    events = [
        call("Bash", "t1", command="ls"), reply(100), result("t1"),
        call("Skill", "t2", skill="tracker"), reply(150), result("t2"),
        reply(400),
    ]  # fmt: skip
    use = measure(events, NATIVE)["skill_use"]
    assert (use["loaded"], use["used"], use["how"], use["turn"], use["files"]) == (True, True, "skill_tool", 2, ["SKILL.md"])
    assert (use["tokens_before"], use["tokens_after"]) == (250, 400)


def test_an_agent_that_never_loads_a_native_skill_did_not_use_it() -> None:
    use = measure([call("Bash", "t1", command="tracker list"), reply(100), result("t1"), reply(50)], NATIVE)["skill_use"]
    assert (use["used"], use["loaded"], use["how"], use["turn"], use["tokens_before"], use["tokens_after"]) == (
        False, False, None, None, None, None,
    )  # fmt: skip


def test_a_failed_skill_call_or_another_skill_is_no_load() -> None:
    events = [call("Skill", "t1", skill="tracker"), reply(10), result("t1", is_error=True),
              call("Skill", "t2", skill="dataviz"), reply(10), result("t2")]  # fmt: skip
    assert measure(events, NATIVE)["skill_use"]["loaded"] is False


def test_reading_its_files_and_running_its_script_count_and_are_named() -> None:
    events = [
        call("Read", "t1", file_path=f"{INSTALLED}/reference.md"), reply(10), result("t1"),
        call("Bash", "t2", command='python3 "$CLAUDE_CONFIG_DIR/skills/tracker/scripts/count.py" --open'), reply(10), result("t2"),
        call("Bash", "t3", command=f"cat {FOLDER}/SKILL.md"), reply(10), result("t3"),
    ]  # fmt: skip
    use = measure(events, NATIVE)["skill_use"]
    assert (use["how"], use["turn"]) == ("read", 1)
    assert use["files"] == ["reference.md", "scripts/count.py", "SKILL.md"]
    assert use["scripts"] == ["scripts/count.py"]


def test_an_embedded_skill_is_used_from_the_start_and_an_arm_without_one_has_none() -> None:
    embedded = SkillView("embed", "tracker", ("SKILL.md",), (FOLDER,))
    use = measure([reply(10)], embedded)["skill_use"]
    assert (use["delivery"], use["used"], use["loaded"]) == ("embed", True, False)
    assert measure([reply(10)], None) == {"skill_use": None, "subagent_calls": 0, "compactions": 0}


def test_subagent_calls_and_compactions_are_counted() -> None:
    events = [
        call("Task", "t1", prompt="look"), call("Agent", "t2", prompt="look"),
        {"kind": "system", "subtype": "compact_boundary", "data": {}}, {"kind": "system", "subtype": "status", "data": {}},
        reply(5, parent_tool_use_id="t1"), reply(5),
    ]  # fmt: skip
    assert measure(events, None) == {"skill_use": None, "subagent_calls": 2, "compactions": 1}


def test_a_subagents_replies_count_as_tokens_but_not_as_turns() -> None:
    events = [reply(7, parent_tool_use_id="t0"), call("Skill", "t1", skill="tracker"), reply(10), result("t1"), reply(20)]
    use = measure(events, NATIVE)["skill_use"]
    assert (use["turn"], use["tokens_before"], use["tokens_after"]) == (1, 17, 20)


def test_a_skill_folder_is_installed_whole_under_the_config_folder(tmp_path: Path) -> None:
    skill = tmp_path / "bench" / "skills" / "tracker"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: issues\ndescription: Use it.\n---\nBody\n")
    (skill / "scripts" / "count.py").write_text("print(1)\n")
    (skill / ".hidden").write_text("x")
    assert skill_files(skill / "SKILL.md") == ["SKILL.md", "scripts/count.py"]
    installed = install(skill / "SKILL.md", tmp_path / "config")
    assert installed == tmp_path / "config" / "skills" / "issues"  # the frontmatter's name wins
    assert sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*") if p.is_file()) == ["SKILL.md", "scripts/count.py"]
    view = skill_view(skill / "SKILL.md", "native", tmp_path / "config")
    assert view.name == "issues" and str(installed) in view.folders


def test_a_skill_name_comes_from_the_frontmatter_else_its_folder_or_file() -> None:
    assert frontmatter("---\nname: a\ndescription: 'b: c'\n---\nx") == {"name": "a", "description": "b: c"}
    assert skill_name(Path("/s/tracker/SKILL.md"), "no frontmatter") == "tracker"
    assert skill_name(Path("/s/guide.md"), "") == "guide"


BENCH = """
[bench]
model = "claude-sonnet-4-5"

[arms.cli]
binaries = ["tracker"]
bootstrap = "Hi."
skill = "SKILL.md"
{delivery}

[tasks.count]
tier = "read"
intent = "How many?"
required_facts = ["5"]
"""


def bench_with(tmp_path: Path, delivery: str) -> Any:
    (tmp_path / "SKILL.md").write_text("---\nname: tracker\ndescription: Use tracker.\n---\n\n# Guide\nUse it well.\n")
    (tmp_path / "bench.toml").write_text(BENCH.format(delivery=delivery))
    return load_bench(tmp_path / "bench.toml")


def test_native_delivery_offers_the_skill_tool_keeps_the_body_out_of_the_prompt_and_is_its_own_definition(tmp_path: Path) -> None:
    embedded = bench_with(tmp_path, "")
    native = bench_with(tmp_path, 'skill_delivery = "native"')
    assert embedded.arms["cli"].skill_delivery == "embed" and embedded.arms["cli"].tools == ("Bash",)
    assert native.arms["cli"].tools == ("Bash", "Skill")
    assert native.arms["cli"].system_prompt_addition == "Hi."
    assert "Use it well." in embedded.arms["cli"].system_prompt_addition
    assert native.fingerprint("cli", "count") != embedded.fingerprint("cli", "count")
    # The default adds nothing to the conditions: samples stored before the key existed still count.
    assert "skill_delivery" not in embedded.conditions("cli", "count")["arm"]
    assert native.conditions("cli", "count")["arm"]["skill_frontmatter"].startswith("---\nname: tracker")


@pytest.mark.parametrize(
    ("delivery", "message"),
    [
        ('skill_delivery = "plugin"', "[arms.cli] skill_delivery has value 'plugin'"),
        ('skill_delivery = "native"\n', 'native delivery needs `skill`'),
    ],
)
def test_a_bad_delivery_is_refused_with_what_is_allowed(tmp_path: Path, delivery: str, message: str) -> None:
    text = BENCH.format(delivery=delivery)
    if "needs" in message:
        text = text.replace('skill = "SKILL.md"\n', "")
    (tmp_path / "bench.toml").write_text(text)
    with pytest.raises(BenchConfigError) as info:
        load_bench(tmp_path / "bench.toml")
    assert message in str(info.value)
    assert "embed" in str(info.value)
