"""Run one agent conversation through the Claude Agent SDK.

This is the only module that imports claude_agent_sdk, and it does so inside functions: importing
the SDK costs about half a second, which collection, reports and the pure tests never pay.

What it guarantees:
- exactly the arm's tools (`tools` = the declared built-ins, MCP servers only as declared);
- a PreToolUse hook that asks the guard about every tool call, built-ins and MCP included, and
  records each attempt with the decision (denied attempts are real wasted effort);
- the turn cap through `max_turns` (result subtype error_max_turns);
- the wall-clock backstop by interrupting the client (not by cancelling the task, which would make
  the SDK wait 5 s for the CLI): the CLI stops within a fraction of a second and is reaped, and the
  partial usage it reports is kept. The backstop counts the conversation, from the CLI's init
  message on: before it the CLI waits for the arm's MCP servers (`startup_wait_s`), no time of the
  agent's;
- the model API's own signals fed to an api_faults.ApiLog (the CLI's api_retry messages, the raw
  stream events, its synthetic failure message, the result): the stall watch ends a run whose API
  sent no byte for `api_stall_ms` while a request was open, repeated credential refusals end it at
  once, and api_faults.classify says whether the API ended it (`api_fault`), how long the CLI
  waited on retries (`api_wait_ms`), which replies arrived in full (the turns; a reply the interrupt
  cut off is none) and whether every reply reported its usage;
- what the CLI offered as the conversation began (the init message: each MCP server's status and
  the tools), so a trial whose agent never saw its arm's tools is not charged to the arm;
- an independent transcript of tool calls, rebuilt from the assistant messages' tool_use blocks and
  the tool results that followed (the audit reads this, not the guard's own bookkeeping);
- with a `recorder`, the trial's full transcript (transcript.py's events), taken from the SDK's message
  stream with partial messages on. Why the stream and not the CLI's own session record
  (CLAUDE_CONFIG_DIR/projects/.../<session>.jsonl, which has the same messages and per-request
  usage): the stream is the CLI's stdout as the harness reads it, so no command of the agent can edit
  it (the session file lives in the trial's config folder, writable by the agent's commands where the
  sandbox is off); it is the SDK's documented interface (the session file's format is the CLI's own,
  undocumented and changing: measured 2.1.332 writes api-request blobs and attachments beside the
  messages); and whatever arrived before a wall-clock interrupt or a Ctrl-C is already in the
  recorder, with no file to flush. Partial messages are what make the stream complete: an assistant
  message's usage is its request's usage at the start of the response, output 0 (measured with CLI
  2.1.332), while the raw message_delta event carries the request's final usage, and the CLI's
  `status: requesting` marks when each request began (a request the backstop cut off shows).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api_faults import DEFAULT_API_STALL_MS, ApiFault, ApiLog, RunEnd, classify
from .isolation.tool_offer import ToolOffer
from .sample import sum_tokens, tokens_from_camel, tokens_from_snake, zero_tokens
from .transcript import Recorder

GuardFunction = Callable[[str, Mapping[str, Any]], "tuple[bool, str]"]

# After an interrupt the CLI normally answers within about 0.35 s; this bounds a CLI that does not.
INTERRUPT_GRACE_S = 10.0
STDERR_TAIL_LINES = 40


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
    first_request_tools: tuple[str, ...] | None = None  # what the first model request carried, where known
    api: ApiLog = field(default_factory=ApiLog)  # the model API's signals during the run
    api_fault: ApiFault | None = None  # the API ended the run (api_faults.classify)
    api_wait_ms: int = 0  # the CLI's waits between attempts of failing model requests

    @property
    def replies(self) -> int:
        """Model replies the agent received in full: the sample's `turns` (README "The sample format")."""
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


# The SDK modules a trial touches, imported up front. The SDK imports some of them (and `mcp`) only
# when a client connects: an interrupt (a pytest-timeout, Ctrl-C) landing in the middle of such an
# import leaves a half-initialised module in sys.modules, and every later trial fails on it.
SDK_MODULES = (
    "claude_agent_sdk",
    "claude_agent_sdk._internal.client",
    "claude_agent_sdk._internal.query",
    "claude_agent_sdk._internal.transport.subprocess_cli",
    "claude_agent_sdk._internal.sdk_mcp_bridge",
    "claude_agent_sdk._internal._mcp_compat",
    "mcp.server",
    "mcp.shared.message",
    "mcp.shared.memory",
)


