"""What the trial keeps of its transcript on every exit, and how the SDK's messages become events.

The agent runner is the injected dependency here (the real one drives the CLI, tests/test_transcript_e2e.py);
the message objects are the SDK's own types, built as the SDK's parser builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_trial_exits import Hooks, spec_for, stored

from pytest_benchcell.agent import _sdk
from pytest_benchcell.transcribing import _Transcriber
from pytest_benchcell.transcript import Recorder, read_transcript
from pytest_benchcell.trial import run_trial


def runner_that_records_then(exc: BaseException) -> Any:
    def run(request: Any) -> Any:
        request.recorder.start()
        request.recorder.add("prompt", system_prompt=request.system_prompt, prompt=request.prompt)
        request.recorder.add("tool_use", message_id="m1", id="t1", name="Bash", input={"command": "ls"})
        request.recorder.add("tool_result", tool_use_id="t1", is_error=False, content="a.txt")
        raise exc

    return run


@pytest.mark.parametrize("raised", [KeyboardInterrupt(), TypeError("harness bug")])
def test_an_interrupted_or_crashed_run_keeps_what_was_seen(tmp_path: Path, raised: BaseException) -> None:
    spec = spec_for(tmp_path, "say-hello")
    with pytest.raises(type(raised)):
        run_trial(spec, Hooks(), agent_runner=runner_that_records_then(raised))
    (sample,) = stored(spec)
    lines = read_transcript(spec.store.root, sample)
    assert lines is not None, sample["transcript"]
    assert [event["kind"] for event in lines] == ["header", "prompt", "tool_use", "tool_result", "ended"]
    assert lines[-1]["status"] == "error" and lines[-1]["reason"] == sample["reason"]
    assert lines[1]["prompt"] == "Say hello."


def test_a_trial_that_ended_before_the_agent_has_no_transcript(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, "say-hello")

    class Broken(Hooks):
        def pytest_benchcell_provision(self, **_: Any) -> None:
            raise RuntimeError("no database")

    run_trial(spec, Broken(), agent_runner=runner_that_records_then(AssertionError("never called")))
    (sample,) = stored(spec)
    assert sample["status"] == "error" and sample["transcript"] is None
    assert not (spec.store.root / "transcripts").exists()


def test_an_unwritable_transcript_folder_costs_the_transcript_not_the_sample(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, "say-hello")
    spec.store.root.mkdir(parents=True)
    (spec.store.root / "transcripts").write_text("a file where the folder belongs")
    with pytest.raises(KeyboardInterrupt):
        run_trial(spec, Hooks(), agent_runner=runner_that_records_then(KeyboardInterrupt()))
    (sample,) = stored(spec)
    assert sample["transcript"]["error"].startswith("the transcript could not be written: ")
    assert read_transcript(spec.store.root, sample) is None


def transcribe(*messages: Any) -> list[dict[str, Any]]:
    transcriber = _Transcriber(Recorder(), _sdk)
    for message in messages:
        transcriber.message(message)
    transcriber.finish(None)
    return transcriber.recorder.events


def test_thinking_text_tools_and_results_become_events_in_order() -> None:
    from claude_agent_sdk import AssistantMessage, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, UserMessage

    events = transcribe(
        AssistantMessage(content=[ThinkingBlock(thinking="list first", signature="opaque")], model="m", message_id="m1"),
        AssistantMessage(content=[TextBlock(text="Listing.")], model="m", message_id="m1"),
        AssistantMessage(content=[ToolUseBlock(id="t1", name="Bash", input={"command": "ls"})], model="m", message_id="m1"),
        UserMessage(content=[ToolResultBlock(tool_use_id="t1", content=[{"type": "text", "text": "a"}, {"type": "image"}], is_error=False)]),
        UserMessage(content="a note the CLI added"),
        AssistantMessage(content=[TextBlock(text="sub")], model="m", message_id="m2", parent_tool_use_id="task1"),
    )
    assert [(e["kind"], e.get("message_id")) for e in events] == [
        ("thinking", "m1"), ("text", "m1"), ("tool_use", "m1"), ("tool_result", None), ("user", None), ("text", "m2")
    ]
    assert [e.get("parent_tool_use_id") for e in events] == [None] * 5 + ["task1"]
    assert events[0]["thinking"] == "list first" and "signature" not in events[0]
    assert events[3]["content"] == "a\n[image]"
    assert events[4]["content"] == "a note the CLI added"


def stream(event: dict[str, Any]) -> Any:
    from claude_agent_sdk import StreamEvent

    return StreamEvent(uuid="u", session_id="s", event=event)


def requesting() -> Any:
    from claude_agent_sdk import SystemMessage

    return SystemMessage(subtype="status", data={"type": "system", "subtype": "status", "status": "requesting"})


START = {"type": "message_start", "message": {"id": "m1", "model": "claude-x", "usage": {
    "input_tokens": 10, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 30, "output_tokens": 1}}}  # fmt: skip


def test_each_request_gets_its_responses_final_usage() -> None:
    events = transcribe(
        requesting(),
        stream(START),
        stream({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}),
        # the API's message_delta may carry only the output tokens: the input fields stay as started
        stream({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 42}}),
        stream({"type": "message_stop"}),
    )
    assert [e["kind"] for e in events] == ["model_request", "model_response"]
    response = events[1]
    assert (response["request"], response["message_id"], response["model"], response["stop_reason"]) == (1, "m1", "claude-x", "end_turn")
    assert response["usage"] == {"fresh_input": 10, "cache_write": 20, "cache_read": 30, "output": 42}
    assert response["complete"] is True


def test_a_response_cut_off_mid_stream_is_kept_incomplete_and_an_unannounced_request_is_counted() -> None:
    events = transcribe(stream(START), stream({**START, "message": {**START["message"], "id": "m2"}}))
    assert [(e["kind"], e.get("request"), e.get("complete")) for e in events] == [
        ("model_request", 1, None), ("model_response", 1, False), ("model_request", 2, None), ("model_response", 2, False)
    ]
    assert events[1]["usage"]["output"] == 1  # what the start reported


def test_an_api_error_and_the_result_are_kept() -> None:
    from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, TextBlock

    events = transcribe(
        SystemMessage(subtype="init", data={"type": "system", "subtype": "init", "tools": ["Bash"], "model": "m",
                                            "mcp_servers": [{"name": "files", "status": "pending"}], "cwd": "/w"}),  # fmt: skip
        AssistantMessage(content=[TextBlock(text="API Error: 529")], model="<synthetic>", error="server_error"),
        ResultMessage(subtype="success", duration_ms=5, duration_api_ms=4, is_error=True, num_turns=1, session_id="s",
                      usage={"input_tokens": 3, "output_tokens": 0},
                      model_usage={"m": {"inputTokens": 3, "outputTokens": 0}}, api_error_status=529),  # fmt: skip
    )
    init, error, result = events
    assert init["tools"] == ["Bash"] and init["mcp_servers"] == [{"name": "files", "status": "pending"}]
    assert (error["kind"], error["error"], error["text"]) == ("api_error", "server_error", "API Error: 529")
    assert result["kind"] == "result" and result["is_error"] is True
    assert result["usage"] == {"fresh_input": 3, "cache_write": 0, "cache_read": 0, "output": 0}
    assert result["model_usage"] == {"m": {"fresh_input": 3, "cache_write": 0, "cache_read": 0, "output": 0}}
