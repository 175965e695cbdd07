r"""The arm rules: what one arm may run, checked against the commands the parser found.

What is checked on a command line
---------------------------------
Every simple command that would run is found, including those in function bodies, loop bodies
and conditions, and substitutions anywhere. For each one:

- The program name must be written literally: a variable, substitution, wildcard, brace expansion
  or `~` as the program name is refused, because the program is then chosen at run time.
- A name containing `/` is refused even for the arm's own binary: a path can point at a renamed
  copy of any program. Call programs by name.
- The name must be one of: the arm's binaries, its harmless utilities (`HARMLESS_UTILITIES` by
  default), `SHELL_BUILTINS_ALLOWED`, or a function defined in the same command line (its body is
  checked where it is defined). Everything else is refused: interpreters (python, node, perl, ruby,
  php, lua, awk, sed, ...), shells, `eval`, `source`/`.`, `alias`, `trap`, `hash`, `exec`, `kill`,
  and the launchers below.
- Launchers (`LAUNCHERS`: bash/sh/... `-c`, eval, env, xargs, find -exec, timeout, nice, nohup,
  command, exec, busybox, builtin, stdbuf, setsid, chroot, sudo, su, doas, watch, parallel,
  script, flock, ionice, taskset, source) are refused unless the arm lists them. When it does,
  the command they wrap is extracted and checked too (`timeout 5 curl x` still refuses curl;
  `bash -c S` and `eval S` parse S). When the guard cannot tell what a listed launcher would run
  (a script file, stdin, a string built at run time, an option it does not know), it refuses.
- Subcommand rules: for `SubcommandRule("tea", ("api",))` the first non-option argument of
  `tea` must not be `api`. It must be written literally (not `$X`, `$(...)` or a wildcard), and a
  bare `tea` fed by xargs is refused because its subcommand would come from the input. When the
  first non-option argument directly follows an option, it may be that option's value, so the
  next argument is checked as well.
- Variables that choose or load programs or steer paths cannot be changed (`PATH`, `LD_PRELOAD`,
  `BASH_ENV`, `PS4`, `CDPATH`, `OLDPWD`, ...: `LOADER_VARIABLES`), whether by prefix, assignment,
  `export`, `local`, `read`, `printf -v`, `unset`, a `for` variable or `env NAME=value`; nor can the
  arm's own (fixed) variables. Variables a program reads for code, options or configuration cannot be
  set, by family (`catalog.VARIABLE_FAMILIES`: OPENSSL_*, PYTHON*, npm_config_* in any case, MAKE*,
  TAR_*, GIT_*, pagers and editors, ...; and NAME_* named after one of the arm's binaries), minus
  the members that only change output; a pager or editor may be one harmless utility that only
  reads (`GIT_PAGER=cat`). They may be unset.
- Variable names given to builtins (`read`, `printf -v`, `export`, `local`, `unset`, `test -v`)
  must be plain identifiers: bash evaluates array subscripts such as `a[$(curl x)]`.
- Redirections to `/dev/tcp/...` or `/dev/udp/...` (bash opens a network connection itself) are
  refused, and so is a redirection whose target starts with a variable or substitution, since
  the guard cannot rule that out unless its values are known (the arm's fixed variables, literal
  values given on the line). Write file names literally (`> "out-$i.json"` is fine where the line
  gives `$i` literal values).
- With `ArmRules.write_roots` set (every trial sets them), redirections and the output operands
  and options of the utilities that write files (`arguments.write_targets`) must stay inside
  those folders (`arguments.WritePolicy`), paths normalised; a target with a part only known at
  run time must take its values from the arm's fixed variables or from literal values given on
  the same line (`_known_values`), since any other could hold `/../..`.
- Argument rules per binary (`ArgumentRule`): excluded subcommands (read as the binary reads them:
  npm's aliases and prefixes) and options (tar's old-style bundles unbundled), allowed URLs
  (`curl_rule.url_refusal` for every client; curl's whole command line by `curl_rule`).
- `sort --compress-program` (which starts a program) is refused, and so are `sort` options that
  are not written literally.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .arguments import WRITING_UTILITIES, ArgumentRule, WritePolicy, argument_reason, cd_leaves, subcommand_named, write_targets
from .curl_rule import CurlArgument, CurlConfinement, curl_refusal
from .catalog import (
    HARMLESS_UTILITIES,
    HARMLESS_VARIABLES,
    LOADER_VARIABLES,
    PAGER_VARIABLES,
    SHELL_BUILTINS_ALLOWED,
    variable_family,
)
from .words import Command, IDENTIFIER, option_spec, parse_options, possible_values, Word

if TYPE_CHECKING:
    from .parser import Findings  # the parser imports bashlex; the rules need only its results

_TEXT_UTILITY_EXAMPLES = ("cat", "head", "grep", "jq", "sort", "wc")


@dataclass(frozen=True)
class SubcommandRule:
    binary: str  # e.g. "tea"
    deny: tuple[str, ...]  # denied first arguments, e.g. ("api",) -> `tea api ...` denied


@dataclass(frozen=True)
class ArmRules:
    arm: str
    binaries: frozenset[str]  # programs this arm may run by name (e.g. {"tracker"})
    builtin_tools: frozenset[str]  # Claude Code built-in tools the arm declares, e.g. {"Bash"}
    mcp_servers: frozenset[str]  # this arm's MCP servers (tools are named mcp__<server>__<tool>)
    subcommand_rules: tuple[SubcommandRule, ...] = ()
    harmless: frozenset[str] = HARMLESS_UTILITIES  # the extra utilities allowed
    argument_rules: tuple[ArgumentRule, ...] = ()  # options, subcommands and URLs per binary
    write_roots: tuple[str, ...] = ()  # folders command lines may write into (() = not checked)
    # The arm's declared variables and their values: fixed (the agent may not set or unset them), so
    # "$TRACKER_URL/issues" or "$WORKDIR/out" is known before it runs.
    variables: Mapping[str, str] = field(default_factory=dict)
    fixed_variables: frozenset[str] = frozenset()  # further fixed names whose values are not known here

    def all_subcommand_rules(self) -> tuple[SubcommandRule, ...]:
        from_arguments = tuple(
            SubcommandRule(rule.binary, rule.deny_subcommands) for rule in self.argument_rules if rule.deny_subcommands
        )
        return self.subcommand_rules + from_arguments

    @property
    def curl(self) -> CurlConfinement | None:
        """Where curl may connect: its `allow_urls` rule with the arm's variables (curl_rule.py)."""
        for rule in self.argument_rules:
            if rule.binary == "curl" and rule.allow_urls is not None:
                return CurlConfinement(rule.allow_urls, dict(self.variables), writes_checked=bool(self.write_roots))
        return None

    def is_fixed(self, name: str) -> bool:
        return name in self.variables or name in self.fixed_variables


