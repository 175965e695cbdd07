"""Whether and when the agent used its arm's skill, read from one trial's transcript events; and the
subagent calls and context compactions of the trial.

A skill reaches the agent in one of two ways (skill_delivery.py). Embedded, its body is in the prompt
from the first request, so the skill is `used` in every trial. Delivered natively, only its
description is; the agent uses the skill when it loads it. Either way the agent may open the skill:
- through the Skill tool (the CLI loads SKILL.md into the conversation), counted when the call did not
  fail;
- by reading one of its files with the Read tool;
- by a Bash command that names one of its files (`cat .../SKILL.md`, `python3 .../scripts/x.py`).
The first of these is the moment the skill was loaded: its turn (the model reply that asked for it,
counted from 1) and the tokens of the trial's model requests up to and including that reply
(`tokens_before`) and after it (`tokens_after`). `files` lists the skill's files the agent opened
(relative to the skill's folder), `scripts` those of them a Bash command ran or named that are
programs (by suffix, or under a `scripts/` folder).

Events are transcript.py's (format 1). Pure: no pytest, no SDK; unit-tested on made-up events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .sample import TOKEN_COMPONENTS

SKILL_TOOL = "Skill"
SUBAGENT_TOOLS = ("Task", "Agent")  # Claude Code's subagent tool, under its older and newer name
COMPACTION = "compact_boundary"  # the CLI's system message when it compacts the conversation's context
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".js", ".mjs", ".ts", ".rb", ".pl")

VIA_SKILL_TOOL = "skill_tool"
VIA_READ = "read"
VIA_BASH = "bash"


@dataclass(frozen=True)
class SkillView:
    """The arm's skill as the trial had it: how it was delivered, the name the CLI knows it by, its
    files (relative to its folder, SKILL.md first) and the folders those files were at for the agent
    (the bench's own, and the trial's installed copy for a native delivery)."""

    delivery: str
    name: str
    files: tuple[str, ...]
    folders: tuple[str, ...]


def is_script(relative: str) -> bool:
    return relative.endswith(SCRIPT_SUFFIXES) or relative.startswith("scripts/") or "/scripts/" in relative


def _tokens(usage: Any) -> int:
    if not isinstance(usage, Mapping):
        return 0
    return sum(value for name in TOKEN_COMPONENTS if type(value := usage.get(name)) is int)


def _named_files(text: str, skill: SkillView) -> list[str]:
    """The skill's files a command line or path names: by an absolute path under one of its folders,
    or by `<folder name>/<file>` (a path through a variable such as $CLAUDE_CONFIG_DIR)."""
    found = []
    for relative in skill.files:
        spellings = [f"{folder.rstrip('/')}/{relative}" for folder in skill.folders]
        spellings += [f"{folder.rstrip('/').rsplit('/', 1)[-1]}/{relative}" for folder in skill.folders]
        if any(spelling in text for spelling in spellings):
            found.append(relative)
    return found


def _skill_tool_names(input_: Mapping[str, Any], skill: SkillView) -> bool:
    asked = str(input_.get("skill") or input_.get("command") or "").lstrip("/")
    return asked == skill.name or asked.endswith(f":{skill.name}")


def _opened(name: str, input_: Mapping[str, Any], skill: SkillView) -> tuple[str, list[str], list[str]] | None:
    """(how, files, scripts) when this tool call opens the skill, else None."""
    if name == SKILL_TOOL and _skill_tool_names(input_, skill):
        return VIA_SKILL_TOOL, [skill.files[0]] if skill.files else [], []
    if name == "Read":
        files = _named_files(str(input_.get("file_path") or ""), skill)
        return (VIA_READ, files, []) if files else None
    if name == "Bash":
        files = _named_files(str(input_.get("command") or ""), skill)
        return (VIA_BASH, files, [relative for relative in files if is_script(relative)]) if files else None
    return None


def measure(events: Iterable[Mapping[str, Any]], skill: SkillView | None) -> dict[str, Any]:
    """The sample's `skill_use` (None for an arm without a skill), `subagent_calls` and `compactions`."""
    events = list(events)
    failed = {event.get("tool_use_id") for event in events if event.get("kind") == "tool_result" and event.get("is_error")}
    replies = 0  # main-thread model replies completed so far
    tokens_so_far = 0
    subagent_calls = compactions = 0
    first: dict[str, Any] | None = None
    files: list[str] = []
    scripts: list[str] = []
    pending_turn: int | None = None  # the load's reply has not ended yet: its tokens count before
    tokens_before: int | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "model_response":
            tokens_so_far += _tokens(event.get("usage"))
            if not event.get("parent_tool_use_id"):
                replies += 1
                if pending_turn is not None and replies >= pending_turn:
                    tokens_before, pending_turn = tokens_so_far, None
        elif kind == "system" and event.get("subtype") == COMPACTION:
            compactions += 1
        elif kind == "tool_use":
            name, input_ = str(event.get("name") or ""), event.get("input")
            input_ = input_ if isinstance(input_, Mapping) else {}
            if name in SUBAGENT_TOOLS:
                subagent_calls += 1
            opened = _opened(name, input_, skill) if skill is not None and event.get("id") not in failed else None
            if opened is None:
                continue
            how, opened_files, opened_scripts = opened
            files += [relative for relative in opened_files if relative not in files]
            scripts += [relative for relative in opened_scripts if relative not in scripts]
            if first is None:
                first = {"how": how, "turn": replies + 1}
                pending_turn = replies + 1
    if pending_turn is not None:  # the reply that asked was cut off: every token so far came before
        tokens_before = tokens_so_far
    return {
        "skill_use": None if skill is None else _skill_use(skill, first, files, scripts, tokens_before, tokens_so_far),
        "subagent_calls": subagent_calls,
        "compactions": compactions,
    }


def _skill_use(
    skill: SkillView, first: Mapping[str, Any] | None, files: Sequence[str], scripts: Sequence[str],
    tokens_before: int | None, total: int,
) -> dict[str, Any]:  # fmt: skip
    loaded = first is not None
    return {
        "delivery": skill.delivery,
        "name": skill.name,
        "used": loaded or skill.delivery == "embed",  # embedded: its body was in the prompt from the start
        "loaded": loaded,
        "how": first["how"] if first else None,
        "turn": first["turn"] if first else None,
        "files": list(files),
        "scripts": list(scripts),
        "tokens_before": tokens_before if loaded else None,
        "tokens_after": total - tokens_before if loaded and tokens_before is not None else None,
    }


# --- the store's index keeps one short field per sample: the delivery's initial and whether it was used


def index_text(sample: Mapping[str, Any]) -> str:
    """'' without a skill record (no skill, an older sample, the agent never ran), else the delivery's
    initial and 1 or 0 for used: "n1", "n0", "e1"."""
    use = sample.get("skill_use")
    if not isinstance(use, Mapping) or not isinstance(use.get("delivery"), str) or not use["delivery"]:
        return ""
    return f"{use['delivery'][0]}{1 if use.get('used') is True else 0}"


def from_index_text(text: str) -> tuple[str, bool] | None:
    """(delivery, used) from index_text's field, None for ''."""
    if len(text) != 2 or text[1] not in "01":
        return None
    delivery = {"e": "embed", "n": "native"}.get(text[0])
    return (delivery, text[1] == "1") if delivery else None
