"""Re-score stored samples with the current checker, without any model call.

Samples keep the final answer and a bounded snapshot of the ground truth and end state, so after a
checker fix (or a corrected fact in bench.toml) their verdicts can be computed again. Nothing is
rewritten: a new verdict is appended as a `rescore` record that points at the original
(`rescore_of`) and carries the scoring fingerprint it was computed under; readers apply the latest
rescore of a sample over its original verdict (sample.effective_samples, store.read_summaries).

A record is appended when the verdict or its differences changed, and also when the verdict stays
the same but was computed under an older scoring definition: that record brings the sample up to
date, so it counts again for the floor, fill and reports. Only checker verdicts (pass, incorrect)
are re-scored: confused and hung are bounds, invalid and error were never scored, and a trial the
harness broke (harness_broke.py) is an error whatever its verdict, so it is skipped with that said.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .config import Bench
from .environment import TrialInfo
from .harness_broke import harness_broke, what_broke
from .sample import (
    CHECKER_OUTCOMES,
    OUTCOME_INCORRECT,
    OUTCOME_PASS,
    RECORD_RESCORE,
    SCHEMA_VERSION,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_RESCORE,
    STATUS_SCORED,
    Definition,
    effective_samples,
    new_sample_id,
    scoring_of,
    utc_now_iso,
)
from .store import Cell, Store
from .trial import HarnessError, differences_for


@dataclass
class RescoreTally:
    """What became of every stored sample the rescore read: each one is changed, kept, current or
    skipped for a named reason, so the summary's parts add up to what it read."""

    read: int = 0  # trial samples of the selected cells (rescore records applied, not counted)
    changed: list[str] = field(default_factory=list)  # one line per verdict that really changed (pass <-> incorrect)
    updated: int = 0  # same verdict, recorded under the current scoring (or with other differences)
    current: int = 0  # same verdict and differences under the current scoring: nothing appended
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many samples were not re-scored
    skipped_lines: list[str] = field(default_factory=list)  # the samples a problem kept from re-scoring

    def skip(self, why: str, count: int = 1, line: str | None = None) -> None:
        if count:
            self.skipped[why] = self.skipped.get(why, 0) + count
        if line is not None:
            self.skipped_lines.append(line)

    def summary_lines(self, where: str) -> list[str]:
        skipped = sum(self.skipped.values())
        why = f" ({'; '.join(f'{count} {reason}' for reason, count in self.skipped.items())})" if skipped else ""
        return [
            f"re-scored {self.read} stored samples in {where}: {len(self.changed)} verdicts changed, "
            f"{self.updated} kept their verdict under the current scoring (appended as rescore records), "
            f"{self.current} already current (nothing appended), {skipped} skipped{why}",
            *(f"    {line}" for line in self.changed),
            *(f"    skipped {line}" for line in self.skipped_lines),
        ]


# Why a stored sample is not re-scored, in the summary's words.
SKIP_STATUS = {STATUS_INVALID: "invalid: never scored", STATUS_ERROR: "error: never scored"}
SKIP_BOUND = "confused or hung: a bound, not a checker verdict"
SKIP_TASK_GONE = "of a task no longer in the bench file"
SKIP_NO_STATE = "without a stored state snapshot"
SKIP_CHECKER_FAILED = "the checker could not judge"
SKIP_HARNESS_BROKE = "the harness broke: an error whatever its verdict"


def samples_elsewhere(store: Store, cells: list[Cell], flag: str) -> list[str]:
    """A line saying how many samples the given cells (of the other model kind) hold, and how to
    re-score them (`flag`); nothing when they hold none."""
    present = [cell for cell in cells if store.samples_path(cell).exists()]
    samples = sum(1 for _ in store.iter_summaries([], cells=present))  # trial samples, not rescore records
    if not samples:
        return []
    kind = present[0].model_kind
    return [f"the {kind} store {store.root / kind} has {samples} samples in {len(present)} of the selected cells: "
            f"{flag} to re-score them"]  # fmt: skip