class ArmChecker:
    def __init__(self, rules: ArmRules, findings: Findings) -> None:
        self.rules = rules
        self.functions = findings.functions
        self.allowed = rules.binaries | rules.harmless | SHELL_BUILTINS_ALLOWED
        self.write_policy = WritePolicy(rules.write_roots)
        self.curl = rules.curl
        self.values = _known_values(rules, findings)
        # The CLI starts every command in the working directory; a cd the guard cannot place makes
        # the relative paths of the whole line unplaceable.
        self.after_cd = any(
            found.words and found.words[0].literal == "cd" and cd_leaves(found.words[1:], rules.write_roots, self.values)
            for found in findings.commands
        )

    def command(self, found: Command) -> str:
        """The reason this command is refused, or ""."""
        for name, value in found.assignments:
            reason = self.variable_target(Word.plain(name), value)
            if reason:
                return reason
        if not found.words:
            return ""
        first = found.words[0]
        by = f" (started by {found.launched_by})" if found.launched_by else ""
        if first.literal is None:
            return (
                f"the program name `{first.text}`{by} {first.dynamic}, so the guard cannot tell which "
                f"program would run; write the program name literally. In arm '{self.rules.arm}' "
                f"{self.offer()}."
            )
        program = first.literal
        if "/" in program:
            return self.path_reason(program, by)
        if program in self.functions:
            return ""
        if program not in self.allowed:
            return f"{program}{by} is not available in arm '{self.rules.arm}': {self.offer()}."
        args = found.words[1:]
        checks = (
            lambda: _BUILTIN_ARGUMENT_CHECKS.get(program, _no_check)(args, self),
            lambda: _sort_options_reason(args, found.appended_input) if program == "sort" else "",
            lambda: self.subcommand(program, found),
            lambda: self.arguments(program, found),
            lambda: self.writes(program, args),
            lambda: self.launcher(program, found),
        )
        for check in checks:
            reason = check()
            if reason:
                return reason
        return ""

    def offer(self) -> str:
        return offer(self.rules)

    def path_reason(self, program: str, by: str) -> str:
        base = program.rstrip("/").rsplit("/", 1)[-1]
        if base in self.rules.binaries or base in self.rules.harmless:
            return (
                f"{program}{by} is a path: call programs by name (`{base} ...`), not by path, in arm "
                f"'{self.rules.arm}'."
            )
        return (
            f"{program}{by} is a path to a program, and arm '{self.rules.arm}' runs programs by name "
            f"only: {self.offer()}."
        )

    def subcommand(self, program: str, found: Command) -> str:
        for rule in self.rules.all_subcommand_rules():
            if rule.binary == program:
                reason = _subcommand_reason(rule, found, self.rules.arm)
                if reason:
                    return reason
        return ""

    def arguments(self, program: str, found: Command) -> str:
        for rule in self.rules.argument_rules:
            if rule.binary != program or not (rule.deny_options or rule.allow_urls is not None):
                continue
            if found.appended_input:
                return (
                    f"{program} run by {found.launched_by} would take arguments from its input, which the guard "
                    f"cannot check against arm '{self.rules.arm}''s rules for {program}; write them literally"
                )
            if program == "curl" and self.curl is not None:
                # curl's URLs and options by curl_rule, which knows curl's whole command line.
                args = [CurlArgument(word.raw, word.literal) for word in found.words[1:]]
                reason = curl_refusal(args, self.curl)
                if reason:
                    return reason
                rule = replace(rule, allow_urls=None)
            reason = argument_reason(rule, found.words[1:], self.rules.arm, self.rules.variables)
            if reason:
                return reason
        return ""

    def writes(self, program: str, args: Sequence[Word]) -> str:
        """Output files of the utilities that write them (uniq's second operand, sort -o, ...)."""
        if not self.rules.write_roots:
            return ""
        targets = write_targets(program, args)
        if isinstance(targets, str):
            return targets
        return self.redirections(targets)

    def redirections(self, writes: Sequence[tuple[Word, str]]) -> str:
        if not self.rules.write_roots:
            return ""
        return _first(self.write_policy.reason(word, what, self.after_cd, self.values) for word, what in writes)

    def devices(self, targets: Sequence[Word]) -> str:
        """Redirection targets that start with a variable: bash opens /dev/tcp/HOST/PORT itself."""
        for target in targets:
            paths = possible_values(target.raw, self.values)
            if paths is None:
                return (
                    f"the redirection target `{target.raw}` starts with a variable or substitution, so "
                    "the guard cannot rule out a network device; write the file name literally "
                    '(e.g. > out.json or > "out-$i.json")'
                )
            for path in paths:
                if re.match(r"/dev/(tcp|udp)/", posixpath.normpath(path) if path.startswith("/") else path):
                    return (
                        f"redirecting to {target.raw} ({path}) opens a network connection from the shell, "
                        "which no arm may do; use the arm's own tools"
                    )
        return ""

    def launcher(self, program: str, found: Command) -> str:
        if not found.unresolved:
            return ""
        return (
            f"{program} {found.unresolved}, so the guard cannot check what it would run; run the "
            f"command directly instead. In arm '{self.rules.arm}' {self.offer()}."
        )

    def variable_target(self, name_word: Word, value: Word | None) -> str:
        """Setting (value given) or unsetting (None) a variable: refused for the arm's fixed
        variables, those that load programs, and, when set, the families programs read."""
        name = name_word.literal
        if name is None or not IDENTIFIER.match(name):
            return (
                f"`{name_word.text}` is not a plain variable name (bash evaluates array subscripts, "
                "which can run commands); use a plain name"
            )
        arm = self.rules.arm
        if self.rules.is_fixed(name):
            return f"{name} may not be changed in arm '{arm}': the arm's environment fixes it"
        if name in LOADER_VARIABLES or name.startswith("BASH_FUNC_"):
            return (
                f"{name} may not be changed in arm '{arm}': it decides which programs run, loads code into "
                "them or steers where cd and relative paths lead; call programs by name instead"
            )
        if value is None:
            return ""
        if name in HARMLESS_VARIABLES or (name in PAGER_VARIABLES and self.harmless_program(value)):
            return ""
        family = variable_family(name)
        does = family.does if family is not None else self.named_after_a_binary(name)
        if does:
            return (
                f"{name} may not be changed in arm '{arm}': {does}, which the command line does not show; "
                "run without setting it"
                + (" (a pager or editor may be one harmless utility written literally, e.g. cat)"
                   if name in PAGER_VARIABLES else "")
            )
        return ""

    def harmless_program(self, value: Word) -> bool:
        """A pager or editor value that starts nothing but a harmless utility that only reads."""
        program = value.literal
        if program is None:
            return False
        return program in ("", ":") or (program in self.rules.harmless and program not in WRITING_UTILITIES)

    def named_after_a_binary(self, name: str) -> str:
        """A variable named after one of the arm's binaries (TRACKER_CONFIG for tracker) configures it."""
        for binary in sorted(self.rules.binaries):
            stem = re.sub(r"[^A-Za-z0-9]", "_", binary).upper()
            if name.startswith(stem + "_"):
                return f"it is named after the arm's binary {binary}, which may read it"
        return ""


