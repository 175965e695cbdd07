"""The steps of a script (what the fake model does for one request) and the check of a script
before it is played."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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


def load_skill(name: str, text: str = "") -> ToolUse:
    """The model loads the skill ``name`` through Claude Code's Skill tool (an agent that uses its
    skill; one that never does simply never plays this step)."""
    return ToolUse("Skill", {"skill": name}, text)


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
