"""Tests of the scripted fake Messages API: the HTTP surface directly, then the real SDK + CLI."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pytest_benchcell.cli_environment import offline_cli_environment
from pytest_benchcell.scripted import (
    Answer,
    ApiError,
    BrokenStream,
    Delay,
    NoUsage,
    Repeat,
    ScriptedModel,
    Stall,
    ToolUse,
    prompt_text,
)

MESSAGES_PATH = "/v1/messages?beta=true"  # the exact path the Claude Code CLI posts to


# --------------------------------------------------------------------------- helpers


def post_raw(model: ScriptedModel, body: bytes, path: str = MESSAGES_PATH,
             method: str = "POST", timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    address = urlsplit(model.base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout)
    try:
        connection.request(method, path, body=body if method == "POST" else None,
                           headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def post(model: ScriptedModel, body: dict[str, Any], path: str = MESSAGES_PATH
         ) -> tuple[int, dict[str, str], bytes]:
    return post_raw(model, json.dumps(body).encode(), path)


def parse_sse(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in payload.decode().split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = json.loads(fields["data"])
        assert data["type"] == fields["event"]
        events.append((fields["event"], data))
    return events


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def request(*messages: dict[str, Any], stream: bool = True, system: Any = "You are terse.",
            tools: list[dict[str, Any]] | None = None, model: str = "claude-sonnet-4-5"
            ) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 1024,
        "stream": stream,
        "system": system,
        "tools": tools if tools is not None else [BASH_TOOL],
        "messages": list(messages) or [user("hello")],
    }


BASH_TOOL = {"name": "Bash", "description": "Run a shell command.",
             "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


def stream_of(model: ScriptedModel, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    status, headers, payload = post(model, body)
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    return parse_sse(payload)


def final_text(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(data["delta"]["text"] for name, data in events
                   if name == "content_block_delta" and data["delta"]["type"] == "text_delta")


def usage_of(events: list[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    """The usage a client ends up with: input side from message_start, output from message_delta."""
    start = next(data for name, data in events if name == "message_start")["message"]["usage"]
    delta = next(data for name, data in events if name == "message_delta")["usage"]
    return {**start, "output_tokens": delta["output_tokens"]}


@pytest.fixture
def serve():
    """Start ScriptedModels for a test and always stop them."""
    started: list[ScriptedModel] = []

    def start(steps: list[Any], **kwargs: Any) -> ScriptedModel:
        model = ScriptedModel(steps, **kwargs).start()
        started.append(model)
        return model

    yield start
    for model in started:
        model.stop()


# --------------------------------------------------------------------------- the wire format


def test_answer_streams_the_api_event_sequence(serve):
    model = serve([Answer("All done.")])

    events = stream_of(model, request())

    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]
    message = events[0][1]["message"]
    assert message["role"] == "assistant" and message["content"] == []
    assert message["model"] == "claude-sonnet-4-5"  # echoes the request
    assert message["id"].startswith("msg_")
    assert events[1][1] == {"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}}
    assert final_text(events) == "All done."
    assert events[4][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}


def test_tool_use_streams_text_then_the_tool_call_and_its_input_round_trips(serve):
    tool_input = {"state": "open", "labels": ["bug", "ünïcode ✓"], "limit": 3,
                  "filter": {"assignee": None, "nested": [1.5, True]}}
    model = serve([ToolUse("mcp__tracker__list_issues", tool_input, text="Let me look.")])

    events = stream_of(model, request())

    starts = [data for name, data in events if name == "content_block_start"]
    deltas = [data for name, data in events if name == "content_block_delta"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use"]
    assert deltas[0]["delta"] == {"type": "text_delta", "text": "Let me look."}
    tool_block = starts[1]["content_block"]
    assert tool_block["name"] == "mcp__tracker__list_issues"
    assert tool_block["id"].startswith("toolu_")
    assert tool_block["input"] == {}  # the input arrives through input_json_delta, as from the API
    assert deltas[1]["index"] == 1 and deltas[1]["delta"]["type"] == "input_json_delta"
    assert json.loads(deltas[1]["delta"]["partial_json"]) == tool_input
    message_delta = next(data for name, data in events if name == "message_delta")
    assert message_delta["delta"]["stop_reason"] == "tool_use"


def test_tool_use_without_text_has_a_single_block(serve):
    model = serve([ToolUse("Bash", {"command": "ls"})])

    events = stream_of(model, request())

    starts = [data for name, data in events if name == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["tool_use"]
    assert starts[0]["index"] == 0


def test_tool_use_ids_are_unique(serve):
    model = serve([Repeat(ToolUse("Bash", {"command": "true"}))])

    ids = []
    for _ in range(5):
        events = stream_of(model, request())
        ids.append(next(data["content_block"]["id"] for name, data in events
                        if name == "content_block_start"))

    assert len(set(ids)) == 5


def test_model_name_overrides_the_requested_model(serve):
    model = serve([Answer("hi")], model_name="claude-scripted-1")

    events = stream_of(model, request(model="claude-sonnet-4-5"))

    assert events[0][1]["message"]["model"] == "claude-scripted-1"


def test_non_streaming_request_gets_a_plain_message(serve):
    model = serve([ToolUse("Bash", {"command": "ls"}, text="Listing.")])

    status, headers, payload = post(model, request(stream=False))

    assert status == 200 and headers["content-type"] == "application/json"
    message = json.loads(payload)
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert message["content"][0] == {"type": "text", "text": "Listing."}
    assert message["content"][1]["input"] == {"command": "ls"}
    assert set(message["usage"]) == {"input_tokens", "cache_creation_input_tokens",
                                     "cache_read_input_tokens", "output_tokens", "cache_creation"}
    # The cache writes split by lifetime, as the API reports them: 5 minutes unless a breakpoint says 1h.
    split = message["usage"]["cache_creation"]
    assert split == {"ephemeral_5m_input_tokens": message["usage"]["cache_creation_input_tokens"],
                     "ephemeral_1h_input_tokens": 0}


# --------------------------------------------------------------------------- the script


def test_steps_play_in_order_then_the_script_is_exhausted(serve):
    model = serve([Answer("first"), Answer("second")])
    bodies = [request(user(f"question {i}")) for i in range(3)]

    texts = [final_text(stream_of(model, body)) for body in bodies]

    assert texts == ["first", "second", "(script exhausted)"]
    assert model.steps_played == 2
    assert model.requests == bodies


def test_requests_is_a_copy(serve):
    model = serve([Answer("x")])
    stream_of(model, request())

    model.requests.clear()

    assert len(model.requests) == 1


@pytest.mark.parametrize(("status", "error_type"), [
    (529, "overloaded_error"), (500, "api_error"), (429, "rate_limit_error"),
    (400, "invalid_request_error"), (418, "api_error"),
])
def test_api_error_answers_with_the_status_and_an_anthropic_error_body(serve, status, error_type):
    model = serve([ApiError(status, "scripted failure"), Answer("recovered")])

    code, headers, payload = post(model, request())

    assert code == status
    assert headers["content-type"] == "application/json"
    assert json.loads(payload) == {"type": "error",
                                   "error": {"type": error_type, "message": "scripted failure"}}
    # The error consumed its step: a retry gets the next one.
    assert final_text(stream_of(model, request())) == "recovered"


def test_api_error_defaults_to_overloaded():
    assert ApiError() == ApiError(529, "Overloaded")


def test_api_error_sends_retry_after_and_x_should_retry(serve):
    model = serve([ApiError(429, "slow down", retry_after=1.5), ApiError(401, "bad key", should_retry=False),
                   ApiError(401, "bad key")])

    assert post(model, request())[1]["retry-after"] == "1.5"
    assert post(model, request())[1]["x-should-retry"] == "false"
    assert "x-should-retry" not in post(model, request())[1]  # the API's default: the client decides


def read_raw(model: ScriptedModel, timeout: float = 10) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers, the bytes that came and whether the declared length arrived (or the read timed out)."""
    address = urlsplit(model.base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout)
    try:
        connection.request("POST", MESSAGES_PATH, body=json.dumps(request()).encode(),
                           headers={"content-type": "application/json"})
        response = connection.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        chunks = []
        try:
            while chunk := response.read1(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        payload = b"".join(chunks)
        return response.status, headers, payload, len(payload) == int(headers["content-length"])
    finally:
        connection.close()


def test_a_cut_stream_closes_before_its_declared_length_and_the_retry_gets_the_next_step(serve):
    model = serve([BrokenStream(Answer("hello there"), "cut"), Answer("hello there")])

    status, headers, payload, whole = read_raw(model)

    assert (status, whole) == (200, False)
    assert len(payload) < int(headers["content-length"])
    assert [name for name, _ in parse_sse(payload)] == ["message_start", "content_block_start", "content_block_delta"]
    assert model.usages == []  # a failed request: no usage, nothing remembered for caching
    assert final_text(stream_of(model, request())) == "hello there"
    assert usage_of(stream_of(model, request()))["cache_read_input_tokens"] > 0  # only the answered one cached


def test_an_invalid_event_and_an_error_event_break_a_200_stream(serve):
    model = serve([BrokenStream(Answer("x"), "invalid"), BrokenStream(Answer("x"), "error")])

    invalid = post(model, request())[2].decode().split("\n\n")
    error = parse_sse(post(model, request())[2])

    with pytest.raises(ValueError):
        json.loads(invalid[3].split("data: ", 1)[1])
    assert error[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert model.usages == []


def test_a_stall_sends_the_start_then_no_byte(serve):
    model = serve([Stall(30, Answer("hello there"))])

    status, headers, payload, whole = read_raw(model, timeout=0.5)

    assert (status, whole) == (200, False)
    assert [name for name, _ in parse_sse(payload)] == ["message_start", "content_block_start", "content_block_delta"]
    model.stop()  # cuts the stall short


def test_a_short_stall_completes_the_reply(serve):
    model = serve([Stall(0.05, Answer("hello there"))])

    events = stream_of(model, request())

    assert final_text(events) == "hello there" and events[-1][0] == "message_stop"
    assert len(model.usages) == 1


def test_no_usage_streams_a_whole_reply_without_any_usage_field(serve):
    model = serve([NoUsage(Answer("hello")), NoUsage(Answer("again"))])

    events = stream_of(model, request())
    plain = json.loads(post(model, request(stream=False))[2])

    assert final_text(events) == "hello" and events[-1][0] == "message_stop"
    assert all("usage" not in data and "usage" not in data.get("message", {}) for _, data in events)
    assert "usage" not in plain and plain["content"][0]["text"] == "again"
    assert model.usages == []


@pytest.mark.parametrize(("step", "error"), [
    (BrokenStream(ApiError(), "cut"), TypeError),  # type: ignore[arg-type]
    (BrokenStream(Answer("a"), "reset"), ValueError),
    (Stall(-1, Answer("a")), ValueError),
    (NoUsage(Delay(1, Answer("a"))), TypeError),  # type: ignore[arg-type]
])
def test_malformed_fault_steps_are_rejected(step, error):
    with pytest.raises(error):
        ScriptedModel([step])


def test_faults_can_repeat_and_be_delayed(serve):
    model = serve([Delay(0.01, NoUsage(Answer("late"))), Repeat(ApiError(500, "down"))])

    assert final_text(stream_of(model, request())) == "late"
    assert [post(model, request())[0] for _ in range(3)] == [500, 500, 500]


def test_repeat_plays_forever_and_is_never_consumed(serve):
    model = serve([Answer("first"), Repeat(Answer("again"))])

    texts = [final_text(stream_of(model, request())) for _ in range(25)]

    assert texts == ["first"] + ["again"] * 24
    assert model.steps_played == 25


def test_repeat_of_a_delay_delays_every_time(serve):
    model = serve([Repeat(Delay(0.05, Answer("slow")))])

    started = time.monotonic()
    texts = [final_text(stream_of(model, request())) for _ in range(3)]

    assert texts == ["slow"] * 3
    assert time.monotonic() - started >= 0.15


@pytest.mark.parametrize("steps", [
    [Repeat(Answer("a")), Answer("b")],
    [Delay(1, Repeat(Answer("a")))],
    [Repeat(Repeat(Answer("a")))],
    [Delay(-1, Answer("a"))],
])
def test_malformed_scripts_are_rejected(steps):
    with pytest.raises(ValueError):
        ScriptedModel(steps)


def test_a_non_step_is_rejected():
    with pytest.raises(TypeError):
        ScriptedModel(["Answer: hi"])  # type: ignore[list-item]


def test_delay_answers_with_its_step_after_sleeping(serve):
    model = serve([Delay(0.3, ToolUse("Bash", {"command": "ls"}))])

    started = time.monotonic()
    events = stream_of(model, request())

    assert time.monotonic() - started >= 0.3
    assert any(data.get("content_block", {}).get("name") == "Bash" for _, data in events)


def test_overlapping_requests_each_consume_exactly_one_step(serve):
    count = 12
    model = serve([Delay(0.05, Answer(f"answer {i}")) for i in range(count)])
    texts: list[str] = []
    texts_lock = threading.Lock()

    def ask() -> None:
        text = final_text(stream_of(model, request()))
        with texts_lock:
            texts.append(text)

    threads = [threading.Thread(target=ask) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(texts) == sorted(f"answer {i}" for i in range(count))
    assert model.steps_played == count and len(model.requests) == count


# --------------------------------------------------------------------------- other requests


def test_other_paths_get_a_quiet_404_and_consume_nothing(serve, capfd):
    model = serve([Answer("x")])

    status, _, payload = post(model, request(), path="/v1/complete")
    assert status == 404
    assert json.loads(payload)["error"]["type"] == "not_found_error"
    assert post_raw(model, b"", path="/api/hello", method="HEAD")[0] == 404
    assert post_raw(model, b"", path="/v1/models", method="GET")[0] == 404

    assert model.steps_played == 0 and model.requests == []
    assert capfd.readouterr().err == ""  # no default request logging


def test_a_body_that_is_not_json_is_a_400_and_consumes_nothing(serve):
    model = serve([Answer("x")])

    status, _, payload = post_raw(model, b"{not json")

    assert status == 400
    assert json.loads(payload)["error"]["type"] == "invalid_request_error"
    assert model.steps_played == 0


# --------------------------------------------------------------------------- usage


def answer_all(model: ScriptedModel, bodies: list[dict[str, Any]]) -> list[dict[str, int]]:
    return [usage_of(stream_of(model, body)) for body in bodies]


def conversation(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = user("Close the login bug.")
    call = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "tracker ls"}}]}
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "#12 login fails"}]}
    return [request(first, tools=tools), request(first, call, result, tools=tools)]


