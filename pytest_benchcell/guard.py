r"""The tool guard: decide, before a tool call runs, whether an arm may make it.

Pure: no pytest, no claude_agent_sdk. `agent.py` calls `check_tool_call` from a PreToolUse hook
for every tool call (built-ins and MCP tools included); `audit.py` re-applies it to the calls that
the transcript shows were executed.

Tools
-----
- `Bash` is allowed only when the arm declares it; the command line is then checked (below).
  `BashOutput` and `KillShell`/`KillBash` (reading or stopping a background `Bash` call) come with
  `Bash`: they start no program.
- `mcp__<server>__<tool>` is allowed only when `<server>` is one of the arm's MCP servers.
- Every other built-in (Read, Write, Edit, Glob, Grep, WebFetch, WebSearch, Task, Agent, ...) is
  allowed only when the arm declares it.

Why a real parser, and why bashlex
----------------------------------
A shell line hides commands in many places: pipelines, `;` `&&` `||` `&`, newlines, subshells,
brace groups, `$(...)` and backticks (also inside double quotes, assignments and redirection
targets), process substitution, loop and function bodies. A regular expression or `shlex.split`
cannot tell `echo 'curl x'` (data) from `echo $(curl x)` (a command). bashlex is a pure-Python port
of GNU bash's own yacc grammar and word-expansion code: no subprocess, no bash needed, and it
returns an AST whose nodes carry source positions, which this module uses to re-read each word as
written. But it is a partial port with real defects (bashlex 0.18). Each one below was found by
running lines in a real bash next to the guard (tests/test_guard.py does this), and each is
either fixed here or turned into a refusal:

- Not implemented, so refused with a reason that names a replacement: `case`, `[[ ... ]]`,
  `(( ... ))`, `$(( ... ))` and `$[ ... ]`, `time`, `select`, `coproc`, C-style `for ((...))`,
  arrays `a=(...)`.
- Here-documents (fixed by replacing two bashlex functions, see `_read_here_document` and
  `_next_token_after_here_documents`): bashlex compared the closing line with the delimiter as
  written, so `<<'EOF'` never ended; it joined backslash-newline inside quoted bodies, so a body
  line ending in `\` swallowed the delimiter and hid the commands after it; and inside compound
  commands (if, loops, `{ }`, functions) it read bodies one line late, so an empty body hid the
  next line. Here-documents inside `$(...)` are refused: bashlex mis-measures them.
- bashlex parses only the first line of commands inside `$(...)`, backticks and `<(...)`, and
  parses backtick text without bash's unescaping. A substitution whose parsed commands do not
  reach its closing `)` or backtick, and backticks containing `\$`, `` \` ``, `\\` or `\"`, are
  refused (`_substitution_end`).
- `bashlex.parse` restarts one character after each top-level command, so after `;#` or `)#` it
  read the comment's text as commands (a quote there could swallow later lines). Refused when the
  skipped character is not a blank (`_check_restarts`).
- bashlex drops backslash-newline inside a word before expanding it, which shifts the positions of
  the substitutions in it. A word with substitutions and a line continuation is refused, and
  every word's source text must agree with bashlex's reading of it (`_without_quoting`).
- Word expansion blind spots, cross-checked by the guard's own scanner of each word
  (`_scan_word`): a word that starts and ends with a single quote is taken as wholly quoted
  (`'a'$(curl x)'b'` hid curl; such words are read again), and `'...'` inside a larger word is not
  treated as quoting (`--body='run `make`'` showed a false `make`; substitutions inside single
  quotes are dropped). Any `$(`, backtick or `${` that bashlex did not report is refused.
- bashlex does not look inside `${...}`, so `${X:-$(curl x)}` would hide curl. Only plain forms
  are accepted (`_SAFE_BRACED_PARAMETER`): a name with a literal default, pattern or numeric
  substring offset, where a default may use a plain `$name`. Refused: quotes, substitutions, nested
  braces, array subscripts, indirection `${!x}`, offsets that are not numbers, `@P` and
  `${NAME:=...}` on protected variables. Array subscripts, indirection and offsets are
  arithmetic, and bash's arithmetic evaluates a variable's value as an expression, so
  `i='a[$(curl x)]'; echo ${x:i}` runs curl (checked against bash 5.2).
- bashlex's quote removal differs from bash's in corners (backslashes inside double quotes), so
  the guard computes each word's value itself (`_Word.literal`). Program names, subcommands,
  variable names and command strings handed to another shell all use that value.

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
- Variables that choose or load programs cannot be set (`PATH`, `LD_PRELOAD`, `BASH_ENV`, `PS4`,
  ...: `LOADER_VARIABLES`), whether by prefix, assignment, `export`, `local`, `read`, `printf -v`,
  `unset`, a `for` variable or `env NAME=value`. Variables naming a program another program may
  start (`PAGER`, `EDITOR`, ...: `PROGRAM_VARIABLES`) may be set only to a program the arm may run
  (so `PAGER=cat` is fine).
- Variable names given to builtins (`read`, `printf -v`, `export`, `local`, `unset`, `test -v`)
  must be plain identifiers: bash evaluates array subscripts such as `a[$(curl x)]`.
- Redirections to `/dev/tcp/...` or `/dev/udp/...` (bash opens a network connection itself) are
  refused, and so is a redirection whose target starts with a variable or substitution, since
  the guard cannot rule that out. Write file names literally (`> "out-$i.json"` and `> ~/x` are
  fine).
- `sort --compress-program` (which starts a program) is refused, and so are `sort` options that
  are not written literally.

Here-documents: with a quoted delimiter (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) the body is data and
is not looked at. With an unquoted delimiter bash expands `$(...)` and backticks in the body, so
the guard parses those substitutions and checks the commands in them like any other; anything in
the body it cannot read is refused with a hint to quote the delimiter.

What the guard cannot guarantee
-------------------------------
- It sees the command line, not what an allowed program does: the arm's own binary may start
  other programs, read configuration or honour variables not in the lists above. An arm that
  lists an interpreter, a shell without `-c`, or a program that starts others but is not in
  `LAUNCHERS` can run anything through it.
- Harmless utilities read any file the agent's user can read, and redirections write files.
- Variable values are unknown: `tracker $ARGS` is allowed (only the program name, subcommand,
  variable names and command strings must be literal).
- Aliases and functions that Claude Code's shell loads from the user's configuration are
  invisible; `alias` itself is refused. Functions defined by earlier Bash calls are unknown, so
  calling them is refused.
- Structural parsing is bashlex's: where its grammar differs from bash's in a way the word
  cross-checks do not catch, the guard may err. Over-reporting (a false refusal) is the common
  failure; every path that could hide a command is refused instead of trusted.
- Refusals that cost legitimate commands: the constructs bashlex lacks (above), several lines of
  commands inside one `$(...)`, here-documents inside `$(...)`, backticks with escapes, `;#`
  without a blank, a line continuation inside a word with substitutions, redirections to
  `"$file"`, `${...}` beyond the plain forms, and global options that take a separate value
  before a ruled binary's subcommand when the next argument happens to be a denied subcommand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors
import bashlex.heredoc
import bashlex.tokenizer

__all__ = [
    "HARMLESS_UTILITIES",
    "SHELL_BUILTINS_ALLOWED",
    "LAUNCHERS",
    "LOADER_VARIABLES",
    "PROGRAM_VARIABLES",
    "SubcommandRule",
    "ArmRules",
    "Decision",
    "GuardParseError",
    "check_tool_call",
    "check_bash_command",
    "commands_in",
]

# Text and file inspection utilities every shell arm may run. None of them starts another program
# (sort's --compress-program is refused separately). Deliberately absent: sed and awk (they run
# code), find and xargs (they start programs), tee and rmdir (not needed to inspect output),
# interpreters, shells and network tools.
HARMLESS_UTILITIES: frozenset[str] = frozenset(
    "cat head tail wc cut tr sort uniq comm grep egrep fgrep diff echo printf ls pwd cd mkdir "
    "test [ true false basename dirname seq sleep date nl rev tac fold column expr jq".split()
)

# Shell builtins and keywords that run no program. `set` is allowed in every form: its options
# change the shell's own behaviour only (the one indirect path, xtrace expanding PS4, is closed
# by refusing assignments to PS4). `wait` only waits for this shell's own background jobs. `type`
# only describes names. Not here on purpose: eval, source, ., exec, command, builtin, alias,
# trap, hash (`hash -p` rebinds a name to any file), enable, let and declare (arithmetic on
# array subscripts runs substitutions), kill, mapfile (-C runs a callback), getopts.
SHELL_BUILTINS_ALLOWED: frozenset[str] = frozenset(
    "cd echo printf test [ true false read export unset set local return exit break continue "
    "shift : pwd wait type".split()
)

# Programs that run another program given on their command line. Refused unless the arm lists
# them; when listed, the wrapped command is extracted and checked too.
SHELLS: frozenset[str] = frozenset("bash sh zsh dash ksh mksh ash fish".split())
LAUNCHERS: frozenset[str] = SHELLS | frozenset(
    "eval env xargs find timeout nice nohup command exec busybox builtin stdbuf setsid chroot "
    "sudo su doas watch parallel script flock ionice taskset source .".split()
)

# Variables that decide which program runs, load code into programs, or decide which configuration
# (and credentials) they read: never settable. HOME also keeps `> ~/x` from reaching /dev/tcp.
LOADER_VARIABLES: frozenset[str] = frozenset(
    "PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV SHELLOPTS BASHOPTS PS1 PS2 PS3 PS4 "
    "PROMPT_COMMAND NODE_OPTIONS PYTHONSTARTUP PYTHONPATH PERL5OPT PERL5LIB RUBYOPT LESSOPEN "
    "LESSCLOSE GIT_EXEC_PATH GCONV_PATH HOME XDG_CONFIG_HOME".split()
)
# Variables naming a program that other programs start: settable only to a program the arm may run.
PROGRAM_VARIABLES: frozenset[str] = frozenset(
    "PAGER GIT_PAGER MANPAGER EDITOR VISUAL GIT_EDITOR BROWSER SHELL GIT_SSH GIT_SSH_COMMAND "
    "GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS".split()
)

# Built-ins that only read or stop the output of a background Bash call: they come with Bash.
_BASH_COMPANIONS = frozenset({"BashOutput", "KillShell", "KillBash"})
_MAX_DEPTH = 8  # nested command strings (bash -c "eval '...'") followed before giving up
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TEXT_UTILITY_EXAMPLES = ("cat", "head", "grep", "jq", "sort", "wc")


# --------------------------------------------------------------------------------------------
# Public types
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # "" when allowed; otherwise a sentence the agent can act on


class GuardParseError(ValueError):
    """The guard cannot tell what a command line would run. The message is meant for the agent."""


ALLOWED = Decision(True, "")


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def check_tool_call(tool_name: str, tool_input: Mapping[str, Any], rules: ArmRules) -> Decision:
    """Decide whether `rules.arm` may make this tool call (any tool, built-in or MCP)."""
    if tool_name == "Bash":
        if "Bash" not in rules.builtin_tools:
            return Decision(False, _no_shell_reason(rules))
        command = tool_input.get("command")
        if not isinstance(command, str):
            return Decision(False, "the Bash call has no command string; pass the command to run")
        return check_bash_command(command, rules)
    if tool_name.startswith("mcp__"):
        if any(tool_name.startswith(f"mcp__{server}__") for server in rules.mcp_servers):
            return ALLOWED
        return Decision(False, f"{tool_name} is not available in arm '{rules.arm}': {_offer(rules)}.")
    if tool_name in rules.builtin_tools:
        return ALLOWED
    if tool_name in _BASH_COMPANIONS and "Bash" in rules.builtin_tools:
        return ALLOWED
    return Decision(False, f"the {tool_name} tool is not available in arm '{rules.arm}': {_offer(rules)}.")


def check_bash_command(command: str, rules: ArmRules) -> Decision:
    """Decide whether `rules.arm` may run this shell command line."""
    if "Bash" not in rules.builtin_tools:
        return Decision(False, _no_shell_reason(rules))
    try:
        findings = _find_commands(command)
    except GuardParseError as error:
        return Decision(False, str(error))
    checker = _ArmChecker(rules, findings.functions)
    for variable in findings.loop_variables:
        reason = checker.variable_target(variable, value=_UNKNOWN_VALUE)
        if reason:
            return Decision(False, reason)
    for found in findings.commands:
        reason = checker.command(found)
        if reason:
            return Decision(False, reason)
    if findings.refusals:
        return Decision(False, findings.refusals[0])
    return ALLOWED


def commands_in(command: str) -> list[list[str]]:
    """Every simple command that would run, as argv word lists, launchers resolved.

    Words are shown with quotes removed; expansions stay as written (`$x`, `$(...)`). Commands
    inside substitutions come before the command that uses them; the command a launcher wraps comes
    after the launcher (`timeout 5 curl x` gives both). A launcher whose target the guard cannot
    determine is listed alone. Assignment-only commands are left out. Raises GuardParseError when
    the line cannot be understood.
    """
    return [found.argv() for found in _find_commands(command).commands if found.words]


# --------------------------------------------------------------------------------------------
# bashlex fixes: reading here-documents as bash does
# --------------------------------------------------------------------------------------------


def _heredoc_delimiter(raw: str) -> tuple[str, bool]:
    """The delimiter word after quote removal, and whether any part of it was quoted.

    bash expands nothing in the delimiter but removes quotes, including $'...' and $"..."
    (`<<$'EOF'` ends at a line `EOF`). Escapes inside $'...' are refused rather than decoded.
    """
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "$" and raw[i + 1 : i + 2] in ("'", '"'):
            if raw[i + 1] == "'" and "\\" in raw[i:]:
                raise bashlex.errors.ParsingError("a here-document delimiter with $'...' escapes", raw, 0)
            i += 1  # the quote that follows is handled below
        elif char == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            quoted = True
            i += 2
        elif char in "'\"":
            end = raw.find(char, i + 1)
            end = len(raw) if end < 0 else end
            out.append(raw[i + 1 : end])
            quoted = True
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out), quoted


def _read_here_document(tokenizer: Any, redirect: Any, lineno: int, strip_tabs: bool) -> str:
    """Replacement for bashlex.heredoc.makeheredoc.

    bashlex compares body lines with the delimiter as written, so `<<'EOF'` never ends; bash
    removes quotes first, and a quoted delimiter makes the body literal (recorded as `quoted`).
    bashlex also reads the body through its input reader, which joins backslash-newline even in a
    quoted body, where bash does not: a body line `x\\` would swallow the delimiter line and hide the
    commands after it. So the lines are read here, straight from the source.
    """
    if tokenizer._eol_ungetc_lookahead is not None:
        source = tokenizer._shell_input_line
        raise bashlex.errors.ParsingError("here-document in an unexpected place", source, 0)
    delimiter, quoted = _heredoc_delimiter(redirect.output.word)
    text: str = tokenizer._shell_input_line
    start = index = tokenizer._shell_input_line_index
    lines: list[str] = []
    while True:
        if index >= len(text):
            raise bashlex.errors.ParsingError(
                f"here-document not terminated (wanted a line {delimiter!r})", text, len(text)
            )
        line, index = _source_line(text, index)
        # In an unquoted body an unescaped backslash-newline joins lines, before the delimiter test.
        while not quoted and _ends_with_line_continuation(line) and index < len(text):
            more, index = _source_line(text, index)
            line = line[:-2] + more
        if strip_tabs:
            line = line.lstrip("\t")
        if line.removesuffix("\n") == delimiter:
            break
        lines.append(line)
    tokenizer._shell_input_line_index = index
    tokenizer._line_number += text.count("\n", start, index)
    end = index - 1
    body = "".join(lines)
    redirect.heredoc = bashlex.ast.node(kind="heredoc", value=body, quoted=quoted, pos=(start, end))
    if redirect.pos[1] + 1 == start:
        redirect.pos = (redirect.pos[0], end)
    return body


def _source_line(text: str, index: int) -> tuple[str, int]:
    """The line starting at index, with its newline (added at the end of the text), and the next index."""
    newline = text.find("\n", index)
    if newline < 0:
        return text[index:] + "\n", len(text)
    return text[index : newline + 1], newline + 1


def _ends_with_line_continuation(line: str) -> bool:
    body = line.removesuffix("\n")
    backslashes = len(body) - len(body.rstrip("\\"))
    return line.endswith("\n") and backslashes % 2 == 1


_bashlex_next_token = bashlex.tokenizer.tokenizer.token


def _next_token_after_here_documents(tokenizer: Any) -> Any:
    """Replacement for bashlex's tokenizer.token: read pending here-document bodies first.

    bashlex reads here-document bodies when it lexes the newline that ends the `<<` line. Inside a
    compound command (if, for, while, { }, functions) the parser has not registered the
    redirection yet at that moment, so bashlex lexed the first body line as commands and took
    later lines, up to the delimiter, as the body: `if true; then cat <<EOF` + `EOF` + `curl x` +
    `EOF` + `fi` hid curl, which bash runs. bash reads the bodies when it starts the next line; so
    does this: after a newline token, any redirection registered meanwhile gets its body now.
    """
    previous = getattr(tokenizer, "_current_token", None)
    if tokenizer.redirstack and getattr(previous, "ttype", None) == bashlex.tokenizer.tokentype.NEWLINE:
        bashlex.heredoc.gatherheredocuments(tokenizer)
    return _bashlex_next_token(tokenizer)


# bashlex looks both up at call time. They are bug fixes: inputs bashlex already read correctly
# are read the same way.
bashlex.heredoc.makeheredoc = _read_here_document
bashlex.tokenizer.tokenizer.token = _next_token_after_here_documents


# --------------------------------------------------------------------------------------------
# Parsing a line into findings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Word:
    text: str  # bashlex's reading: quotes removed, expansions left as written (for display)
    raw: str  # the word exactly as written
    literal: str | None  # the value bash will use, when known before running; else None
    dynamic: str = ""  # why the value is not known ("" when literal is set)
    prefix: str = ""  # the known leading part of the value

    @staticmethod
    def plain(value: str) -> _Word:
        return _Word(text=value, raw=value, literal=value, prefix=value)

    @property
    def shown(self) -> str:
        return self.literal if self.literal is not None else self.text


@dataclass
class _Command:
    words: tuple[_Word, ...]
    assignments: tuple[tuple[str, _Word], ...] = ()
    launched_by: str = ""  # the launcher this command was extracted from
    appended_input: bool = False  # xargs/parallel append input words to it
    unresolved: str = ""  # a launcher whose target the guard cannot tell

    def argv(self) -> list[str]:
        return [word.shown for word in self.words]


@dataclass
class _Findings:
    commands: list[_Command] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    loop_variables: list[_Word] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # refused in every arm


def _find_commands(command: str) -> _Findings:
    findings = _Findings()
    _Walker(findings, depth=0).walk_source(command)
    return findings


def _unparsable(detail: str, advice: str = "") -> GuardParseError:
    """A refusal for a line the guard cannot read; `advice` is a sentence saying what to write."""
    advice = f" {advice}" if advice else ""
    return GuardParseError(
        f"could not parse this command: {detail}.{advice} Plain commands joined by |, &&, ||, ; or "
        "newlines, if/for/while loops, $(...) and quoted here-documents are fine."
    )


# (text found in bashlex's NotImplementedError message, what it is, what to write instead)
_UNSUPPORTED = (
    ("arithmetic", "arithmetic expansion $(( )) or $[ ] is not supported", "Use expr for arithmetic."),
    ("pattern", "case ... esac is not supported by the guard", "Use if/elif with [ ... ] instead."),
    ("time command", "time is not supported by the guard", "Run the command without time."),
    ("coproc", "coproc is not allowed", ""),
    ("select", "select is not supported by the guard", "Use a for loop."),
)


def _parse(source: str) -> list[Any]:
    lines = [line.lstrip(" \t") for line in source.split("\n")]
    if all(not line or line.startswith("#") for line in lines):
        return []  # only comments or blank lines: nothing runs (bashlex cannot parse these)
    try:
        trees = list(bashlex.parse(source))
    except NotImplementedError as error:
        message = str(error)
        for needle, detail, avoid in _UNSUPPORTED:
            if needle in message:
                raise _unparsable(detail, avoid) from None
        raise _unparsable(f"a construct the guard does not support ({message})") from None
    except bashlex.errors.ParsingError as error:
        raise _explain_parse_error(error.message, source) from None
    except Exception as error:  # bashlex raises assorted errors on malformed input
        raise _unparsable(f"bash syntax the guard could not read ({type(error).__name__})") from None
    _check_restarts(trees, source)
    return trees


class _HereDocumentEnd(bashlex.ast.nodevisitor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.end = -1

    def visitheredoc(self, node: Any, value: Any) -> None:
        self.end = max(self.end, node.pos[1])


def _check_restarts(trees: Sequence[Any], source: str) -> None:
    """bashlex.parse reads one top-level command, then restarts one character after its end,
    assuming that character separates commands. After `;#` or `)#` it is the `#` of a comment, and
    the comment's text is then read as commands, so a quote in it can swallow the lines after it
    (which bash runs). Refuse when the skipped character is anything but a blank or a newline."""
    for tree in trees[:-1]:
        finder = _HereDocumentEnd()
        finder.visit(tree)
        end = max(tree.pos[1], finder.end)
        if source[end : end + 1] not in (" ", "\t", "\n"):
            raise _unparsable(
                f"the guard could not tell where a command ends near `{source[end : end + 12]}`",
                "Put a space before a # comment.",
            )


def _explain_parse_error(message: str, source: str) -> GuardParseError:
    if "[[" in source:
        return _unparsable("[[ ... ]] is not supported by the guard", "Use [ ... ] or test instead.")
    if re.search(r"\bfor\s*\(\(", source):
        return _unparsable("C-style for ((...)) is not supported", "Use for i in $(seq 1 5) instead.")
    if re.search(r"(^|[\s;&|(])[A-Za-z_][A-Za-z0-9_]*\+?=\(", source):
        return _unparsable("arrays are not supported by the guard", "Use plain variables.")
    if "here-document" in message:
        return _unparsable(message, "End a here-document with its delimiter alone on a line.")
    if "matching" in message:
        return _unparsable(f"{message}: a quote, parenthesis or $( is never closed")
    if "unexpected EOF" in message:
        return _unparsable(
            "the command ends too early (a trailing |, && or ||, or an unfinished if/for/while?)"
        )
    return _unparsable(f"bash syntax the guard could not read ({message})")


def _without_quoting(text: str) -> str:
    """Text without quote characters, backslashes and newlines: a word as written and bashlex's
    reading of it agree on the rest, unless bashlex's positions have drifted from the source."""
    return re.sub(r"['\"\\\n]", "", text)


