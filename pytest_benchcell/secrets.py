"""What is a secret, and how it is kept out of the store: the one place that decides both.

A trial's sample never holds these values (every string in it is redacted before the append):

- declared secrets, whatever their length: the values of `Environment.secrets`, and for each name in
  `[bench] secrets` the provision hook's value of that placeholder and the value of that variable in
  the arm's `env` or an MCP server's `env`;
- the harness's own credentials (`HARNESS_CREDENTIALS`, from the harness's environment);
- guessed secrets: the value of every variable of the arm (or of its MCP servers) whose name contains one of
  `CREDENTIAL_WORDS` (any case), when it has at least `GUESSED_MINIMUM` characters (a shorter value
  under a guessed name is more likely a word than a secret, and redacting it would garble the sample).

A secret of `SPACED_MINIMUM` characters or more is also found spelled out with separators between its
characters (`s 3 c r 3 t`, `s-3-c-r-3-t`), the cheap way a command can print a value it was not meant
to show.

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
SPACED_MINIMUM = 6
_CREDENTIAL_NAME = re.compile("|".join(CREDENTIAL_WORDS), re.IGNORECASE)
_SEPARATORS = r"[\s,;:|._-]*"


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


def _pattern(secrets: Sequence[str]) -> re.Pattern[str] | None:
    alternatives = []
    for secret in secrets:
        alternatives.append(re.escape(secret))
        if len(secret) >= SPACED_MINIMUM:
            alternatives.append(_SEPARATORS.join(re.escape(char) for char in secret))
    return re.compile("|".join(alternatives)) if alternatives else None


def redact(sample: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """A copy of the sample with every secret replaced in every string value, however deep (keys are
    the sample's own field names and stay as they are)."""
    pattern = _pattern(secrets)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(REDACTED, value) if pattern else value
        if isinstance(value, Mapping):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(item) for item in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return clean(str(value))  # a hook may add values JSON has no type for: stored as text

    return clean(dict(sample))

