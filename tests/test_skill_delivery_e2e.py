"""A skill delivered as Claude Code delivers skills, end to end through the real SDK and CLI against
the scripted model: what the model API receives (the tools offered, the description in context, the
body only once loaded), where the skill lies (never in the agent's working folder), and what the
sample says of its use. An embedded skill, the default, for contrast."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_benchcell import Environment
from pytest_benchcell.agent import AgentRequest, AgentResult, run_agent
from pytest_benchcell.config import load_bench
from pytest_benchcell.scripted import Answer, ScriptedModel, Step, ToolUse, load_skill
from pytest_benchcell.store import Store
from pytest_benchcell.trial import TrialSpec, run_trial

pytestmark = pytest.mark.e2e

DESCRIPTION = "Count the notes of the folder with the notes command (DESCRIPTION-MARK)."
SKILL = f"---\nname: notes\ndescription: {DESCRIPTION}\n---\n\n# Notes guide (BODY-MARK)\n\nRun `ls` and count.\n"

BENCH = """
[bench]
name = "skills"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 6
wall_clock_ms = 30000

[arms.{arm}]
tools = ["Bash"]
bootstrap = "Count what you are asked to."
skill = "skills/notes/SKILL.md"
{delivery}

[tasks.count]
tier = "read"
intent = "How many notes are there?"
required_facts = ["2 notes"]
"""


class Hooks:
    def pytest_benchcell_provision(self, trial: Any) -> Environment:
        for name in ("a.txt", "b.txt"):
            (trial.agent_cwd / name).write_text("note")
        return Environment(data=trial.agent_cwd)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("pytest_benchcell_"):
            raise AttributeError(name)
        return lambda **kwargs: None


def run(tmp_path: Path, steps: list[Step], *, native: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """One trial; its sample, the request bodies the scripted model received, and what the agent's
    working folder held when the agent ended."""
    (tmp_path / "skills" / "notes").mkdir(parents=True)
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text(SKILL)
    arm = "native" if native else "embed"
    delivery = 'skill_delivery = "native"' if native else ""
    (tmp_path / "bench.toml").write_text(BENCH.format(arm=arm, delivery=delivery))
    bench = load_bench(tmp_path / "bench.toml")
    received: list[dict[str, Any]] = []
    working: list[str] = []

    def against_our_model(request: AgentRequest) -> AgentResult:
        with ScriptedModel(steps, model_name=bench.model) as model:
            result = run_agent(replace(request, env={**request.env, "ANTHROPIC_BASE_URL": model.base_url}))
            received.extend(model.requests)
        working.extend(sorted(str(p.relative_to(request.cwd)) for p in Path(request.cwd).rglob("*")))
        return result

    spec = TrialSpec(bench=bench, arm=arm, task="count", trial=1, model_kind="scripted", sitting="s",
                     turn_cap=6, wall_clock_ms=30_000, store=Store(bench.store))  # fmt: skip
    sample = run_trial(spec, Hooks(), agent_runner=against_our_model)
    return sample, received, working


def tools_of(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


def test_a_native_skill_is_offered_by_description_and_its_body_arrives_only_once_loaded(tmp_path: Path) -> None:
    sample, received, working = run(tmp_path, [load_skill("notes"), ToolUse("Bash", {"command": "ls | wc -l"}), Answer("There are 2 notes.")])
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]
    first, after_load = json.dumps(received[0]), json.dumps(received[1])
    assert tools_of(received[0]) == ["Bash", "Skill"]
    assert "DESCRIPTION-MARK" in first and "BODY-MARK" not in first  # the description in context, not the body
    assert "BODY-MARK" in after_load  # loaded on demand by the Skill tool
    assert "BODY-MARK" not in json.dumps(received[0].get("system"))  # nor embedded in the prompt
    # Only the arm's skill is listed: neither the user's skills nor the CLI's built-in ones leak in.
    assert "The following skills are available" in first
    assert "- notes:" in first and "dataviz" not in first
    assert working == ["a.txt", "b.txt"]  # the skill lies outside the checked working folder
    assert sample["tool_calls"][0]["tool"] == "Skill" and sample["tool_calls"][0]["allowed"] is True
    use = sample["skill_use"]
    assert {key: use[key] for key in ("delivery", "name", "used", "loaded", "how", "turn", "files", "scripts")} == {
        "delivery": "native", "name": "notes", "used": True, "loaded": True, "how": "skill_tool", "turn": 1,
        "files": ["SKILL.md"], "scripts": [],
    }  # fmt: skip
    total = sum(sample["usage"]["total"].values())
    assert 0 < use["tokens_before"] < total and use["tokens_before"] + use["tokens_after"] == total
    assert (sample["subagent_calls"], sample["compactions"]) == (0, 0)


def test_an_agent_that_never_loads_its_native_skill_is_recorded_as_such(tmp_path: Path) -> None:
    sample, received, _ = run(tmp_path, [ToolUse("Bash", {"command": "ls | wc -l"}), Answer("There are 2 notes.")])
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]
    assert all("BODY-MARK" not in json.dumps(body) for body in received)
    assert sample["skill_use"]["delivery"] == "native"
    assert (sample["skill_use"]["used"], sample["skill_use"]["loaded"], sample["skill_use"]["turn"]) == (False, False, None)


def test_an_embedded_skill_is_in_the_prompt_and_no_skill_tool_is_offered(tmp_path: Path) -> None:
    sample, received, _ = run(tmp_path, [ToolUse("Bash", {"command": "ls | wc -l"}), Answer("There are 2 notes.")], native=False)
    assert (sample["status"], sample["outcome"]) == ("scored", "pass"), sample["reason"]
    assert tools_of(received[0]) == ["Bash"]
    assert "BODY-MARK" in json.dumps(received[0].get("system")) and "DESCRIPTION-MARK" not in json.dumps(received[0])
    assert (sample["skill_use"]["delivery"], sample["skill_use"]["used"], sample["skill_use"]["loaded"]) == ("embed", True, False)