def rescore_cells(bench: Bench, store: Store, cells: list[Cell], hooks: Any, *, sitting: str) -> RescoreTally:
    tally = RescoreTally()
    with tempfile.TemporaryDirectory(prefix="benchcell-rescore-") as scratch:
        for cell in cells:
            samples = effective_samples(store.read_cell(cell).samples)
            tally.read += len(samples)
            if cell.task not in bench.tasks:
                line = f"{cell}: task {cell.task!r} is no longer in {bench.path.name}"
                tally.skip(SKIP_TASK_GONE, len(samples), line if samples else None)
                continue
            definition = bench.definition(cell.arm, cell.task)  # hashes the whole definition: once per cell
            for sample in samples:
                status = sample.get("status")
                if status != STATUS_SCORED:
                    tally.skip(SKIP_STATUS.get(str(status), f"{status}: never scored"))
                    continue
                if harness_broke(sample):  # an error whatever its verdict: a new one would change nothing
                    tally.skip(
                        SKIP_HARNESS_BROKE,
                        line=f"{cell.arm}-{cell.task}-t{sample.get('trial')}: the harness broke it ({what_broke(sample)[0]}), "
                        "so it counts as an error whatever its verdict",
                    )
                    continue
                if sample.get("outcome") not in CHECKER_OUTCOMES:
                    tally.skip(SKIP_BOUND)
                    continue
                _rescore_one(bench, store, cell, definition, sample, hooks, Path(scratch), sitting, tally)
    return tally


def _rescore_one(
    bench: Bench, store: Store, cell: Cell, definition: Definition, sample: dict[str, Any], hooks: Any,
    scratch: Path, sitting: str, tally: RescoreTally,
) -> None:  # fmt: skip
    task = bench.tasks[cell.task]
    label = f"{cell.arm}-{cell.task}-t{sample.get('trial')}"
    state = sample.get("state") or {}
    if task.check_state and ("before" not in state or "after" not in state):
        tally.skip(SKIP_NO_STATE, line=f"{label}: no stored state snapshot to re-score the end state against")
        return
    info = TrialInfo(
        arm=cell.arm, task=cell.task, tier=task.tier, trial=int(sample["trial"]), model_kind=cell.model_kind,
        workdir=scratch, agent_cwd=scratch,
    )  # fmt: skip
    try:
        differences = differences_for(
            bench, task, hooks, info, None, sample.get("final_answer", ""), state.get("before"), state.get("after")
        )
    except HarnessError as exc:
        tally.skip(SKIP_CHECKER_FAILED, line=f"{label}: {exc}")
        return
    outcome = OUTCOME_INCORRECT if differences else OUTCOME_PASS
    same_verdict = outcome == sample["outcome"] and differences == sample.get("score", {}).get("differences", [])
    if same_verdict and definition.scores(scoring_of(sample)):
        tally.current += 1
        return
    reason = differences[0] if differences else ""
    store.append(
        {
            "schema": SCHEMA_VERSION,
            "id": new_sample_id(),
            "record": RECORD_RESCORE,
            "rescore_of": sample["id"],
            "sitting": sitting,
            "arm": cell.arm,
            "task": cell.task,
            "tier": task.tier,
            "trial": sample["trial"],
            "model_kind": cell.model_kind,
            "status": STATUS_RESCORE,
            "outcome": outcome,
            "reason": reason,
            "score": {"differences": differences},
            "previous": {"outcome": sample["outcome"], "reason": sample.get("reason", "")},
            "rescored_at": utc_now_iso(),
            "provenance": {
                "plugin": __version__, "fingerprint": definition.conditions, "conditions": definition.conditions,
                "scoring": definition.scoring,
            },
        }
    )  # fmt: skip
    if outcome != sample["outcome"]:
        tally.changed.append(f"{label}: {sample['outcome']} -> {outcome}" + (f" ({reason})" if reason else ""))
    else:
        tally.updated += 1
