"""A scripted fake of the Anthropic Messages API, served on 127.0.0.1.

Why it exists
-------------
A bench that drives a coding agent through claude-agent-sdk is itself software that needs tests,
and running those tests against a real model costs tokens, is slow and is not reproducible.
:class:`ScriptedModel` stands in for the model: it is a tiny stdlib HTTP server that answers
``POST /v1/messages`` (the Claude Code CLI calls ``/v1/messages?beta=true`` with ``stream: true``)
by playing a fixed script of steps, one step per request. Point the CLI at it with
``ANTHROPIC_BASE_URL=<model.base_url>`` and the *real* CLI runs the *real* tools and hooks
(Bash really executes, PreToolUse hooks really fire, ResultMessage carries real accounting), for
free and deterministically. So a whole trial (provision -> agent -> audit -> score -> record) can
be tested end to end offline.

Script steps
------------
- :class:`ToolUse` -- the model calls a tool (optionally after some text); stop_reason ``tool_use``.
- :class:`Answer` -- the model ends its turn with final text; stop_reason ``end_turn``.
- :class:`Delay` -- sleep, then play another step (to exercise wall-clock bounds).
- :class:`ApiError` -- answer with an HTTP error status and an Anthropic-style JSON error body,
  optionally with ``retry-after`` or ``x-should-retry: false``.
- :class:`BrokenStream` -- answer 200 and start streaming a reply, then break the stream: the
  connection cut mid-message, an SSE event that is not JSON, or an ``event: error`` in the stream.
- :class:`Stall` -- stream a reply's start and first delta, then send no byte for a while.
- :class:`NoUsage` -- stream a reply with no usage fields at all (a gateway that omits them).
- :class:`Repeat` -- play a step forever (to exercise turn caps and outages); must be the last step.

The faults are those a real Messages API or a gateway in front of it shows; what the Claude Code CLI
does with each (retry, give up, wait) is what the end-to-end tests of the harness pin
(tests/test_api_faults_e2e.py).

Each request to a path starting with ``/v1/messages`` consumes the next step (a Repeat is never
consumed). Once the script is exhausted every request is answered with
``Answer("(script exhausted)")``, so a mis-scripted test ends instead of hanging.

Usage model (deterministic, scales with the real request)
---------------------------------------------------------
Token accounting must behave like a real model's for a bench to compare arms: an arm whose tool
definitions or tool outputs are bigger must cost more, and prompt caching must show up. So usage
is computed from the request actually received, not scripted:

1. The prompt text is the concatenation of ``json.dumps(part, sort_keys=True)`` of the system
   prompt, the tools array and then each message in order. ``cache_control`` markers are removed
   first: the CLI moves them from message to message, and the real API does not count them as
   content either (left in, they would break every cached prefix).
2. Tokens are characters / 4, rounded down.
3. The server remembers every prompt it has answered successfully. The longest common prefix (in
   characters) between this prompt and any earlier one is a cache READ. The characters after that
   prefix are new: those inside the final message are fresh input, those before it are a cache
   WRITE (on the first request: everything but the final message is a cache write).
   Fresh input is at least 1 token.
4. Output tokens are len(JSON of the emitted content blocks) / 4, at least 1.

message_start carries ``input_tokens`` (fresh), ``cache_creation_input_tokens`` and
``cache_read_input_tokens``; message_delta carries ``output_tokens`` and repeats the input fields,
as the real API does. The same sequence of requests always yields the same usage; tool-use and
message ids come from per-server counters (fixed width) for the same reason. Failed requests
(ApiError, BrokenStream) report no usage and are not remembered for caching; a NoUsage reply is
remembered for caching but reports nothing, so it is missing from :attr:`ScriptedModel.usages`.

This module is pure stdlib: it must not import pytest or claude_agent_sdk.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Answer",
    "ApiError",
    "BrokenStream",
    "Delay",
    "NoUsage",
    "Repeat",
    "ScriptedModel",
    "Stall",
    "Step",
    "ToolUse",
    "Usage",
    "offered_tools",
    "prompt_text",
]

EXHAUSTED_TEXT = "(script exhausted)"
DEFAULT_MODEL_NAME = "scripted"
CHARS_PER_TOKEN = 4
MESSAGES_PATH = "/v1/messages"
SSE_TYPE = "text/event-stream; charset=utf-8"
FIRST_DELTA_EVENTS = 3  # message_start, the first content_block_start and its first delta
# With tool search on, the CLI defers MCP tools: it names them in a system reminder of the first user
# message instead of the tools array (CLI 2.1.332: "The following deferred tools are now available
# via ToolSearch. ...:" then one name per line).
DEFERRED_TOOLS = re.compile(r"deferred tools are now available[^\n]*\n(.*?)</system-reminder>", re.DOTALL)


@dataclass(frozen=True)
class ToolUse:
    """The model calls tool ``name`` with ``input``, after the optional assistant ``text``."""

    name: str
    input: dict[str, Any]
    text: str = ""


@dataclass(frozen=True)
class Answer:
    """The model ends its turn with this final text (stop_reason ``end_turn``)."""

    text: str


@dataclass(frozen=True)
class Delay:
    """Sleep ``seconds`` before answering with ``then`` (any step but a Repeat)."""

    seconds: float
    then: Step


@dataclass(frozen=True)
class ApiError:
    """Answer with HTTP ``status`` and an Anthropic-style JSON error body. ``retry_after`` (seconds)
    sends a ``retry-after`` header; ``should_retry=False`` sends ``x-should-retry: false``, the API's
    word that retrying is pointless (the CLI then stops at once)."""

    status: int = 529
    message: str = "Overloaded"
    retry_after: float | None = None
    should_retry: bool | None = None

    def headers(self) -> dict[str, str]:
        headers = {}
        if self.retry_after is not None:
            headers["retry-after"] = f"{self.retry_after:g}"
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers


Reply = ToolUse | Answer
STREAM_FAULTS = ("cut", "invalid", "error")


@dataclass(frozen=True)
class BrokenStream:
    """Answer HTTP 200 and stream ``reply`` up to its first content delta, then break the stream:
    ``cut`` closes the connection before the declared length arrived, ``invalid`` sends an SSE event
    whose data is not JSON, ``error`` sends ``event: error`` (an overloaded_error) inside the 200
    stream. The request failed: no usage, nothing remembered for caching."""

    reply: Reply
    fault: str = "cut"


@dataclass(frozen=True)
class Stall:
    """Stream ``reply``'s start and first content delta, then send no byte for ``seconds``, then the
    rest: an API (or a gateway) that stops mid-answer, told apart from a model that is slow to start."""

    seconds: float
    reply: Reply


@dataclass(frozen=True)
class NoUsage:
    """Stream ``reply`` complete but without any usage field in message_start and message_delta."""

    reply: Reply


@dataclass(frozen=True)
class Repeat:
    """Play ``step`` for every remaining request, forever. Must be the last step of a script."""

    step: Step


Step = ToolUse | Answer | Delay | ApiError | BrokenStream | Stall | NoUsage | Repeat

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


@dataclass(frozen=True)
class Usage:
    """Token usage of one answered request, in the API's four components."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int

    def input_fields(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    def as_dict(self) -> dict[str, int]:
        return {**self.input_fields(), "output_tokens": self.output_tokens}


def _without_cache_control(value: Any) -> Any:
    """A copy of ``value`` with every ``cache_control`` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_without_cache_control(value), sort_keys=True, ensure_ascii=False)


def prompt_text(body: dict[str, Any]) -> tuple[str, str]:
    """The request's prompt as (everything before the final message, the final message).

    Deterministic serialization of system + tools + messages (see the module docstring).
    """
    messages = body.get("messages") or []
    head_parts = [_dumps(body.get("system") or ""), _dumps(body.get("tools") or [])]
    head_parts.extend(_dumps(message) for message in messages[:-1])
    final = _dumps(messages[-1]) if messages else ""
    return "".join(head_parts), final


def offered_tools(body: dict[str, Any]) -> tuple[str, ...]:
    """The tools a Messages API request offers the model: the tools array (but for entries with
    `defer_loading`, which the CLI adds as placeholders) and the deferred tools it names."""
    tools = [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict) and not tool.get("defer_loading")]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [{"text": content}]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            for listing in DEFERRED_TOOLS.findall(text if isinstance(text, str) else ""):
                tools.extend(line.strip() for line in listing.splitlines() if line.strip())
    return tuple(dict.fromkeys(tools))


def _common_prefix_length(left: str, right: str) -> int:
    """Length of the longest common prefix, by binary search over C-level slice comparisons.

    Prompts reach hundreds of kilobytes and are compared against every earlier prompt, so a
    per-character Python loop would make a long conversation visibly slow.
    """
    low, high = 0, min(len(left), len(right))
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class _PromptCache:
    """Remembers answered prompts and splits a new prompt into fresh / cache write / cache read."""

    def __init__(self) -> None:
        self._seen: list[str] = []

    def account(self, head: str, final: str, *, remember: bool = True) -> tuple[int, int, int]:
        """(fresh_input, cache_write, cache_read) tokens for this prompt; remembers it unless told not to."""
        prompt = head + final
        cached_chars = 0
        # Newest first: in a conversation each prompt extends the previous one, so the newest
        # usually wins at once and older (shorter) prompts can be skipped without comparing.
        for earlier in reversed(self._seen):
            if len(earlier) <= cached_chars:
                continue
            if prompt.startswith(earlier):
                cached_chars = len(earlier)
            else:
                cached_chars = max(cached_chars, _common_prefix_length(prompt, earlier))
        # New characters before the final message are written to the cache; those inside it are
        # fresh input (the real CLI puts its last cache breakpoint on the final message).
        write_chars = max(0, len(head) - cached_chars)
        fresh_chars = len(prompt) - max(cached_chars, len(head))
        if remember:
            self._seen.append(prompt)
        return (
            max(1, fresh_chars // CHARS_PER_TOKEN),
            write_chars // CHARS_PER_TOKEN,
            cached_chars // CHARS_PER_TOKEN,
        )


def _validate_script(steps: Sequence[Step]) -> None:
    for index, step in enumerate(steps):
        _validate_step(step, top_level=True)
        if isinstance(step, Repeat) and index != len(steps) - 1:
            raise ValueError(f"Repeat must be the last step of a script (found at index {index})")


def _validate_step(step: Any, *, top_level: bool) -> None:
    if isinstance(step, (ToolUse, Answer, ApiError)):
        return
    if isinstance(step, (BrokenStream, Stall, NoUsage)):
        if not isinstance(step.reply, (ToolUse, Answer)):
            raise TypeError(f"{type(step).__name__} streams a reply (ToolUse or Answer), not {step.reply!r}")
        if isinstance(step, BrokenStream) and step.fault not in STREAM_FAULTS:
            raise ValueError(f"BrokenStream fault {step.fault!r}; allowed: {', '.join(STREAM_FAULTS)}")
        if isinstance(step, Stall) and step.seconds < 0:
            raise ValueError(f"Stall seconds must be >= 0, got {step.seconds}")
        return
    if isinstance(step, Delay):
        if step.seconds < 0:
            raise ValueError(f"Delay seconds must be >= 0, got {step.seconds}")
        if isinstance(step.then, Repeat):
            raise ValueError("Delay cannot wrap a Repeat; use Repeat(Delay(...)) instead")
        _validate_step(step.then, top_level=False)
        return
    if isinstance(step, Repeat):
        if not top_level:
            raise ValueError("Repeat can only be a top-level step")
        if isinstance(step.step, Repeat):
            raise ValueError("Repeat cannot wrap a Repeat")
        _validate_step(step.step, top_level=False)
        return
    raise TypeError(f"not a script step: {step!r}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # server_close() must not join handler threads: one may be sleeping in a Delay.
    block_on_close = False
    model: ScriptedModel


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0: one request per connection, so no keep-alive handler thread outlives stop().
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the default logs every request to stderr, which would flood test output

    def do_POST(self) -> None:
        if not self.path.startswith(MESSAGES_PATH):
            self._send_json(404, error_body(404, f"no such endpoint: {self.path}"))
            return
        try:
            body = json.loads(self._read_body() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            self._send_json(400, error_body(400, f"request body is not JSON: {exc}"))
            return
        if not isinstance(body, dict):
            self._send_json(400, error_body(400, "request body must be a JSON object"))
            return
        self.server.model._handle_messages(self, body)

    def do_GET(self) -> None:
        self._send_json(404, error_body(404, f"no such endpoint: {self.path}"))

    def do_HEAD(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()  # the blank line after the last chunk
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, content_type: str, payload: bytes, headers: dict[str, str] | None = None,
              length: int | None = None) -> None:  # fmt: skip
        """Send a response; `length` declares more bytes than `payload` when the rest follows (or never does)."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload) if length is None else length))
            self.send_header("Connection", "close")
            self.send_header("request-id", "req_scripted")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (timeout, interrupt): nothing left to tell it
        self._write(payload)

    def _write(self, payload: bytes) -> None:
        try:
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_json(self, status: int, value: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(value).encode(), headers)


class ScriptedModel:
    """A fake Messages API that plays ``steps``, one per request. See the module docstring.

    Use as a context manager (``with ScriptedModel([...]) as model:``) or call start()/stop().
    """

    def __init__(self, steps: Sequence[Step], *, model_name: str | None = None) -> None:
        _validate_script(steps)
        self._steps: tuple[Step, ...] = tuple(steps)
        self._model_name = model_name
        # One lock guards the cursor, the request log, the id counters and the prompt cache:
        # the CLI may send overlapping requests (retries), and the order they are accounted in
        # must be the order they were received.
        self._lock = threading.Lock()
        self._cursor = 0
        self._played = 0
        self._requests: list[dict[str, Any]] = []
        self._tool_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._cache = _PromptCache()
        self._usages: list[Usage] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> ScriptedModel:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        if self._server is not None or self._stopping.is_set():
            raise RuntimeError("a ScriptedModel can be started only once")
        server = _Server(("127.0.0.1", 0), _Handler)
        server.model = self
        self._server = server
        # A short poll interval keeps stop() fast: shutdown() waits for the loop to notice.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedModel:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent; never waits on a sleeping Delay."""
        self._stopping.set()  # wakes any handler sleeping in a Delay; it then answers nothing
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- observation

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``, for ANTHROPIC_BASE_URL."""
        if self._server is None:
            raise RuntimeError("ScriptedModel is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies of the /v1/messages requests received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def usages(self) -> list[Usage]:
        """The usage reported for each successfully answered request, in answer order (a copy).

        Lets a test check that the SDK's accounting adds up to what the model reported.
        """
        with self._lock:
            return list(self._usages)

    @property
    def first_request_tools(self) -> tuple[str, ...] | None:
        """The tools the first request offered the model (see offered_tools); None before any request."""
        with self._lock:
            first = self._requests[0] if self._requests else None
        return offered_tools(first) if first is not None else None

    @property
    def steps_played(self) -> int:
        """How many requests were answered from the script (each play of a Repeat counts;
        answers given after the script was exhausted do not)."""
        with self._lock:
            return self._played

    # ----------------------------------------------------------------- serving

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self._requests.append(body)
            if self._cursor >= len(self._steps):
                return Answer(EXHAUSTED_TEXT)
            step = self._steps[self._cursor]
            self._played += 1
            if isinstance(step, Repeat):
                return step.step  # never consumed
            self._cursor += 1
            return step

    def _handle_messages(self, handler: _Handler, body: dict[str, Any]) -> None:
        step = self._next_step(body)
        while isinstance(step, Delay):
            # Event.wait instead of time.sleep so stop() can cut the sleep short.
            if self._stopping.wait(step.seconds):
                return  # shutting down: drop the request, the connection just closes
            step = step.then
        if self._stopping.is_set():
            return
        if isinstance(step, ApiError):
            handler._send_json(step.status, error_body(step.status, step.message), step.headers())
            return
        reply = step.reply if isinstance(step, (BrokenStream, Stall, NoUsage)) else step
        assert isinstance(reply, (ToolUse, Answer)), step  # guaranteed by _validate_script
        model = self._model_name or str(body.get("model") or DEFAULT_MODEL_NAME)
        content, stop_reason = self._content_for(reply)
        # A broken stream is a failed request: its usage is shown in message_start (as the API does
        # before it fails) but neither remembered for caching nor listed among the answered usages.
        usage = self._usage_for(body, content, answered=not isinstance(step, BrokenStream),
                                reported=not isinstance(step, (BrokenStream, NoUsage)))  # fmt: skip
        message_id = self._new_id("msg_", self._message_ids)
        if not body.get("stream"):
            message = _message(message_id, model, content, stop_reason, usage.as_dict())
            if isinstance(step, NoUsage):
                del message["usage"]
            handler._send_json(200, message)
            return
        events = _sse_events(message_id, model, content, stop_reason, usage, with_usage=not isinstance(step, NoUsage))
        if isinstance(step, BrokenStream):
            self._break_stream(handler, events, step.fault)
        elif isinstance(step, Stall):
            first, rest = events[:FIRST_DELTA_EVENTS], events[FIRST_DELTA_EVENTS:]
            handler._send(200, SSE_TYPE, b"".join(first), length=len(b"".join(events)))
            if not self._stopping.wait(step.seconds):
                handler._write(b"".join(rest))
        else:
            handler._send(200, SSE_TYPE, b"".join(events))

    def _break_stream(self, handler: _Handler, events: list[bytes], fault: str) -> None:
        first = b"".join(events[:FIRST_DELTA_EVENTS])
        if fault == "cut":  # the connection closes before the declared length arrived
            handler._send(200, SSE_TYPE, first, length=len(b"".join(events)))
            return
        if fault == "invalid":
            broken = b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\n\n"
        else:
            broken = _sse_event("error", error_body(529, "Overloaded"))
        handler._send(200, SSE_TYPE, first + broken)

    def _content_for(self, step: ToolUse | Answer) -> tuple[list[dict[str, Any]], str]:
        if isinstance(step, Answer):
            return [{"type": "text", "text": step.text}], "end_turn"
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        tool_id = self._new_id("toolu_", self._tool_ids)
        content.append({"type": "tool_use", "id": tool_id, "name": step.name, "input": step.input})
        return content, "tool_use"

    def _new_id(self, prefix: str, counter: itertools.count[int]) -> str:
        with self._lock:
            number = next(counter)
        # Fixed width so the length of everything that echoes an id back is deterministic.
        return f"{prefix}scripted{number:016d}"

    def _usage_for(self, body: dict[str, Any], content: list[dict[str, Any]], *, answered: bool = True,
                   reported: bool = True) -> Usage:  # fmt: skip
        head, final = prompt_text(body)
        output = max(1, len(json.dumps(content, sort_keys=True)) // CHARS_PER_TOKEN)
        with self._lock:
            fresh, write, read = self._cache.account(head, final, remember=answered)
            usage = Usage(fresh, write, read, output)
            if reported:
                self._usages.append(usage)
        return usage


def _message(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str | None,
    usage: dict[str, int],
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
