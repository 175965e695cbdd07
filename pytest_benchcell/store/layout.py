"""Where a store keeps things, and what a sample must carry to have a place there.

    <root>/<model_kind>/<arm>/<task>.jsonl   one complete sample per line, append-only
    <root>/<model_kind>/<arm>/<task>.idx     the checked index of those lines (index.py)
    <root>/<model_kind>/<arm>/<task>.trials  one JSON line per trial-number reservation (lock.py)
    <root>/definitions/<fingerprint>.toml    resolved arm + task definitions, once per fingerprint
    <root>/.lock                             the store-wide filelock
    <root>/transcripts/...                   each trial's transcript (transcript.py): never read here
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..names import NAME_RULE, name_problem
from ..sample import MODEL_KINDS, STATUSES

SAMPLES_SUFFIX = ".jsonl"
RESERVATIONS_SUFFIX = ".trials"
# A cache of one checked row per sample (see index.py). Plugins before schema 2 kept `.index` files;
# they are left where they are and never read.
INDEX_SUFFIX = ".idx"
DEFINITIONS_DIR = "definitions"
LOCK_NAME = ".lock"

REQUIRED_SAMPLE_KEYS = ("schema", "id", "arm", "task", "trial", "status", "model_kind")


class StoreError(Exception):
    """The store cannot do what was asked (bad sample, lock timeout, unreadable folder)."""


@dataclass(frozen=True, order=True)
class Cell:
    """One (arm, task) cell of one model kind: a file of samples."""

    model_kind: str
    arm: str
    task: str

    def __str__(self) -> str:
        return f"{self.arm} x {self.task}"


UNREADABLE = "unreadable"
DUPLICATE = "duplicate"


@dataclass(frozen=True)
class Problem:
    """A line of the store that could not be read as a sample, or repeats a sample id (kind)."""

    path: Path
    line: int
    message: str
    kind: str = UNREADABLE
    sample_id: str = ""  # for a duplicate: the repeated id

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class CellContents:
    samples: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


class Layout:
    """The files of the store rooted at one folder; touches disk only to list its cells."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def samples_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{SAMPLES_SUFFIX}"

    def index_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{INDEX_SUFFIX}"

    def reservations_path(self, cell: Cell) -> Path:
        return self.root / cell.model_kind / cell.arm / f"{cell.task}{RESERVATIONS_SUFFIX}"

    def definitions_path(self, fingerprint: str) -> Path:
        return self.root / DEFINITIONS_DIR / f"{fingerprint}.toml"

    def cells(self, model_kinds: Iterable[str] = MODEL_KINDS) -> list[Cell]:
        """Every cell that has a samples file, sorted."""
        found: list[Cell] = []
        for kind in model_kinds:
            kind_dir = self.root / kind
            if not kind_dir.is_dir():
                continue
            for arm_dir in kind_dir.iterdir():
                if not arm_dir.is_dir():
                    continue
                for path in arm_dir.glob(f"*{SAMPLES_SUFFIX}"):
                    found.append(Cell(kind, arm_dir.name, path.name[: -len(SAMPLES_SUFFIX)]))
        return sorted(found)


def looks_like_store(root: Path) -> bool:
    """Whether a folder is a sample store (what a sitting or a merge leaves): its lock file, a
    real/ or scripted/ folder of cells, or a definitions/ folder."""
    return (root / LOCK_NAME).is_file() or any((root / name).is_dir() for name in (*MODEL_KINDS, DEFINITIONS_DIR))


def cell_of(sample: Mapping[str, Any]) -> Cell:
    """The cell a validated sample belongs to."""
    return Cell(sample["model_kind"], sample["arm"], sample["task"])


def validate_sample(sample: Mapping[str, Any]) -> None:
    missing = [key for key in REQUIRED_SAMPLE_KEYS if key not in sample]
    if missing:
        raise StoreError(f"sample lacks required field(s): {', '.join(missing)}")
    if sample["status"] not in STATUSES:
        raise StoreError(f"sample status {sample['status']!r} is not one of {', '.join(STATUSES)}")
    if sample["model_kind"] not in MODEL_KINDS:
        raise StoreError(f"sample model_kind {sample['model_kind']!r} is not one of {', '.join(MODEL_KINDS)}")
    trial = sample["trial"]
    if not isinstance(trial, int) or isinstance(trial, bool) or trial < 1:
        raise StoreError(f"sample trial must be a positive integer, got {trial!r}")
    check_cell_names(sample["arm"], sample["task"])


def check_cell_names(arm: Any, task: Any) -> None:
    """Arm and task become a folder and a file name: the one name rule (names.py) guards them here
    too, before any folder or lock is made for a cell."""
    for kind, name in (("arm", arm), ("task", task)):
        problem = name_problem(name)
        if problem:
            raise StoreError(f"sample {kind} {str(name)[:80]!r} is not a valid {kind} name ({problem}); allowed: {NAME_RULE}")
