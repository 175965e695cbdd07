"""Whether the agent was offered its arm's tools when the conversation began.

A trial measures an arm only if the model saw the arm's tools from its first request on. An MCP
server still starting when the CLI gives up waiting leaves the agent without the arm's tools: it
answers without them, and a failure would be charged to the arm. So a trial counts only if, at the
first model request, every MCP server the arm declares was connected and no tool outside the arm
was offered; otherwise it is stored `invalid` with the server and its status named.

The evidence: the CLI's init message (each MCP server's status and the tools it offers, sent just
before the first model request) and, where the harness serves the model itself (the scripted model),
the tools that first request really carried.

The CLI waits for MCP servers before its first request for `MCP_TIMEOUT` ms (30 s when unset; a
server that needs 35 s then ends as `failed`). With `MCP_CONNECTION_NONBLOCKING=false` a server not
up by then ends as `failed` rather than `pending` (a pending server could join mid-conversation).

Pure: no pytest, no claude_agent_sdk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..output_lines import lines_naming_the_error

CONNECTED = "connected"
# Built-in tools the CLI names differently in different places: an arm declaring "Task" is offered
# "Agent" in the request and listed as "Task" in the init message (CLI 2.1.332).
ALIASES = {"Task": "Agent"}


@dataclass(frozen=True)
class McpWait:
    """How long the CLI waits for the arm's MCP servers before its first model request."""

    timeout_ms: int
    servers: tuple[str, ...]

    def environment(self) -> dict[str, str]:
        """The CLI's own connection settings (nothing for an arm without MCP servers)."""
        if not self.servers:
            return {}
        return {"MCP_TIMEOUT": str(self.timeout_ms), "MCP_CONNECTION_NONBLOCKING": "false"}

    @property
    def seconds(self) -> float:
        """The start-up time the CLI may spend before the conversation begins (outside the backstop)."""
        return self.timeout_ms / 1000 if self.servers else 0.0


@dataclass(frozen=True)
class ToolOffer:
    """What the CLI offered as the conversation began."""

    servers: Mapping[str, str]  # MCP server name -> status in the init message
    tools: tuple[str, ...]  # the tools the init message lists
    first_request: tuple[str, ...] | None = None  # tools the first model request carried, where known


def tools_not_offered(
    offer: ToolOffer | None,
    *,
    declared_tools: Iterable[str],
    declared_servers: Iterable[str],
    wait: McpWait,
    stopped_before_start: bool = False,
    offer_ms: int | None = None,
    ends: Mapping[str, Any] | None = None,
) -> str | None:
    """Why the agent was not offered exactly its arm's tools at its first model request, or None.

    offer None: the CLI never reported its tools. That is a problem of the offer only when the harness
    stopped the CLI while it was still starting (`stopped_before_start`) and the arm has MCP servers;
    a CLI that failed before its init message is an error judged elsewhere.

    A server not connected is said as what ended it: the CLI's wait, unless the init message came
    sooner (`offer_ms` after the CLI started); then its exit (`ends`: per server, what
    mcp_launch.server_ends read back: `.status`, `.stderr`), else its connection that ended; with
    the line of its stderr that names its error.
    """
    servers = sorted(declared_servers)
    if offer is None:
        if stopped_before_start and servers:
            names = ", ".join(f"'{name}'" for name in servers)
            return (
                f"MCP server {names}: no status: the CLI had not reported its tools when the harness stopped "
                f"waiting ({_waited(wait)} plus the backstop); the agent never saw the arm's tools"
            )
        return None
    not_connected = [(name, offer.servers.get(name, "missing")) for name in servers if offer.servers.get(name) != CONNECTED]
    if not_connected:
        ends = ends or {}
        if offer_ms is not None and offer_ms < wait.timeout_ms:  # else the CLI gave up on it (and stopped it)
            listed = "; ".join(_ended(name, status, ends.get(name), offer_ms) for name, status in not_connected)
            return f"{listed}: its tools were not offered, so the trial does not measure the arm"
        listed = ", ".join(f"'{name}' was {status}" for name, status in not_connected)
        said = "".join(_said(ends.get(name)) for name, _ in not_connected)
        return (
            f"MCP server {listed} at the agent's first model request ({_waited(wait)}){said}: "
            f"its tools were not offered, so the trial does not measure the arm"
        )
    declared = {_canonical(tool) for tool in declared_tools}
    prefixes = tuple(f"mcp__{name}__" for name in servers)
    offered = [*offer.tools, *(offer.first_request or ())]
    foreign = sorted({tool for tool in offered if _canonical(tool) not in declared and not tool.startswith(prefixes)})
    if foreign:
        return f"tool the arm does not declare offered at the first model request: {', '.join(foreign)}"
    if offer.first_request is not None:
        sent = set(offer.first_request)
        unsent = sorted(tool for tool in offer.tools if tool.startswith(prefixes) and tool not in sent)
        if unsent:
            return f"MCP tools listed by the CLI but missing from the first model request: {', '.join(unsent)}"
    return None


def _ended(name: str, status: str, end: Any, offer_ms: int | None) -> str:
    """One server that was not connected, said as what ended it (see tools_not_offered)."""
    exit_status = getattr(end, "status", None)
    if exit_status is not None:
        what = f"MCP server '{name}' exited with status {exit_status} before the agent's first model request"
    else:
        what = (
            f"MCP server '{name}' was {status} at the agent's first model request, {offer_ms} ms after the CLI started "
            f"(its connection ended: not the CLI's wait)"
        )
    return what + _said(end)


def _said(end: Any) -> str:
    """`; it said: <the last line of its stderr naming an error>`, or nothing."""
    lines = lines_naming_the_error(getattr(end, "stderr", "") or "", limit=1)
    return f"; it said: {lines[-1].strip()}" if lines else ""


def mcp_wait(bench: Any, arm: Any) -> McpWait:
    """The wait for this arm's MCP servers ([bench] mcp_timeout_ms)."""
    return McpWait(bench.mcp_timeout_ms, tuple(server.name for server in arm.mcp_servers))


def arm_not_offered(bench: Any, arm: Any, result: Any, ends: Mapping[str, Any] | None = None) -> str | None:
    """tools_not_offered for a finished agent run (an agent.AgentResult) of this arm; `ends`: what
    its MCP servers left (mcp_launch.server_ends)."""
    offer = result.offer
    if offer is not None and result.first_request_tools is not None:
        offer = replace(offer, first_request=result.first_request_tools)
    return tools_not_offered(
        offer,
        declared_tools=arm.tools,
        declared_servers=[server.name for server in arm.mcp_servers],
        wait=mcp_wait(bench, arm),
        stopped_before_start=result.hung,
        offer_ms=result.offer_ms,
        ends=ends,
    )


def _canonical(tool: str) -> str:
    return ALIASES.get(tool, tool)


def _waited(wait: McpWait) -> str:
    return f"the CLI waited up to {wait.timeout_ms} ms, [bench] mcp_timeout_ms"
