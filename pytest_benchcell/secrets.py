"""What is a secret, and how it is kept out of the store: the one place that decides both.

A trial's sample never holds these values (every string in it is redacted before the append):

- declared secrets, whatever their length: the values of `Environment.secrets`, and for each name in
  `[bench] secrets` the provision hook's value of that placeholder and the value of that variable in
  the arm's `env` or an MCP server's `env`;
- the harness's own credentials (`HARNESS_CREDENTIALS`, from the harness's environment);
- guessed secrets: the value of every variable of the arm (or of its MCP servers) whose name contains one of
  `CREDENTIAL_WORDS` (any case), when it has at least `GUESSED_MINIMUM` characters (a shorter value
  under a guessed name is more likely a word than a secret, and redacting it would garble the sample).

Every spelling the harness itself could write is found too, so a checker's normalized quote
(`matched "pin is sgpt2"`), a lower-cased copy or a line cut at "..." never re-spells a secret. A
secret's *letters and digits* are its characters that are neither punctuation nor space; a
*separator* is any other character (`_ - * . : /`, quotes, spaces, newlines). Redacted are:

1. the exact value, anywhere, whatever its length;
2. the value in any case, its own separators dropped or changed (up to `GAP` more characters than it
   has there): `SGPT2` as `sgpt2`, `bcx_live_W9q` as `bcxlivew9q`, `BCX-LIVE-W9Q` or `bcx live w9q`,
   as the answer checker normalizes text (it lower-cases and deletes `_`, `*`, backticks, `~~`);
3. a secret of `RESPELLED_MINIMUM` letters and digits or more, also spelled out: up to `GAP`
   separators between any two of them (`s 3 c r 3 t`, `S-3-C-R-3-T`, `s, 3, c, r, 3, t`), the
   cheap way a command prints a value it was not meant to show;
4. a piece of a secret that a cut at an ellipsis (`...` or `…`) left: its first or last letters and
   digits, spelled as in 2 or 3, right before or after the ellipsis, when the piece holds at least
   `PIECE_MINIMUM` of them, or all but one of a secret of five or six (`SHORTEST_PIECE`: a secret of
   four or fewer has no pieces): a diff cut at 200 characters in the middle of a token shows
   `"bcx_live_W9qmb8AH..."`, redacted as `"[redacted]..."`.

Why the limits: a shorter secret spelled out (`1 2 3 4 5`, `a-b-c-d-e`) or a piece of fewer than six
characters (`test...`) is ordinary text too often, and redacting it would garble the sample; the
exact value and its other cases are honoured at any length (a bench that declares a short common
word as a secret asked for it). Matching is anywhere, not at word boundaries: the checker's
normalization deletes `_` and `*`, which glues a secret to the word before it (`PIN_SGPT2` reads
`pinsgpt2`), so a boundary rule would miss exactly the spellings this guards against.

Pure: nothing here knows pytest, the SDK or the store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .config import Arm, Bench, BenchConfigError, fill_placeholders
from .environment import Environment

REDACTED = "[redacted]"
# Credentials of the harness itself: never stored, whatever a bench declares.
HARNESS_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CREDENTIAL_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "PRIVATE")
GUESSED_MINIMUM = 6
RESPELLED_MINIMUM = 6  # letters and digits a secret needs to be found spelled out
PIECE_MINIMUM = 6  # letters and digits a piece cut at an ellipsis needs (all but one of a shorter secret's)
SHORTEST_PIECE = 4  # so a secret of four letters and digits or fewer has no pieces
GAP = 3  # separators allowed between two letters or digits beyond the secret's own
_CREDENTIAL_NAME = re.compile("|".join(CREDENTIAL_WORDS), re.IGNORECASE)
_RUNS = re.compile(r"([^\W_]+)|[\W_]+")  # a run of letters and digits, or of separators
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_ELLIPSIS = r"(?:\.\.\.|…)"


def is_credential_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (SERVICE_KEY, GITHUB_TOKEN, db_password)."""
    return bool(_CREDENTIAL_NAME.search(name))


