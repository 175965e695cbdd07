"""What changed between two stored definitions of an arm, named for a reader: the stored conditions
(config.Bench.conditions, the task's part aside) flattened to dotted keys and compared key by key."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from ..definition_model import DefinitionChange

# Values longer than this (or of several lines) are shown by their size, and the change by its lines.
SHORT_TEXT = 60

# Dotted keys of the stored conditions and how a reader knows them; a key not named here is shown as it is.
_NAMES = {
    "model": "the model",
    "base_prompt": "the base prompt",
    "arm.skill": "the skill's text",
    "arm.bootstrap": "the arm's prompt (bootstrap)",
    "arm.tools": "the tools offered",
    "arm.binaries": "the declared binaries",
    "arm.env": "the environment variables passed",
    "arm.readable": "the declared readable paths",
    "arm.network": "the declared network endpoints",
    "arm.mcp_servers": "the MCP servers",
    "arm.guard_exempt": "the guard's exemptions",
    "bounds.turn_cap": "the turn cap",
    "bounds.wall_clock_ms": "the wall-clock bound",
}
_PREFIXES = {
    "arm.deny_subcommands": "the denied subcommands",
    "arm.arguments": "the argument rules",
    "arm.helpers": "the declared helpers",
    "arm.probe": "the capability probes",
}


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys; lists and scalars are values."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            out.update(flatten(item, path + "."))
        else:
            out[path] = item
    return out


def name_of(key: str) -> str:
    """A dotted key of the conditions as a reader knows it."""
    if key in _NAMES:
        return _NAMES[key]
    parts = key.split(".")
    if parts[:2] == ["arm", "identity"] and len(parts) >= 4:
        binary, what = parts[2], parts[3]
        if what == "sha256":
            return f"{binary}'s binary (content hash)"
        if what == "version":
            return f"{binary}'s version"
        if what == "files":
            return f"{binary}'s file {'.'.join(parts[4:])} (content hash)" if len(parts) > 4 else f"{binary}'s files"
        return f"{binary}'s {'.'.join(parts[3:])}"
    for prefix, name in _PREFIXES.items():
        if key == prefix or key.startswith(prefix + "."):
            return f"{name} ({key[len(prefix) + 1:]})" if key != prefix else name
    return key


def changes_between(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[DefinitionChange]:
    """Every key whose value differs (present in one only: "" on the other side), in key order."""
    old, new = flatten(before), flatten(after)
    out = []
    for key in sorted(set(old) | set(new)):
        if key in old and key in new and old[key] == new[key]:
            continue
        shown_before, shown_after = _shown(old.get(key), new.get(key))
        out.append(DefinitionChange(name_of(key), key, shown_before, shown_after))
    return out


def _shown(before: Any, after: Any) -> tuple[str, str]:
    if isinstance(before, list) and isinstance(after, list):
        removed = [item for item in before if item not in after]
        added = [item for item in after if item not in before]
        if removed or added:
            return ", ".join(map(_text, removed)) or "(none removed)", ", ".join(map(_text, added)) or "(none added)"
    texts = ["" if value is None else _text(value) for value in (before, after)]
    if all(len(text) <= SHORT_TEXT and "\n" not in text for text in texts):
        return texts[0], texts[1]
    old_lines, new_lines = texts[0].splitlines(), texts[1].splitlines()
    diff = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=0))
    lines_added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    lines_removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    return _size(texts[0]), f"{_size(texts[1])}: {lines_added} lines added, {lines_removed} removed"


def _size(text: str) -> str:
    return f"{len(text):,} characters" if text else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