def test_usage_is_deterministic_for_the_same_requests(serve):
    bodies = conversation([BASH_TOOL])
    script = [ToolUse("Bash", {"command": "tracker ls"}), Answer("Closed #12.")]

    first_run = answer_all(serve(script), bodies)
    second_run = answer_all(serve(script), bodies)

    assert first_run == second_run
    for usage in first_run:
        assert usage["input_tokens"] >= 1 and usage["output_tokens"] >= 1


def test_a_bigger_context_costs_more(serve):
    script = [ToolUse("Bash", {"command": "tracker ls"}), Answer("Closed #12.")]
    many_tools = [dict(BASH_TOOL, name=f"tool_{i}", description="x" * 400) for i in range(20)]

    small = answer_all(serve(script), conversation([BASH_TOOL]))
    big = answer_all(serve(script), conversation(many_tools))

    def input_side(usages: list[dict[str, int]]) -> int:
        return sum(u["input_tokens"] + u["cache_creation_input_tokens"]
                   + u["cache_read_input_tokens"] for u in usages)

    assert input_side(big) > input_side(small) + 20 * 400 // 4
    assert big[0]["cache_creation_input_tokens"] > small[0]["cache_creation_input_tokens"]


def test_a_repeated_prefix_is_read_from_cache_on_the_next_request(serve):
    model = serve([ToolUse("Bash", {"command": "tracker ls"}), Answer("Closed #12.")])
    first_body, second_body = conversation([BASH_TOOL])
    # The CLI moves its cache_control marker to the newest message; that must not break the prefix.
    first_body["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}

    first, second = answer_all(model, [first_body, second_body])

    head1, final1 = prompt_text(first_body)
    head2, final2 = prompt_text(second_body)
    assert "cache_control" not in head1 + final1
    # First request: nothing cached yet; everything before the final message is written.
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] == len(head1) // 4
    assert first["input_tokens"] == len(final1) // 4
    # Second request: the whole first prompt is a prefix of it and is read back; the new turn
    # before the final message is written, the final message is fresh.
    assert (head2 + final2).startswith(head1 + final1)
    assert second["cache_read_input_tokens"] == len(head1 + final1) // 4
    assert second["cache_creation_input_tokens"] == (len(head2) - len(head1 + final1)) // 4
    assert second["input_tokens"] == len(final2) // 4
    assert second["cache_read_input_tokens"] > first["input_tokens"]