_SINGLE, _ANSI, _PLAIN, _DOUBLE, _HEREDOC = range(5)
_PART_KINDS = {
    "parameter": "uses a variable",
    "commandsubstitution": "uses command substitution",
    "processsubstitution": "uses process substitution",
    "tilde": "starts with ~",
}


@dataclass
class _Scan:
    """What `_scan_word` learned about one word."""

    chars: list[str] = field(default_factory=list)  # the value, while it is known
    dynamic: str = ""
    prefix: str = ""
    kept: list[Any] = field(default_factory=list)  # bashlex parts that bash really expands
    hidden: list[str] = field(default_factory=list)  # expansions bashlex did not report
    brace_marks: list[str] = field(default_factory=list)  # unquoted { } , and .. in order

    def mark(self, why: str) -> None:
        if not self.dynamic:
            self.dynamic = why
            self.prefix = "".join(self.chars)


def _scan_word(raw: str, parts: Sequence[Any], start: int, heredoc: bool = False) -> _Scan:
    """Read one word as bash does, next to bashlex's list of its expansions (`parts`).

    Returns the word's value when it is known, the parts bash really expands (bashlex also reports
    `$(...)` inside single quotes, which bash does not run) and the expansions bashlex missed.
    `start` is the word's offset in the source the part positions refer to. In `heredoc` mode the
    word is an unquoted here-document body: quotes are ordinary characters there.
    """
    at = {part.pos[0] - start: part for part in reversed(parts)}
    scan = _Scan()
    state = _HEREDOC if heredoc else _PLAIN
    i = 0
    while i < len(raw):
        char = raw[i]
        following = raw[i + 1] if i + 1 < len(raw) else ""
        if state == _SINGLE:
            if char == "'":
                state = _PLAIN
            else:
                scan.chars.append(char)
            i += 1
            continue
        if state == _ANSI:  # $'...': backslash escapes, no expansions
            i += 2 if char == "\\" else 1
            if char == "'":
                state = _PLAIN
            continue
        if state == _PLAIN and char == "$" and following in ("'", '"'):
            # bashlex reads $'...' and $"..." as a parameter `$`: skip its bogus part
            if following == "'":
                state = _ANSI
                scan.mark("uses $'...' quoting")
            else:
                state = _DOUBLE
            i += 2
            continue
        part = at.get(i)
        if part is not None:
            scan.kept.append(part)
            scan.mark(_PART_KINDS.get(part.kind, "uses an expansion"))
            if part.kind in ("commandsubstitution", "processsubstitution"):
                end = _substitution_end(raw, part, start)
            else:
                end = part.pos[1] - start
            i = end if end > i else i + 1
            continue
        if state == _PLAIN and char == "'":
            state = _SINGLE
            i += 1
        elif state in (_PLAIN, _DOUBLE) and char == '"':
            state = _DOUBLE if state == _PLAIN else _PLAIN
            i += 1
        else:
            i = _scan_character(raw, i, state, scan)
    if _has_brace_expansion(scan.brace_marks):
        scan.mark("uses brace expansion")
    return scan


