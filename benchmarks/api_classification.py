"""What does reading the model API's signals cost per trial? Target: <= 5 ms for a long trial.

    .venv/bin/python benchmarks/api_classification.py [--replies 40] [--deltas 30] [--runs 25]

A trial's message stream is built from the SDK's own message classes as CLI 2.1.332 sends them with
partial messages on: three api_retry messages first (a 529 storm the CLI got past), then per model
reply a `status: requesting` message, message_start, one text block and one tool_use block with
--deltas content_block_delta events between them, message_delta and message_stop, the assistant
messages (one per block) and the tool result; a result message last. The default, 40 replies of
30 deltas each, is a long trial (1,645 messages); a typical one has a tenth of that.

Timed, in one process, each over --runs passes (medians):
- with: agent._absorb_message over the whole stream, which feeds api_faults.ApiLog (the retries, the
  stall watch's two readings per message, replies, usage reported or not), then api_faults.classify;
- without: the same loop with the ApiLog feed replaced by a no-op, as the harness read the stream
  before (offer, tool calls, usage, result);
- the pure core alone: the same events fed straight into an ApiLog, then classify.
The cost of the classification per trial is with - without; printed with the per-message figure,
for the trial asked for and for a typical one (4 replies). The target, 5 ms for a long trial, is
about 1% of the harness's own overhead per trial (benchmarks/trial_overhead.py: about 420 ms) and
nothing beside the minutes of model time a long trial takes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_benchcell import agent  # noqa: E402
from pytest_benchcell.api_faults import ApiLog, RunEnd, classify  # noqa: E402

TARGET_MS_PER_TRIAL = 5.0
TYPICAL_REPLIES = 4


def trial_stream(replies: int, deltas: int) -> list[Any]:
    from claude_agent_sdk import (
        AssistantMessage,
        ResultMessage,
        StreamEvent,
        SystemMessage,
        TextBlock,
        ToolResultBlock,
        ToolUseBlock,
        UserMessage,
    )

    def event(data: dict[str, Any]) -> StreamEvent:
        return StreamEvent(uuid="u", session_id="s", event=data)

    usage = {"input_tokens": 480, "cache_creation_input_tokens": 3200, "cache_read_input_tokens": 9000, "output_tokens": 0}
    messages: list[Any] = [SystemMessage("init", {"type": "system", "subtype": "init", "tools": ["Bash"], "mcp_servers": []})]
    messages.append(SystemMessage("status", {"type": "system", "subtype": "status", "status": "requesting"}))
    for attempt, delay in enumerate((607, 1198, 2215), start=1):
        messages.append(SystemMessage("api_retry", {"type": "system", "subtype": "api_retry", "attempt": attempt,
                                                    "max_retries": 10, "retry_delay_ms": delay, "error_status": 529,
                                                    "error": "overloaded"}))  # fmt: skip
    for number in range(1, replies + 1):
        message_id = f"msg_{number:016d}"
        if number > 1:
            messages.append(SystemMessage("status", {"type": "system", "subtype": "status", "status": "requesting"}))
        messages.append(event({"type": "message_start", "message": {"id": message_id, "usage": usage}}))
        for index, block in enumerate(("text", "tool_use")):
            messages.append(event({"type": "content_block_start", "index": index, "content_block": {"type": block}}))
            for _ in range(deltas // 2):
                messages.append(event({"type": "content_block_delta", "index": index,
                                       "delta": {"type": "text_delta", "text": "some words "}}))  # fmt: skip
            content = TextBlock("some words " * (deltas // 2)) if block == "text" else ToolUseBlock(f"toolu_{number}", "Bash", {"command": "ls"})
            messages.append(AssistantMessage([content], "claude-sonnet-4-5", usage=usage, message_id=message_id))
            messages.append(event({"type": "content_block_stop", "index": index}))
        messages.append(event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {**usage, "output_tokens": 90}}))
        messages.append(event({"type": "message_stop"}))
        messages.append(UserMessage([ToolResultBlock(f"toolu_{number}", "a\nb\nc", False)]))
    messages.append(ResultMessage(subtype="success", duration_ms=90_000, duration_api_ms=60_000, is_error=False,
                                  num_turns=replies, session_id="s", result="done", usage=usage,
                                  model_usage={"claude-sonnet-4-5": {"inputTokens": 480, "outputTokens": 90}}))  # fmt: skip
    return messages


def absorb_all(messages: list[Any]) -> float:
    """Seconds to read the stream as agent.py does, and classify it."""
    result = agent.AgentResult()
    watch = agent._Watch(result.api)
    started = time.perf_counter()
    for message in messages:
        agent._absorb_message(message, result, watch)
    classify(result.api, RunEnd(watch.ms(), is_error=result.is_error, terminal_reason=result.terminal_reason))
    return time.perf_counter() - started


def core_only(messages: list[Any]) -> float:
    """Seconds to feed the same signals straight into an ApiLog, and classify."""
    from claude_agent_sdk import AssistantMessage, StreamEvent, SystemMessage

    signals: list[tuple[str, Any]] = []
    for message in messages:
        if isinstance(message, StreamEvent):
            signals.append(("event", (message.event["type"], message.event.get("message", {}).get("id"))))
        elif isinstance(message, SystemMessage) and message.subtype == "status":
            signals.append(("request", None))
        elif isinstance(message, SystemMessage) and message.subtype == "api_retry":
            data = message.data
            signals.append(("retry", (data["attempt"], data["error_status"], data["error"], data["retry_delay_ms"])))
        elif isinstance(message, AssistantMessage):
            signals.append(("reply", message.message_id))
    log = ApiLog()
    started = time.perf_counter()
    for at, (kind, value) in enumerate(signals):
        due = log.stall_due_ms()
        if kind == "event":
            log.stream_event(at, value[0], value[1])
        elif kind == "request":
            log.request_began(at)
        elif kind == "retry":
            log.retry(at, *value)
            log.credentials_refused()
        else:
            log.reply(value, usage_reported=True)
        _ = due, log.stall_due_ms()
    classify(log, RunEnd(len(signals)))
    return time.perf_counter() - started


def measure(messages: list[Any], runs: int) -> tuple[float, float, float]:
    """(with, without, core) medians in seconds; with and without alternate, so a change of the
    machine's load falls on both."""
    absorb_all(messages)  # warm up: the SDK's lazy imports inside agent.py's functions
    feed = agent._feed_log
    with_log, without = [], []
    for _ in range(runs):
        with_log.append(absorb_all(messages))
        agent._feed_log = lambda message, result, watch: None  # the stream read as before the API's signals
        try:
            without.append(absorb_all(messages))
        finally:
            agent._feed_log = feed
    core = statistics.median(core_only(messages) for _ in range(runs))
    return statistics.median(with_log), statistics.median(without), core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=40)
    parser.add_argument("--deltas", type=int, default=30)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    agent.import_sdk()
    for replies in (args.replies, TYPICAL_REPLIES):
        messages = trial_stream(replies, args.deltas)
        with_log, without, core = measure(messages, args.runs)
        cost_ms = (with_log - without) * 1000
        print(f"trial stream: {len(messages):,} messages ({replies} replies, {args.deltas} deltas each, 3 retries)")
        print(f"  reading the stream with the API's signals:  {with_log * 1000:7.2f} ms")
        print(f"  reading the stream without them:            {without * 1000:7.2f} ms")
        print(f"  classification per trial (the difference):  {cost_ms:7.2f} ms ({cost_ms * 1000 / len(messages):.2f} us per message)")
        print(f"  the pure core alone (ApiLog + classify):    {core * 1000:7.2f} ms")
        if replies == args.replies:
            verdict = "met" if cost_ms <= TARGET_MS_PER_TRIAL else "missed"
            print(f"  target <= {TARGET_MS_PER_TRIAL:g} ms per long trial: {verdict}")


if __name__ == "__main__":
    main()