# A substitution whose output is only numbers: seq with numeric operands and no options.
_NUMBERS = re.compile(r'"?\$\(seq(?: +-?[0-9]+(?:\.[0-9]+)?){1,3}\)"?')


def _known_values(rules: ArmRules, findings: Findings) -> dict[str, tuple[str, ...]]:
    """What each variable can hold on this line, where that is known before it runs: the arm's
    fixed variables, and variables the line gives only literal values (`for i in 1 2`, `n=7`).
    A variable given any value computed at run time, or never given one here, is left out."""
    given: dict[str, list[str | None]] = {}

    def give(name: str, value: Word | None) -> None:
        if value is not None and value.literal is None and _NUMBERS.fullmatch(value.raw):
            value = Word.plain("0")  # `$(seq 1 3)` gives numbers: any one stands for all (no / or ..)
        given.setdefault(name, []).append(value.literal if value is not None else None)

    for name, words in findings.assigned:
        for word in words if words is not None else (None,):
            give(name, word)
    for found in findings.commands:
        for name, value in found.assignments:
            give(name, value)
        program = found.words[0].literal if found.words else None
        args = found.words[1:]
        if program in ("export", "local"):
            for word in args:
                name, equals, rest = (word.literal or word.text).partition("=")
                if equals:
                    give(name, Word.plain(rest) if word.literal is not None else None)
        elif program == "unset":
            for word in args:
                give(word.shown, Word.plain(""))
        elif program in ("read", "printf"):
            for word in args:
                give(word.shown, None)  # any word may be the name read or printed into
    known: dict[str, tuple[str, ...]] = {}
    for name, values in given.items():
        literal = tuple(value for value in values if value is not None)
        if len(literal) == len(values):
            known[name] = literal
    known.update({name: (value,) for name, value in rules.variables.items()})
    return known