def import_sdk() -> None:
    """Import the SDK completely, outside any trial (the plugin calls this at sitting start)."""
    import importlib

    for name in SDK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an internal module of another SDK version: nothing to preload
            if name == "claude_agent_sdk":
                raise


def sdk_versions() -> dict[str, str]:
    """The installed SDK and bundled CLI versions, for provenance."""
    try:
        from claude_agent_sdk import __version__ as sdk_version
    except ImportError:  # pragma: no cover - the SDK is a hard dependency
        return {"sdk": "missing", "cli": "missing"}
    try:
        from claude_agent_sdk._cli_version import __cli_version__ as cli_version
    except ImportError:
        cli_version = "unknown"
    return {"sdk": sdk_version, "cli": cli_version}


def bundled_cli() -> str:
    """Where the SDK's bundled Claude Code CLI is, found without importing the SDK."""
    import importlib.util

    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:  # pragma: no cover - the SDK is a hard dependency
        raise RuntimeError("claude-agent-sdk is not installed")
    return str(Path(spec.origin).parent / "_bundled" / "claude")


def run_agent(request: AgentRequest) -> AgentResult:
    """Run the conversation to its end (or its backstop) and return everything measured."""
    return asyncio.run(_run(request))


class _ApiEnded(Exception):
    """The API's signals end the run before its backstop: a stall, or credentials refused again and again."""


@dataclass
class _Watch:
    """The run's clock, the API's log and the event that ends the run early: what the message loop
    feeds and the backstop loop reads."""

    log: ApiLog
    started: float = field(default_factory=time.monotonic)
    api_says_end: asyncio.Event = field(default_factory=asyncio.Event)
    stall_sooner: asyncio.Event = field(default_factory=asyncio.Event)  # a request opened: the watch wakes earlier

    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


