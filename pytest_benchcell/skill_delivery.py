"""How an arm's skill reaches the agent: embedded in its prompt, or delivered as Claude Code delivers
skills (natively), and the skill's own files.

`embed` (the default) adds the skill's body to the arm's prompt: every trial pays for it and none has
to find it. `native` installs the skill for one trial where the bundled CLI discovers skills, the
`skills/NAME/` folder of the trial's own CLAUDE_CONFIG_DIR (created per trial by
cli_environment.isolated_cli_variables, outside the agent's working folder, so the checked end state
never sees it): the CLI then offers the Skill tool, lists the skill's frontmatter description in the
conversation's context and loads the body only when the agent calls the tool. agent.py reads the
user settings of that folder only (`setting_sources=["user"]`, which holds nothing but the skill) and
lists the skill by name, so neither the user's own skills nor the CLI's built-in ones are offered.
Measured with CLI 2.1.337: a SKILL.md under CLAUDE_CONFIG_DIR/skills/NAME/ is discovered with the
"user" setting source only; the Skill tool's result is "Launching skill: NAME", and the body follows
as a user message that starts "Base directory for this skill: <folder>".

Pure: no pytest, no SDK.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .skill_use import SkillView

EMBED = "embed"
NATIVE = "native"
DELIVERIES = (EMBED, NATIVE)
SKILL_FILE = "SKILL.md"
SKILLS_FOLDER = "skills"  # under CLAUDE_CONFIG_DIR: where the CLI discovers a user's skills
SKILL_FILES_LIMIT = 200  # files of a skill folder listed (a skill is a few files; a huge folder is a mistake)


def split_frontmatter(text: str) -> tuple[str, str]:
    """(the frontmatter block as written, from the first `---` line to the end of the second; what
    follows it): ("", text) without one."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[: end + 4], text[end + 4 :]
    return "", text


def frontmatter(text: str) -> dict[str, str]:
    """The `key: value` lines of a skill file's frontmatter (between the first two `---` lines)."""
    head, _ = split_frontmatter(text)
    fields: dict[str, str] = {}
    for line in head[4:-4].splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() and not line.startswith((" ", "\t")):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def frontmatter_text(text: str) -> str:
    """The frontmatter block as written (what a native delivery puts in context), '' without one."""
    return split_frontmatter(text)[0]


def skill_name(skill_file: Path, text: str) -> str:
    """The name the CLI knows the skill by: the frontmatter's `name`, else its folder's name (for a
    SKILL.md), else the file's stem."""
    declared = frontmatter(text).get("name", "")
    if declared:
        return declared
    return skill_file.parent.name if skill_file.name == SKILL_FILE else skill_file.stem


def skill_folder(skill_file: Path) -> Path | None:
    """The folder that is the skill (a SKILL.md with its scripts and references beside it), or None
    for a skill file of another name, which is the skill on its own."""
    return skill_file.parent if skill_file.name == SKILL_FILE else None


def skill_files(skill_file: Path) -> list[str]:
    """The skill's files, relative to its folder, with `/` (SKILL.md first): what the agent may load."""
    folder = skill_folder(skill_file)
    if folder is None:
        return [SKILL_FILE]
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if not name.startswith(".") and name != "__pycache__")
        for name in sorted(files):
            relative = (Path(root) / name).relative_to(folder).as_posix()
            if not name.startswith(".") and relative != SKILL_FILE:
                found.append(relative)
            if len(found) >= SKILL_FILES_LIMIT:
                return [SKILL_FILE, *found]
    return [SKILL_FILE, *found]


def install(skill_file: Path, config_dir: Path) -> Path:
    """Install the skill for one trial under the CLI's config folder; return the installed folder.
    Its files are copied (never linked: the agent's commands must not reach the bench through it)."""
    text = skill_file.read_text(encoding="utf-8")
    target = config_dir / SKILLS_FOLDER / skill_name(skill_file, text)
    target.mkdir(parents=True, exist_ok=True)
    for relative in skill_files(skill_file):
        source = skill_file if relative == SKILL_FILE else skill_file.parent / relative
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=True)
    return target


def skill_view(skill_file: Path, delivery: str, config_dir: Path | None) -> SkillView:
    """The skill as one trial had it, for skill_use.measure: its files and every folder the agent
    could find them in (the bench's, and the trial's installed copy when delivered natively)."""
    name = skill_name(skill_file, skill_file.read_text(encoding="utf-8"))
    folders = [str(skill_file.parent), os.path.realpath(skill_file.parent)]
    if delivery == NATIVE and config_dir is not None:
        folders.append(str(config_dir / SKILLS_FOLDER / name))
    return SkillView(delivery, name, tuple(skill_files(skill_file)), tuple(dict.fromkeys(folders)))
