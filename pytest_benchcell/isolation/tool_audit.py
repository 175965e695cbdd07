"""The post-run leak audit, independent of the guard's own bookkeeping.

The guard decides in-band (PreToolUse hook) and records its decisions. The audit does not read
those records: it takes the tool calls the CLI itself streamed back (the assistant messages'
tool_use blocks and the tool results that followed) and the CLI's own list of permission denials,
and checks every call that was not denied against the arm's declared rules. So a call that slipped
past the hook (a bug, a loosened rule, an auto-approved tool) still makes the trial invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Decide = Callable[[str, Mapping[str, Any]], "tuple[bool, str]"]


NOT_AVAILABLE = "No such tool available"


def find_leaks(
    transcript: Sequence[Mapping[str, Any]],
    denied_ids: Iterable[str],
    decide: Decide,
    provided: Callable[[str], bool] = lambda tool: True,
) -> list[str]:
    """Return one line per executed tool call the arm's rules do not allow ([] = clean).

    transcript: [{"id", "tool", "input", "result"}] rebuilt from the message stream.
    denied_ids: tool_use ids the CLI reports as denied (ResultMessage.permission_denials).
    decide:     the arm's rules as declared in bench.toml: (tool, input) -> (allowed, reason).
    provided:   whether the CLI was given the tool at all. A call to a tool it was not given, answered
                with the CLI's own "No such tool available" error, cannot have run. (A tool that was
                given is judged by the rules whatever its output says, so output cannot fake this.)
    A call with no result may still have run (the run was cut off mid-call), so it is checked too.
    """
    denied = set(denied_ids)
    leaks = []
    for call in transcript:
        if call.get("id") in denied or _refused_as_unavailable(call, provided):
            continue
        allowed, reason = decide(str(call.get("tool", "")), call.get("input") or {})
        if not allowed:
            leaks.append(f"{call.get('tool')} {_describe_input(call.get('input') or {})} ran: {reason}")
    return leaks


def _describe_input(tool_input: Mapping[str, Any]) -> str:
    command = tool_input.get("command")
    text = repr(command) if isinstance(command, str) else repr(dict(tool_input))
    return text if len(text) <= 200 else text[:197] + "..."


def _refused_as_unavailable(call: Mapping[str, Any], provided: Callable[[str], bool]) -> bool:
    result = call.get("result") or {}
    return (
        not provided(str(call.get("tool", "")))
        and bool(result.get("is_error"))
        and NOT_AVAILABLE in str(result.get("content", ""))
    )
