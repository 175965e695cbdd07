"""What a trial is given (`TrialSpec`, the agent runner, the callback once recorded), the errors that end
a trial as the harness's (`HarnessError`, `TaskUnusable`, `StoreUnavailable`), the call of one of the
bench's hooks and the mark of a sample's verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..agent import AgentRequest, AgentResult
from ..config import Bench
from ..sample import STATUS_ERROR
from ..store import Store


@dataclass(frozen=True)
class TrialSpec:
    bench: Bench
    arm: str
    task: str
    trial: int
    model_kind: str
    sitting: str
    turn_cap: int
    wall_clock_ms: int
    store: Store
    probe: Mapping[str, Any] | None = None  # the session's capability-probe verdict, if any
    gateway: str | None = None  # the xdist worker that runs it (gw0, ...), None in the controller's process


class HarnessError(Exception):
    """A failure of the harness or the bench's hooks: recorded as status `error`."""


class TaskUnusable(HarnessError):
    """The task's definition cannot work in this environment (a `changes` path that does not
    resolve against the ground truth): every trial of the task would fail the same way."""


RecordedCallback = Callable[..., None]  # (sample, *, task_unusable: str | None)


AgentRunner = Callable[[AgentRequest], AgentResult]


class StoreUnavailable(Exception):
    """Not even an `error` sample could be written: the sitting must stop (the message says why)."""


def _call_hook(hook: Any, **kwargs: Any) -> Any:
    try:
        return hook(**kwargs)
    except (KeyboardInterrupt, HarnessError):
        raise
    except Exception as exc:  # noqa: BLE001 - a crash in the bench's own hook is a harness error
        name = getattr(hook, "name", "hook")
        raise HarnessError(f"{name} raised {type(exc).__name__}: {exc}") from exc


def _mark(sample: dict[str, Any], status: str, outcome: str | None, reason: str) -> None:
    sample["status"] = status
    sample["outcome"] = outcome
    sample["reason"] = reason
    if status == STATUS_ERROR:
        sample["final_answer"] = ""  # whatever the CLI said then (its error text) is no answer of the agent
