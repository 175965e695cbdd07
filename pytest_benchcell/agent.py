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
  the tools), so a trial whose agent never saw its arm's tools is not charged to the arm; a run
  whose init message shows a declared MCP server not connected is interrupted right there, before
  the model's requests play (`mcp_failed`);
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .agent_result import AgentRequest, AgentResult, _absorb_result, _attach_tool_result, _offer, _whole, note_stream_usage
from .agent_result import GuardFunction as GuardFunction
from .api_faults import ApiLog, RunEnd, classify
from .isolation.tool_offer import CONNECTED
from .sample import sum_tokens, tokens_from_snake
from .transcribing import _Transcriber

# After an interrupt the CLI normally answers within about 0.35 s; this bounds a CLI that does not.
INTERRUPT_GRACE_S = 10.0
STDERR_TAIL_LINES = 40

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
    """Import the SDK completely, outside any trial (the plugin calls this at sitting start), then
    leave what the process holds by then to reference counting alone (`freeze_start`)."""
    import gc
    import importlib

    collecting = gc.isenabled()
    gc.disable()  # the import builds ~100,000 objects that live as long as the process: nothing to free
    try:
        for name in SDK_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:  # an internal module of another SDK version: nothing to preload
                if name == "claude_agent_sdk":
                    raise
    finally:
        if collecting:
            gc.enable()
    freeze_start()


def freeze_start() -> None:
    """Once per process: collect, then move every object left into the garbage collector's permanent
    generation (gc.freeze). The SDK, the `mcp` package's ~550 pydantic models, pytest and the plugin
    live until the process ends, yet every full collection walks them again, and the interpreter's
    exit walks them several times: 0.26 CPU s per process measured, 0.04 s frozen. An xdist worker
    pays that on top of its start, all workers at once; frozen, 16 workers with no trial use 22 CPU s
    instead of 29 (benchmarks/xdist_speedup.py). Reference counting still frees these objects; a cycle
    among them that becomes garbage later stays until the process ends (none is garbage when they are
    frozen: the collection runs first)."""
    import gc

    if gc.get_freeze_count():
        return  # frozen already (an earlier sitting in this process, or the program that hosts it)
    gc.collect()
    gc.freeze()


IMPORT_SWITCH_INTERVAL_S = 0.0002  # the interpreter's thread switch interval while the SDK is imported


class SdkImport:
    """The SDK imported on a thread of its own while the sitting collects and runs its pre-flight
    (whose time is mostly spent waiting for the commands it runs in the sandbox): a sitting starts
    that much sooner. `wait()` before anything uses the SDK; it raises what the import raised. An
    interrupt reaches only the main thread, so it can never leave the import half done."""

    def __init__(self) -> None:
        import threading

        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="benchcell-sdk-import", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import sys

        # The import holds the interpreter lock for long stretches, and the main thread's pre-flight
        # lets go of it at each system call (a stat, a write, a process started): at the default
        # switch interval each one then waited up to 5 ms to get it back, which made the pre-flight
        # several times slower while the import ran. A short interval while it runs keeps that wait small.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(IMPORT_SWITCH_INTERVAL_S)
        try:
            import_sdk()
        except BaseException as exc:  # handed to the thread that waits  # noqa: BLE001
            self.failure = exc
        finally:
            sys.setswitchinterval(interval)

    def wait(self) -> None:
        self.thread.join()
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure


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


class _ServersFailed(Exception):
    """The init message shows an MCP server of the arm not connected: the run would not measure the arm."""


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
    transcriber = _Transcriber(request.recorder, _sdk) if request.recorder is not None else None
    if transcriber is not None:
        transcriber.recorder.start()
        transcriber.recorder.add("prompt", system_prompt=request.system_prompt, prompt=request.prompt)

    async def guard_hook(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:  # the SDK's hook output
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
        mcp_servers={name: cast(Any, dict(config)) for name, config in request.mcp_servers.items()},  # stdio configs
        strict_mcp_config=True,
        # No settings leak in; a natively delivered skill is found among the trial's own config
        # folder's "user" settings (which hold nothing else), and only it is listed (skill_delivery.py).
        setting_sources=["user"] if request.skills else [],
        skills=list(request.skills) if request.skills else None,
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
        except TimeoutError:
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
        except _ServersFailed:
            if transcriber is not None:
                transcriber.interrupted("mcp_failed", servers=list(result.mcp_failed))
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
        raise TimeoutError
    if result.offer is not None:
        # A declared server not connected as the conversation begins leaves the agent without the
        # arm's tools for good (the CLI does not wait for it later): stop before its requests play.
        result.mcp_failed = tuple(name for name in request.mcp_servers if result.offer.servers.get(name) != CONNECTED)
        if result.mcp_failed and not collecting.done():
            await _cancel(collecting)
            raise _ServersFailed
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
                raise TimeoutError
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
        if isinstance(message.event, dict):
            note_stream_usage(result, message.event)  # per request, for its price (prices.py)
        return
    if isinstance(message, sdk.SystemMessage):
        if message.subtype == "init" and result.offer is None:
            result.offer = _offer(message.data if isinstance(message.data, dict) else {})
            result.offer_ms = watch.ms()
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
        start = started if isinstance(started := event.get("message"), dict) else {}
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
