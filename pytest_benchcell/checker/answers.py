"""Facts in a final answer (read tasks).

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
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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
