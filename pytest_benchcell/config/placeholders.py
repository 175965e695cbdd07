"""The {name} placeholders of a bench's texts and their filling (`fill_placeholders`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from .model import BenchConfigError

PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill_placeholders(text: str, values: Mapping[str, str], *, where: str) -> str:
    """Replace {name} with values[name]; other braces (JSON, shell) are left alone.

    An unknown {identifier} is an error, so a typo in a prompt never reaches the agent.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise BenchConfigError(
                f"{where} uses the placeholder {{{key}}}, but the environment supplies only: "
                f"{', '.join(sorted(values)) or 'no values'}"
            )
        return str(values[key])

    return PLACEHOLDER.sub(replace, text)
