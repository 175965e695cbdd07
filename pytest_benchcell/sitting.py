"""A sitting: which trials of which cells run now, and the tally printed at its end. Pure values."""

from __future__ import annotations

import datetime as _dt
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .api_faults import CREDENTIAL_FIX, DEFAULT_STOP_AFTER_API_FAILURES, KIND_CREDENTIALS
from .arm_stops import ArmStops
from .config import Bench, BenchConfigError, did_you_mean
from .names import NAME_RULE, name_problem
from .sample import STATUS_ERROR, STATUS_INVALID, STATUS_SCORED, cost_equivalent
from .store import Cell, Store

SELECT_ALL = "all"
# The most trials one sitting plans per cell, and the deepest --bench-fill target: far beyond what a
# token budget allows, small enough that planning never holds more numbers than memory takes.
MAX_TRIALS_PER_CELL = 10_000


def new_sitting_id() -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def resolve_selection(requested: Sequence[str], available: Iterable[str], *, kind: str, option: str) -> list[str]:
    """Expand `all`, keep declaration order, reject unknown names with the list of valid ones."""
    names = list(available)
    chosen: list[str] = []
    for entry in requested:
        for name in (part.strip() for part in entry.split(",")):
            if not name:
                continue
            problem = name_problem(name)
            if problem and name != SELECT_ALL:
                raise BenchConfigError(f"{option} {name[:80]!r}: not a valid {kind} name ({problem}); allowed: {NAME_RULE}")
            if name == SELECT_ALL:
                chosen.extend(n for n in names if n not in chosen)
            elif name in names:
                if name not in chosen:
                    chosen.append(name)
            else:
                raise BenchConfigError(
                    f"{option} {name!r}: no such {kind}{did_you_mean(name, [*names, SELECT_ALL])}; "
                    f"valid {kind}s: {', '.join(names)} (or {SELECT_ALL})"
                )
    if not chosen:
        raise BenchConfigError(
            f"{option} {', '.join(repr(entry) for entry in requested)}: names no {kind}; "
            f"valid {kind}s: {', '.join(names)} (or {SELECT_ALL})"
        )
    return chosen


@dataclass(frozen=True)
class PlannedTrial:
    arm: str
    task: str
    trial: int

    @property
    def item_name(self) -> str:
        # The trial number comes last so `-k` can pick arms, tasks or single trials.
        return f"{self.arm}-{self.task}-t{self.trial}"


def plan_trials(numbers: Mapping[tuple[str, str], Sequence[int]]) -> list[PlannedTrial]:
    """Interleave the cells trial by trial, so a drift of the host or model over a sitting does not
    land on one arm: (a1,t1) (a2,t1) (a1,t2) (a2,t2) ..."""
    planned = []
    depth = max((len(trials) for trials in numbers.values()), default=0)
    for round_index in range(depth):
        for (arm, task), trials in numbers.items():
            if round_index < len(trials):
                planned.append(PlannedTrial(arm, task, trials[round_index]))
    return planned


def reserve_selected(store: Store, model_kind: str, selected: Sequence[PlannedTrial], sitting_id: str) -> dict[PlannedTrial, PlannedTrial]:
    """Reserve the trial numbers of the trials that will run (after -k, -m and other deselection),
    one reservation per cell. Returns previewed trial -> reserved trial: the same unless another
    sitting reserved past the preview meanwhile, which moves the cell's trials to fresh numbers."""
    by_cell: dict[tuple[str, str], list[PlannedTrial]] = {}
    for planned in selected:
        by_cell.setdefault((planned.arm, planned.task), []).append(planned)
    reserved: dict[PlannedTrial, PlannedTrial] = {}
    for (arm, task), trials in by_cell.items():
        trials.sort(key=lambda planned: planned.trial)
        numbers = store.reserve_previewed(Cell(model_kind, arm, task), [t.trial for t in trials], sitting=sitting_id)
        reserved.update((old, PlannedTrial(arm, task, number)) for old, number in zip(trials, numbers))
    return reserved


