r"""The command parser: every simple command a bash line would run, found with bashlex.

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
  the guard computes each word's value itself (`Word.literal`). Program names, subcommands,
  variable names and command strings handed to another shell all use that value.

Here-documents: with a quoted delimiter (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) the body is data and
is not looked at. With an unquoted delimiter bash expands `$(...)` and backticks in the body, so
the guard parses those substitutions and checks the commands in them like any other; anything in
the body it cannot read is refused with a hint to quote the delimiter.

Reading one word as bash does, next to bashlex's list of its expansions (`_scan_word`,
`_substitution_end`, `_without_quoting`), is in `word_scan.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors

from .bashlex_fixes import install as install_bashlex_fixes
from .catalog import LOADER_VARIABLES, variable_family
from .launchers import RESOLVERS
from .word_scan import _scan_word, _without_quoting
from .words import GuardParseError, Command, IDENTIFIER, unparsable, Word

# Redirections that open their target for writing (`<>` opens it read-write; `>&word` with a file
# name sends stdout and stderr there).
_WRITING_REDIRECTIONS = frozenset({">", ">>", ">|", "<>", "&>", "&>>", ">&"})
install_bashlex_fixes()
_MAX_DEPTH = 8  # nested command strings (bash -c "eval '...'") followed before giving up


@dataclass
class Findings:
    commands: list[Command] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    loop_variables: list[Word] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # refused in every arm
    writes: list[tuple[Word, str]] = field(default_factory=list)  # redirection targets bash opens for writing
    # Values variables are given by loops and ${NAME:=...} on this line (None: not known before it runs);
    # assignments of simple commands are on the commands themselves.
    assigned: list[tuple[str, tuple[Word, ...] | None]] = field(default_factory=list)
    # Redirection targets that start with a variable or substitution: the guard can rule out a
    # network device only when the arm's fixed variables give their values.
    device_checks: list[Word] = field(default_factory=list)


def find_commands(command: str) -> Findings:
    findings = Findings()
    _Walker(findings, depth=0).walk_source(command)
    return findings



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
                raise unparsable(detail, avoid) from None
        raise unparsable(f"a construct the guard does not support ({message})") from None
    except bashlex.errors.ParsingError as error:
        raise _explain_parse_error(error.message, source) from None
    except Exception as error:  # bashlex raises assorted errors on malformed input
        raise unparsable(f"bash syntax the guard could not read ({type(error).__name__})") from None
    _check_restarts(trees, source)
    return trees


class _HereDocumentEnd(bashlex.ast.nodevisitor):
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
            raise unparsable(
                f"the guard could not tell where a command ends near `{source[end : end + 12]}`",
                "Put a space before a # comment.",
            )


def _explain_parse_error(message: str, source: str) -> GuardParseError:
    if "[[" in source:
        return unparsable("[[ ... ]] is not supported by the guard", "Use [ ... ] or test instead.")
    if re.search(r"\bfor\s*\(\(", source):
        return unparsable("C-style for ((...)) is not supported", "Use for i in $(seq 1 5) instead.")
    if re.search(r"(^|[\s;&|(])[A-Za-z_][A-Za-z0-9_]*\+?=\(", source):
        return unparsable("arrays are not supported by the guard", "Use plain variables.")
    if "here-document" in message:
        return unparsable(message, "End a here-document with its delimiter alone on a line.")
    if "matching" in message:
        return unparsable(f"{message}: a quote, parenthesis or $( is never closed")
    if "unexpected EOF" in message:
        return unparsable(
            "the command ends too early (a trailing |, && or ||, or an unfinished if/for/while?)"
        )
    return unparsable(f"bash syntax the guard could not read ({message})")


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


def _check_parameter(node: Any, source: str, findings: Findings) -> None:
    """Refuse ${...} forms that bashlex does not look inside or that can run code."""
    raw = source[node.pos[0] : node.pos[1]]
    if not raw.startswith("${"):
        return
    inner = raw[2:-1] if raw.endswith("}") else raw[2:]
    if not _SAFE_BRACED_PARAMETER.match(inner):
        raise unparsable(
            f"the guard cannot see what `{raw}` does",
            "Inside ${...} use only a plain name with a literal default, pattern or numeric offset: "
            "no quotes, substitutions, array subscripts, ${!...} or @P. Compute values first "
            '(v=$(...)), then use "${X:-$v}".',
        )
    assigned = _ASSIGNING_PARAMETER.match(inner)
    if assigned and (assigned.group(1) in LOADER_VARIABLES or variable_family(assigned.group(1))):
        raise unparsable(f"`{raw}` assigns {assigned.group(1)}, which no arm may change this way")
    if assigned:
        findings.assigned.append((assigned.group(1), None))


class _Walker:
    """Walk bashlex trees and collect every command that would run into `findings`."""

    def __init__(self, findings: Findings, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise unparsable("command strings are nested too deeply")
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
                raise unparsable(
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
            _check_parameter(node, source, self.findings)
        elif kind not in ("reservedword", "operator", "pipe", "tilde"):
            raise unparsable(f"an unexpected shell construct ({kind})")

    def nodes(self, nodes: Iterable[Any], source: str, inside_substitution: bool) -> None:
        for child in nodes:
            self.node(child, source, inside_substitution)

    def for_loop(self, node: Any, source: str, inside_substitution: bool) -> None:
        parts = list(node.parts)
        variable: Word | None = None
        values: list[Word] | None = None  # None: no `in`, the loop runs over "$@"
        for index, part in enumerate(parts):
            before = parts[index - 1] if index > 0 else None
            if before is not None and before.kind == "reservedword" and before.word == "for":
                variable = self.word(part, source, inside_substitution)
                self.findings.loop_variables.append(variable)
            elif part.kind == "reservedword" and part.word == "in":
                values = []
            elif part.kind == "word" and values is not None and variable is not None:
                values.append(self.word(part, source, inside_substitution))
            else:
                if part.kind == "reservedword" and part.word in (";", "do") and variable is not None:
                    self.findings.assigned.append((variable.shown, tuple(values) if values is not None else None))
                    variable = None
                self.node(part, source, inside_substitution)

    # -- words -------------------------------------------------------------------------------

    def word(self, node: Any, source: str, inside_substitution: bool) -> Word:
        """Read a word node, walk the substitutions bash would run in it, return its value."""
        start, end = node.pos
        raw = source[start:end]
        if node.parts and "\\\n" in raw:
            # bashlex drops backslash-newline from a word before expanding it, so the positions of
            # the substitutions in it (and of everything inside them) no longer match the source.
            raise unparsable(
                f"a line continuation inside a word with substitutions (`{raw.strip()}`)",
                "Join those lines, or break the line outside $(...) and quotes.",
            )
        if _without_quoting(raw) != _without_quoting(node.word):
            raise unparsable(f"the guard could not match `{node.word}` with the command text")
        scan = _scan_word(raw, node.parts, start)
        if scan.hidden and raw.startswith("'"):
            # bashlex takes a word that starts and ends with ' as wholly single-quoted: read it
            # again with an empty "" in front, which bash reads the same way.
            source, start, raw = f': ""{raw}', 2, f'""{raw}'
            node = self.reparsed_word(source)
            scan = _scan_word(raw, node.parts, start)
        self.nodes(scan.kept, source, inside_substitution)
        if scan.hidden:
            raise unparsable(f"the guard cannot see what `{scan.hidden[0]}` runs in `{raw.strip()}`")
        literal = None if scan.dynamic else "".join(scan.chars)
        return Word(node.word, raw, literal, scan.dynamic, scan.prefix if scan.dynamic else literal or "")

    @staticmethod
    def reparsed_word(source: str) -> Any:
        """The second word of `: <word>`, as bashlex reads it."""
        trees = _parse(source)
        if len(trees) == 1 and trees[0].kind == "command" and len(trees[0].parts) == 2:
            second = trees[0].parts[1]
            if second.kind == "word":
                return second
        raise unparsable("a word mixing quotes and substitutions that the guard could not read")

    def assignment(self, node: Any, source: str, inside_substitution: bool) -> tuple[str, Word]:
        raw = source[node.pos[0] : node.pos[1]]
        name, _, _ = raw.partition("=")
        name = name.removesuffix("+")
        if not IDENTIFIER.match(name):
            raise unparsable(f"array assignments are not supported (`{raw}`)", "Use plain variables.")
        value_start = node.pos[0] + raw.index("=") + 1
        value_node = bashlex.ast.node(
            kind="word", word=node.word.partition("=")[2], parts=node.parts, pos=(value_start, node.pos[1])
        )
        return name, self.word(value_node, source, inside_substitution)

    # -- commands ----------------------------------------------------------------------------

    def simple_command(self, node: Any, source: str, inside_substitution: bool) -> None:
        words: list[Word] = []
        assignments: list[tuple[str, Word]] = []
        for part in node.parts:
            if part.kind == "assignment" and not words:
                assignments.append(self.assignment(part, source, inside_substitution))
            elif part.kind in ("word", "assignment"):
                words.append(self.word(part, source, inside_substitution))
            else:
                self.node(part, source, inside_substitution)
        self.add(Command(tuple(words), tuple(assignments)))

    def add(self, command: Command) -> None:
        """Record a command, then what it launches, if it is a launcher."""
        self.findings.commands.append(command)
        name = command.words[0].literal if command.words else None
        resolver = RESOLVERS.get(name or "")
        if resolver is None:
            return
        launch = resolver(command.words[1:])
        command.unresolved = launch.problem
        for argv in launch.argvs:
            if argv:
                wrapped = Command(
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
        if node.type in _WRITING_REDIRECTIONS:
            self.findings.writes.append((target, f"the redirection {node.type}"))

    def check_redirect_target(self, target: Word) -> None:
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
            self.findings.device_checks.append(target)  # the arm's fixed variables may place it

    def here_document(self, node: Any, inside_substitution: bool) -> None:
        document = node.heredoc
        if document is None:
            raise unparsable("a here-document without a body")
        if inside_substitution:
            raise unparsable(
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
            raise unparsable("the guard could not read the substitutions in a here-document body", hint)
        scan = _scan_word(body, parts, 0, heredoc=True)
        self.nodes(scan.kept, body, inside_substitution=False)
        if scan.hidden:
            raise unparsable(
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
        raise unparsable(f"a here-document body uses {error}", "Use expr for arithmetic.") from None
    return list(parts)
