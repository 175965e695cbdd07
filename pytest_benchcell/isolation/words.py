"""One shell word as the guard reads it, one simple command, and getopt-style option parsing.

Shared by the parser (which builds them), the launcher resolvers and the arm rules (which read them)."""

from __future__ import annotations

import re
from collections.abc import Sequence
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


