"""Tool isolation: an arm gets exactly its declared tools, and independent layers keep it there.

Pure: no pytest, no claude_agent_sdk. The modules, from the command line inwards:

- `guard.py`       decides, before a tool call runs, whether the arm may make it (PreToolUse hook);
- `parser.py`      finds every simple command a bash line would run (bashlex, with the fixes in
                   `bashlex_fixes.py`; `word_scan.py` reads each word as bash does); `launchers.py`
                   follows programs that run other programs;
                   `words.py` holds the word, command and option-parsing types they share;
- `rules.py`       the arm's rules (ArmRules) judged against what the parser found;
- `catalog.py`     the shared lists: harmless utilities, shell builtins, launchers, variable families;
- `arguments.py`   argument rules per binary (options, subcommands, URLs) and where lines may write;
- `curl_rule.py`   where curl may connect when an arm confines it, and the one URL judge (allow_urls);
- `tool_audit.py`  after the run, re-checks the tool calls the CLI streamed back;
- `exec_audit/`    after the run, checks every program the Bash commands actually executed (strace);
- `hygiene.py`     the environment the agent sees: a curated PATH and no harness variables;
- `tool_offer.py`  whether the agent's first model request offered exactly the arm's tools.
"""

from __future__ import annotations

import importlib
from typing import Any

# Where each public name lives. Loaded on first use: the parser imports bashlex (about 0.14 s),
# which a sitting's planning, reports and the execution audit's availability check never need.
_EXPORTS = {
    "HARMLESS_UTILITIES": "catalog",
    "SHELL_BUILTINS_ALLOWED": "catalog",
    "LAUNCHERS": "catalog",
    "LOADER_VARIABLES": "catalog",
    "VARIABLE_FAMILIES": "catalog",
    "SubcommandRule": "rules",
    "ArmRules": "rules",
    "ArgumentRule": "arguments",
    "WritePolicy": "arguments",
    "Decision": "guard",
    "GuardParseError": "words",
    "check_tool_call": "guard",
    "check_bash_command": "guard",
    "commands_in": "guard",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Not cached in this module's globals: pytester's in-process runs drop and re-import modules,
    # and a cached function would keep running an old bashlex beside freshly imported parts of it.
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
