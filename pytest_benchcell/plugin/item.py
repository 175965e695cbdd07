"""The trial item: the bench file as the collector of a sitting's trials, and one trial as a pytest
item whose outcome maps the sample's status and outcome (see the package's docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .keys import (
    API_ERROR_PROPERTY,
    BLOCKED_PROPERTY,
    COST_PROPERTY,
    DOLLARS_PROPERTY,
    HARNESS_BROKE_PROPERTY,
    PROGRESS_PROPERTY,
    REASON_PROPERTY,
    SITTING_KEY,
    STATUS_PROPERTY,
    STATUS_SCORED,
    UNMETERED_PROPERTY,
)

if TYPE_CHECKING:
    from ..sitting import PlannedTrial

# pytest-timeout's limit for a trial item, on top of its readiness bound and wall-clock backstop:
# provisioning, the CLI's start, scoring and teardown. A global --timeout never cuts a trial short.
TRIAL_TIMEOUT_MARGIN_S = 120


class BenchFile(pytest.File):
    """The bench.toml, as the parent of a sitting's trial items (node ids: bench.toml::ARM-TASK-tN)."""

    def collect(self) -> list[pytest.Item]:
        state = self.config.stash[SITTING_KEY]
        return [TrialItem.from_parent(self, name=planned.item_name, planned=planned) for planned in state.trials]


def _outcome_exception(tag: str) -> Any:  # a subclass of pytest.fail.Exception, which has no public name
    # pytest prints an exception as "<name>: <message>" in the short summary and omits the module
    # of classes that claim to be builtins (as pytest's own Failed does). Naming the class after
    # the outcome makes the line read "FAILED ...-t3 - confused: turn cap of 40 reached".
    return type(tag, (pytest.fail.Exception,), {"__module__": "builtins", "__doc__": f"A trial that ended {tag}."})


TRIAL_EXCEPTIONS = {
    tag: _outcome_exception(tag) for tag in ("incorrect", "confused", "hung", "invalid", "error", "refused")
}


