"""Values that pass between the harness and a bench's hooks (the public API for bench authors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrialInfo:
    """Which trial is being run, handed to every bench hook."""

    arm: str
    task: str
    tier: str
    trial: int
    model_kind: str  # "real" or "scripted"
    workdir: Path  # a fresh folder for this trial's environment; removed after teardown
    agent_cwd: Path  # the agent's fresh, empty working directory


@dataclass
class Environment:
    """What a bench's provision hook hands back.

    - `values`: the strings that fill {placeholders} in the base prompt, the task intent, the
      arm's env and its MCP server definitions (for example the path of a seeded database).
    - `data`: anything the bench wants back in its snapshot, check and teardown hooks.
    - `secrets`: values that must never reach the store, whatever their length (redacted from
      every string recorded; pytest_benchcell/secrets.py says what else is redacted).
    - `hidden`: files and folders the agent's commands must never read, even inside the workdir
      (the service's data: its database is the answer key one `cat` away). The sandbox mounts
      them empty; without the sandbox nothing enforces it.
    """

    values: Mapping[str, str] = field(default_factory=dict)
    data: Any = None
    secrets: tuple[str, ...] = ()
    hidden: tuple[str | Path, ...] = ()


@dataclass(frozen=True)
class Probe:
    """A capability probe's verdict (see the pytest_benchcell_probe hook).

    - `verdict`: what was found, recorded on every sample of the sitting (JSON-like values).
    - `drop`: task ids to leave out of the selection.
    - `swap`: task id -> the task id to run instead.
    """

    verdict: Mapping[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    swap: Mapping[str, str] = field(default_factory=dict)
