"""Tool isolation: an arm gets exactly its declared tools, and independent layers keep it there.

Pure: no pytest, no claude_agent_sdk. The modules, from the command line inwards:

- `guard.py`       decides, before a tool call runs, whether the arm may make it (PreToolUse hook);
- `parser.py`      finds every simple command a bash line would run (bashlex, with the fixes in
                   `bashlex_fixes.py`); `launchers.py` follows programs that run other programs;
                   `words.py` holds the word, command and option-parsing types they share;
- `rules.py`       the arm's rules (ArmRules) judged against what the parser found;
- `catalog.py`     the shared lists: harmless utilities, shell builtins, launchers, variables;
- `tool_audit.py`  after the run, re-checks the tool calls the CLI streamed back;
- `hygiene.py`     the environment the agent sees: a curated PATH and no harness variables.
"""

from __future__ import annotations

from .catalog import HARMLESS_UTILITIES, LAUNCHERS, LOADER_VARIABLES, PROGRAM_VARIABLES, SHELL_BUILTINS_ALLOWED
from .guard import Decision, check_bash_command, check_tool_call, commands_in
from .rules import ArmRules, SubcommandRule
from .words import GuardParseError

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