class TrialItem(pytest.Item):
    """One new trial of one cell."""

    def __init__(self, *, planned: PlannedTrial, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.add_marker(pytest.mark.benchcell)
        state = self.config.stash[SITTING_KEY]
        plugins = self.config.pluginmanager
        if plugins.hasplugin("timeout"):
            # The trial bounds itself (readiness bound + MCP servers' wait + backstop); a global
            # --timeout meant for unit tests must not cut it short. The marker overrides the global value.
            mcp_wait_ms = state.bench.mcp_timeout_ms if state.bench.arms[planned.arm].mcp_servers else 0
            bound_s = (state.bench.ready_timeout_ms + mcp_wait_ms + state.wall_clock_ms) / 1000 + TRIAL_TIMEOUT_MARGIN_S
            self.add_marker(pytest.mark.timeout(bound_s))
        if plugins.hasplugin("rerunfailures"):
            self.add_marker(pytest.mark.flaky(reruns=0))  # a trial is a draw: never retried

    def runtest(self) -> None:
        from ..leftovers import printable
        from ..sitting import sitting_spend
        from ..store import Cell
        from ..trial import StoreUnavailable, TrialSpec, run_trial

        state = self.config.stash[SITTING_KEY]
        key = (self.planned.arm, self.planned.task, self.planned.trial)
        started = state.extra.setdefault("started", set())
        if key in started:
            # Something ran this item again (a rerun plugin, a plugin calling the protocol twice):
            # a second draw under one trial number would bias the cell, so it is refused, unrecorded,
            # and its report must not carry the first run's sample into the tally.
            self.user_properties[:] = [item for item in self.user_properties if not item[0].startswith("benchcell_")]
            raise TRIAL_EXCEPTIONS["refused"](
                f"trial {self.planned.trial} of {self.planned.arm} x {self.planned.task} already ran in this "
                f"sitting; a trial is one draw and never runs twice under one number (rerun plugins and "
                f"options such as --reruns are ignored for trials; nothing was recorded for this attempt)",
                pytrace=False,
            )
        started.add(key)
        stopped = self._arm_stopped()
        if stopped is not None:  # the harness broke enough of this arm's trials: it runs no more of them
            pytest.skip(stopped)
        task = state.bench.tasks[self.planned.task]
        unusable = state.extra.setdefault("unusable_tasks", {}).get(task.id)
        if unusable is not None:
            pytest.skip(f"task {task.id} skipped for this sitting: {unusable}")
        if state.budget is not None:
            cells = [Cell(state.model_kind, arm, task) for arm, task in state.tallies]
            spent = sitting_spend(state.extra.get("spend_in", state.store), cells, state.sitting_id, state.bench.weights)
            if spent >= state.budget:
                pytest.skip(f"budget of {state.budget:,} cost-equivalent tokens reached ({spent:,.0f} spent this sitting)")
        if state.budget_usd is not None:
            self._keep_to_dollars()
        spec = TrialSpec(
            bench=state.bench,
            arm=self.planned.arm,
            task=self.planned.task,
            trial=self.planned.trial,
            model_kind=state.model_kind,
            sitting=state.sitting_id,
            turn_cap=state.turn_cap,
            wall_clock_ms=state.wall_clock_ms,
            store=state.store,
            probe=state.probe["verdict"] if state.probe else None,
            gateway=getattr(self.config, "workerinput", {}).get("workerid"),
        )
        try:
            sample = run_trial(spec, self.ihook, on_recorded=self._recorded)
        except StoreUnavailable as exc:
            pytest.exit(f"benchcell: {exc}", returncode=pytest.ExitCode.INTERNAL_ERROR)
        if sample["status"] == STATUS_SCORED and sample["outcome"] == "pass":
            return
        tag = sample["outcome"] if sample["status"] == STATUS_SCORED else sample["status"]
        raise TRIAL_EXCEPTIONS[tag](printable(sample["reason"]), pytrace=False)  # it may quote what the agent made

    def _keep_to_dollars(self) -> None:
        """--bench-budget-usd: skip the trial when the sitting's spend plus its expected cost would pass it."""
        from ..dollar_budget import dollar_spend
        from ..store import Cell

        state = self.config.stash[SITTING_KEY]
        assert state.budget_usd is not None  # called only under --bench-budget-usd
        cells = [Cell(state.model_kind, arm, task) for arm, task in state.tallies]
        summaries = state.extra.get("spend_in", state.store).iter_summaries([], cells=cells)
        spend = dollar_spend(summaries, state.sitting_id, state.bench.price_table)
        # Workers that read one store (this machine's) may be running a trial each; a worker on another
        # machine keeps to its share of the budget (xdist_bridge) and runs its trials one at a time.
        running = int(getattr(self.config, "workerinput", {}).get("workercount", 1)) if "spend_in" in state.extra else 1
        refusal = spend.refuses((self.planned.arm, self.planned.task), state.budget_usd, running=running)
        if refusal is not None:
            pytest.skip(refusal)

    def _arm_stopped(self) -> str | None:
        """Why this trial's arm runs no more trials this sitting (arm_stops.py): by this process's own
        count, or (an xdist worker) by the controller's, from the file it leaves on this machine."""
        reason = self.config.stash[SITTING_KEY].arm_stops.reason(self.planned.arm)
        worker = self.config.pluginmanager.get_plugin("benchcell-xdist-worker")
        if reason is None and worker is not None:
            reason = worker.arm_stop_requested(self.planned.arm)
        return reason

    def _recorded(self, sample: dict[str, Any], *, task_unusable: str | None) -> None:
        """The stored sample's facts for the report, also when the trial was interrupted.

        user_properties travel with the report (also from xdist workers to the controller) and end
        up in junit XML as <property> elements: sample id, status, outcome."""
        from ..sample import cost_equivalent
        from ..sitting import unmetered

        state = self.config.stash[SITTING_KEY]
        if task_unusable is not None:
            state.extra.setdefault("unusable_tasks", {})[self.planned.task] = task_unusable
        self.user_properties.append((STATUS_PROPERTY, sample["status"]))
        self.user_properties.append(("benchcell_outcome", sample["outcome"]))
        self.user_properties.append(("benchcell_sample", sample["id"]))
        self.user_properties.append(("benchcell_cell", [self.planned.arm, self.planned.task]))
        cost = cost_equivalent(sample["usage"]["total"], state.bench.weights)
        self.user_properties.append((COST_PROPERTY, cost))
        from ..dollar_budget import sample_dollars
        from ..prices import usd

        dollars = sample_dollars(sample, state.bench.price_table)
        self.user_properties.append((DOLLARS_PROPERTY, dollars))
        spend = f"{cost:,.0f} cost-eq tokens" if sample["usage"]["total"] is not None else "usage unknown"
        spend += f", {usd(dollars)}" if dollars is not None else ""
        waited = sample.get("api_wait_ms") or 0
        api_wait = f" ({waited / 1000:.1f} s of it the API's retry waits)" if waited else ""
        progress = f"{sample['turns']} turns, {spend}, {sample['duration_ms'] / 1000:.1f} s{api_wait}"
        if (sample.get("sandbox") or {}).get("reached"):
            progress += f", {len(sample['sandbox']['reached'])} sandbox limit(s) reached"
        self.user_properties.append((PROGRESS_PROPERTY, progress))
        self.user_properties.append((REASON_PROPERTY, sample["reason"] or ""))
        self.user_properties.append((API_ERROR_PROPERTY, sample.get("api_error")))
        self.user_properties.append((UNMETERED_PROPERTY, unmetered(sample)))
        from ..harness_broke import causes
        from ..leftovers import printable

        if sample.get("sandbox_blocked"):
            from ..isolation.blocked import describe_record

            lines = [printable(describe_record(entry)) for entry in sample["sandbox_blocked"]]
            self.user_properties.append((BLOCKED_PROPERTY, lines))
        broke = [{key: printable(value) for key, value in cause.items()} for cause in causes(sample)]
        if broke:  # the sitting counts these per arm (arm_stops.py), also from xdist workers' reports
            self.user_properties.append((HARNESS_BROKE_PROPERTY, broke))
        worker = self.config.pluginmanager.get_plugin("benchcell-xdist-worker")
        if worker is not None:  # an xdist worker: the sample travels to the controller's store
            worker.record(self.nodeid, sample)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"trial {self.planned.trial} of {self.planned.arm} x {self.planned.task}"