def _substitution_end(raw: str, part: Any, start: int) -> int:
    """Where the $(...), `...`, <(...) or >(...) starting at part.pos ends in raw (relative).

    bashlex parses only the first line of commands inside a substitution (`$(true` newline
    `curl x)` showed true alone), and parses backtick text without the unescaping bash does first
    (`\\$(...)` inside backticks runs). So the guard accepts only what bashlex read completely:
    after its parsed commands, nothing but blanks, newlines and comments may come before the
    closing parenthesis or backtick.
    """
    begin = part.pos[0] - start
    parsed_end = part.command.pos[1] - start
    one_line = (
        "Put the commands inside $(...) on one line, joined with ; or && (and no here-documents there)."
    )
    if raw.startswith("`", begin):
        close = part.pos[1] - start - 1  # bashlex found the closing backtick itself
        if raw[close : close + 1] != "`" or re.search(r'\\[$`\\"]', raw[begin + 1 : close]):
            raise _unparsable("backticks with backslash escapes or nested backticks", "Use $(...) instead.")
        if _skip_blanks_and_comments(raw, parsed_end) < close:
            raise _unparsable("several lines of commands inside backticks", one_line)
        return close + 1
    close = _skip_blanks_and_comments(raw, parsed_end)
    if raw[close : close + 1] != ")":
        raise _unparsable("several lines of commands inside a substitution", one_line)
    return close + 1


