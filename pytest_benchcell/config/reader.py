"""Reading one table of a bench.toml document, every refusal a `BenchConfigError` that names the
file, the key, the value and what is allowed; the name rule applied to a table's name; and the
command line's counts (`positive_int`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from ..names import NAME_RULE, case_clashes, name_problem
from .model import BenchConfigError, did_you_mean


class _Reader:
    """Reads one table of the TOML document, remembering where it is for error messages."""

    def __init__(self, file: Path, where: str, table: Any) -> None:
        self.file = file
        self.where = where
        if not isinstance(table, dict):
            self.fail(where, table, "a table")
        self.table: dict[str, Any] = table

    def fail(self, key: str, value: Any, allowed: str, *, choices: Any = ()) -> NoReturn:
        raise BenchConfigError(
            f"{self.file}: {self._key(key)} has value {_show(value)}{did_you_mean(value, choices)}; allowed: {allowed}"
        )

    def _key(self, key: str) -> str:
        return f"[{self.where}] {key}" if key != self.where else f"[{self.where}]"

    def only(self, *allowed: str) -> None:
        for key in self.table:
            if key not in allowed:
                raise BenchConfigError(
                    f"{self.file}: [{self.where}] has unknown key {key!r}{did_you_mean(key, allowed)}; "
                    f"allowed keys: {', '.join(allowed)}"
                )

    def require(self, key: str) -> Any:
        if key not in self.table:
            raise BenchConfigError(f"{self.file}: [{self.where}] lacks the required key {key!r}")
        return self.table[key]

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        value = self.require(key) if required else self.table.get(key, default)
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(key, value, "a non-empty string" if required else "a string")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        """One of a fixed set of words: a value of any other type or spelling is refused with the set."""
        value = self.table.get(key, default)
        if not isinstance(value, str) or value not in choices:
            self.fail(key, value, ", ".join(f'"{choice}"' for choice in choices), choices=choices)
        return value

    def integer(self, key: str, default: int, *, minimum: int = 1) -> int:
        value = self.table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(key, value, f"a whole number >= {minimum}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.table.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            self.fail(key, value, "a number >= 0")
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, value, "true or false")
        return value

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.table.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, value, "a list of non-empty strings")
        return tuple(value)

    def string_table(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.fail(key, value, "a table of string values")
        return dict(value)

    def sub(self, key: str) -> _Reader:
        return _Reader(self.file, f"{self.where}.{key}", self.table.get(key, {}))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

def _check_name(reader: _Reader, kind: str, name: str) -> None:
    problem = name_problem(name)
    if problem:
        table = reader.where[: -len(name) - 1]  # where is "<table>.<name>"
        raise BenchConfigError(
            f"{reader.file}: [{table}] has the {kind} name {_show(name)}, refused because {problem}; "
            f"allowed: {NAME_RULE}"
        )


def _refuse_case_clashes(file: Path, table: str, names: Any, kind: str) -> None:
    for first, second in case_clashes(names):
        raise BenchConfigError(
            f"{file}: [{table}.{second}] differs from [{table}.{first}] only in case; allowed: {kind} names "
            f"that differ in more than case (macOS and Windows would store both in one file)"
        )

def positive_int(text: str) -> int:
    """An argparse type for counts on the command line: a whole number >= 1, or a clear error."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; allowed: a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small; allowed: a whole number >= 1")
    return value
