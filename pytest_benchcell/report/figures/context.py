"""The shared state of one report's figures, and which arms and tasks the headline is over."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ... import statistics as stats
from ..model import COVERED, CellSummary, ReportSettings, TaskInfo, names_in_prose
from ..reading import Trial


@dataclass
class _Context:
    settings: ReportSettings
    arms: list[str]
    catalogue: dict[str, TaskInfo]
    cells: dict[tuple[str, str], CellSummary]  # (arm, task) -> summary, every arm x catalogue task
    z: float
    trials: dict[tuple[str, str], list[Trial]]  # (arm, task) -> scored trials of the reported group, oldest first
    paired: dict[tuple[str, str, tuple[str, ...]], list[tuple[Trial, Trial]]] = dataclasses.field(default_factory=dict)

    def seed(self, *labels: str) -> int:
        return stats.derive_seed(self.settings.seed, *labels)

    def scored_tasks(self) -> list[str]:
        """The tasks every scored table counts: not bonus, not left out by the bench (its capability probe)."""
        return [task for task, info in self.catalogue.items() if not info.bonus and not info.excluded]

    def covered(self, arm: str, task: str) -> bool:
        return self.cells[(arm, task)].coverage == COVERED


def _arms_without_scores(context: _Context) -> list[str]:
    """Arms with no scored sample in any scored task (every trial invalid or errored, or none yet)."""
    return [arm for arm in context.arms if not any(context.cells[(arm, t)].scored for t in context.scored_tasks())]


def _headline_arms(context: _Context) -> list[str]:
    """The arms the headline tasks are chosen for: an arm with no scored sample at all is left out
    (and named), so one broken arm does not empty the table for the others."""
    without = _arms_without_scores(context)
    return [arm for arm in context.arms if arm not in without] or list(context.arms)


def _every_headline_arm(context: _Context) -> str:
    left_out = [arm for arm in context.arms if arm not in _headline_arms(context)]
    return f"every arm but {names_in_prose(left_out)} (no scored sample)" if left_out else "every arm"


def _headline_tasks(context: _Context) -> list[str]:
    if not context.arms:
        return []
    arms = _headline_arms(context)
    return [t for t in context.scored_tasks() if all(context.covered(arm, t) for arm in arms)]