async def _run(request: AgentRequest) -> AgentResult:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher

    result = AgentResult(api=ApiLog(stall_ms=request.api_stall_ms))
    stderr_lines: list[str] = []
    transcriber = _Transcriber(request.recorder) if request.recorder is not None else None
    if transcriber is not None:
        transcriber.recorder.start()
        transcriber.recorder.add("prompt", system_prompt=request.system_prompt, prompt=request.prompt)

    async def guard_hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        tool_name = str(hook_input.get("tool_name", ""))
        tool_input = hook_input.get("tool_input") or {}
        allowed, reason = request.guard(tool_name, tool_input)
        if transcriber is not None:
            transcriber.recorder.add(
                "guard", tool_use_id=tool_use_id or hook_input.get("tool_use_id"), name=tool_name, allowed=allowed, reason=reason
            )
        result.attempts.append(
            {
                "id": tool_use_id or hook_input.get("tool_use_id"),
                "tool": tool_name,
                "input": dict(tool_input),
                "allowed": allowed,
                "reason": reason,
            }
        )
        decision = {"hookEventName": "PreToolUse", "permissionDecision": "allow" if allowed else "deny"}
        if not allowed:
            decision["permissionDecisionReason"] = reason
        return {"hookSpecificOutput": decision}

    def keep_stderr(line: str) -> None:
        stderr_lines.append(line.rstrip())
        del stderr_lines[:-STDERR_TAIL_LINES]

    options = ClaudeAgentOptions(
        model=request.model,
        system_prompt=request.system_prompt,
        max_turns=request.max_turns,
        cwd=str(request.cwd),
        env=dict(request.env),
        tools=list(request.tools),
        # Every call still passes the guard hook first; allowed_tools only stops the CLI from
        # asking a permission question nobody is there to answer.
        allowed_tools=list(request.tools) + [f"mcp__{name}__*" for name in request.mcp_servers],
        mcp_servers={name: dict(config) for name, config in request.mcp_servers.items()},
        strict_mcp_config=True,
        setting_sources=[],
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[guard_hook])]},
        stderr=keep_stderr,
        cli_path=str(request.cli_path) if request.cli_path else None,
        # The raw stream events are the API's signs of life (the stall watch) and say which replies
        # arrived in full; the transcript is built from them too.
        include_partial_messages=True,
    )

    watch = _Watch(result.api)
    # When the conversation began (the init message): a hung run's duration counts from there, as
    # the CLI's own duration_ms does, so the MCP servers' start-up is not the agent's time.
    began = {"conversation": watch.started}
    client = ClaudeSDKClient(options=options)
    try:
        await client.connect()
        await client.query(request.prompt)
        try:
            await _collect_within_backstop(client, result, request, began, watch, transcriber)
        except asyncio.TimeoutError:
            result.hung = True
            result.api.interrupted(watch.ms())
            if transcriber is not None:
                transcriber.interrupted("backstop", wall_clock_ms=int(request.wall_clock_s * 1000))
            await _interrupt(client, result, watch, transcriber)
        except _ApiEnded:
            result.api.interrupted(watch.ms())
            if transcriber is not None and result.api.stalled_ms is not None:
                transcriber.interrupted("api_stall", stall_ms=request.api_stall_ms)
            elif transcriber is not None:
                transcriber.interrupted("api_refused", attempts=len(result.api.pending))
            await _interrupt(client, result, watch, transcriber)
    except Exception as exc:  # noqa: BLE001 - every SDK failure becomes a recorded harness error
        if not _absorb_result_error(exc, result):
            result.error = f"{type(exc).__name__}: {exc}"
    finally:
        end_ms = watch.ms()
        result.api_wait_ms = result.api.wait_ms(end_ms)
        result.api_fault = classify(
            result.api,
            RunEnd(end_ms, backstop=result.hung, is_error=result.is_error, terminal_reason=result.terminal_reason,
                   api_error_status=result.api_error_status),
        )  # fmt: skip
        if transcriber is not None:
            transcriber.finish(result.error, result.api_fault)
        try:
            await asyncio.wait_for(client.disconnect(), timeout=INTERRUPT_GRACE_S)
        except Exception:  # noqa: BLE001 - the CLI is gone either way; nothing left to save
            pass
    elapsed_ms = int((time.monotonic() - watch.started) * 1000)
    result.duration_ms = result.duration_ms or elapsed_ms
    if result.hung:
        result.duration_ms = int((time.monotonic() - began["conversation"]) * 1000)
    result.stderr_tail = stderr_lines
    return result