def _no_check(args: Sequence[Word], checker: ArmChecker) -> str:
    return ""


def _check_read(args: Sequence[Word], checker: ArmChecker) -> str:
    spec = option_spec("-e -r -s", "-a -d -i -n -N -p -t -u")
    parsed = parse_options("read", args, spec)
    if parsed.problem:
        return f"read {parsed.problem}"
    targets = list(parsed.operands)
    array = parsed.value("-a")
    if array is not None:
        targets.append(array)
    return _first(checker.variable_target(word, value=UNKNOWN_VALUE) for word in targets)


def _check_printf(args: Sequence[Word], checker: ArmChecker) -> str:
    first = args[0].literal if args else None
    if first is not None and first.startswith("-v"):
        target = Word.plain(first[2:]) if len(first) > 2 else (args[1] if len(args) > 1 else None)
        if target is not None:
            return checker.variable_target(target, value=UNKNOWN_VALUE)
    return ""


def _check_declaration(program: str, allowed_options: str) -> Callable[[Sequence[Word], ArmChecker], str]:
    """export / local / unset: NAME or NAME=value operands; only harmless options."""

    def check(args: Sequence[Word], checker: ArmChecker) -> str:
        parsed = parse_options(program, args, option_spec(allowed_options))
        if parsed.problem:
            return f"{program} {parsed.problem} (allowed options: {allowed_options})"
        for word in parsed.operands:
            name, equals, _ = word.text.partition("=")
            raw_name = word.raw.partition("=")[0]
            if any(char in raw_name for char in "$`"):
                return (
                    f"{program} is given a variable name that is not literal ({word.text}); "
                    "use a plain name"
                )
            value = None
            if equals:
                known = word.literal is not None
                value = Word.plain((word.literal or "").partition("=")[2]) if known else UNKNOWN_VALUE
            elif program in ("local", "unset"):
                value = None  # unsetting or localising: only loader variables matter
            reason = checker.variable_target(Word.plain(name), value)
            if reason:
                return reason
        return ""

    return check


def _check_test(args: Sequence[Word], checker: ArmChecker) -> str:
    for option, operand in zip(args, args[1:]):
        plain_name = operand.literal is not None and IDENTIFIER.match(operand.literal)
        if option.literal in ("-v", "-R") and not plain_name:
            return (
                f"`test {option.literal} {operand.text}` names an array element or a computed name; bash "
                "evaluates such subscripts, which can run commands. Use a plain variable name"
            )
    return ""


