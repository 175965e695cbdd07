"""A trial as Inspect AI messages and events (export_inspect.py writes them into its log): from the
trial's kept transcript (transcript.py, format 1) when there is one, else from what every sample
holds, its tool calls with their (clipped) outputs and its final answer.

Every function takes `ai`, the inspect_ai namespace export_inspect imported: this module imports
nothing of inspect_ai itself.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

from .sample import TOKEN_COMPONENTS


def int_or_zero(value: Any) -> int:
    return value if type(value) is int else 0


def utc_moment(text: Any) -> _dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)


def _tool_error(ai: Any, call: Mapping[str, Any]) -> Any:
    if call.get("allowed") is False:
        return ai.tool.ToolCallError("permission", str(call.get("reason") or "refused"))
    if call.get("is_error"):
        return ai.tool.ToolCallError("unknown", str(call.get("output") or "the tool reported an error"))
    return None


def from_tool_calls(ai: Any, sample: Mapping[str, Any], model: str, intent: str, started: _dt.datetime) -> tuple[list[Any], list[Any]]:
    """Messages and events from what every sample holds: each tool call as an assistant turn and
    its (clipped) result, then the final answer. No per-call time is stored: events carry the
    trial's start (an explicit working_start; Inspect would otherwise ask a running eval for it)."""
    M, E = ai.model, ai.event
    messages: list[Any] = [M.ChatMessageUser(content=intent or f"task {sample.get('task')}")]
    events: list[Any] = []
    for number, call in enumerate(c for c in sample.get("tool_calls") or [] if isinstance(c, Mapping)):
        call_id = str(call.get("id") or f"call-{number + 1}")
        function = str(call.get("tool") or "unknown")
        arguments = call.get("input") if isinstance(call.get("input"), dict) else {"input": call.get("input")}
        output = str(call.get("output") or "")
        error = _tool_error(ai, call)
        messages.append(M.ChatMessageAssistant(content="", model=model, tool_calls=[ai.tool.ToolCall(call_id, function, arguments)]))
        messages.append(M.ChatMessageTool(content=output, tool_call_id=call_id, function=function, error=error))
        events.append(
            E.ToolEvent(id=call_id, function=function, arguments=arguments, result=output, error=error,
                        timestamp=started, working_start=0.0, metadata=_guard(call))
        )  # fmt: skip
    answer = str(sample.get("final_answer") or "")
    if answer:
        messages.append(M.ChatMessageAssistant(content=answer, model=model))
    return messages, events


def _guard(call: Mapping[str, Any]) -> dict[str, Any]:
    return {"allowed": call.get("allowed"), "reason": call.get("reason") or ""}


# Transcript kinds shown as info events in the viewer's transcript (the rest become messages,
# model events and tool events; header, model_request and ended are folded into those or the score).
_INFO_KINDS = ("init", "api_error", "system", "backstop", "error", "result")


def from_transcript(ai: Any, lines: Sequence[Mapping[str, Any]], model: str, intent: str, started: _dt.datetime) -> tuple[list[Any], list[Any]]:
    """Messages and events from a kept transcript (transcript.py, format 1): each model request as
    a model event with that request's own usage, the assistant's thinking, text and tool calls as
    its message, each tool result as a tool message and a tool event with its full result."""
    return _TranscriptReplay(ai, model, intent, started, lines).run()


