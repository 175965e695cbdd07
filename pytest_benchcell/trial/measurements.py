"""What the agent run measured, into the sample: usage, turns, times, the API's retries, the final
answer and the tool calls with the guard's decision beside each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agent import AgentResult

TOOL_OUTPUT_LIMIT = 4000  # characters of each tool result kept in the sample


def _fill_measurements(sample: dict[str, Any], result: AgentResult) -> None:
    if result.usage_known:
        sample["usage"] = {"total": dict(result.usage_total), "by_model": {k: dict(v) for k, v in result.usage_by_model.items()}}
        if result.requests:  # what the dollars are priced from (prices.py): each request with its cache-write split
            sample["usage"]["requests"] = [list(request) for request in result.requests]
    else:
        sample["usage"] = {"total": None, "by_model": {}}  # unknown, not zero: reports leave it out
    # One definition of a turn: a model reply. The CLI's own num_turns counts differently at the
    # cap (cap + 1) and after an interrupt (2 with no reply at all); it is kept as cli_num_turns.
    sample["turns"] = result.replies
    sample["cli_num_turns"] = result.turns
    sample["duration_ms"] = result.duration_ms
    # The CLI's waits between attempts of failing model requests: the API's time, within duration_ms.
    sample["api_wait_ms"] = min(result.api_wait_ms, result.duration_ms)
    sample["api_retries"] = len(result.api.retries)
    sample["cost_usd"] = result.cost_usd
    sample["result_subtype"] = result.subtype
    sample["final_answer"] = result.final_answer
    sample["tool_calls"] = _tool_calls(result)


def _tool_calls(result: AgentResult) -> list[dict[str, Any]]:
    """The ordered tool calls, as streamed by the CLI, with the guard's decision beside each."""
    decisions = {attempt["id"]: attempt for attempt in result.attempts if attempt.get("id")}
    calls = []
    seen = set()
    for call in result.transcript:
        outcome = call.get("result") or {}
        allowed, reason = _decision(decisions.get(call["id"]), outcome)
        calls.append(
            {
                "id": call["id"],
                "tool": call["tool"],
                "input": call["input"],
                "allowed": allowed,
                "reason": reason,
                "is_error": outcome.get("is_error"),
                "output": _clip(outcome.get("content", "")),
            }
        )
        seen.add(call["id"])
    for attempt in result.attempts:  # decided by the guard but never streamed back (cut off)
        if attempt.get("id") not in seen:
            calls.append({**attempt, "is_error": None, "output": ""})
    return calls


def _decision(attempt: Mapping[str, Any] | None, outcome: Mapping[str, Any]) -> tuple[bool | None, str]:
    """Whether a streamed call was allowed, and why: the guard's decision, or, for a call the guard
    never saw, the CLI's own refusal (a tool the arm does not have is refused before any hook)."""
    if attempt is not None:
        return attempt.get("allowed"), attempt.get("reason", "")
    if outcome.get("is_error"):
        said = str(outcome.get("content", "")).strip().splitlines()
        return False, "refused by the Claude Code CLI before the guard: " + (said[0][:200] if said else "no reason given")
    return None, "not seen by the guard"


def _clip(text: str) -> str:
    if len(text) <= TOOL_OUTPUT_LIMIT:
        return text
    return text[:TOOL_OUTPUT_LIMIT] + f"... [{len(text) - TOOL_OUTPUT_LIMIT} more characters]"
