"""The SDK's messages turned into the transcript's events (transcript.py documents each kind), as
they stream. Given the SDK namespace by agent.py (`sdk`, looked up on each message as agent._sdk
does), it imports none itself: only agent.py imports claude_agent_sdk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .api_faults import ApiFault
from .sample import tokens_from_camel, tokens_from_snake
from .transcript import Recorder


class _Transcriber:
    """Turns the SDK's messages into transcript events (transcript.py documents each kind)."""

    def __init__(self, recorder: Recorder, sdk: Callable[[], Any]) -> None:
        self.recorder = recorder
        self.sdk = sdk  # returns the claude_agent_sdk module (agent._sdk)
        self.requests = 0
        self.answered = 0  # the request the last response answered
        self.response: dict[str, Any] | None = None  # the response being streamed
        self.cut = False  # the harness interrupted the run: later stream events are the CLI's making

    def message(self, message: Any) -> None:
        sdk = self.sdk()
        AssistantMessage, ResultMessage, StreamEvent = sdk.AssistantMessage, sdk.ResultMessage, sdk.StreamEvent
        SystemMessage, UserMessage = sdk.SystemMessage, sdk.UserMessage

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
                kind, fields = _block_event(sdk, block, message.message_id)
                add(kind, **fields, **_subagent(message))
        elif isinstance(message, UserMessage):
            if isinstance(message.content, str):
                add("user", content=message.content)
                return
            for block in message.content:
                kind, fields = _block_event(sdk, block, None)
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
            start = message if isinstance(message := event.get("message"), dict) else {}
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
            delta = given if isinstance(given := event.get("delta"), dict) else {}
            self.response["stop_reason"] = delta.get("stop_reason") or self.response["stop_reason"]
            # The final usage: output always; the input fields when the API repeats them.
            reported = usage if isinstance(usage := event.get("usage"), dict) else {}
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


def _block_event(sdk: Any, block: Any, message_id: str | None) -> tuple[str, dict[str, Any]]:
    TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock = sdk.TextBlock, sdk.ThinkingBlock, sdk.ToolResultBlock, sdk.ToolUseBlock

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
