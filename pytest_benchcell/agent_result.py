"""What one agent conversation is asked (`AgentRequest`) and what it measured (`AgentResult`), and
the parts of the CLI's messages read into the result as plain objects: the result message, the tool
results, the init message's offer. No SDK import: agent.py hands the messages over."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api_faults import DEFAULT_API_STALL_MS, ApiFault, ApiLog
from .isolation.tool_offer import ToolOffer
from .sample import sum_tokens, tokens_from_camel, tokens_from_snake, zero_tokens
from .transcript import Recorder

GuardFunction = Callable[[str, Mapping[str, Any]], "tuple[bool, str]"]

@dataclass(frozen=True)
class AgentRequest:
    model: str
    system_prompt: str
    prompt: str
    max_turns: int
    wall_clock_s: float
    cwd: Path
    env: Mapping[str, str]  # layered by the SDK over the harness's environment
    tools: tuple[str, ...]  # Claude Code built-in tools the arm declares
    mcp_servers: Mapping[str, Mapping[str, Any]]  # name -> stdio server config
    guard: GuardFunction  # (tool name, tool input) -> (allowed, reason)
    cli_path: Path | None = None  # a launcher for the CLI (see hygiene.cli_wrapper); None: the bundled one
    startup_wait_s: float = 0.0  # how long the CLI may wait for MCP servers before the conversation
    recorder: Recorder | None = None  # receives the transcript's events as they arrive (kept on any exit)
    api_stall_ms: int = DEFAULT_API_STALL_MS  # no byte from the API for this long while a request is open: a stall
    # Skills installed natively in the CLI's config folder (skill_delivery.py): only these are offered.
    skills: tuple[str, ...] = ()


@dataclass
class AgentResult:
    subtype: str | None = None  # ResultMessage.subtype; None if no result arrived
    is_error: bool = False
    terminal_reason: str | None = None
    final_answer: str = ""
    turns: int = 0
    duration_ms: int = 0
    cost_usd: float | None = None
    usage_total: dict[str, int] = field(default_factory=zero_tokens)
    usage_by_model: dict[str, dict[str, int]] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # from the PreToolUse hook
    transcript: list[dict[str, Any]] = field(default_factory=list)  # from the messages themselves
    hung: bool = False
    error: str | None = None  # an SDK/CLI/API failure, not an agent failure
    api_error_status: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
    partial_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    denied_ids: list[str] = field(default_factory=list)  # the CLI's own record of denied calls
    offer: ToolOffer | None = None  # from the init message; None: the CLI never sent one
    offer_ms: int | None = None  # when the init message came, ms after the run began (the CLI's start)
    mcp_failed: tuple[str, ...] = ()  # declared MCP servers not connected at the init message (the run was stopped)
    first_request_tools: tuple[str, ...] | None = None  # what the first model request carried, where known
    api: ApiLog = field(default_factory=ApiLog)  # the model API's signals during the run
    api_fault: ApiFault | None = None  # the API ended the run (api_faults.classify)
    api_wait_ms: int = 0  # the CLI's waits between attempts of failing model requests
    # Each model request whose stream ended (message_delta came): [model, fresh_input, cache_write,
    # cache_write_1h or None, cache_read, output], what prices.price_usage needs (the sample's usage.requests).
    requests: list[list[Any]] = field(default_factory=list)
    open_request: list[Any] | None = None  # the request whose message_start came and message_delta not yet

    @property
    def replies(self) -> int:
        """Model replies the agent received in full: the sample's `turns` (docs/store.md, "The sample format")."""
        return len(self.api.completed_replies)

    @property
    def usage_known(self) -> bool:
        """Whether the run's usage is known. A run the model never answered (hung before its first
        reply, an API error before any response) reports none, and a reply that came without usage
        fields (a gateway that drops them) leaves the sum unknown: unknown, not zero."""
        if self.api.usage_unreported:
            return False
        return bool(self.replies) or any(self.usage_total.values())

    @property
    def hit_turn_cap(self) -> bool:
        return self.subtype == "error_max_turns"


