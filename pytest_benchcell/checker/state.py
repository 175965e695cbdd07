"""The full end-state diff (mutation tasks).

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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal


_WHITESPACE = re.compile(r"\s+")
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


def show(value: Any, limit: int = 200) -> str:
    """A value for a message: JSON, with long composites shortened."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    if not isinstance(value, str) and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


_BARE_SELECTOR_VALUE = re.compile(r"[^\[\]\"=\s](?:[^\[\]\"=]*[^\[\]\"=\s])?")


def selector_text(key: str, value: Any) -> str:
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


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _identity_value(value: Any, policy: StatePolicy) -> Any:
    return policy.text(value) if isinstance(value, str) else _canonical(value, policy)


def _identity_key(items: Sequence[Any], policy: StatePolicy) -> str | None:
    """The first identity key present, with a scalar value, in every item; None if there is none."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return None
    for key in policy.identity_keys:
        if all(key in item and (isinstance(item[key], str) or is_number(item[key])) for item in items):
            return key
    return None


def _sort_key(value: Any) -> tuple[int, Any]:
    if is_number(value):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))


class _Differ:
    def __init__(self, policy: StatePolicy) -> None:
        self.policy = policy
        self.out: list[str] = []

    def show(self, value: Any) -> str:
        return show(_drop_volatile(value, self.policy.ignore_keys))

    def value(self, expected: Any, actual: Any, path: str, key: str | None) -> None:
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            self.mapping(expected, actual, path)
        elif isinstance(expected, list) and isinstance(actual, list):
            self.sequence(expected, actual, path, key)
        elif isinstance(expected, str) and isinstance(actual, str):
            if self.policy.text(expected) != self.policy.text(actual):
                self.out.append(f"{_at(path)}: expected {show(expected)}, got {show(actual)}")
        elif is_number(expected) and is_number(actual):
            if expected != actual:
                self.out.append(f"{_at(path)}: expected {show(expected)}, got {show(actual)}")
        elif type(expected) is not type(actual) or expected != actual:
            self.out.append(f"{_at(path)}: expected {show(expected)}, got {show(actual)}")

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
            where = path + selector_text(identity, ident)
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
