"""The change language (`apply_changes`): how a task declares its intended change of the ground truth.

Each change is a table ``{op, path, value}``. Paths are dotted keys plus selectors:
``[key=value]`` picks the one dict in a list whose ``key`` equals the value (the value is an integer
when it is all digits, a JSON string when double-quoted, otherwise the bare text), and ``[index]``
picks a list position (negative counts from the end). Example: ``issues[number=2].state``.

- ``set``: replace the value at an existing path (a misspelt key is an error, not a new key);
- ``append``: append ``value`` to the list at ``path``;
- ``add``: same as ``append`` when ``path`` is a list; when ``path`` ends in a dict key that does not
  exist yet, create that key with ``value``;
- ``remove``: remove one element equal to ``value`` from the list at ``path``;
- ``delete``: delete the dict key, list item, or selected entity at ``path``.

Any path that does not resolve, a selector matching no element or several, or a malformed change
raises ``ValueError`` naming the change.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .state import is_number, selector_text, show


@dataclass(frozen=True)
class _Key:
    name: str

    def __str__(self) -> str:
        return "." + self.name


@dataclass(frozen=True)
class _Index:
    index: int

    def __str__(self) -> str:
        return f"[{self.index}]"


@dataclass(frozen=True)
class _Select:
    key: str
    value: str | int

    def __str__(self) -> str:
        return selector_text(self.key, self.value)


_Segment = _Key | _Index | _Select

_KEY_TOKEN = re.compile(r"[^.\[\]]+")
_BRACKET_TOKEN = re.compile(r'\[((?:"(?:[^"\\]|\\.)*"|[^\]"])*)\]')
_INDEX = re.compile(r"-?[0-9]+")


def _parse_bracket(inner: str, path: str) -> _Segment:
    text = inner.strip()
    if _INDEX.fullmatch(text):
        return _Index(int(text))
    key, eq, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not eq or not key or not raw:
        raise ValueError(f"bad selector [{inner}] in path {path!r}: use [index] or [key=value]")
    value: str | int
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"bad quoted value in selector [{inner}] of path {path!r}") from None
        if not isinstance(value, str):
            raise ValueError(f"bad quoted value in selector [{inner}] of path {path!r}")
    elif raw.isdigit():
        value = int(raw)
    else:
        value = raw
    return _Select(key, value)


def _parse_path(path: Any) -> list[_Segment]:
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty string, got {path!r}")
    segments: list[_Segment] = []
    pos = 0
    while pos < len(path):
        if path[pos] == "[":
            bracket = _BRACKET_TOKEN.match(path, pos)
            if bracket is None:
                raise ValueError(f"unclosed '[' at position {pos} in path {path!r}")
            segments.append(_parse_bracket(bracket.group(1), path))
            pos = bracket.end()
            continue
        if segments:
            if path[pos] != ".":
                raise ValueError(f"expected '.' or '[' at position {pos} in path {path!r}")
            pos += 1
        key = _KEY_TOKEN.match(path, pos)
        if key is None:
            raise ValueError(f"empty key at position {pos} in path {path!r}")
        segments.append(_Key(key.group(0)))
        pos = key.end()
    return segments


def _show_path(segments: Sequence[_Segment]) -> str:
    return "".join(str(s) for s in segments).lstrip(".") or "<root>"


def _selector_matches(item: Any, select: _Select) -> bool:
    if not isinstance(item, Mapping) or select.key not in item:
        return False
    found = item[select.key]
    if isinstance(select.value, int):
        return is_number(found) and found == select.value
    return isinstance(found, str) and found == select.value


def _slot(container: Any, segment: _Segment, where: str) -> Any:
    """The dict key or list index that ``segment`` designates in ``container``; ValueError if none."""
    if isinstance(segment, _Key):
        if not isinstance(container, dict):
            raise ValueError(f"{where} is a {type(container).__name__}, not a table; cannot take key {segment.name!r}")
        if segment.name not in container:
            known = ", ".join(sorted(map(str, container))) or "none"
            raise ValueError(f"{where} has no key {segment.name!r} (keys: {known})")
        return segment.name
    if not isinstance(container, list):
        raise ValueError(f"{where} is a {type(container).__name__}, not a list; cannot apply {segment}")
    if isinstance(segment, _Index):
        if not -len(container) <= segment.index < len(container):
            raise ValueError(f"{where} has {len(container)} item(s); index {segment.index} is out of range")
        return segment.index
    hits = [i for i, item in enumerate(container) if _selector_matches(item, segment)]
    if len(hits) != 1:
        present = [item[segment.key] for item in container if isinstance(item, Mapping) and segment.key in item]
        shown = ", ".join(show(v) for v in present[:10]) + (", ..." if len(present) > 10 else "")
        count = "no element" if not hits else f"{len(hits)} elements"
        raise ValueError(f"{where}{segment} matches {count} ({segment.key} values present: {shown or 'none'})")
    return hits[0]


def _resolve(state: Any, segments: Sequence[_Segment]) -> Any:
    node = state
    for depth, segment in enumerate(segments):
        node = node[_slot(node, segment, _show_path(segments[:depth]))]
    return node


_OPS = ("set", "append", "add", "remove", "delete")
_CHANGE_KEYS = frozenset({"op", "path", "value"})


def _apply_one(state: Any, change: Mapping[str, Any]) -> None:
    op, segments = change["op"], _parse_path(change["path"])
    parent_segments, last = segments[:-1], segments[-1]
    value = copy.deepcopy(change.get("value"))
    if op in ("append", "add", "remove"):
        parent = _resolve(state, parent_segments)
        if op == "add" and isinstance(last, _Key) and isinstance(parent, dict) and last.name not in parent:
            parent[last.name] = value
            return
        target = parent[_slot(parent, last, _show_path(parent_segments))]
        if not isinstance(target, list):
            hint = "; use set to replace it" if op == "add" else ""
            raise ValueError(f"{_show_path(segments)} is a {type(target).__name__}, not a list{hint}")
        if op == "remove":
            for index, item in enumerate(target):
                if type(item) is type(value) and item == value:
                    del target[index]
                    return
            raise ValueError(f"{_show_path(segments)} does not contain {show(value)}")
        target.append(value)
        return
    parent = _resolve(state, parent_segments)
    slot = _slot(parent, last, _show_path(parent_segments))
    if op == "set":
        parent[slot] = value
    else:  # delete
        del parent[slot]


def _validate_change(change: Any) -> None:
    if not isinstance(change, Mapping):
        raise ValueError(f"a change must be a table, got {type(change).__name__}")
    unknown = sorted(set(change) - _CHANGE_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; allowed: op, path, value")
    if change.get("op") not in _OPS:
        raise ValueError(f"op must be one of {', '.join(_OPS)}, got {change.get('op')!r}")
    if "path" not in change:
        raise ValueError("missing path")
    if change["op"] == "delete":
        if "value" in change:
            raise ValueError("delete takes no value")
    elif "value" not in change:
        raise ValueError(f"{change['op']} needs a value")


def validate_change(change: Any) -> None:
    """Raise ValueError if a change is malformed (keys, op, value, path syntax); the state is not needed."""
    _validate_change(change)
    _parse_path(change["path"])


def apply_changes(state: Any, changes: Sequence[Mapping[str, Any]]) -> Any:
    """A deep copy of ``state`` with the changes applied in order (the input is left untouched)."""
    if isinstance(changes, (str, Mapping)) or not isinstance(changes, Iterable):
        raise ValueError("changes must be a list of change tables")
    result = copy.deepcopy(state)
    for number, change in enumerate(changes, start=1):
        label = f"change {number}"
        if isinstance(change, Mapping):
            label += f" ({change.get('op')} {change.get('path')})"
        try:
            _validate_change(change)
            _apply_one(result, change)
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
    return result
