"""One shell word as the guard reads it, one simple command, getopt-style option parsing, and the
values a word can take when its variables are known (`expand_fixed`, `possible_values`).

Shared by the parser (which builds them), the launcher resolvers and the arm rules (which read them)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

class GuardParseError(ValueError):
    """The guard cannot tell what a command line would run. The message is meant for the agent."""



def unparsable(detail: str, advice: str = "") -> GuardParseError:
    """A refusal for a line the guard cannot read; `advice` is a sentence saying what to write."""
    advice = f" {advice}" if advice else ""
    return GuardParseError(
        f"could not parse this command: {detail}.{advice} Plain commands joined by |, &&, ||, ; or "
        "newlines, if/for/while loops, $(...) and quoted here-documents are fine."
    )


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Word:
    text: str  # bashlex's reading: quotes removed, expansions left as written (for display)
    raw: str  # the word exactly as written
    literal: str | None  # the value bash will use, when known before running; else None
    dynamic: str = ""  # why the value is not known ("" when literal is set)
    prefix: str = ""  # the known leading part of the value

    @staticmethod
    def plain(value: str) -> Word:
        return Word(text=value, raw=value, literal=value, prefix=value)

    @property
    def shown(self) -> str:
        return self.literal if self.literal is not None else self.text


@dataclass
class Command:
    words: tuple[Word, ...]
    assignments: tuple[tuple[str, Word], ...] = ()
    launched_by: str = ""  # the launcher this command was extracted from
    appended_input: bool = False  # xargs/parallel append input words to it
    unresolved: str = ""  # a launcher whose target the guard cannot tell

    def argv(self) -> list[str]:
        return [word.shown for word in self.words]



@dataclass(frozen=True)
class OptionSpec:
    flags: frozenset[str] = frozenset()  # options without a value (-x, --verbose)
    valued: frozenset[str] = frozenset()  # options followed by a value (-n 5, --signal=KILL)
    optional: frozenset[str] = frozenset()  # values only when attached (-i{}, --replace={})
    numeric: bool = False  # nice's -10


def option_spec(flags: str = "", valued: str = "", optional: str = "", numeric: bool = False) -> OptionSpec:
    return OptionSpec(
        frozenset(flags.split()), frozenset(valued.split()), frozenset(optional.split()), numeric
    )


@dataclass
class ParsedOptions:
    options: list[tuple[str, Word | None]]
    operands: tuple[Word, ...]
    problem: str = ""

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def value(self, *names: str) -> Word | None:
        for name, value in self.options:
            if name in names:
                return value
        return None


def parse_options(program: str, args: Sequence[Word], spec: OptionSpec) -> ParsedOptions:
    """Split leading options from operands, getopt style. Unknown options are a problem: guessing
    whether they take a value could make the guard check the wrong word as the program."""
    options: list[tuple[str, Word | None]] = []

    def problem(text: str) -> ParsedOptions:
        return ParsedOptions(options, (), f"is given {text}, which the guard cannot follow")

    i = 0
    while i < len(args):
        text = args[i].literal
        if text is None:
            if args[i].text.startswith("-"):
                return problem(f"an option that is not written literally ({args[i].text})")
            break
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            if name in spec.valued and not equals:
                if i + 1 >= len(args):
                    return problem(f"{name} without its value")
                options.append((name, args[i + 1]))
                i += 1
            elif name in spec.valued or (name in spec.optional and equals):
                options.append((name, Word.plain(value)))
            elif name in spec.flags | spec.optional and not equals:
                options.append((name, None))
            else:
                return problem(f"the option {name}")
            i += 1
            continue
        if spec.numeric and text[1:].isdigit():
            options.append((text, None))
            i += 1
            continue
        for j in range(1, len(text)):
            option, rest = f"-{text[j]}", text[j + 1 :]
            if option in spec.flags:
                options.append((option, None))
                continue
            if option in spec.optional:
                options.append((option, Word.plain(rest) if rest else None))
                break
            if option in spec.valued:
                if rest:
                    options.append((option, Word.plain(rest)))
                elif i + 1 < len(args):
                    i += 1
                    options.append((option, args[i]))
                else:
                    return problem(f"{option} without its value")
                break
            return problem(f"the option {option}")
        i += 1
    return ParsedOptions(options, tuple(args[i:]))


UNKNOWN_PART = "\x00"  # stands for a part of a value only known at run time (never in a real path or URL)


def expand_fixed(raw: str, variables: Mapping[str, str], unknown: str | None = None) -> str | None:
    """The value of a shell word that uses only quotes, escapes and `variables`; None if anything
    else would be expanded when it runs (another variable, a substitution, a wildcard, `~`).
    With `unknown`, another plain variable inside double quotes becomes that marker instead."""
    out: list[str] = []
    i, quote = 0, ""
    while i < len(raw):
        char = raw[i]
        if quote == "'":
            if char == "'":
                quote = ""
            else:
                out.append(char)
            i += 1
            continue
        if char == "\\":
            if i + 1 >= len(raw):
                return None
            following = raw[i + 1]
            if quote == '"' and following not in '$`"\\\n':
                out.append(char)
            out.append(following)
            i += 2
            continue
        if char == "'" and not quote:
            quote = "'"
        elif char == '"':
            quote = "" if quote == '"' else '"'
        elif char == "$":
            name, length = _variable_at(raw, i)
            if name is not None and name in variables:
                out.append(variables[name])
            elif name is not None and unknown is not None and quote == '"':
                out.append(unknown)
            else:
                return None
            i += length
            continue
        elif char == "`":
            return None
        elif not quote and (char in "*?[{~" or char.isspace()):
            return None
        else:
            out.append(char)
        i += 1
    return None if quote else "".join(out)


def _variable_at(raw: str, i: int) -> tuple[str | None, int]:
    """The plain variable `$NAME` or `${NAME}` starting at raw[i] and its length in raw."""
    if raw.startswith("${", i):
        end = raw.find("}", i)
        name = raw[i + 2 : end] if end != -1 else ""
        return (name, end - i + 1) if name.isidentifier() else (None, 0)
    j = i + 1
    while j < len(raw) and (raw[j].isalnum() or raw[j] == "_"):
        j += 1
    name = raw[i + 1 : j]
    return (name, j - i) if name and not name[0].isdigit() else (None, 0)


def variables_in(raw: str) -> list[str]:
    """The plain variables `$NAME` and `${NAME}` a shell word uses, in order (repeats kept)."""
    names = []
    i = raw.find("$")
    while i != -1:
        name, length = _variable_at(raw, i)
        if name is not None:
            names.append(name)
        i = raw.find("$", i + max(length, 1))
    return names


def possible_values(raw: str, values: Mapping[str, Sequence[str]], limit: int = 64) -> list[str] | None:
    """Every value a shell word can take when each variable it uses holds one of `values[name]`;
    None when any part is unknown (another variable, a substitution, a wildcard) or the variables
    allow more than `limit` combinations."""
    names = sorted(set(variables_in(raw)))
    if any(name not in values for name in names):
        return None
    combinations = list(itertools.islice(itertools.product(*(values[name] for name in names)), limit + 1))
    if len(combinations) > limit:
        return None
    results = []
    for combination in combinations:
        value = expand_fixed(raw, dict(zip(names, combination)))
        if value is None:
            return None
        results.append(value)
    return results