def _absorb_result(message: Any, result: AgentResult) -> None:
    result.subtype = message.subtype
    result.is_error = bool(message.is_error)
    result.terminal_reason = getattr(message, "terminal_reason", None)
    result.final_answer = message.result or ""
    result.turns = int(message.num_turns or 0)
    result.duration_ms = int(message.duration_ms or 0)
    result.cost_usd = message.total_cost_usd
    if message.api_error_status:
        result.api_error_status = int(message.api_error_status)
    if message.is_error and message.subtype == "success":
        # An API failure after the CLI's retries arrives as a "success" result flagged is_error
        # (terminal_reason api_error): the model never answered, so it is a harness error.
        status = f" {message.api_error_status}" if message.api_error_status else ""
        result.error = f"model API error{status}: {(message.result or '').strip()[:300]}"
    for denial in message.permission_denials or []:
        if isinstance(denial, dict) and denial.get("tool_use_id"):
            result.denied_ids.append(str(denial["tool_use_id"]))
    by_model = {name: tokens_from_camel(usage) for name, usage in (message.model_usage or {}).items()}
    if by_model:
        result.usage_by_model = by_model
        result.usage_total = sum_tokens(by_model.values())
    elif message.usage:
        result.usage_total = tokens_from_snake(message.usage)


def note_stream_usage(result: AgentResult, event: Mapping[str, Any]) -> None:
    """A raw stream event's usage, per model request: message_start carries the request's input side
    (its cache writes split by lifetime in `cache_creation`, where the API splits them) and its model,
    message_delta the request's final usage; a request counts once its message_delta came."""
    kind = event.get("type")
    if kind == "message_start":
        message = started if isinstance(started := event.get("message"), Mapping) else {}
        usage = message.get("usage")
        result.open_request = [str(message.get("model") or ""), *_request_tokens(usage)] if isinstance(usage, Mapping) else None
    elif kind == "message_delta" and result.open_request is not None:
        usage = event.get("usage")
        if isinstance(usage, Mapping):
            final = _request_tokens({**_usage_fields(result.open_request), **{k: v for k, v in usage.items() if v is not None}})
            result.open_request[1:] = final
        result.requests.append(result.open_request)
        result.open_request = None


def _request_tokens(usage: Mapping[str, Any]) -> list[Any]:
    split = usage.get("cache_creation")
    write_1h = _whole(split.get("ephemeral_1h_input_tokens")) if isinstance(split, Mapping) else None
    tokens = tokens_from_snake(usage)
    return [tokens["fresh_input"], tokens["cache_write"], write_1h, tokens["cache_read"], tokens["output"]]


def _usage_fields(request: list[Any]) -> dict[str, Any]:
    """A request's entry back as the API's usage fields (what message_delta then updates)."""
    _, fresh, write, write_1h, read, output = request
    fields: dict[str, Any] = {"input_tokens": fresh, "cache_creation_input_tokens": write,
                              "cache_read_input_tokens": read, "output_tokens": output}  # fmt: skip
    if write_1h is not None:
        fields["cache_creation"] = {"ephemeral_5m_input_tokens": write - write_1h, "ephemeral_1h_input_tokens": write_1h}
    return fields


def _whole(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _offer(data: Any) -> ToolOffer:
    """The init message's MCP server statuses and tools (the first init only: a later one would
    describe a later moment than the first model request)."""
    data = data if isinstance(data, dict) else {}
    servers = {
        str(server.get("name")): str(server.get("status"))
        for server in data.get("mcp_servers") or []
        if isinstance(server, dict)
    }
    return ToolOffer(servers=servers, tools=tuple(str(tool) for tool in data.get("tools") or []))


def _attach_tool_result(result: AgentResult, block: Any) -> None:
    content = block.content
    if isinstance(content, list):
        content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    for call in reversed(result.transcript):
        if call["id"] == block.tool_use_id:
            call["result"] = {"is_error": bool(block.is_error), "content": str(content or "")}
            return
