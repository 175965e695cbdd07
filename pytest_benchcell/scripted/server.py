"""`ScriptedModel`: the HTTP server on 127.0.0.1 that plays a script, one step per request, with the
faults of a real API (error statuses, broken and stalled streams, replies without usage)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .steps import Answer, ApiError, BrokenStream, Delay, NoUsage, Repeat, Stall, Step, ToolUse, _validate_script
from .usage import CHARS_PER_TOKEN, Usage, _PromptCache, cache_lifetime, offered_tools, prompt_text
from .wire import FIRST_DELTA_EVENTS, SSE_TYPE, _message, _sse_event, _sse_events, error_body

EXHAUSTED_TEXT = "(script exhausted)"
DEFAULT_MODEL_NAME = "scripted"
MESSAGES_PATH = "/v1/messages"


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
            chunks: list[bytes] = []
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
    """A fake Messages API that plays ``steps``, one per request. See the package docstring.

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
        return f"http://{host!s}:{port}"  # an IPv4 server's host is a str

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
            usage = Usage(fresh, write, read, output, cache_write_1h=write if cache_lifetime(body) == "1h" else 0)
            if reported:
                self._usages.append(usage)
        return usage