def secret_values(bench: Bench, arm: Arm, environment: Environment | None) -> list[str]:
    """Every value of this trial that must never reach the store, longest first (so a secret that
    contains another is redacted whole)."""
    declared = [os.environ.get(name, "") for name in (*HARNESS_CREDENTIALS, *bench.secrets)]
    guessed: list[str] = []
    if isinstance(environment, Environment):  # not what a broken provision hook returned instead
        declared += [str(value) for value in environment.secrets]
        declared += [str(environment.values[name]) for name in bench.secrets if name in environment.values]
        placeholders = {str(key): str(value) for key, value in environment.values.items()}
        variables = [*arm.env.items(), *(item for server in arm.mcp_servers for item in server.env.items())]
        for name, template in variables:
            if name not in bench.secrets and not is_credential_name(name):
                continue
            try:
                value = fill_placeholders(template, placeholders, where=name)
            except BenchConfigError:
                continue  # the trial already failed on this placeholder; no value reached the agent
            (declared if name in bench.secrets else guessed).append(value)
    values = {value for value in declared if value}
    values |= {value for value in guessed if len(value) >= GUESSED_MINIMUM}
    return sorted(values, key=len, reverse=True)


def _units(secret: str) -> list[str]:
    """The secret as regular expressions, one a letter or digit, each with the separators allowed
    before it (none before the first): a secret's shape, in any case and spelling (rules 2 and 3)."""
    spelled_out = len(_LETTER_OR_DIGIT.findall(secret)) >= RESPELLED_MINIMUM
    units: list[str] = []
    own = 0  # separators the secret itself has before the next letter or digit
    for run in _RUNS.finditer(secret):
        if run.group(1) is None:
            own = len(run.group(0))
            continue
        for char in run.group(1):
            widest = own + GAP if (own or spelled_out) else 0
            units.append((rf"[\W_]{{0,{widest}}}" if units and widest else "") + re.escape(char))
            own = 0
    return units


def _piece_length(units: Sequence[str]) -> int | None:
    """The fewest letters and digits of a piece cut at an ellipsis that is redacted (rule 4)."""
    shortest = min(PIECE_MINIMUM, len(units) - 1)
    return shortest if shortest >= SHORTEST_PIECE else None


def _first_piece(units: Sequence[str], shortest: int) -> str:
    """The secret's first `shortest` letters and digits or more, and its separators, up to an ellipsis."""
    rest = ""
    for unit in reversed(units[shortest:-1]):
        rest = f"(?:{unit}{rest})?"
    return "".join(units[:shortest]) + rest + rf"[\W_]{{0,{GAP}}}(?={_ELLIPSIS})"


def _compiled(alternatives: Sequence[str], starts: set[str]) -> re.Pattern[str] | None:
    if not alternatives:
        return None
    # A lookahead on the characters a match can begin with lets the search skip the rest of a text fast.
    lead = "(?=[" + "".join(re.escape(char) for char in sorted(starts)) + "])"
    return re.compile(lead + "(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


class _Matcher:
    """Every spelling of the secrets (rules 1 to 4). A piece right after an ellipsis is the first
    piece of the reversed secret right before it in the reversed text: found that way, it costs
    what a first piece costs (a pattern that had to guess where in the secret the piece starts
    would try every position after every ellipsis)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        forward: list[str] = []
        first_pieces: list[str] = []
        last_pieces: list[str] = []
        starts: set[str] = set()
        ends: set[str] = set()
        for secret in secrets:
            forward.append(re.escape(secret))
            starts.add(secret[0])
            units = _units(secret)
            if not units:
                continue
            forward.append("".join(units))
            letters = _LETTER_OR_DIGIT.findall(secret)
            starts.add(letters[0])
            shortest = _piece_length(units)
            if shortest is not None:
                first_pieces.append(_first_piece(units, shortest))
                last_pieces.append(_first_piece(_units(secret[::-1]), shortest))
                ends.add(letters[-1])
        self.forward = _compiled(forward + first_pieces, starts)
        self.backward = _compiled(last_pieces, ends)  # searched in the reversed text

    def sub(self, text: str) -> str:
        if self.forward is not None:
            text = self.forward.sub(REDACTED, text)
        if self.backward is not None and ("..." in text or "…" in text):
            text = self.backward.sub(REDACTED[::-1], text[::-1])[::-1]
        return text


def redact(sample: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """A copy of the sample with every secret replaced in every string value, however deep (keys are
    the sample's own field names and stay as they are)."""
    matcher = _Matcher(secrets)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return matcher.sub(value)
        if isinstance(value, Mapping):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(item) for item in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return clean(str(value))  # a hook may add values JSON has no type for: stored as text

    return clean(dict(sample))