def test_an_identical_request_is_all_cache_read_with_minimal_fresh_input(serve):
    model = serve([Repeat(Answer("same"))])
    body = request(user("same question"))

    first, second = answer_all(model, [body, body])

    head, final = prompt_text(body)
    assert second["cache_read_input_tokens"] == len(head + final) // 4
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] == 1  # never zero


def test_message_delta_repeats_the_input_usage_and_counts_output(serve):
    model = serve([ToolUse("Bash", {"command": "echo " + "x" * 400})])

    events = stream_of(model, request())

    start_usage = events[0][1]["message"]["usage"]
    delta_usage = next(data for name, data in events if name == "message_delta")["usage"]
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        assert delta_usage[key] == start_usage[key]
    assert delta_usage["output_tokens"] > 100  # ~ the JSON of a 400-character command / 4
    assert model.usages[0].as_dict() == delta_usage


def test_cache_writes_are_split_by_the_lifetime_the_request_asks_for(serve):
    model = serve([Answer("one"), Answer("two")])
    system_5m = [{"type": "text", "text": "You are terse. " * 200, "cache_control": {"type": "ephemeral"}}]
    system_1h = [{"type": "text", "text": "You are brief. " * 200, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]

    for system, lifetime in ((system_5m, "5m"), (system_1h, "1h")):
        start = stream_of(model, request(system=system))[0][1]["message"]["usage"]
        written = start["cache_creation_input_tokens"]
        assert written > 500
        other = "1h" if lifetime == "5m" else "5m"
        assert start["cache_creation"] == {f"ephemeral_{lifetime}_input_tokens": written, f"ephemeral_{other}_input_tokens": 0}
    assert [usage.cache_write_1h > 0 for usage in model.usages] == [False, True]


def test_failed_requests_report_no_usage(serve):
    model = serve([ApiError(529), Answer("ok")])
    body = request()

    post(model, body)
    usage = usage_of(stream_of(model, body))

    # The failed attempt was not cached, so the retry is accounted like a first request.
    assert usage["cache_read_input_tokens"] == 0
    assert len(model.usages) == 1


def test_common_prefix_length_matches_a_naive_scan():
    import os.path
    import random

    from pytest_benchcell.scripted import _common_prefix_length

    rng = random.Random(7)
    for _ in range(300):
        left = "".join(rng.choice("ab") for _ in range(rng.randrange(0, 40)))
        right = left[: rng.randrange(0, len(left) + 1)] + "".join(
            rng.choice("ab") for _ in range(rng.randrange(0, 10)))
        assert _common_prefix_length(left, right) == len(os.path.commonprefix([left, right]))


# --------------------------------------------------------------------------- lifecycle


def test_base_url_is_loopback_on_an_ephemeral_port():
    with ScriptedModel([Answer("x")]) as model:
        address = urlsplit(model.base_url)
        assert address.scheme == "http" and address.hostname == "127.0.0.1"
        assert address.port and address.port > 0
    with pytest.raises(RuntimeError):
        _ = model.base_url  # stopped


def test_a_model_cannot_be_restarted():
    model = ScriptedModel([Answer("x")]).start()
    model.stop()
    with pytest.raises(RuntimeError):
        model.start()


def test_stop_before_start_is_harmless():
    ScriptedModel([Answer("x")]).stop()


def test_stop_is_idempotent_and_fast_while_a_delay_sleeps():
    model = ScriptedModel([Delay(60, Answer("too late"))]).start()
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(post(model, request())[0])
        except (http.client.HTTPException, OSError) as exc:
            outcome.append(exc)

    client = threading.Thread(target=ask, daemon=True)
    client.start()
    deadline = time.monotonic() + 5
    while not model.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.requests, "the request never reached the server"

    started = time.monotonic()
    model.stop()
    model.stop()
    assert time.monotonic() - started < 1.5

    # The sleeping request is dropped (the connection closes without an answer).
    client.join(timeout=5)
    assert not client.is_alive()
    assert outcome and not isinstance(outcome[0], int)


# --------------------------------------------------------------------------- end to end (real CLI)


def run_agent(model: ScriptedModel, tmp_path: Path, prompt: str, **overrides: Any
              ) -> tuple[list[Any], Exception | None, float]:
    """Run one conversation through the real SDK + bundled CLI against ``model``.

    Returns the messages, the ResultError/ProcessError raised (if any) and the elapsed seconds.
    """
    import anyio
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ProcessError

    (tmp_path / "cwd").mkdir(exist_ok=True)
    env = offline_cli_environment(model.base_url, tmp_path)
    options = {
        "model": "claude-sonnet-4-5",
        "cwd": str(tmp_path / "cwd"),
        "setting_sources": [],
        "tools": ["Bash"],
        "allowed_tools": ["Bash"],
        "max_turns": 5,
        "env": env,
        **overrides,
    }
    messages: list[Any] = []
    failure: list[Exception] = []

    async def converse() -> None:
        with anyio.fail_after(30):
            try:
                async with ClaudeSDKClient(ClaudeAgentOptions(**options)) as client:
                    await client.query(prompt)
                    async for message in client.receive_response():
                        messages.append(message)
            except ProcessError as exc:  # ResultError subclasses it
                failure.append(exc)

    started = time.monotonic()
    anyio.run(converse)
    return messages, (failure[0] if failure else None), time.monotonic() - started


def result_of(messages: list[Any]) -> Any:
    from claude_agent_sdk import ResultMessage

    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1, messages
    return results[0]


@pytest.mark.e2e
def test_e2e_the_real_cli_runs_a_scripted_bash_call(tmp_path):
    with ScriptedModel([ToolUse("Bash", {"command": "echo hello | tee out.txt"}),
                        Answer("done")]) as model:
        messages, error, elapsed = run_agent(model, tmp_path, "Write hello to out.txt.")

    assert error is None
    result = result_of(messages)
    assert (result.subtype, result.is_error, result.result) == ("success", False, "done")
    assert (tmp_path / "cwd" / "out.txt").read_text() == "hello\n"  # the real Bash ran
    assert elapsed < 10

    # One request per model turn, both on the CLI's path, nothing else consumed a step.
    assert len(model.requests) == 2 and model.steps_played == 2
    first, second = model.requests
    assert first["stream"] is True and first["model"] == "claude-sonnet-4-5"
    assert [tool["name"] for tool in first["tools"]] == ["Bash"]
    tool_results = [block for block in second["messages"][-1]["content"]
                    if block.get("type") == "tool_result"]
    assert len(tool_results) == 1 and "hello" in str(tool_results[0]["content"])
    assert tool_results[0]["tool_use_id"].startswith("toolu_")

    # The SDK's accounting adds up exactly what the fake reported, in both casings.
    reported = {key: sum(u.as_dict()[key] for u in model.usages)
                for key in ("input_tokens", "cache_creation_input_tokens",
                            "cache_read_input_tokens", "output_tokens")}
    assert all(value > 0 for value in reported.values()), reported
    assert {key: result.usage[key] for key in reported} == reported
    per_model = result.model_usage["claude-sonnet-4-5"]
    assert (per_model["inputTokens"], per_model["cacheCreationInputTokens"],
            per_model["cacheReadInputTokens"], per_model["outputTokens"]) == tuple(reported.values())


@pytest.mark.e2e
def test_e2e_an_api_error_ends_the_run_with_an_error_result(tmp_path):
    with ScriptedModel([ApiError(500, "scripted outage")]) as model:
        messages, error, elapsed = run_agent(model, tmp_path, "Do anything.")

    # With ClaudeSDKClient the CLI stays up after a result, so the error arrives as an error
    # ResultMessage; query() (or a CLI that exits) raises ResultError instead. Accept either.
    if error is not None:
        assert getattr(error, "api_error_status", None) == 500
    else:
        result = result_of(messages)
        assert result.is_error and result.api_error_status == 500
        assert result.terminal_reason == "api_error"
        assert "scripted outage" in (result.result or "")
    assert len(model.requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry
    assert elapsed < 10


@pytest.mark.e2e
def test_e2e_repeat_runs_into_the_turn_cap(tmp_path):
    with ScriptedModel([Repeat(ToolUse("Bash", {"command": "true"}))]) as model:
        messages, error, elapsed = run_agent(model, tmp_path, "Loop.", max_turns=3)

    result = result_of(messages)
    assert (result.subtype, result.is_error, result.terminal_reason) == \
        ("error_max_turns", True, "max_turns")
    assert len(model.requests) == 3 == model.steps_played
    assert elapsed < 10