class _TranscriptReplay:
    def __init__(self, ai: Any, model: str, intent: str, started: _dt.datetime, lines: Sequence[Mapping[str, Any]]) -> None:
        self.ai, self.model, self.lines = ai, model, lines
        header = lines[0] if lines and lines[0].get("kind") == "header" else {}
        self.started = utc_moment(header.get("started_at")) or started
        self.intent = intent
        self.messages: list[Any] = []
        self.events: list[Any] = []
        self.parts: dict[str, list[Any]] = {}  # message id -> content parts of a response not yet ended
        self.calls: dict[str, list[Any]] = {}  # message id -> its tool calls
        self.uses: dict[str, tuple[Mapping[str, Any], float]] = {}  # tool_use id -> (tool_use event, its t_ms)
        self.guards: dict[str, Mapping[str, Any]] = {}
        self.requested: dict[Any, float] = {}  # request number -> t_ms it started

    def at(self, t_ms: float) -> _dt.datetime:
        return self.started + _dt.timedelta(milliseconds=t_ms)

    def run(self) -> tuple[list[Any], list[Any]]:
        M, E = self.ai.model, self.ai.event
        for line in self.lines[1:]:
            kind = line.get("kind")
            t_ms = float(line.get("t_ms") or 0.0) if type(line.get("t_ms")) in (int, float) else 0.0
            if kind == "prompt":
                if line.get("system_prompt"):
                    self.messages.append(M.ChatMessageSystem(content=str(line["system_prompt"])))
                self.messages.append(M.ChatMessageUser(content=str(line.get("prompt") or self.intent)))
            elif kind == "model_request":
                self.requested[line.get("request")] = t_ms
            elif kind in ("text", "thinking"):
                part = (M.ContentText(text=str(line.get("text") or "")) if kind == "text"
                        else M.ContentReasoning(reasoning=str(line.get("thinking") or "")))  # fmt: skip
                self.parts.setdefault(str(line.get("message_id")), []).append(part)
            elif kind == "tool_use":
                call_id = str(line.get("id"))
                arguments = line.get("input") if isinstance(line.get("input"), dict) else {"input": line.get("input")}
                self.calls.setdefault(str(line.get("message_id")), []).append(
                    self.ai.tool.ToolCall(call_id, str(line.get("name") or "unknown"), arguments))
                self.parts.setdefault(str(line.get("message_id")), [])
                self.uses[call_id] = (line, t_ms)
            elif kind == "guard":
                self.guards[str(line.get("tool_use_id"))] = line
            elif kind == "model_response":
                self.respond(line, t_ms)
            elif kind == "tool_result":
                self.tool_result(line, t_ms)
            elif kind == "user":
                self.messages.append(M.ChatMessageUser(content=str(line.get("content") or "")))
            elif kind in _INFO_KINDS:
                data = {key: value for key, value in line.items() if key not in ("kind", "t_ms")}
                self.events.append(E.InfoEvent(source=str(kind), data=data, timestamp=self.at(t_ms), working_start=t_ms / 1000))
        if not any(message.role == "user" for message in self.messages):  # cut before the prompt was recorded
            self.messages.insert(0, M.ChatMessageUser(content=self.intent or "(no prompt recorded)"))
        for message_id in list(self.parts):  # responses the stream cut before they ended
            self.messages.append(self.assistant(message_id))
        for use, t_ms in self.uses.values():  # calls that never got a result
            self.events.append(self.tool_event(use, t_ms, None, "", self.ai.tool.ToolCallError("cancelled", "no result: the trial ended first")))
        return self.messages, self.events

    def assistant(self, message_id: str) -> Any:
        parts = self.parts.pop(message_id, [])
        calls = self.calls.pop(message_id, None)
        content = parts if parts else ""
        return self.ai.model.ChatMessageAssistant(content=content, model=self.model, tool_calls=calls, id=message_id)

    def respond(self, line: Mapping[str, Any], t_ms: float) -> None:
        M, E = self.ai.model, self.ai.event
        model = str(line.get("model") or self.model)
        message = self.assistant(str(line.get("message_id")))
        tokens = usage if isinstance(usage := line.get("usage"), Mapping) else {}
        counts = {name: int_or_zero(tokens.get(name)) for name in TOKEN_COMPONENTS}
        usage = M.ModelUsage(
            input_tokens=counts["fresh_input"], output_tokens=counts["output"],
            input_tokens_cache_write=counts["cache_write"], input_tokens_cache_read=counts["cache_read"],
            total_tokens=sum(counts.values()),
        )  # fmt: skip
        stop = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "max_tokens", "stop_sequence": "stop"}
        output = M.ModelOutput(
            model=model,
            choices=[M.ChatCompletionChoice(message=message, stop_reason=stop.get(str(line.get("stop_reason")), "unknown"))],
            usage=usage,
        )
        begun = self.requested.get(line.get("request"), t_ms)
        self.events.append(
            E.ModelEvent(model=model, input=list(self.messages), tools=[], tool_choice="auto", config=M.GenerateConfig(),
                         output=output, timestamp=self.at(begun), working_start=begun / 1000, completed=self.at(t_ms),
                         working_time=max(t_ms - begun, 0.0) / 1000,
                         error=None if line.get("complete", True) else "the stream stopped before this response's final usage")
        )  # fmt: skip
        self.messages.append(message)

    def tool_result(self, line: Mapping[str, Any], t_ms: float) -> None:
        call_id = str(line.get("tool_use_id"))
        use, used_at = self.uses.pop(call_id, ({"id": call_id, "name": "unknown", "input": {}}, t_ms))
        content = str(line.get("content") or "")
        guard = self.guards.get(call_id) or {}
        error = None
        if guard.get("allowed") is False:
            error = self.ai.tool.ToolCallError("permission", str(guard.get("reason") or "refused"))
        elif line.get("is_error"):
            error = self.ai.tool.ToolCallError("unknown", content or "the tool reported an error")
        function = str(use.get("name") or "unknown")
        self.messages.append(self.ai.model.ChatMessageTool(content=content, tool_call_id=call_id, function=function, error=error))
        self.events.append(self.tool_event(use, used_at, t_ms, content, error))

    def tool_event(self, use: Mapping[str, Any], used_at: float, ended_at: float | None, result: str, error: Any) -> Any:
        call_id = str(use.get("id"))
        arguments = use.get("input") if isinstance(use.get("input"), dict) else {"input": use.get("input")}
        guard = self.guards.get(call_id) or {}
        return self.ai.event.ToolEvent(
            id=call_id, function=str(use.get("name") or "unknown"), arguments=arguments, result=result, error=error,
            timestamp=self.at(used_at), working_start=used_at / 1000,
            completed=self.at(ended_at) if ended_at is not None else None,
            working_time=(ended_at - used_at) / 1000 if ended_at is not None else None,
            metadata={"allowed": guard.get("allowed"), "reason": guard.get("reason") or ""},
        )  # fmt: skip
