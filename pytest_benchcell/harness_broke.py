"""A trial the harness broke: never counted for or against the arm.

When the sandbox kept one of the arm's own programs from what it needs (a hidden file, a refused
endpoint: the sample's `sandbox_blocked`) or the arm's MCP server failed (`mcp_failed`), the trial did
not measure the arm's condition, whatever its verdict: a pass made while the arm's program could not
run is the agent answering without it. Such a trial is `error` (an `invalid` one stays invalid), its
reason saying what broke it and what the trial would have been.

One rule, applied wherever a verdict is read: a live trial (trial/verdict.py), every stored sample a
count, fill or report reads (store/reading.py, which judges index rows by the flag they carry), and
--bench-rescore, which never re-scores such a sample. Stored samples are judged as they are read,
never rewritten (samples an older plugin stored as `pass` count as errors here).

Pure: no pytest, no SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sample import STATUS_ERROR, STATUS_INVALID, STATUS_SCORED

# The words the reason gives a trial the harness broke, after what broke it.
NOT_COUNTED = "which the harness caused, so it is not counted for or against the arm"
# How isolation/tool_offer.py's reason starts for an MCP server not connected at the first model request.
MCP_NOT_CONNECTED = "MCP server "


def harness_broke(sample: Mapping[str, Any]) -> bool:
    """Whether the sample records a program of the arm the sandbox blocked, or an MCP server that failed."""
    return bool(_entries(sample, "sandbox_blocked") or _entries(sample, "mcp_failed"))


def what_broke(sample: Mapping[str, Any]) -> list[str]:
    """One line per thing the harness broke in this trial: what the sandbox kept from which program
    (and the declaration that gives it back), then each MCP server that failed."""
    from .isolation.blocked import describe_record

    lines = [describe_record(entry) for entry in _entries(sample, "sandbox_blocked") if isinstance(entry, Mapping)]
    lines += [describe_mcp_failure(entry) for entry in _entries(sample, "mcp_failed")]
    return lines


def describe_mcp_failure(entry: Any) -> str:
    """One line for an `mcp_failed` entry: the server, and what it said where the sample kept it."""
    if not isinstance(entry, Mapping):
        return f"MCP server failed: {entry}"
    name = entry.get("server") or entry.get("name") or "?"
    said = entry.get("error") or entry.get("reason") or entry.get("status") or "failed"
    return f"MCP server {name!r} failed: {said}"


def causes(sample: Mapping[str, Any]) -> list[dict[str, str]]:
    """What the harness broke in this trial, for stopping the arm (arm_stops.py): per program, its
    name, what it could not reach, the agent's command that ran it and the line describing it all
    (with the declaration that gives it back). An `invalid` trial whose MCP server was not connected
    at the first model request (isolation/tool_offer.py) counts too: no trial of that arm can measure it."""
    found = [
        {"program": str(entry.get("program") or ""), "target": str(entry.get("target") or ""),
         "command": str(entry.get("command") or ""), "line": line}
        for entry, line in zip(
            (entry for entry in _entries(sample, "sandbox_blocked") if isinstance(entry, Mapping)), what_broke(sample)
        )
    ]  # fmt: skip
    for entry in _entries(sample, "mcp_failed"):
        name = str(entry.get("server") or entry.get("name") or "") if isinstance(entry, Mapping) else ""
        found.append({"program": f"MCP server {name}".strip(), "target": "", "command": "", "line": describe_mcp_failure(entry)})
    reason = str(sample.get("reason") or "")
    if not found and sample.get("status") == STATUS_INVALID and reason.startswith(MCP_NOT_CONNECTED):
        found.append({"program": "MCP server", "target": "", "command": "", "line": reason})
    return found


def judge(sample: dict[str, Any]) -> None:
    """Make a scored trial the harness broke an `error` (in place), its reason saying what broke it
    and what the trial would have been. Invalid and error samples are left as they are."""
    if sample.get("status") != STATUS_SCORED or not harness_broke(sample):
        return
    lines = what_broke(sample) or ["the harness broke the trial"]
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    kind = "sandbox" if _entries(sample, "sandbox_blocked") else "MCP"
    outcome, reason = sample.get("outcome"), sample.get("reason")
    was = f"{outcome}: {reason}" if reason else str(outcome)
    sample["status"], sample["outcome"] = STATUS_ERROR, None
    sample["reason"] = f"{kind}: {lines[0]}{more}; the trial would have been {was}, {NOT_COUNTED}"


def _entries(sample: Mapping[str, Any], key: str) -> list[Any]:
    value = sample.get(key)
    return value if isinstance(value, list) else []