def _skip_blanks_and_comments(text: str, i: int) -> int:
    while i < len(text):
        if text[i] in " \t\n":
            i += 1
        elif text[i] == "#":
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline + 1
        else:
            break
    return i


def _scan_character(raw: str, i: int, state: int, scan: _Scan) -> int:
    """Handle raw[i] (not a quote character) outside single quotes when no bashlex part starts
    there; return the next i."""
    char = raw[i]
    following = raw[i + 1] if i + 1 < len(raw) else ""
    if char == "\\":
        escapable = {_PLAIN: None, _DOUBLE: '$`"\\\n', _HEREDOC: "$`\\\n"}[state]
        if following == "\n":
            return i + 2  # line continuation
        if following and (escapable is None or following in escapable):
            scan.chars.append(following)
            return i + 2
        scan.chars.append(char)
        return i + 1
    if char == "$":
        if following == "(" or following == "[" or following == "{":
            arithmetic = following == "[" or raw[i + 1 : i + 3] == "(("
            scan.hidden.append("arithmetic" if arithmetic else f"${following}")
            scan.mark("uses an expansion")
            return i + 2
        if following and (following.isalnum() or following in "_@*#?-$!"):
            scan.mark("uses a variable")
            return i + 2
    if char == "`":
        scan.hidden.append("`")
        scan.mark("uses command substitution")
        return i + 1
    if state == _PLAIN:
        if char in "<>" and following == "(":
            scan.hidden.append(f"{char}(")
            scan.mark("uses process substitution")
            return i + 2
        if char in "*?" or (char == "[" and "]" in raw[i + 1 :]):
            scan.mark("contains a wildcard")
        if char in "{},":
            scan.brace_marks.append(char)
        elif char == "." and following == ".":
            scan.brace_marks.append("..")
    scan.chars.append(char)
    return i + 1


def _has_brace_expansion(marks: list[str]) -> bool:
    """An unquoted `{` followed by `,` or `..` and then `}`, as in {a,b} or {1..3}."""
    seen_open = seen_separator = False
    for mark in marks:
        if mark == "{":
            seen_open, seen_separator = True, False
        elif mark in (",", "..") and seen_open:
            seen_separator = True
        elif mark == "}" and seen_separator:
            return True
    return False


# The ${...} forms the guard accepts. bashlex does not look inside ${...}, so anything that could
# hide a command is refused: substitutions, quotes, nested braces, array subscripts and indirection
# (both evaluate a subscript arithmetically, and arithmetic evaluates a variable's value, so
# i='a[$(curl x)]'; ${x:i} or ${!i} runs curl), substring offsets other than literal numbers, @P.
_WORD_IN_BRACES = r"(?:[^$`()'\"\\{}\[\]]|\$[A-Za-z_][A-Za-z0-9_]*)*"
_NAME_IN_BRACES = r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])"
_SAFE_BRACED_PARAMETER = re.compile(
    rf"""(?:
        \#{_NAME_IN_BRACES}                               # length: ${{#x}}
      | ![A-Za-z_][A-Za-z0-9_]*[*@]                        # names with a prefix: ${{!BASH*}}
      | {_NAME_IN_BRACES}(?:\[[@*]\])?
        (?: :?[-=?+]{_WORD_IN_BRACES}                      # default, assign, error, alternate
          | :[ ]*-?[0-9]+[ ]*(?::[ ]*-?[0-9]+[ ]*)?        # substring with literal numbers
          | (?:\#\#?|%%?|//?|/\#|/%|\^\^?|,,?){_WORD_IN_BRACES}   # patterns and case
          | @[QEAaKkUuL]                                   # transformations except @P
        )?
    )\Z""",
    re.VERBOSE,
)
_ASSIGNING_PARAMETER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):?=")


