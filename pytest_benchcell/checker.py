"""Deterministic scoring: facts in a final answer, and a full end-state diff.

Pure functions over plain values; nothing here knows pytest or the agent SDK. Every check returns a
list of human-readable differences, and an empty list means the trial passes.

Read tasks: facts in the final answer
-------------------------------------
A task declares *required* facts (each must be present) and *forbidden* facts (none may be present).
A fact has a ``description`` (used in messages), any number of accepted renderings (``any_of``) and an
optional regular expression (``pattern``). A fact is present when at least one rendering matches or
the pattern matches.

Normalization, applied identically to the answer and to every rendering (``normalize_text``):

1. lower-case;
2. the markdown emphasis/code marks ``*``, ``_``, the backtick and the strike-through pair ``~~`` are
   deleted (the text between them is kept, so ``**5** open``, `` `5` open `` and ``__5__ open`` all
   read as ``5 open``; a lone ``~`` is kept; struck-through text still counts as written);
3. every run of whitespace (spaces, tabs, newlines, non-breaking spaces) becomes one space;
4. leading and trailing whitespace is trimmed.

Nothing else is normalized: punctuation, ``#``, quotes, hyphens and markdown links are compared as
written, so ``open: 5`` and ``open 5`` are different renderings.

A rendering matches when its normalized form occurs in the normalized answer *and* it is not glued to
a longer token at either end:

- an edge that is a digit (0-9) must not touch another digit, nor continue into a decimal: ``#42``
  does not match inside ``#420``, ``5 open`` does not match ``15 open``, ``5`` matches neither
  ``0.5`` nor ``5.5``. A comma is *not* treated as part of a number (``1,3,6`` is a common way to list
  issue numbers), so ``3`` does match in ``1,3,6`` and ``234`` matches in ``1,234``;
- an edge that is a letter must not touch another letter or digit: ``bug`` does not match ``debug``
  or ``bugs``, ``open`` does not match ``reopened``. Plurals and inflections therefore need their own
  renderings or a pattern;
- an edge that is neither (``#``, ``:``, a quote, ...) is unguarded.

A digit edge may touch a letter (``5`` matches ``5th``); a letter edge may touch punctuation
(``bug`` matches ``bug,`` and ``(bug)``).

A ``pattern`` is searched (``re.search``, case-insensitive) in the *normalized* answer, and then in
the answer lower-cased with only its whitespace collapsed (marks kept): a pattern written for the
normalized text (``5 open`` finds ``**5** open``) and one with a mark in it (``order_id``) both match;
it gets no automatic boundary guards.

A missing required fact reads ``missing fact: <description> (expected one of: "5 open", "five
open")``; a present forbidden fact reads ``forbidden fact present: <description> (matched "...")``.
Forbidden facts are how a task penalizes listing everything or contradicting itself.

Mutation tasks: full end-state diff
-----------------------------------
The expected state is the ground truth with the task's declared change applied (``apply_changes``);
it is compared in full with the actual end state, so a missing intended change and any collateral
change both fail. States are JSON-like values. Under a ``StatePolicy``:

- keys in ``ignore_keys`` (ids, timestamps) are dropped from dicts at every depth before comparing;
- a list whose items are all dicts sharing an identity key (the first of ``identity_keys`` present,
  with a scalar value, in every item of both lists) is matched by identity: ``missing
  issues[number=3]``, ``unexpected issues[number=12] (collateral change)``, then field by field
  (``issues[number=3].state: expected "open", got "closed"``). An identity key in ``ignore_keys``
  (``id``, by default) still identifies entities; it is only never compared as a field. So a list of
  orders that have only an ``id`` reads ``orders[id=1002].status``, and a list whose items carry a
  ``number`` is matched by ``number`` first (the order of ``identity_keys``);
- otherwise a list stored under a key in ``multiset_keys`` is compared as a multiset (order-free,
  duplicates honoured; each item canonicalized to sorted-key JSON after the other rules):
  ``issues[number=1].labels: missing "priority"; unexpected "bug"``;
- every other list is compared position by position;
- strings are compared under ``whitespace``: ``exact``, ``strip`` (trim the ends) or ``collapse``
  (trim and turn internal whitespace runs into one space);
- numbers compare by value (``1 == 1.0``) but booleans are never numbers (``true != 1``);
- a key present on one side only reads ``<path>: missing in actual (expected ...)`` or
  ``<path>: unexpected in actual (got ...)``.

Differences come out in path order: dict keys alphabetically, entities by identity value (numbers
numerically), list items by position.

The change language (``apply_changes``)
---------------------------------------
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
import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "Fact",
    "StatePolicy",
    "apply_changes",
    "check_answer",
    "diff_states",
    "fact_from_config",
    "fact_present",
    "normalize_text",
]

# ----------------------------------------------------------------------------------------------
# Read tasks: facts
# ----------------------------------------------------------------------------------------------

_MARKDOWN_MARKS = re.compile(r"~~|[*_`]")
_WHITESPACE = re.compile(r"\s+")
_DIGITS = frozenset("0123456789")


def normalize_text(text: str) -> str:
    """Lower-case, delete markdown marks (``* _ ` ~~``), collapse whitespace runs, trim."""
    text = _MARKDOWN_MARKS.sub("", text.lower())
    return _WHITESPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Fact:
    """One fact a final answer must (or must not) state."""

    description: str
    any_of: tuple[str, ...] = ()
    pattern: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(f"fact description must be a non-empty string, got {self.description!r}")
        if isinstance(self.any_of, str):
            raise ValueError(
                f"fact {self.description!r}: any_of must be a sequence of strings, not a single string"
            )
        renderings = tuple(self.any_of)
        for rendering in renderings:
            if not isinstance(rendering, str):
                raise ValueError(f"fact {self.description!r}: rendering {rendering!r} is not a string")
            if not normalize_text(rendering):
                raise ValueError(
                    f"fact {self.description!r}: rendering {rendering!r} is empty after normalization"
                )
        object.__setattr__(self, "any_of", renderings)
        if self.pattern is not None:
            if not isinstance(self.pattern, str) or not self.pattern:
                raise ValueError(f"fact {self.description!r}: pattern must be a non-empty string")
            try:
                _compile_pattern(self.pattern)
            except re.error as exc:
                raise ValueError(f"fact {self.description!r}: invalid pattern {self.pattern!r}: {exc}") from None
        if not renderings and self.pattern is None:
            raise ValueError(f"fact {self.description!r}: needs at least one rendering (any_of) or a pattern")


@functools.lru_cache(maxsize=1024)
def _compile_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _edge_guards(edge: str) -> tuple[str, str]:
    """(lookbehind, lookahead) guarding one end of a rendering, by the kind of its edge character."""
    if edge in _DIGITS:
        return r"(?<![0-9])(?<![0-9]\.)", r"(?![0-9])(?!\.[0-9])"
    if edge.isalnum():
        return r"(?<!\w)", r"(?!\w)"
    return "", ""


@functools.lru_cache(maxsize=1024)
def _rendering_regex(normalized: str) -> re.Pattern[str]:
    before, _ = _edge_guards(normalized[0])
    _, after = _edge_guards(normalized[-1])
    return re.compile(before + re.escape(normalized) + after)


def _find(normalized_answer: str, fact: Fact, answer: str = "") -> str | None:
    """The text of the answer that shows the fact, or None."""
    for rendering in fact.any_of:
        match = _rendering_regex(normalize_text(rendering)).search(normalized_answer)
        if match:
            return match.group(0)
    if fact.pattern is not None:
        pattern = _compile_pattern(fact.pattern)
        # Also against the answer with its marks kept: `order_id`, `a*b` or `~/x` in a pattern
        # would otherwise never match, as normalization deletes `_`, `*` and backticks.
        for text in (normalized_answer, _WHITESPACE.sub(" ", answer.lower()).strip()):
            match = pattern.search(text)
            if match:
                return match.group(0)
    return None


def fact_present(answer: str, fact: Fact) -> bool:
    """Whether the answer states the fact (see the module docstring for the matching rules)."""
    return _find(normalize_text(answer), fact, answer) is not None


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _expectation(fact: Fact) -> str:
    parts = []
    if fact.any_of:
        parts.append("expected one of: " + ", ".join(_quote(r) for r in fact.any_of))
    if fact.pattern is not None:
        parts.append(("or " if parts else "expected ") + f"pattern /{fact.pattern}/")
    return "; ".join(parts)


def check_answer(answer: str, required: Sequence[Fact], forbidden: Sequence[Fact] = ()) -> list[str]:
    """Differences between a final answer and the declared facts; [] means pass.

    Required facts are reported in declaration order, then forbidden ones.
    """
    normalized = normalize_text(answer)
    differences = []
    for fact in required:
        if _find(normalized, fact, answer) is None:
            differences.append(f"missing fact: {fact.description} ({_expectation(fact)})")
    for fact in forbidden:
        found = _find(normalized, fact, answer)
        if found is not None:
            differences.append(f"forbidden fact present: {fact.description} (matched {_quote(found)})")
    return differences


_FACT_KEYS = frozenset({"description", "any_of", "pattern"})


def fact_from_config(value: str | Mapping[str, Any]) -> Fact:
    """A Fact from bench.toml: a plain string (one rendering) or a table.

    A table has ``any_of`` (a list of strings), ``pattern`` (a regex string), or both, and an optional
    ``description`` (default: the first rendering, else the pattern).
    """
    if isinstance(value, str):
        if not normalize_text(value):
            raise ValueError(f"fact {value!r} is empty after normalization")
        return Fact(description=value, any_of=(value,))
    if not isinstance(value, Mapping):
        raise ValueError(f"a fact must be a string or a table, got {type(value).__name__}: {value!r}")
    unknown = sorted(set(value) - _FACT_KEYS)
    if unknown:
        raise ValueError(
            f"fact {dict(value)!r}: unknown key(s) {', '.join(unknown)}; allowed: description, any_of, pattern"
        )
    any_of = value.get("any_of", ())
    if isinstance(any_of, str):
        raise ValueError(f"fact {dict(value)!r}: any_of must be a list of strings, e.g. any_of = [{any_of!r}]")
    if not isinstance(any_of, (list, tuple)):
        raise ValueError(f"fact {dict(value)!r}: any_of must be a list of strings, got {type(any_of).__name__}")
    pattern = value.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise ValueError(f"fact {dict(value)!r}: pattern must be a string, got {type(pattern).__name__}")
    if not any_of and not pattern:
        raise ValueError(f"fact {dict(value)!r}: needs any_of (a list of renderings), a pattern, or both")
    description = value.get("description")
    if description is None:
        description = any_of[0] if any_of and isinstance(any_of[0], str) else f"/{pattern}/"
    if not isinstance(description, str):
        raise ValueError(f"fact {dict(value)!r}: description must be a string")
    return Fact(description=description, any_of=tuple(any_of), pattern=pattern)


# ----------------------------------------------------------------------------------------------
# Mutation tasks: state diff
# ----------------------------------------------------------------------------------------------

_WHITESPACE_MODES = ("exact", "strip", "collapse")


@dataclass(frozen=True)
class StatePolicy:
    """How two states are compared (see the module docstring)."""

    ignore_keys: frozenset[str] = frozenset({"id", "created_at", "updated_at", "createdAt", "updatedAt"})
    multiset_keys: frozenset[str] = frozenset({"labels", "assignees", "comments", "reviews"})
    identity_keys: tuple[str, ...] = ("number", "name", "id")
    whitespace: Literal["exact", "strip", "collapse"] = "collapse"

    def __post_init__(self) -> None:
        for name in ("ignore_keys", "multiset_keys", "identity_keys"):
            if isinstance(getattr(self, name), str):
                raise ValueError(f"StatePolicy.{name} must be a collection of key names, not a string")
        object.__setattr__(self, "ignore_keys", frozenset(self.ignore_keys))
        object.__setattr__(self, "multiset_keys", frozenset(self.multiset_keys))
        object.__setattr__(self, "identity_keys", tuple(self.identity_keys))
        if self.whitespace not in _WHITESPACE_MODES:
            raise ValueError(f"StatePolicy.whitespace must be one of {_WHITESPACE_MODES}, got {self.whitespace!r}")

    def text(self, value: str) -> str:
        """A string as compared under the whitespace policy."""
        if self.whitespace == "strip":
            return value.strip()
        if self.whitespace == "collapse":
            return _WHITESPACE.sub(" ", value).strip()
        return value


def _drop_volatile(value: Any, ignore: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_volatile(v, ignore) for k, v in value.items() if k not in ignore}
    if isinstance(value, (list, tuple)):
        return [_drop_volatile(v, ignore) for v in value]
    return value


def _canonical(value: Any, policy: StatePolicy) -> Any:
    """A value with the whitespace policy applied to every string and integral floats made ints."""
    if isinstance(value, str):
        return policy.text(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v, policy) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v, policy) for v in value]
    return value


def _canonical_json(value: Any, policy: StatePolicy) -> str:
    return json.dumps(_canonical(value, policy), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _show(value: Any, limit: int = 200) -> str:
    """A value for a message: JSON, with long composites shortened."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    if not isinstance(value, str) and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


_BARE_SELECTOR_VALUE = re.compile(r"[^\[\]\"=\s](?:[^\[\]\"=]*[^\[\]\"=\s])?")


def _selector_text(key: str, value: Any) -> str:
    """``[key=value]``, written so that apply_changes would parse it back to the same value."""
    if isinstance(value, str) and not value.isdigit() and _BARE_SELECTOR_VALUE.fullmatch(value):
        shown = value
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        shown = str(value)
    else:
        shown = json.dumps(value, ensure_ascii=False)
    return f"[{key}={shown}]"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _at(path: str) -> str:
    return path or "<root>"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _identity_value(value: Any, policy: StatePolicy) -> Any:
    return policy.text(value) if isinstance(value, str) else _canonical(value, policy)


def _identity_key(items: Sequence[Any], policy: StatePolicy) -> str | None:
    """The first identity key present, with a scalar value, in every item; None if there is none."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return None
    for key in policy.identity_keys:
        if all(key in item and (isinstance(item[key], str) or _is_number(item[key])) for item in items):
            return key
    return None


def _sort_key(value: Any) -> tuple[int, Any]:
    if _is_number(value):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))


class _Differ:
    def __init__(self, policy: StatePolicy) -> None:
        self.policy = policy
        self.out: list[str] = []

    def show(self, value: Any) -> str:
        return _show(_drop_volatile(value, self.policy.ignore_keys))

    def value(self, expected: Any, actual: Any, path: str, key: str | None) -> None:
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            self.mapping(expected, actual, path)
        elif isinstance(expected, list) and isinstance(actual, list):
            self.sequence(expected, actual, path, key)
        elif isinstance(expected, str) and isinstance(actual, str):
            if self.policy.text(expected) != self.policy.text(actual):
                self.out.append(f"{_at(path)}: expected {_show(expected)}, got {_show(actual)}")
        elif _is_number(expected) and _is_number(actual):
            if expected != actual:
                self.out.append(f"{_at(path)}: expected {_show(expected)}, got {_show(actual)}")
        elif type(expected) is not type(actual) or expected != actual:
            self.out.append(f"{_at(path)}: expected {_show(expected)}, got {_show(actual)}")

    def mapping(self, expected: Mapping[str, Any], actual: Mapping[str, Any], path: str) -> None:
        for key in sorted(set(expected) | set(actual), key=str):
            where = _join(path, str(key))
            if key in self.policy.ignore_keys:
                continue
            if key not in actual:
                self.out.append(f"{where}: missing in actual (expected {self.show(expected[key])})")
            elif key not in expected:
                self.out.append(f"{where}: unexpected in actual (got {self.show(actual[key])})")
            else:
                self.value(expected[key], actual[key], where, str(key))

    def sequence(self, expected: list[Any], actual: list[Any], path: str, key: str | None) -> None:
        identity = _identity_key(expected + actual, self.policy)
        if identity is not None:
            self.entities(expected, actual, path, identity)
        elif key is not None and key in self.policy.multiset_keys:
            self.multiset(expected, actual, path)
        else:
            self.in_order(expected, actual, path)

    def entities(self, expected: list[Any], actual: list[Any], path: str, identity: str) -> None:
        def group(items: list[Any]) -> dict[Any, list[Any]]:
            groups: dict[Any, list[Any]] = {}
            for item in items:
                groups.setdefault(_identity_value(item[identity], self.policy), []).append(item)
            return groups

        wanted, found = group(expected), group(actual)
        for ident in sorted(set(wanted) | set(found), key=_sort_key):
            where = path + _selector_text(identity, ident)
            exp, act = wanted.get(ident, []), found.get(ident, [])
            if not act:
                self.out.append(f"missing {where}" + (f" ({len(exp)} entries)" if len(exp) > 1 else ""))
            elif not exp:
                self.out.append(
                    f"unexpected {where} (collateral change"
                    + (f", {len(act)} entries)" if len(act) > 1 else ")")
                )
            elif len(exp) != len(act):
                self.out.append(f"{where}: expected {len(exp)} entries with this identity, got {len(act)}")
            else:
                for one_expected, one_actual in zip(exp, act):
                    self.mapping(one_expected, one_actual, where)

    def multiset(self, expected: list[Any], actual: list[Any], path: str) -> None:
        ignore = self.policy.ignore_keys
        wanted = Counter(_canonical_json(_drop_volatile(item, ignore), self.policy) for item in expected)
        found = Counter(_canonical_json(_drop_volatile(item, ignore), self.policy) for item in actual)
        missing = sorted((wanted - found).elements())
        unexpected = sorted((found - wanted).elements())
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if unexpected:
            parts.append("unexpected " + ", ".join(unexpected))
        if parts:
            self.out.append(f"{_at(path)}: " + "; ".join(parts))

    def in_order(self, expected: list[Any], actual: list[Any], path: str) -> None:
        for index in range(max(len(expected), len(actual))):
            where = f"{path}[{index}]"
            if index >= len(actual):
                self.out.append(f"{where}: missing in actual (expected {self.show(expected[index])})")
            elif index >= len(expected):
                self.out.append(f"{where}: unexpected in actual (got {self.show(actual[index])})")
            else:
                self.value(expected[index], actual[index], where, None)


def diff_states(expected: Any, actual: Any, policy: StatePolicy = StatePolicy()) -> list[str]:
    """Human-readable differences between two JSON-like states, in path order; [] means pass."""
    differ = _Differ(policy)
    # Ignored keys are skipped where dicts are compared, not dropped first: an identity key that is
    # also ignored (`id`, by default) still tells entities apart, and is never compared as a field.
    differ.value(expected, actual, "", None)
    return differ.out


# ----------------------------------------------------------------------------------------------
# The change language
# ----------------------------------------------------------------------------------------------


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
        return _selector_text(self.key, self.value)


_Segment = Union[_Key, _Index, _Select]

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
        return _is_number(found) and found == select.value
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
        shown = ", ".join(_show(v) for v in present[:10]) + (", ..." if len(present) > 10 else "")
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
            raise ValueError(f"{_show_path(segments)} does not contain {_show(value)}")
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