UNKNOWN_VALUE = Word(text="", raw="", literal=None, dynamic="is read at run time")
_BUILTIN_ARGUMENT_CHECKS: dict[str, Callable[[Sequence[Word], ArmChecker], str]] = {
    "read": _check_read,
    "printf": _check_printf,
    "export": _check_declaration("export", "-f -n -p"),
    "local": _check_declaration("local", "-r -x"),
    "unset": _check_declaration("unset", "-f -v"),
    "test": _check_test,
    "[": _check_test,
}


def _sort_options_reason(args: Sequence[Word], appended_input: bool) -> str:
    """GNU sort --compress-program=PROG starts PROG; getopt accepts any unique prefix (--co...)."""
    if appended_input:
        return (
            "sort fed arguments by xargs could be given --compress-program, which starts a "
            "program; pipe into sort instead"
        )
    for word in args:
        if word.literal == "--":
            return ""
        if word.literal is None:
            return (
                f"sort is given an argument that is not written literally ({word.text}); it could be "
                "an option such as --compress-program. Write sort's arguments literally or pipe into sort"
            )
        name = word.literal.partition("=")[0]
        if len(name) >= 4 and "--compress-program".startswith(name):
            return "sort --compress-program starts another program; sort without it"
    return ""


def _subcommand_reason(rule: SubcommandRule, found: Command, arm: str) -> str:
    binary = rule.binary
    plural = len(rule.deny) > 1
    excluded = (
        f"the {binary} subcommand{'s' if plural else ''} {', '.join(rule.deny)} "
        f"{'are' if plural else 'is'} excluded in arm '{arm}'; use another {binary} subcommand"
    )
    operands: list[tuple[Word, bool]] = []  # (word, directly after an option)
    after_option = only_operands = False
    for word in found.words[1:]:
        text = word.literal if word.literal is not None else word.text
        if not only_operands and text == "--":
            only_operands = True
        elif not only_operands and text.startswith("-") and len(text) > 1:
            after_option = "=" not in text
        else:
            operands.append((word, after_option))
            after_option = False
    if not operands:
        if found.appended_input:
            return (
                f"{binary} run by {found.launched_by} would take its subcommand from the input: {excluded}. "
                "Write the subcommand literally."
            )
        return ""
    first, follows_option = operands[0]
    if first.literal is None:
        return f"the {binary} subcommand `{first.text}` {first.dynamic}; write it literally ({excluded})."
    denied = subcommand_named(binary, first.literal, rule.deny)
    if denied:
        runs_as = "" if denied == first.literal else f" ({binary} runs it as {denied})"
        return f"`{binary} {first.literal}`{runs_as} is not available: {excluded}."
    second = operands[1][0].literal if follows_option and len(operands) > 1 else None
    if second is not None and subcommand_named(binary, second, rule.deny):
        return (
            f"`{binary} ... {second}` may run the subcommand {second}, because the word before it could be "
            f"an option's value: {excluded}. Put options after the subcommand."
        )
    return ""


def _first(reasons: Iterable[str]) -> str:
    return next((reason for reason in reasons if reason), "")


# --------------------------------------------------------------------------------------------
# Reasons
# --------------------------------------------------------------------------------------------


def offer(rules: ArmRules) -> str:
    """What the arm may use, for the end of a refusal."""
    pieces: list[str] = []
    if "Bash" in rules.builtin_tools:
        runnable = sorted(rules.binaries)
        examples = [name for name in _TEXT_UTILITY_EXAMPLES if name in rules.harmless]
        if rules.harmless:
            shown = ", ".join(examples[:4] or sorted(rules.harmless)[:4])
            runnable.append(f"common text utilities ({shown}, ...)")
        if runnable:
            pieces.append("this arm may run " + _join(runnable))
        else:
            pieces.append("this arm's shell may run only shell builtins")
    servers = sorted(rules.mcp_servers)
    if servers:
        tools = ", ".join(f"mcp__{server}__*" for server in servers)
        pieces.append(f"{'it' if pieces else 'this arm'} may use the MCP tools {tools}")
    others = sorted(rules.builtin_tools - {"Bash"})
    if others:
        pieces.append(f"{'it' if pieces else 'this arm'} may use the built-in tools {', '.join(others)}")
    return "; ".join(pieces) if pieces else "this arm has no tools"


def no_shell_reason(rules: ArmRules) -> str:
    return f"arm '{rules.arm}' has no shell (no Bash tool): {offer(rules)}."


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