def _check_parameter(node: Any, source: str) -> None:
    """Refuse ${...} forms that bashlex does not look inside or that can run code."""
    raw = source[node.pos[0] : node.pos[1]]
    if not raw.startswith("${"):
        return
    inner = raw[2:-1] if raw.endswith("}") else raw[2:]
    if not _SAFE_BRACED_PARAMETER.match(inner):
        raise _unparsable(
            f"the guard cannot see what `{raw}` does",
            "Inside ${...} use only a plain name with a literal default, pattern or numeric offset: "
            "no quotes, substitutions, array subscripts, ${!...} or @P. Compute values first "
            '(v=$(...)), then use "${X:-$v}".',
        )
    assigned = _ASSIGNING_PARAMETER.match(inner)
    if assigned and assigned.group(1) in LOADER_VARIABLES | PROGRAM_VARIABLES:
        raise _unparsable(f"`{raw}` assigns {assigned.group(1)}, which no arm may change this way")


class _Walker:
    """Walk bashlex trees and collect every command that would run into `findings`."""

    def __init__(self, findings: _Findings, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _unparsable("command strings are nested too deeply")
        self.findings = findings
        self.depth = depth

    def walk_source(self, source: str) -> None:
        for tree in _parse(source):
            self.node(tree, source, inside_substitution=False)

    # -- structure ---------------------------------------------------------------------------

    def node(self, node: Any, source: str, inside_substitution: bool) -> None:
        kind = node.kind
        if kind in ("list", "pipeline", "if", "while", "until"):
            self.nodes(node.parts, source, inside_substitution)
        elif kind == "compound":
            if source.startswith("((", node.pos[0]):
                raise _unparsable(
                    "arithmetic (( ... )) is not supported", "Use expr or [ ... -lt ... ] instead."
                )
            self.nodes(node.list, source, inside_substitution)
            self.nodes(getattr(node, "redirects", []), source, inside_substitution)
        elif kind == "for":
            self.for_loop(node, source, inside_substitution)
        elif kind == "function":
            self.findings.functions.add(node.name.word)
            self.node(node.body, source, inside_substitution)
        elif kind == "command":
            self.simple_command(node, source, inside_substitution)
        elif kind in ("word", "assignment"):
            self.word(node, source, inside_substitution)
        elif kind == "redirect":
            self.redirect(node, source, inside_substitution)
        elif kind in ("commandsubstitution", "processsubstitution"):
            self.node(node.command, source, inside_substitution=True)
        elif kind == "parameter":
            _check_parameter(node, source)
        elif kind not in ("reservedword", "operator", "pipe", "tilde"):
            raise _unparsable(f"an unexpected shell construct ({kind})")

    def nodes(self, nodes: Iterable[Any], source: str, inside_substitution: bool) -> None:
        for child in nodes:
            self.node(child, source, inside_substitution)

    def for_loop(self, node: Any, source: str, inside_substitution: bool) -> None:
        parts = list(node.parts)
        for index, part in enumerate(parts):
            before = parts[index - 1] if index > 0 else None
            if before is not None and before.kind == "reservedword" and before.word == "for":
                self.findings.loop_variables.append(self.word(part, source, inside_substitution))
            else:
                self.node(part, source, inside_substitution)

    # -- words -------------------------------------------------------------------------------

    def word(self, node: Any, source: str, inside_substitution: bool) -> _Word:
        """Read a word node, walk the substitutions bash would run in it, return its value."""
        start, end = node.pos
        raw = source[start:end]
        if node.parts and "\\\n" in raw:
            # bashlex drops backslash-newline from a word before expanding it, so the positions of
            # the substitutions in it (and of everything inside them) no longer match the source.
            raise _unparsable(
                f"a line continuation inside a word with substitutions (`{raw.strip()}`)",
                "Join those lines, or break the line outside $(...) and quotes.",
            )
        if _without_quoting(raw) != _without_quoting(node.word):
            raise _unparsable(f"the guard could not match `{node.word}` with the command text")
        scan = _scan_word(raw, node.parts, start)
        if scan.hidden and raw.startswith("'"):
            # bashlex takes a word that starts and ends with ' as wholly single-quoted: read it
            # again with an empty "" in front, which bash reads the same way.
            source, start, raw = f': ""{raw}', 2, f'""{raw}'
            node = self.reparsed_word(source)
            scan = _scan_word(raw, node.parts, start)
        self.nodes(scan.kept, source, inside_substitution)
        if scan.hidden:
            raise _unparsable(f"the guard cannot see what `{scan.hidden[0]}` runs in `{raw.strip()}`")
        literal = None if scan.dynamic else "".join(scan.chars)
        return _Word(node.word, raw, literal, scan.dynamic, scan.prefix if scan.dynamic else literal or "")

    @staticmethod
    def reparsed_word(source: str) -> Any:
        """The second word of `: <word>`, as bashlex reads it."""
        trees = _parse(source)
        if len(trees) == 1 and trees[0].kind == "command" and len(trees[0].parts) == 2:
            second = trees[0].parts[1]
            if second.kind == "word":
                return second
        raise _unparsable("a word mixing quotes and substitutions that the guard could not read")

    def assignment(self, node: Any, source: str, inside_substitution: bool) -> tuple[str, _Word]:
        raw = source[node.pos[0] : node.pos[1]]
        name, _, _ = raw.partition("=")
        name = name.removesuffix("+")
        if not _IDENTIFIER.match(name):
            raise _unparsable(f"array assignments are not supported (`{raw}`)", "Use plain variables.")
        value_start = node.pos[0] + raw.index("=") + 1
        value_node = bashlex.ast.node(
            kind="word", word=node.word.partition("=")[2], parts=node.parts, pos=(value_start, node.pos[1])
        )
        return name, self.word(value_node, source, inside_substitution)

    # -- commands ----------------------------------------------------------------------------

    def simple_command(self, node: Any, source: str, inside_substitution: bool) -> None:
        words: list[_Word] = []
        assignments: list[tuple[str, _Word]] = []
        for part in node.parts:
            if part.kind == "assignment" and not words:
                assignments.append(self.assignment(part, source, inside_substitution))
            elif part.kind in ("word", "assignment"):
                words.append(self.word(part, source, inside_substitution))
            else:
                self.node(part, source, inside_substitution)
        self.add(_Command(tuple(words), tuple(assignments)))

    def add(self, command: _Command) -> None:
        """Record a command, then what it launches, if it is a launcher."""
        self.findings.commands.append(command)
        name = command.words[0].literal if command.words else None
        resolver = _RESOLVERS.get(name or "")
        if resolver is None:
            return
        launch = resolver(command.words[1:])
        command.unresolved = launch.problem
        for argv in launch.argvs:
            if argv:
                wrapped = _Command(
                    argv, launch.assignments, launched_by=name or "", appended_input=launch.appended_input
                )
                if launch.replace and launch.replace in argv[0].shown:
                    wrapped.unresolved = f"takes the program name from its input ({launch.replace})"
                _Walker(self.findings, self.depth + 1).add(wrapped)
        for script in launch.scripts:
            _Walker(self.findings, self.depth + 1).walk_source(script)

    # -- redirections ------------------------------------------------------------------------

    def redirect(self, node: Any, source: str, inside_substitution: bool) -> None:
        if node.type in ("<<", "<<-"):
            self.here_document(node, inside_substitution)
            return
        if not isinstance(node.output, bashlex.ast.node):
            return  # a file descriptor such as 2>&1
        target = self.word(node.output, source, inside_substitution)
        if node.type == "<<<":
            return  # a here-string is data
        self.check_redirect_target(target)

    def check_redirect_target(self, target: _Word) -> None:
        if target.raw.startswith(("<(", ">(")):
            return  # a process substitution: bash supplies a pipe; its commands are checked
        if target.raw.startswith("~") and not any(char in target.raw for char in "$`"):
            return  # ~ is HOME, which no arm may change
        known = target.literal if target.literal is not None else target.prefix
        if re.match(r"/dev/(tcp|udp)/", known):
            self.findings.refusals.append(
                f"redirecting to {known} opens a network connection from the shell, which no arm "
                "may do; use the arm's own tools"
            )
        elif target.literal is None and (not known or known.startswith("/dev/")):
            self.findings.refusals.append(
                f"the redirection target `{target.raw}` starts with a variable or substitution, so "
                "the guard cannot rule out a network device; write the file name literally "
                '(e.g. > out.json or > "out-$i.json")'
            )

    def here_document(self, node: Any, inside_substitution: bool) -> None:
        document = node.heredoc
        if document is None:
            raise _unparsable("a here-document without a body")
        if inside_substitution:
            raise _unparsable(
                "here-documents inside $(...) or <(...) are not supported",
                "Run the command with the here-document on its own; its output is shown to you.",
            )
        body = document.value
        if getattr(document, "quoted", False) or not any(c in body for c in "$`"):
            return  # quoted delimiter: the body is data
        try:
            parts = _expansions_in_heredoc_body(body)
        except GuardParseError:
            raise
        except Exception:
            parts = None
        hint = "Quote the delimiter (<<'EOF') if the body is data, or compute values first (v=$(...))."
        if parts is None:
            raise _unparsable("the guard could not read the substitutions in a here-document body", hint)
        scan = _scan_word(body, parts, 0, heredoc=True)
        self.nodes(scan.kept, body, inside_substitution=False)
        if scan.hidden:
            raise _unparsable(
                f"the guard cannot see what `{scan.hidden[0]}` runs in a here-document body", hint
            )


def _expansions_in_heredoc_body(body: str) -> list[Any]:
    """The substitutions bash performs in an unquoted here-document body.

    Uses bashlex's word expansion in double-quote mode (single quotes are ordinary characters in
    a here-document body, as they are inside double quotes). These are private bashlex functions;
    any failure makes the caller refuse the body.
    """
    from bashlex import flags as bashlex_flags
    from bashlex import parser as bashlex_parser
    from bashlex import subst as bashlex_subst
    from bashlex import tokenizer as bashlex_tokenizer
    from bashlex import utils as bashlex_utils

    try:
        context = bashlex_parser._parser(body)
        no_flags = bashlex_utils.typedset(bashlex_flags.word)
        token = bashlex_tokenizer.token(bashlex_tokenizer.tokentype.WORD, body, (0, len(body)), no_flags)
        parts, _ = bashlex_subst._expandwordinternal(context, token, 1, 1, 0, 0)
    except NotImplementedError as error:
        raise _unparsable(f"a here-document body uses {error}", "Use expr for arithmetic.") from None
    return list(parts)


# --------------------------------------------------------------------------------------------
# Launchers: what a program that runs other programs would run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Launch:
    argvs: tuple[tuple[_Word, ...], ...] = ()  # commands it runs directly
    scripts: tuple[str, ...] = ()  # command lines it hands to a shell
    assignments: tuple[tuple[str, _Word], ...] = ()  # env NAME=value
    appended_input: bool = False  # xargs: input words are appended
    replace: str = ""  # xargs -I: input replaces this string
    problem: str = ""  # why the guard cannot tell what it runs


@dataclass(frozen=True)
class _OptionSpec:
    flags: frozenset[str] = frozenset()  # options without a value (-x, --verbose)
    valued: frozenset[str] = frozenset()  # options followed by a value (-n 5, --signal=KILL)
    optional: frozenset[str] = frozenset()  # values only when attached (-i{}, --replace={})
    numeric: bool = False  # nice's -10


def _options(flags: str = "", valued: str = "", optional: str = "", numeric: bool = False) -> _OptionSpec:
    return _OptionSpec(
        frozenset(flags.split()), frozenset(valued.split()), frozenset(optional.split()), numeric
    )


@dataclass
class _Parsed:
    options: list[tuple[str, _Word | None]]
    operands: tuple[_Word, ...]
    problem: str = ""

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def value(self, *names: str) -> _Word | None:
        for name, value in self.options:
            if name in names:
                return value
        return None


def _parse_options(program: str, args: Sequence[_Word], spec: _OptionSpec) -> _Parsed:
    """Split leading options from operands, getopt style. Unknown options are a problem: guessing
    whether they take a value could make the guard check the wrong word as the program."""
    options: list[tuple[str, _Word | None]] = []

    def problem(text: str) -> _Parsed:
        return _Parsed(options, (), f"is given {text}, which the guard cannot follow")

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
                options.append((name, _Word.plain(value)))
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
                options.append((option, _Word.plain(rest) if rest else None))
                break
            if option in spec.valued:
                if rest:
                    options.append((option, _Word.plain(rest)))
                elif i + 1 < len(args):
                    i += 1
                    options.append((option, args[i]))
                else:
                    return problem(f"{option} without its value")
                break
            return problem(f"the option {option}")
        i += 1
    return _Parsed(options, tuple(args[i:]))


@dataclass(frozen=True)
class _Wrapper:
    """A program of the form `program [options] [N operands] command [args...]`."""

    options: _OptionSpec
    skip: int = 0  # operands before the wrapped command (timeout's duration, chroot's root)
    runs_nothing_with: frozenset[str] = frozenset()  # options that make it run no command
    unfollowable: frozenset[str] = frozenset()  # options whose effect the guard cannot follow
    scripts_via: frozenset[str] = frozenset()  # options whose value is a shell command line
    joins_into_script: frozenset[str] = frozenset()  # options that make it hand argv to a shell
    without_command: str = ""  # problem when no command is given ("": nothing runs)


def _resolve_wrapper(program: str, spec: _Wrapper, args: Sequence[_Word]) -> _Launch:
    parsed = _parse_options(program, args, spec.options)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    for name, _ in parsed.options:
        if name in spec.unfollowable:
            return _Launch(problem=f"is given {name}, whose effect the guard cannot follow")
    if parsed.has(*spec.runs_nothing_with):
        return _Launch()
    for name, value in parsed.options:
        if name in spec.scripts_via:
            return _script_launch(program, [value] if value else [])
    command = parsed.operands[spec.skip :]
    if not command:
        return _Launch(problem=spec.without_command)
    if parsed.has(*spec.joins_into_script):
        return _script_launch(program, command)
    return _Launch(argvs=(tuple(command),))


def _script_launch(program: str, words: Sequence[_Word]) -> _Launch:
    """The words are joined with spaces and handed to a shell, as eval and sh -c do."""
    if not words:
        return _Launch(problem="is given no command string")
    if any(word.literal is None for word in words):
        dynamic = next(word for word in words if word.literal is None)
        return _Launch(problem=f"runs a command string that {dynamic.dynamic} ({dynamic.text})")
    return _Launch(scripts=(" ".join(word.literal or "" for word in words),))


_WRAPPERS: dict[str, _Wrapper] = {
    "timeout": _Wrapper(
        _options("--preserve-status --foreground -v --verbose", "-k --kill-after -s --signal"), skip=1
    ),
    "nice": _Wrapper(_options(valued="-n --adjustment", numeric=True)),
    "nohup": _Wrapper(_options()),
    "stdbuf": _Wrapper(_options(valued="-i -o -e --input --output --error")),
    "setsid": _Wrapper(_options("-c --ctty -f --fork -w --wait")),
    "command": _Wrapper(_options("-p -v -V"), runs_nothing_with=frozenset({"-v", "-V"})),
    "exec": _Wrapper(_options("-c -l", "-a")),
    "builtin": _Wrapper(_options()),
    "busybox": _Wrapper(_options()),
    "ionice": _Wrapper(
        _options("-t --ignore", "-c --class -n --classdata -p --pid -P --pgid -u --uid"),
        runs_nothing_with=frozenset({"-p", "--pid", "-P", "--pgid", "-u", "--uid"}),
    ),
    "taskset": _Wrapper(
        _options("-a --all-tasks -c --cpu-list -p --pid"),
        skip=1,
        runs_nothing_with=frozenset({"-p", "--pid"}),
    ),
    "chroot": _Wrapper(
        _options("--skip-chdir", "--userspec --groups"),
        skip=1,
        without_command="starts a shell without a command",
    ),
    "doas": _Wrapper(_options("-n -L -s", "-u -C"), unfollowable=frozenset({"-s", "-C"})),
    "sudo": _Wrapper(
        _options(
            "-A -b -E -H -K -k -n -P -S -B -N -s -i -e -l -v -V --edit --list --validate --version "
            "--askpass --background --set-home --non-interactive --stdin --bell --shell --login "
            "--preserve-env",
            "-C -D -g -h -p -R -r -T -t -U -u --close-from --chdir --group --host --prompt --chroot --role "
            "--command-timeout --type --other-user --user",
            "--preserve-env",
        ),
        unfollowable=frozenset({"-e", "--edit", "-l", "--list", "-v", "--validate", "-V", "--version"}),
        joins_into_script=frozenset({"-s", "--shell", "-i", "--login"}),
        without_command="starts a shell without a command",
    ),
    "script": _Wrapper(
        _options(
            "-a --append -e --return -f --flush -q --quiet",
            "-c --command -E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m "
            "--logging-format -o --output-limit",
            "-t --timing",
        ),
        scripts_via=frozenset({"-c", "--command"}),
        without_command="starts an interactive shell without -c",
    ),
}


def _resolve_shell(program: str, args: Sequence[_Word]) -> _Launch:
    spec = _options(
        "-c -e -u -x -v -n -f -h -k -m -p -t -a -b -B -C -E -H -P -T -r -i -l -s --norc --noprofile "
        "--posix --login --noediting --restricted --verbose",
        "-o -O --rcfile --init-file",
    )
    parsed = _parse_options(program, args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    if parsed.has("-i", "-l", "--login", "-s", "--rcfile", "--init-file"):
        return _Launch(problem="would also run start-up files or standard input")
    if parsed.has("-c"):
        return _script_launch(program, parsed.operands[:1])
    if parsed.operands:
        script = parsed.operands[0].shown
        return _Launch(problem=f"runs the script file {script}, which the guard cannot read")
    return _Launch(problem="reads commands from standard input, which the guard cannot see")


def _resolve_env(args: Sequence[_Word]) -> _Launch:
    spec = _options("-i --ignore-environment -0 --null -v --debug", "-u --unset -C --chdir -S --split-string")
    parsed = _parse_options("env", args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    if parsed.has("-S", "--split-string"):
        return _Launch(problem="is given -S, whose effect the guard cannot follow")
    operands = list(parsed.operands)
    if operands and operands[0].literal == "-":
        operands.pop(0)
    assignments: list[tuple[str, _Word]] = []
    while operands and "=" in operands[0].text:
        name, _, value = operands[0].text.partition("=")
        if operands[0].literal is None and not _IDENTIFIER.match(name):
            return _Launch(problem=f"sets a variable whose name is not literal ({operands[0].text})")
        assignments.append((name, _Word.plain(value) if operands[0].literal is not None else operands[0]))
        operands.pop(0)
    if not operands:
        return _Launch()  # prints the environment
    return _Launch(argvs=(tuple(operands),), assignments=tuple(assignments))


def _resolve_xargs(args: Sequence[_Word]) -> _Launch:
    spec = _options(
        "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty",
        "-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
        "--process-slot-var",
        "-e -i -l --eof --replace --max-lines",
    )
    parsed = _parse_options("xargs", args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    replace = ""
    if parsed.has("-I"):
        value = parsed.value("-I")
        if value is None or value.literal is None:
            return _Launch(problem="is given a replacement string that is not literal")
        replace = value.literal
    elif parsed.has("-i", "--replace"):
        value = parsed.value("-i", "--replace")
        replace = value.literal if value is not None and value.literal else "{}"
    command = parsed.operands or (_Word.plain("echo"),)
    return _Launch(argvs=(tuple(command),), appended_input=not replace, replace=replace)


def _resolve_find(args: Sequence[_Word]) -> _Launch:
    argvs: list[tuple[_Word, ...]] = []
    i = 0
    while i < len(args):
        if args[i].literal in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end].literal not in (";", "+"):
                end += 1
            if end == len(args):
                return _Launch(problem=f"has {args[i].literal} without its closing ; or +")
            argvs.append(tuple(args[i + 1 : end]))
            i = end
        i += 1
    return _Launch(argvs=tuple(argvs))


def _resolve_su(args: Sequence[_Word]) -> _Launch:
    spec = _options(
        "-l --login -m -p --preserve-environment -P --pty",
        "-c --command --session-command -s --shell -g --group -G --supp-group -w --whitelist-environment",
    )
    parsed = _parse_options("su", args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    if parsed.has("-s", "--shell", "-l", "--login") or any(word.literal == "-" for word in parsed.operands):
        return _Launch(problem="starts a login or chosen shell, which the guard cannot follow")
    if len(parsed.operands) > 1:
        return _Launch(problem="passes extra arguments to a shell")
    script = parsed.value("-c", "--command", "--session-command")
    if script is None:
        return _Launch(problem="starts a shell without -c")
    return _script_launch("su", [script])


def _resolve_flock(args: Sequence[_Word]) -> _Launch:
    spec = _options(
        "-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F --no-fork --verbose",
        "-w --wait --timeout -E --conflict-exit-code -c --command",
    )
    parsed = _parse_options("flock", args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    rest = parsed.operands[1:]  # the lock file or descriptor comes first
    if parsed.has("-c", "--command"):
        value = parsed.value("-c", "--command")
        return _script_launch("flock", [value] if value else [])
    if rest and rest[0].literal in ("-c", "--command"):
        return _script_launch("flock", rest[1:2])
    return _Launch(argvs=(tuple(rest),)) if rest else _Launch()


def _resolve_watch(args: Sequence[_Word]) -> _Launch:
    spec = _options(
        "-b --beep -e --errexit -g --chgexit -t --no-title -c --color -C --no-color -p --precise "
        "-r --no-rerun -w --no-wrap -x --exec",
        "-n --interval -q --equexit",
        "-d --differences",
    )
    parsed = _parse_options("watch", args, spec)
    if parsed.problem:
        return _Launch(problem=parsed.problem)
    if not parsed.operands:
        return _Launch()
    if parsed.has("-x", "--exec"):
        return _Launch(argvs=(parsed.operands,))
    return _script_launch("watch", parsed.operands)


def _resolve_parallel(args: Sequence[_Word]) -> _Launch:
    if args and (args[0].literal is None or args[0].literal.startswith("-")):
        return _Launch(problem="is given options, which the guard cannot follow")
    template = []
    for word in args:
        if word.literal in (":::", "::::", ":::+", "::::+"):
            break
        template.append(word)
    if not template:
        return _Launch(problem="runs its input lines as commands")
    launch = _script_launch("parallel", template)
    return _Launch(scripts=launch.scripts, problem=launch.problem, appended_input=True)


def _resolve_eval(args: Sequence[_Word]) -> _Launch:
    return _script_launch("eval", args) if args else _Launch()


def _resolve_source(args: Sequence[_Word]) -> _Launch:
    return _Launch(problem="runs the commands in a file, which the guard cannot read")


_RESOLVERS: dict[str, Callable[[Sequence[_Word]], _Launch]] = {
    **{
        name: (lambda args, name=name, spec=spec: _resolve_wrapper(name, spec, args))
        for name, spec in _WRAPPERS.items()
    },
    **{name: (lambda args, name=name: _resolve_shell(name, args)) for name in SHELLS},
    "env": _resolve_env,
    "xargs": _resolve_xargs,
    "find": _resolve_find,
    "su": _resolve_su,
    "flock": _resolve_flock,
    "watch": _resolve_watch,
    "parallel": _resolve_parallel,
    "eval": _resolve_eval,
    "source": _resolve_source,
    ".": _resolve_source,
}
assert set(_RESOLVERS) == LAUNCHERS, "every launcher needs a resolver"


# --------------------------------------------------------------------------------------------
# Checking findings against one arm
# --------------------------------------------------------------------------------------------


class _ArmChecker:
    def __init__(self, rules: ArmRules, functions: set[str]) -> None:
        self.rules = rules
        self.functions = functions
        self.allowed = rules.binaries | rules.harmless | SHELL_BUILTINS_ALLOWED

    def command(self, found: _Command) -> str:
        """The reason this command is refused, or ""."""
        for name, value in found.assignments:
            reason = self.variable_target(_Word.plain(name), value)
            if reason:
                return reason
        if not found.words:
            return ""
        name = found.words[0]
        by = f" (started by {found.launched_by})" if found.launched_by else ""
        if name.literal is None:
            return (
                f"the program name `{name.text}`{by} {name.dynamic}, so the guard cannot tell which "
                f"program would run; write the program name literally. In arm '{self.rules.arm}' "
                f"{self.offer()}."
            )
        program = name.literal
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
            lambda: self.launcher(program, found),
        )
        for check in checks:
            reason = check()
            if reason:
                return reason
        return ""

    def offer(self) -> str:
        return _offer(self.rules)

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

    def subcommand(self, program: str, found: _Command) -> str:
        for rule in self.rules.subcommand_rules:
            if rule.binary == program:
                reason = _subcommand_reason(rule, found, self.rules.arm)
                if reason:
                    return reason
        return ""

    def launcher(self, program: str, found: _Command) -> str:
        if not found.unresolved:
            return ""
        return (
            f"{program} {found.unresolved}, so the guard cannot check what it would run; run the "
            f"command directly instead. In arm '{self.rules.arm}' {self.offer()}."
        )

    def variable_target(self, name_word: _Word, value: _Word | None) -> str:
        """Setting (or unsetting) a variable: refused for loader variables, checked for programs."""
        name = name_word.literal
        if name is None or not _IDENTIFIER.match(name):
            return (
                f"`{name_word.text}` is not a plain variable name (bash evaluates array subscripts, "
                "which can run commands); use a plain name"
            )
        if name in LOADER_VARIABLES or name.startswith("BASH_FUNC_"):
            return (
                f"{name} may not be changed in arm '{self.rules.arm}': it decides which programs run "
                "or loads code into them; call programs by name instead"
            )
        if name in PROGRAM_VARIABLES and value is not None:
            if value.literal is None:
                return f"{name} must be set to a literal program name in arm '{self.rules.arm}'"
            program = value.literal.split()[0] if value.literal.split() else ""
            if program and (program not in self.allowed or "/" in program):
                return (
                    f"{name}={value.literal} would make programs start {program}, which is not available in "
                    f"arm '{self.rules.arm}': {self.offer()}."
                )
        return ""


def _no_check(args: Sequence[_Word], checker: _ArmChecker) -> str:
    return ""


def _check_read(args: Sequence[_Word], checker: _ArmChecker) -> str:
    spec = _options("-e -r -s", "-a -d -i -n -N -p -t -u")
    parsed = _parse_options("read", args, spec)
    if parsed.problem:
        return f"read {parsed.problem}"
    targets = list(parsed.operands)
    array = parsed.value("-a")
    if array is not None:
        targets.append(array)
    return _first(checker.variable_target(word, value=_UNKNOWN_VALUE) for word in targets)


def _check_printf(args: Sequence[_Word], checker: _ArmChecker) -> str:
    first = args[0].literal if args else None
    if first is not None and first.startswith("-v"):
        target = _Word.plain(first[2:]) if len(first) > 2 else (args[1] if len(args) > 1 else None)
        if target is not None:
            return checker.variable_target(target, value=_UNKNOWN_VALUE)
    return ""


def _check_declaration(program: str, allowed_options: str) -> Callable[[Sequence[_Word], _ArmChecker], str]:
    """export / local / unset: NAME or NAME=value operands; only harmless options."""

    def check(args: Sequence[_Word], checker: _ArmChecker) -> str:
        parsed = _parse_options(program, args, _options(allowed_options))
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
                value = _Word.plain((word.literal or "").partition("=")[2]) if known else _UNKNOWN_VALUE
            elif program in ("local", "unset"):
                value = None  # unsetting or localising: only loader variables matter
            reason = checker.variable_target(_Word.plain(name), value)
            if reason:
                return reason
        return ""

    return check


def _check_test(args: Sequence[_Word], checker: _ArmChecker) -> str:
    for option, operand in zip(args, args[1:]):
        plain_name = operand.literal is not None and _IDENTIFIER.match(operand.literal)
        if option.literal in ("-v", "-R") and not plain_name:
            return (
                f"`test {option.literal} {operand.text}` names an array element or a computed name; bash "
                "evaluates such subscripts, which can run commands. Use a plain variable name"
            )
    return ""


_UNKNOWN_VALUE = _Word(text="", raw="", literal=None, dynamic="is read at run time")
_BUILTIN_ARGUMENT_CHECKS: dict[str, Callable[[Sequence[_Word], _ArmChecker], str]] = {
    "read": _check_read,
    "printf": _check_printf,
    "export": _check_declaration("export", "-f -n -p"),
    "local": _check_declaration("local", "-r -x"),
    "unset": _check_declaration("unset", "-f -v"),
    "test": _check_test,
    "[": _check_test,
}


def _sort_options_reason(args: Sequence[_Word], appended_input: bool) -> str:
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


def _subcommand_reason(rule: SubcommandRule, found: _Command, arm: str) -> str:
    binary = rule.binary
    plural = len(rule.deny) > 1
    excluded = (
        f"the {binary} subcommand{'s' if plural else ''} {', '.join(rule.deny)} "
        f"{'are' if plural else 'is'} excluded in arm '{arm}'; use another {binary} subcommand"
    )
    operands: list[tuple[_Word, bool]] = []  # (word, directly after an option)
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
    if first.literal in rule.deny:
        return f"`{binary} {first.literal}` is not available: {excluded}."
    if follows_option and len(operands) > 1 and operands[1][0].literal in rule.deny:
        second = operands[1][0].literal
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


def _offer(rules: ArmRules) -> str:
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


def _no_shell_reason(rules: ArmRules) -> str:
    return f"arm '{rules.arm}' has no shell (no Bash tool): {_offer(rules)}."


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
