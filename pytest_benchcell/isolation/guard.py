r"""The tool guard: decide, before a tool call runs, whether an arm may make it.

Pure: no pytest, no claude_agent_sdk. `agent.py` calls `check_tool_call` from a PreToolUse hook
for every tool call (built-ins and MCP tools included); `tool_audit.py` re-applies it to the calls
that the transcript shows were executed. The command line is read by `parser.py` and judged by
`rules.py`.

Tools
-----
- `Bash` is allowed only when the arm declares it; the command line is then checked (below).
  `BashOutput` and `KillShell`/`KillBash` (reading or stopping a background `Bash` call) come with
  `Bash`: they start no program.
- `mcp__<server>__<tool>` is allowed only when `<server>` is one of the arm's MCP servers.
- Every other built-in (Read, Write, Edit, Glob, Grep, WebFetch, WebSearch, Task, Agent, ...) is
  allowed only when the arm declares it.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .parser import find_commands
from .rules import ArmRules, ArmChecker, no_shell_reason, offer, UNKNOWN_VALUE
from .words import GuardParseError

# Built-ins that only read or stop the output of a background Bash call: they come with Bash.
_BASH_COMPANIONS = frozenset({"BashOutput", "KillShell", "KillBash"})


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # "" when allowed; otherwise a sentence the agent can act on



ALLOWED = Decision(True, "")


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def check_tool_call(tool_name: str, tool_input: Mapping[str, Any], rules: ArmRules) -> Decision:
    """Decide whether `rules.arm` may make this tool call (any tool, built-in or MCP)."""
    if tool_name == "Bash":
        if "Bash" not in rules.builtin_tools:
            return Decision(False, no_shell_reason(rules))
        command = tool_input.get("command")
        if not isinstance(command, str):
            return Decision(False, "the Bash call has no command string; pass the command to run")
        return check_bash_command(command, rules)
    if tool_name.startswith("mcp__"):
        if any(tool_name.startswith(f"mcp__{server}__") for server in rules.mcp_servers):
            return ALLOWED
        return Decision(False, f"{tool_name} is not available in arm '{rules.arm}': {offer(rules)}.")
    if tool_name in rules.builtin_tools:
        return ALLOWED
    if tool_name in _BASH_COMPANIONS and "Bash" in rules.builtin_tools:
        return ALLOWED
    return Decision(False, f"the {tool_name} tool is not available in arm '{rules.arm}': {offer(rules)}.")


def check_bash_command(command: str, rules: ArmRules) -> Decision:
    """Decide whether `rules.arm` may run this shell command line."""
    if "Bash" not in rules.builtin_tools:
        return Decision(False, no_shell_reason(rules))
    try:
        findings = find_commands(command)
    except GuardParseError as error:
        return Decision(False, str(error))
    checker = ArmChecker(rules, findings)
    for variable in findings.loop_variables:
        reason = checker.variable_target(variable, value=UNKNOWN_VALUE)
        if reason:
            return Decision(False, reason)
    for found in findings.commands:
        reason = checker.command(found)
        if reason:
            return Decision(False, reason)
    if findings.refusals:
        return Decision(False, findings.refusals[0])
    reason = checker.devices(findings.device_checks)
    if reason:
        return Decision(False, reason)
    reason = checker.redirections(findings.writes)
    if reason:
        return Decision(False, reason)
    return ALLOWED


def commands_in(command: str) -> list[list[str]]:
    """Every simple command that would run, as argv word lists, launchers resolved.

    Words are shown with quotes removed; expansions stay as written (`$x`, `$(...)`). Commands
    inside substitutions come before the command that uses them; the command a launcher wraps comes
    after the launcher (`timeout 5 curl x` gives both). A launcher whose target the guard cannot
    determine is listed alone. Assignment-only commands are left out. Raises GuardParseError when
    the line cannot be understood.
    """
    return [found.argv() for found in find_commands(command).commands if found.words]

