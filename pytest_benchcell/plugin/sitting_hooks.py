"""The sitting's hooks, registered only during a sitting: header, collection of the bench file,
the plan's order, reservation after deselection, one run per trial, the tally, stops, the summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .item import BenchFile, TrialItem
from .keys import (
    API_ERROR_PROPERTY,
    BLOCKED_PROPERTY,
    COST_PROPERTY,
    DOLLARS_PROPERTY,
    HARNESS_BROKE_PROPERTY,
    PROGRESS_PROPERTY,
    REASON_PROPERTY,
    STATUS_INVALID,
    STATUS_PROPERTY,
    STATUS_SCORED,
    UNMETERED_PROPERTY,
)
from .options import STORE_ALLOWED, _store_source
from .planning import _preflight

if TYPE_CHECKING:
    from ..agent import SdkImport
    from ..sitting import SittingState

class SittingPlugin:
    """The hooks that only matter during a sitting, registered only then (off, they cost nothing)."""

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.invalid: list[str] = []  # "INVALID nodeid - reason" lines for the summary
        self.sdk_import: SdkImport | None = None  # the SDK's import while the sitting starts

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        state = self.state
        return [
            f"benchcell: bench {state.bench.name} ({state.bench.path}), {state.bench.model} ({state.model_kind} model)",
            f"benchcell: store {state.store.root / state.model_kind}, sitting {state.sitting_id}",
            *([f"benchcell: probe verdict {state.probe['verdict']}"] if state.probe else []),
            f"benchcell: execution audit {state.exec_audit}",
            f"benchcell: sandbox {state.sandbox}",
            *(f"benchcell: not collected, not applicable: {cell}" for cell in state.extra["not_applicable"]),
            *([state.extra["decide"].headline()] if "decide" in state.extra else []),
        ]

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path == self.state.bench.path:
            return BenchFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # The plan's order (trial 1 of every cell, then trial 2...) is part of the experiment:
        # a shuffling plugin such as pytest-randomly must not put one arm's trials together.
        # Keep whatever selection other plugins made; restore only the order.
        order = {planned: index for index, planned in enumerate(self.state.trials)}
        trials = sorted((item for item in items if isinstance(item, TrialItem)), key=lambda item: order[item.planned])
        slots = iter(trials)
        items[:] = [next(slots) if isinstance(item, TrialItem) else item for item in items]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Reserve the numbers of the trials that will run, now that -k, -m and other deselection is
        done (before the terminal lists the items). A trial that another sitting's reservation moved
        to a fresh number is renamed after it."""
        from ..sitting import reserve_selected
        from ..store import StoreError

        state = self.state
        if not state.extra["reserve_selected"]:
            return
        state.extra["reserve_selected"] = False
        selected = [item for item in session.items if isinstance(item, TrialItem)]
        arms: dict[str, str] = {}
        for item in selected:
            arms.setdefault(item.planned.arm, item.planned.task)
        if any(state.bench.arms[arm].mcp_servers for arm in arms):
            self.wait_for_sdk()  # the pre-flight speaks MCP: one thread imports `mcp` at a time
        try:
            state.extra["notes"] += _preflight(self.config, state.bench, arms, state.model_kind, state.store.root)
        except pytest.UsageError:
            state.extra["refused"] = True  # nothing ran: no sitting summary under the refusal
            raise
        finally:
            self.wait_for_sdk()
        try:
            reserved = reserve_selected(
                state.store, state.model_kind, [item.planned for item in selected], state.sitting_id
            )
        except (StoreError, OSError) as exc:
            source = _store_source(self.config, state.bench)
            raise pytest.UsageError(f"{source}: {state.store.root}: {exc}; allowed: {STORE_ALLOWED}") from None
        for index, collected in enumerate(session.items):
            if isinstance(collected, TrialItem) and reserved[collected.planned] != collected.planned:
                planned = reserved[collected.planned]
                assert collected.parent is not None  # a trial is collected by its bench file
                renamed = TrialItem.from_parent(collected.parent, name=planned.item_name, planned=planned)
                for mark in collected.own_markers:  # markers other plugins added to the item keep applying
                    if mark not in renamed.own_markers:
                        # What add_marker does with a decorator (a bare Mark it refuses with ValueError).
                        renamed.own_markers.append(mark)
                        renamed.keywords[mark.name] = mark
                session.items[index] = renamed
        state.trials = [reserved[item.planned] for item in selected]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Run a trial item exactly once. This answers the (first-result) protocol hook before
        pytest-rerunfailures' implementation can loop over it; timeouts and other wrappers still apply."""
        if not isinstance(item, TrialItem):
            return None
        self.wait_for_sdk()
        worker = self.config.pluginmanager.get_plugin("benchcell-xdist-worker")
        stop = worker.stop_requested() if worker is not None else None
        if stop is not None:  # the controller stopped the sitting: this trial, already handed out, does not run
            item.session.shouldstop = stop
            return True
        from _pytest.runner import runtestprotocol  # what pytest's own implementation calls

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        runtestprotocol(item, nextitem=nextitem)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for xdist workers' reports too, so the tally is complete there.
        if report.when != "call":
            return
        properties: dict[str, Any] = dict(report.user_properties)
        status = properties.get(STATUS_PROPERTY)
        cell = properties.get("benchcell_cell")
        if status is None or cell is None:
            return
        outcome = properties.get("benchcell_outcome")
        if status == STATUS_INVALID:  # pytest's short summary has no section for this category
            from ..leftovers import printable

            self.invalid.append(f"INVALID {report.nodeid} - {printable(str(properties.get(REASON_PROPERTY, '')))}")
        tally = self.state.tallies.get(tuple(cell))
        unmetered = bool(properties.get(UNMETERED_PROPERTY))
        if tally is not None:
            tally.count(status, outcome, float(properties.get(COST_PROPERTY) or 0.0), properties.get(BLOCKED_PROPERTY) or (), unmetered=unmetered)
            dollars = properties.get(DOLLARS_PROPERTY)
            tally.dollars += [float(dollars)] if dollars is not None else []
            tally.dollars_unknown += dollars is None
        name = report.nodeid.rsplit("::", 1)[-1]
        stop = self.state.stop.record(name, status, properties.get(API_ERROR_PROPERTY), unmetered=unmetered)
        if stop is not None:
            self._stop(stop)
        if self.state.arm_stops.record(cell[0], name, properties.get(HARNESS_BROKE_PROPERTY) or ()) is not None:
            self._stop_arm()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.option.verbose > 0 and not hasattr(self.config, "workerinput"):
            result = outcome if status == STATUS_SCORED else status
            reporter.write_line(f"    {name}: {result}, {properties.get(PROGRESS_PROPERTY, '')}")

    def _stop(self, reason: str) -> None:
        """Stop the sitting after this trial (sitting.SittingStop said it cannot succeed). Without xdist
        and on a worker, pytest stops after the running item (session.shouldstop); xdist's controller
        stops handing out trials and ends when its workers have (DSession.shouldstop), and tells the
        workers on this machine to run none of the trials they were already given."""
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None:  # the xdist controller
            if not getattr(dsession, "shouldstop", False):
                dsession.shouldstop = reason
            bridge = self.config.pluginmanager.get_plugin("benchcell-xdist")
            if bridge is not None:
                bridge.tell_workers_to_stop(reason)
        elif getattr(self, "session", None) is not None and not self.session.shouldstop:
            self.session.shouldstop = reason

    def _stop_arm(self) -> None:
        """An arm was just stopped (arm_stops.ArmStops): its remaining trials do not run (TrialItem.runtest
        skips them), the other arms go on. The xdist controller also tells its workers on this machine,
        which read the stopped arms before each trial."""
        bridge = self.config.pluginmanager.get_plugin("benchcell-xdist")
        if bridge is not None:
            bridge.tell_workers_arm_stopped(self.state.arm_stops.stopped)

    def _arm_stop_messages(self) -> list[str]:
        """One message per arm stopped this sitting (arm_stops.py), with how many of its trials did not run."""
        state = self.state
        messages = []
        for arm in state.arm_stops.stopped:
            planned = sum(1 for trial in state.trials if trial.arm == arm)
            recorded = sum(tally.recorded for (tally_arm, _), tally in state.tallies.items() if tally_arm == arm)
            messages.append(state.arm_stops.message(arm, max(0, planned - recorded)))
        return messages

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        from ..sitting import STOP_PREFIX, stop_line, summary_lines
        from ..store import Cell

        if hasattr(config, "workerinput") or self.state.extra.get("refused"):
            return
        state = self.state
        cells = [Cell(state.model_kind, arm, task) for arm, task in state.tallies]
        for cell in cells if state.reserved else ():  # collect-only ran nothing: after = before
            count = state.store.count_current(cell, state.extra["definitions"][(cell.arm, cell.task)])
            tally = state.tallies[(cell.arm, cell.task)]
            tally.scored_after, tally.stale_scoring, tally.duplicates = count.current, count.stale_scoring, count.duplicates
            tally.other_conditions = count.other_conditions
        # The controller saw every trial's report (xdist workers' too): no need to re-read the store.
        spent = sum(tally.spent for tally in state.tallies.values()) if state.reserved else None
        title = "benchcell sitting" if state.reserved else "benchcell sitting (collect-only: nothing ran or was reserved)"
        terminalreporter.write_sep("=", title)
        lines = summary_lines(
            list(state.tallies.values()),
            str(state.store.root / state.model_kind),
            state.bench.floor,
            spent=spent,
            budget=state.budget,
        )
        if state.reserved and any(tally.dollars for tally in state.tallies.values()) or state.budget_usd is not None:
            from ..dollar_budget import spent_line

            tallies = state.tallies.values()
            lines[-1:-1] = [spent_line([d for t in tallies for d in t.dollars], state.budget_usd, sum(t.dollars_unknown for t in tallies))]
        dsession = config.pluginmanager.get_plugin("dsession")
        worker_stop = str(getattr(dsession, "shouldstop", "") or "")  # a worker's own rule stopped it
        stopped = state.stop.reason or (worker_stop if worker_stop.startswith(STOP_PREFIX) else None)
        if stopped and state.reserved:
            lines.insert(0, stop_line(stopped, len(state.trials), sum(tally.recorded for tally in state.tallies.values())))
        if "decide" in state.extra:  # --bench-fill decide: the comparisons, the plan and why, before the tallies
            lines[:0] = state.extra["decide"].lines()
        elif state.reserved and not state.extra["planned"] and state.extra.get("nothing_left"):
            lines.insert(0, state.extra["nothing_left"])
        lines[:0] = self.invalid
        lines[-1:-1] = state.extra.get("notes", [])
        if "decide_after" in state.extra and state.reserved and any(t.recorded for t in state.tallies.values()):
            after = state.extra["decide_after"]().comparisons
            undecided = sum(not c.decided for c in after)
            lines[-1:-1] = [f"comparisons after this sitting ({undecided} of {len(after)} undecided; the report reads the same):",
                            *(f"    {c.describe()}" for c in after)]  # fmt: skip
        arm_stops = self._arm_stop_messages() if state.reserved else []
        lines[:0] = arm_stops
        for line in lines:
            terminalreporter.write_line(line)
        for message in arm_stops:  # the headline, as pytest writes the one of a stopped session
            terminalreporter.write_sep("!", message, red=True)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # A fill with nothing left to fill (or to decide) is success, not pytest's "no tests collected".
        nothing_planned = not self.state.extra["planned"] and bool(self.state.extra.get("nothing_left"))
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and nothing_planned:
            session.exitstatus = pytest.ExitCode.OK
        # An arm stopped for the rest of the sitting: the sitting did not do what it was asked, as when
        # the whole sitting stops (exit status 2), though the other arms' trials ran.
        stopped_arm = bool(self.state.arm_stops.stopped) and not hasattr(self.config, "workerinput")
        if stopped_arm and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # SIGTERM (a CI cancel, `kill`) ends a trial like Ctrl-C does: the CLI is stopped, teardown
        # runs and the trial is recorded as `error: interrupted`, instead of dying mid-append.
        import signal
        import threading

        self.session = session
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        runs_trials_here = not session.config.pluginmanager.hasplugin("dsession")  # not an xdist controller
        if self.state.reserved and self.state.trials and runs_trials_here:
            # The SDK (and the `mcp` it pulls in) is imported now, outside any trial, on a thread
            # of its own beside collection and the pre-flight (agent.SdkImport); waited for before
            # the pre-flight imports `mcp` itself and before the first trial.
            from ..agent import SdkImport

            self.sdk_import = SdkImport()

    def wait_for_sdk(self) -> None:
        """The SDK's import done (agent.SdkImport), or what it raised."""
        sdk_import = self.sdk_import
        if sdk_import is not None:
            self.sdk_import = None
            sdk_import.wait()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        import sys

        audit_policy = sys.modules.get("pytest_benchcell.isolation.exec_audit.policy")
        if audit_policy is not None:  # a probe started beside a trial or the pre-flight leaves nothing running
            audit_policy.finish_learning()
        previous = getattr(self, "_previous_sigterm", None)
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