@dataclass
class CellTally:
    """What one cell got this sitting, plus its depth before and after."""

    arm: str
    task: str
    scored_before: int
    recorded: int = 0
    passed: int = 0
    failed: int = 0
    invalid: int = 0
    errors: int = 0
    spent: float = 0.0  # cost-equivalent tokens of this sitting's trials
    usage_unknown: int = 0  # trials whose replies came without usage: their tokens are not in `spent`
    dollars: list[float] = field(default_factory=list)  # this sitting's trials in dollars (dollar_budget.py)
    dollars_unknown: int = 0  # trials with no usage or no price: not in `dollars`
    scored_after: int | None = None
    stale_scoring: int = 0  # scored under the current conditions but an older scoring: --bench-rescore
    other_conditions: int = 0  # scored under other conditions (another definition of the cell): never pooled
    fill: tuple[int, int] | None = None  # --bench-fill N: (N, the trials planned to reach it)
    duplicates: list[str] = field(default_factory=list)  # sample ids stored more than once (counted once)
    blocked: int = 0  # trials in which the sandbox kept the arm's own program from what it needs
    blocked_lines: list[str] = field(default_factory=list)  # what it kept, each line once

    def count(
        self, status: str, outcome: str | None, cost: float = 0.0, blocked: Sequence[str] = (), *, unmetered: bool = False
    ) -> None:
        self.recorded += 1
        self.spent += cost
        self.usage_unknown += unmetered
        if blocked:
            self.blocked += 1
            self.blocked_lines += [line for line in blocked if line not in self.blocked_lines]
        if status == STATUS_SCORED:
            if outcome == "pass":
                self.passed += 1
            else:
                self.failed += 1
        elif status == STATUS_INVALID:
            self.invalid += 1
        elif status == STATUS_ERROR:
            self.errors += 1


def sitting_spend(store: Store, cells: Sequence[Cell], sitting_id: str, weights: Mapping[str, float]) -> float:
    """Cost-equivalent tokens the sitting's samples used so far (read back from the shared store,
    so every xdist worker and the controller see the same figure)."""
    spent = 0.0
    for sample in store.iter_summaries([], cells=cells):  # the checked index: no transcript is parsed
        if sample["sitting"] == sitting_id:
            spent += cost_equivalent(sample["usage"]["total"], weights)
    return spent


def fill_counts(scored: Mapping[tuple[str, str], int], target: int) -> dict[tuple[str, str], int]:
    """New trials each cell needs to reach `target` scored samples (0 for cells already there)."""
    return {cell: max(0, target - count) for cell, count in scored.items()}


def summary_lines(
    tallies: Sequence[CellTally], store_path: str, floor: int, *, spent: float | None = None, budget: int | None = None
) -> list[str]:
    lines = []
    for tally in tallies:
        after = tally.scored_after if tally.scored_after is not None else tally.scored_before
        lines.append(
            f"{tally.arm} x {tally.task}: {tally.recorded} recorded this sitting "
            f"({tally.passed} passed, {tally.failed} failed, {tally.invalid} invalid, {tally.errors} errors)"
        )
        if after >= floor:
            status = f"meets the reporting floor of {floor}"
        else:
            status = f"below the reporting floor of {floor}: {floor - after} more to deepen this cell"
        lines.append(f"    scored samples of the current definition: {tally.scored_before} -> {after} ({_growth(tally, after)}{status})")
        if tally.blocked:
            trials = "1 trial" if tally.blocked == 1 else f"{tally.blocked} trials"
            lines.append(
                f"    sandbox: in {trials} it kept the arm's own program from what it needs (errors, never counted "
                "for or against the arm):"
            )
            lines += [f"        {line}" for line in tally.blocked_lines[:3]]
        if tally.stale_scoring:
            lines.append(
                f"    {tally.stale_scoring} more scored under an older scoring definition (facts, changes or "
                f"[checker]): --bench-rescore brings them up to date without running them again"
            )
        if tally.other_conditions:
            lines.append(
                f"    {tally.other_conditions} more scored under other conditions (another definition of this cell: "
                f"never pooled with these)"
            )
        if tally.duplicates:
            shown = ", ".join(tally.duplicates[:5]) + (", ..." if len(tally.duplicates) > 5 else "")
            lines.append(f"    {len(tally.duplicates)} duplicate sample line(s) counted once: {shown}")
    if spent is not None:
        limit = f" of a budget of {budget:,}" if budget else ""
        unknown = sum(tally.usage_unknown for tally in tallies)
        unmetered = f", not counting {unknown} trial(s) whose replies came without usage" if unknown else ""
        lines.append(f"spent: {spent:,.0f} cost-equivalent tokens this sitting{limit}{unmetered}")
    lines.append(f"store: {store_path}")
    return lines


def _growth(tally: CellTally, after: int) -> str:
    """Where the cell's growth came from, said only when this sitting's scored trials are not all of it
    (another sitting or a merge wrote to the cell meanwhile), so before + parts = after always holds;
    before a fill (nothing ran), the trials it plans to reach its target."""
    if tally.scored_after is None:  # nothing ran (--collect-only): what a fill's listing adds up to
        if tally.fill is None:
            return ""
        target, planned = tally.fill
        return f"+{planned} planned to reach --bench-fill {target}; " if planned else f"already at --bench-fill {target}; "
    mine = tally.passed + tally.failed
    others = after - tally.scored_before - mine
    if not others:
        return ""
    said = f"+{others} from other sittings meanwhile" if others > 0 else f"{others} no longer read as current meanwhile"
    return f"+{mine} this sitting, {said}; "


