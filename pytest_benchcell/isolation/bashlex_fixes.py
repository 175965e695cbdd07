"""Two replacements for bashlex functions, so here-documents are read as bash reads them.

`install()` puts them in place (bashlex looks both up at call time). They are bug fixes: inputs
bashlex already read correctly are read the same way. See parser.py for the defects they mend."""

from __future__ import annotations

from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors
import bashlex.heredoc
import bashlex.tokenizer


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


def install() -> None:
    """Install both fixes into bashlex, which looks them up at call time. They are bug fixes:
    inputs bashlex already read correctly are read the same way. (Called by the parser when it is
    imported; a function rather than an import side effect, so the bashlex module the parser uses
    is the one patched, also when a test harness re-imports modules.)"""
    bashlex.heredoc.makeheredoc = _read_here_document
    bashlex.tokenizer.tokenizer.token = _next_token_after_here_documents
