"""What the fake Messages API sends: Anthropic-style error bodies, a message, and the SSE events of
a streamed one in the real API's order."""

from __future__ import annotations

import json
from typing import Any

from .usage import Usage

SSE_TYPE = "text/event-stream; charset=utf-8"
FIRST_DELTA_EVENTS = 3  # message_start, the first content_block_start and its first delta

# Anthropic error types by HTTP status (https://docs.anthropic.com/en/api/errors).
_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_type_for(status: int) -> str:
    """The Anthropic error ``type`` for an HTTP status (``api_error`` when unknown)."""
    return _ERROR_TYPES.get(status, "api_error")


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type_for(status), "message": message}}

def _message(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _sse_event(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _sse_events(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: Usage,
    *,
    with_usage: bool = True,
) -> list[bytes]:
    """The SSE events of one streamed message, in the real API's event order."""
    # message_start reports the input side; output is only known at the end (message_delta).
    start = _message(message_id, model, [], None, {**usage.input_fields(), "output_tokens": 0})
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                             "usage": usage.as_dict()}  # fmt: skip
    if not with_usage:
        del start["usage"], delta["usage"]
    events = [_sse_event("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(content):
        opening: dict[str, Any]
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            change = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            change = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(_sse_event("content_block_start", {
            "type": "content_block_start", "index": index, "content_block": opening,
        }))
        events.append(_sse_event("content_block_delta", {
            "type": "content_block_delta", "index": index, "delta": change,
        }))
        events.append(_sse_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(_sse_event("message_delta", delta))
    events.append(_sse_event("message_stop", {"type": "message_stop"}))
    return events