async def _collect_within_backstop(
    client: Any,
    result: AgentResult,
    request: AgentRequest,
    began: dict[str, float],
    watch: _Watch,
    transcriber: _Transcriber | None = None,
) -> None:
    """Collect the run; raise asyncio.TimeoutError at the backstop, _ApiEnded when the API's signals
    end it first (a stall, refused credentials). The backstop starts at the init message: before it
    the CLI is connecting the arm's MCP servers, bounded by their wait on top."""
    started = asyncio.Event()
    collecting = asyncio.ensure_future(_collect(client, result, watch, started, transcriber))
    starting = asyncio.ensure_future(started.wait())
    try:
        await asyncio.wait(
            {collecting, starting}, timeout=request.startup_wait_s + request.wall_clock_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        starting.cancel()
    if not (started.is_set() or collecting.done()):
        await _cancel(collecting)
        raise asyncio.TimeoutError
    began["conversation"] = time.monotonic()
    deadline = began["conversation"] + request.wall_clock_s
    api_end = asyncio.ensure_future(watch.api_says_end.wait())
    sooner = asyncio.ensure_future(watch.stall_sooner.wait())
    try:
        while not collecting.done():
            # Wake at the backstop or when the open request's silence would become a stall. Events
            # only move a stall later (checked again on waking), but for a request that opens: then
            # `stall_sooner` wakes the loop to wait for the new, earlier time.
            due_ms = watch.log.stall_due_ms()
            wake = deadline if due_ms is None else min(deadline, watch.started + due_ms / 1000)
            await asyncio.wait({collecting, api_end, sooner}, timeout=max(0.0, wake - time.monotonic()),
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if collecting.done():
                break
            if sooner.done():
                watch.stall_sooner.clear()
                sooner = asyncio.ensure_future(watch.stall_sooner.wait())
            if api_end.done():
                watch.log.refused_ms = watch.ms()
                await _cancel(collecting)
                raise _ApiEnded
            if time.monotonic() >= deadline:
                await _cancel(collecting)
                raise asyncio.TimeoutError
            due_ms = watch.log.stall_due_ms()
            if due_ms is not None and watch.ms() >= due_ms:
                watch.log.stalled_ms = watch.ms()
                await _cancel(collecting)
                raise _ApiEnded
    finally:
        api_end.cancel()
        sooner.cancel()
    collecting.result()  # its exception, if any


async def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _collect(
    client: Any,
    result: AgentResult,
    watch: _Watch,
    started: asyncio.Event | None = None,
    transcriber: _Transcriber | None = None,
) -> None:
    try:
        async for message in client.receive_response():
            if transcriber is not None:
                transcriber.message(message)
            _absorb_message(message, result, watch)
            if started is not None and result.offer is not None:
                started.set()
    except Exception as exc:
        if not _absorb_result_error(exc, result):
            raise


async def _interrupt(client: Any, result: AgentResult, watch: _Watch, transcriber: _Transcriber | None = None) -> None:
    """Stop the CLI (backstop, stall, refused credentials) and keep whatever it reports about the partial run."""
    try:
        await client.interrupt()
        await asyncio.wait_for(_collect(client, result, watch, transcriber=transcriber), timeout=INTERRUPT_GRACE_S)
    except Exception:  # noqa: BLE001 - the run ended as it ended whatever the CLI says now
        pass


def _absorb_result_error(exc: Exception, result: AgentResult) -> bool:
    """The SDK raises ResultError after an error result (turn cap, API error): an outcome, not a crash."""
    from claude_agent_sdk import ResultError

    if not isinstance(exc, ResultError):
        return False
    status = getattr(exc, "api_error_status", None)
    if status is not None:
        result.api_error_status = int(status)
    if result.subtype is None:
        result.subtype = getattr(exc, "subtype", None) or "error"
        result.is_error = True
        result.terminal_reason = result.terminal_reason or getattr(exc, "terminal_reason", None)
    if status is not None or (result.subtype == "error_during_execution" and not result.hung):
        result.error = f"model API error {status}: {exc}" if status else f"agent run failed: {exc}"
    return True


def _sdk() -> Any:
    """The SDK module, imported on first use (see the module docstring). Looked up in sys.modules on
    every call, never cached here: a module object kept from an earlier import would hold classes the
    messages are no instances of once the SDK is imported again (pytester's in-process runs do that)."""
    import claude_agent_sdk

    return claude_agent_sdk


def _absorb_message(message: Any, result: AgentResult, watch: _Watch) -> None:
    sdk = _sdk()
    _feed_log(message, result, watch)
    if isinstance(message, sdk.StreamEvent):
        return
    if isinstance(message, sdk.SystemMessage):
        if message.subtype == "init" and result.offer is None:
            result.offer = _offer(message.data if isinstance(message.data, dict) else {})
    elif isinstance(message, sdk.AssistantMessage):
        for block in message.content:
            if isinstance(block, sdk.ToolUseBlock):
                result.transcript.append(
                    {"id": block.id, "tool": block.name, "input": dict(block.input), "result": None}
                )
        if message.usage and not result.usage_by_model:
            # Per-call usage from assistant messages: the only usage a run that never ends has.
            # One API call can arrive as several messages, so they are keyed by message id.
            key = message.message_id or f"message-{len(result.partial_usage)}"
            result.partial_usage[key] = tokens_from_snake(message.usage)
            result.usage_total = sum_tokens(result.partial_usage.values())
    elif isinstance(message, sdk.UserMessage) and isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, sdk.ToolResultBlock):
                _attach_tool_result(result, block)
    elif isinstance(message, sdk.ResultMessage):
        _absorb_result(message, result)


def _feed_log(message: Any, result: AgentResult, watch: _Watch) -> None:
    """What the message says of the model API, into the run's ApiLog; wakes the watch when a request
    opened (its stall is due sooner than the watch was told)."""
    sdk = _sdk()
    log = result.api
    due_ms = log.stall_due_ms()
    if isinstance(message, sdk.StreamEvent):
        event = message.event if isinstance(message.event, dict) else {}
        start = event.get("message") if isinstance(event.get("message"), dict) else {}
        log.stream_event(watch.ms(), str(event.get("type")), start.get("id"))
    elif isinstance(message, sdk.SystemMessage):
        data = message.data if isinstance(message.data, dict) else {}
        if message.subtype == "status" and data.get("status") == "requesting":
            log.request_began(watch.ms())
        elif message.subtype == "api_retry":
            status = data.get("error_status")
            log.retry(watch.ms(), _whole(data.get("attempt")), status if isinstance(status, int) else None,
                      str(data.get("error") or "unknown"), _whole(data.get("retry_delay_ms")))  # fmt: skip
            if log.credentials_refused():
                watch.api_says_end.set()
    elif isinstance(message, sdk.AssistantMessage):
        # One API reply can arrive as several messages (one per content block), with one id. The CLI
        # reports a failed API call as an assistant message of its own (model "<synthetic>", with
        # `error` set): that is no reply of the model.
        if message.error is not None or message.model == "<synthetic>":
            log.failed_for_good(str(message.error or "unknown"))
        else:
            log.reply(message.message_id or f"reply-{len(log.replies)}", usage_reported=message.usage is not None)
    now_due_ms = log.stall_due_ms()
    if now_due_ms is not None and (due_ms is None or now_due_ms < due_ms):
        watch.stall_sooner.set()


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


class _Transcriber:
    """Turns the SDK's messages into transcript events (transcript.py documents each kind)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.requests = 0
        self.answered = 0  # the request the last response answered
        self.response: dict[str, Any] | None = None  # the response being streamed
        self.cut = False  # the harness interrupted the run: later stream events are the CLI's making

    def message(self, message: Any) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage, StreamEvent, SystemMessage, UserMessage

        add = self.recorder.add
        if isinstance(message, StreamEvent):
            if self.cut:
                return  # the closing events the CLI makes up for a reply it was streaming
            self._stream_event(message.event if isinstance(message.event, dict) else {}, message.parent_tool_use_id)
        elif isinstance(message, SystemMessage):
            data = message.data if isinstance(message.data, dict) else {}
            if message.subtype == "init":
                add(
                    "init",
                    session_id=data.get("session_id"),
                    model=data.get("model"),
                    cwd=data.get("cwd"),
                    tools=[str(tool) for tool in data.get("tools") or []],
                    mcp_servers=[
                        {"name": server.get("name"), "status": server.get("status")}
                        for server in data.get("mcp_servers") or []
                        if isinstance(server, dict)
                    ],
                    permission_mode=data.get("permissionMode"),
                )
            elif message.subtype == "status" and data.get("status") == "requesting":
                self.requests += 1
                add("model_request", request=self.requests)
            else:
                add("system", subtype=message.subtype, data={k: v for k, v in data.items() if k not in ("type", "uuid", "session_id")})
        elif isinstance(message, AssistantMessage):
            if message.error is not None or message.model == "<synthetic>":
                add("api_error", error=str(message.error), text=_text_of(message.content))
                return
            for block in message.content:
                kind, fields = _block_event(block, message.message_id)
                add(kind, **fields, **_subagent(message))
        elif isinstance(message, UserMessage):
            if isinstance(message.content, str):
                add("user", content=message.content)
                return
            for block in message.content:
                kind, fields = _block_event(block, None)
                if kind == "tool_result":
                    add(kind, **fields, **_subagent(message))
                else:
                    add("user", content=_text_of([block]), **_subagent(message))
        elif isinstance(message, ResultMessage):
            add(
                "result",
                subtype=message.subtype,
                is_error=bool(message.is_error),
                terminal_reason=getattr(message, "terminal_reason", None),
                stop_reason=message.stop_reason,
                result=message.result,
                num_turns=message.num_turns,
                duration_ms=message.duration_ms,
                duration_api_ms=message.duration_api_ms,
                total_cost_usd=message.total_cost_usd,
                usage=tokens_from_snake(message.usage) if message.usage else None,
                model_usage={name: tokens_from_camel(usage) for name, usage in (message.model_usage or {}).items()},
                permission_denials=list(message.permission_denials or []),
            )

    def _stream_event(self, event: dict[str, Any], parent_tool_use_id: str | None = None) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._end_response(complete=False)  # a response that never ended before the next began
            start = event.get("message") if isinstance(event.get("message"), dict) else {}
            if self.requests == self.answered:  # a request the CLI did not announce
                self.requests += 1
                self.recorder.add("model_request", request=self.requests)
            self.answered = self.requests
            self.response = {
                "request": self.requests,
                "message_id": start.get("id"),
                "model": start.get("model"),
                "stop_reason": None,
                "usage": tokens_from_snake(start.get("usage")),
                **({"parent_tool_use_id": parent_tool_use_id} if parent_tool_use_id else {}),
            }
        elif kind == "message_delta" and self.response is not None:
            delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
            self.response["stop_reason"] = delta.get("stop_reason") or self.response["stop_reason"]
            # The final usage: output always; the input fields when the API repeats them.
            reported = event.get("usage") if isinstance(event.get("usage"), dict) else {}
            snake = {key: value for key, value in reported.items() if value is not None}
            self.response["usage"].update(
                {name: value for name, value in tokens_from_snake(snake).items() if _SNAKE[name] in snake}
            )
        elif kind == "message_stop":
            self._end_response(complete=True)

    def _end_response(self, *, complete: bool) -> None:
        if self.response is not None:
            self.recorder.add("model_response", **self.response, complete=complete)
            self.response = None

    def interrupted(self, kind: str, **fields: Any) -> None:
        """The harness stops the run (`backstop`, `api_stall`, `api_refused`): a response being
        streamed is cut off, kept incomplete with what it reported so far."""
        self.recorder.add(kind, **fields)
        self._end_response(complete=False)
        self.cut = True

    def finish(self, error: str | None, fault: ApiFault | None = None) -> None:
        """The run is over: a response cut off mid-stream is kept with what it reported."""
        self._end_response(complete=False)
        if fault is not None:
            self.recorder.add("api_fault", fault=fault.kind, status=fault.status, error=fault.error,
                              attempts=fault.attempts, reason=fault.reason)  # fmt: skip
        elif error:
            self.recorder.add("error", error=error)


_SNAKE = {"fresh_input": "input_tokens", "cache_write": "cache_creation_input_tokens",
          "cache_read": "cache_read_input_tokens", "output": "output_tokens"}  # fmt: skip


def _subagent(message: Any) -> dict[str, Any]:
    """A subagent's messages (the Task tool) name the tool call that started it."""
    parent = getattr(message, "parent_tool_use_id", None)
    return {"parent_tool_use_id": parent} if parent else {}


def _block_event(block: Any, message_id: str | None) -> tuple[str, dict[str, Any]]:
    from claude_agent_sdk import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

    if isinstance(block, TextBlock):
        return "text", {"message_id": message_id, "text": block.text}
    if isinstance(block, ThinkingBlock):  # the signature is opaque to a reader: left out
        return "thinking", {"message_id": message_id, "thinking": block.thinking}
    if isinstance(block, ToolUseBlock):
        return "tool_use", {"message_id": message_id, "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, ToolResultBlock):
        content = block.content if isinstance(block.content, str) else _text_of(block.content or [])
        return "tool_result", {"tool_use_id": block.tool_use_id, "is_error": bool(block.is_error), "content": content}
    fields = dict(block.__dict__) if hasattr(block, "__dict__") else {"value": str(block)}
    return "block", {"message_id": message_id, "type": type(block).__name__, **fields}


def _text_of(parts: Any) -> str:
    """Text parts joined; any other part named in brackets ([image])."""
    texts = []
    for part in parts if isinstance(parts, list) else [parts]:
        if isinstance(part, dict):
            texts.append(str(part.get("text")) if part.get("type", "text") == "text" else f"[{part.get('type')}]")
        elif hasattr(part, "text"):
            texts.append(str(part.text))
        else:
            texts.append(f"[{type(part).__name__}]")
    return "\n".join(texts)