STOP_PREFIX = "benchcell stops the sitting: "


def unmetered(sample: Mapping[str, Any]) -> bool:
    """Replies came, but not their usage (a gateway that drops usage fields): the trial's spend is unknown."""
    usage = sample.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    return total is None and bool(sample.get("turns"))


@dataclass
class SittingStop:
    """Whether a sitting can still succeed, judged after each recorded trial, in the order they were
    recorded. A sitting stops when the model API refused the credentials (no trial can succeed until
    they are fixed), when `after_api_failures` trials in a row ended by the API (an outage: every
    further trial would wait out its backstop or the CLI's retries), and, under a token budget, when
    a trial's replies came without usage (the budget cannot be kept unmetered). Other errors (a
    provisioning failure) neither count nor break a run of API failures; a scored or invalid trial does.

    `reason` is the whole message (the sitting summary); `headline` is what pytest prints as it stops
    ("Interrupted: ..."), STOP_PREFIX first, so a stop a worker decided is known for the sitting's."""

    after_api_failures: int = DEFAULT_STOP_AFTER_API_FAILURES
    budget: bool = False
    budget_option: str = "--bench-budget"  # the option that set the budget, named in the stop
    api_failures_in_row: int = 0
    reason: str | None = None
    headline: str | None = None

    def record(self, trial: str, status: str, api_error: Mapping[str, Any] | None, *, unmetered: bool = False) -> str | None:
        """Take one trial's verdict; the headline of the stop, once there is one."""
        if self.headline is not None:
            return self.headline
        if api_error is not None:
            said = _fault_words(api_error)
            if api_error.get("kind") == KIND_CREDENTIALS:
                return self._stop(
                    f"the model API refused the credentials in {trial} ({said})",
                    f"no trial of this sitting can succeed; {CREDENTIAL_FIX}",
                )
            self.api_failures_in_row += 1
            if self.api_failures_in_row >= self.after_api_failures:
                return self._stop(
                    f"{self.api_failures_in_row} trials in a row ended by the model API (the last, {trial}: {said})",
                    f"[bench] stop_after_api_failures = {self.after_api_failures}; run the sitting again once the API answers",
                )
        elif status != STATUS_ERROR:
            self.api_failures_in_row = 0
        if self.budget and unmetered:
            return self._stop(
                f"the model API reported no usage for the replies of {trial}",
                f"{self.budget_option} cannot be kept unmetered (a gateway that drops usage fields?); the trial's usage is "
                "stored as unknown",
            )
        return None

    def _stop(self, what: str, then: str) -> str:
        self.headline = f"{STOP_PREFIX}{what}"
        self.reason = f"{what}: {then}"
        return self.headline


def _fault_words(api_error: Mapping[str, Any]) -> str:
    status = api_error.get("status")
    attempts = api_error.get("attempts")
    http = f"HTTP {status} " if status is not None else ""
    return f"{http}{api_error.get('error')} on {attempts} attempt{'s' if attempts != 1 else ''}"


def stop_line(reason: str, planned: int, recorded: int) -> str:
    """The summary's line on a sitting that stopped early, and what stayed unused."""
    left = max(0, planned - recorded)
    why = reason[len(STOP_PREFIX):] if reason.startswith(STOP_PREFIX) else reason
    unused = f"; {left} planned trial(s) did not run (their numbers stay unused)" if left else ""
    return f"the sitting stopped: {why}{unused}"


@dataclass
class SittingState:
    """Everything the plugin keeps for one sitting (held in config.stash)."""

    bench: Bench
    store: Store
    model_kind: str
    sitting_id: str
    trials: list[PlannedTrial]
    turn_cap: int
    wall_clock_ms: int
    reserved: bool  # False for --collect-only: numbers are a preview, nothing was written
    budget: int | None = None  # cost-equivalent tokens; no new trial starts once spent
    budget_usd: float | None = None  # dollars (--bench-budget-usd): no trial starts that would pass it
    probe: dict[str, Any] | None = None  # {"verdict", "drop", "swap"} from pytest_benchcell_probe
    exec_audit: str = ""  # "on (strace ...)" or "off (why)": shown in the header
    sandbox: str = ""  # "on (bubblewrap ...)" or "off (why)": shown in the header
    tallies: dict[tuple[str, str], CellTally] = field(default_factory=dict)
    stop: SittingStop = field(default_factory=SittingStop)  # whether the sitting can still succeed
    arm_stops: ArmStops = field(default_factory=ArmStops)  # arms whose trials the harness broke: stopped
    extra: dict[str, Any] = field(default_factory=dict)
