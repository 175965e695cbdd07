"""The xdist bridge: the controller hands every worker the plan and stores the samples they send;
a worker sends each stored sample on its trial's report."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .keys import WORKER_PLAN_KEY

if TYPE_CHECKING:
    from ..sitting import SittingState

class _XdistBridge:
    """The controller's side of an xdist sitting: hands every worker the plan (its collection must be
    identical), stores the samples the workers send, and stops a sitting whose worker cannot run."""

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.receiver: Any = None
        self.worker_plan: dict[str, Any] = {}  # what every worker gets (made with the receiver)
        self.spools: dict[str, tuple[str, str]] = {}  # gateway id -> (its spec, its spool path)
        self.settled: set[str] = set()  # gateway ids whose spool its worker's Python removed
        self.unsettled: dict[str, str] = {}  # gateway id -> why its spool stays

    def pytest_configure_node(self, node: Any) -> None:
        from ..gateway_check import identity
        from ..remote import Receiver, arm_stop_file, bench_reference, cell_definitions, stop_file

        state = self.state
        if self.receiver is None:  # the first worker: the receiver and the plan, made once for all of them
            self.receiver = Receiver(
                store=state.store, bench=state.bench, sitting=state.sitting_id, model_kind=state.model_kind,
                turn_cap=state.turn_cap, wall_clock_ms=state.wall_clock_ms,
                expected={(t.arm, t.task, t.trial) for t in state.trials},
            )  # fmt: skip
            self.worker_plan = {
                "sitting": state.sitting_id,
                "numbers": state.extra["numbers"],
                "probe": state.probe,
                "bench": bench_reference(state.bench.path, self.config.rootpath),
                "definitions": cell_definitions(
                    state.bench, state.tallies, turn_cap=state.turn_cap, wall_clock_ms=state.wall_clock_ms
                ),
                "store": str(state.store.root.resolve()),
                "stop_file": str(stop_file(state.bench.root, state.sitting_id).resolve()),
                "arm_stop_file": str(arm_stop_file(state.bench.root, state.sitting_id).resolve()),
                "bench_path": str(state.bench.path),  # a worker elsewhere runs the pre-flight on its own checkout
                "learned": state.extra.get("learned", []),  # the controller's probes, for workers on its machine
                "host": socket.gethostname(),
                "identity": identity(state.bench.root),  # a worker runs nothing on another plugin or commit
            }
        self._refuse_a_python_without_the_plugin(node)
        node.workerinput[WORKER_PLAN_KEY] = self.worker_plan

    def _refuse_a_python_without_the_plugin(self, node: Any) -> None:
        """Ask a far Python (another interpreter or checkout) what it has before xdist starts its worker
        there: without the plugin, the worker could only fail on whatever import comes first."""
        from ..gateway_check import PROBE_SOURCE, probe_problem
        from ..remote import gateway_label

        spec = node.gateway.spec
        if spec.popen and not spec.python and not spec.chdir:
            return  # this very Python, in this checkout
        found = node.gateway.remote_exec(PROBE_SOURCE).receive(timeout=120)
        problem = probe_problem(found, self.worker_plan["identity"], checkout=found.get("cwd"))
        if problem:
            pytest.exit(
                f"benchcell: gateway {gateway_label(node.gateway.id, str(spec))} cannot run trials: {problem}; the "
                f"sitting stops (no trial ran there)", returncode=pytest.ExitCode.USAGE_ERROR,
            )  # fmt: skip

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from ..remote import SAMPLE_ATTRIBUTE, TRANSCRIPT_ATTRIBUTE
        from ..store import StoreError

        line = getattr(report, SAMPLE_ATTRIBUTE, None)
        payload = getattr(report, TRANSCRIPT_ATTRIBUTE, None)
        node = getattr(report, "node", None)
        spool = getattr(report, "benchcell_spool", None)
        if node is not None and spool:
            self.spools[node.gateway.id] = (str(node.gateway.spec), spool)
        if line is None or self.receiver is None:
            return
        try:
            self.receiver.take(line, payload)
        except StoreError as exc:
            pytest.exit(
                f"benchcell: {exc}; the sitting stops (the worker's spool keeps the sample: benchcell merge "
                f"{spool} --into {self.state.store.root})", returncode=pytest.ExitCode.INTERNAL_ERROR,
            )  # fmt: skip

    @pytest.hookimpl(tryfirst=True)  # before xdist prints the worker's whole traceback
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from ..remote import SPOOL_OUTPUT, UNSENT_OUTPUT, gateway_label, refusal_cause

        gateway = f"gateway {gateway_label(node.gateway.id, str(node.gateway.spec))}"
        if error is not None and getattr(node, "workerinfo", None) is None:
            # It went down before it could collect (its bench, a mismatch, no CLI): a replacement would
            # fail the same way, so the sitting stops here instead of xdist restarting it forever.
            pytest.exit(
                f"benchcell: {gateway} cannot run trials: {refusal_cause(str(error))}; the sitting stops (no "
                f"trial ran there; the numbers reserved for this sitting stay unused)",
                returncode=pytest.ExitCode.USAGE_ERROR,
            )
        output = getattr(node, "workeroutput", None) or {}
        if output.get(SPOOL_OUTPUT):
            self.spools[node.gateway.id] = (str(node.gateway.spec), output[SPOOL_OUTPUT])
        for line, payload in output.get(UNSENT_OUTPUT, ()):  # trials an interrupt ended: no report carried them
            if self.receiver is not None:
                self.receiver.take(line, payload)
        if node.gateway.id in self.spools and self.receiver is not None:
            self._settle_through_the_gateway(node)

    def _settle_through_the_gateway(self, node: Any) -> None:
        """Every report of this worker has been taken: its own Python (on its machine) removes its spool
        if the store holds everything in it; else the spool stays, and the summary names it."""
        from ..remote import SETTLE_SOURCE

        spec, spool = self.spools[node.gateway.id]
        receiver = self.receiver
        try:
            node.channel.waitclose(timeout=30)  # the worker's own code has returned: its Python is free
            channel = node.gateway.remote_exec(SETTLE_SOURCE)
            channel.send([spool, receiver.model_kind, sorted(receiver.received), sorted(receiver.kept)])
            left = channel.receive(timeout=120)
        except Exception as exc:  # noqa: BLE001 - a gateway that went away: the summary names its spool
            left = f"its worker's Python did not answer ({type(exc).__name__}: {exc})"
        if left is None:
            self.settled.add(node.gateway.id)
        else:
            self.unsettled[node.gateway.id] = left

    def tell_workers_to_stop(self, reason: str) -> None:
        """Workers on this machine see the stop file before their next trial (remote.stop_file); a
        worker elsewhere stops by the same rule applied to its own trials, or once xdist shuts it down.
        Written whole under another name, then renamed: a worker that read it half-written (empty)
        would stop without the reason, and the sitting's summary would not say why."""
        import os

        from ..remote import stop_file

        path = stop_file(self.state.bench.root, self.state.sitting_id)
        partial = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(reason, encoding="utf-8")
            os.replace(partial, path)
        except OSError:  # the workers stop after the trials already handed to them
            partial.unlink(missing_ok=True)

    def tell_workers_arm_stopped(self, stopped: dict[str, str]) -> None:
        """Workers on this machine read which arms are stopped before each trial (remote.arm_stop_file);
        written whole under another name, then renamed, so a worker never reads half of it."""
        import os

        from ..arm_stops import arm_stops_text
        from ..remote import arm_stop_file

        path = arm_stop_file(self.state.bench.root, self.state.sitting_id)
        partial = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(arm_stops_text(stopped), encoding="utf-8")
            os.replace(partial, path)
        except OSError:  # a worker stops the arm by its own count of the trials it ran
            partial.unlink(missing_ok=True)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Spools on this machine whose samples are all stored go; any other is named with the merge
        that takes it in."""
        from ..remote import arm_stop_file, gateway_label, remove_settled_spool, stop_file

        stop_file(self.state.bench.root, self.state.sitting_id).unlink(missing_ok=True)
        arm_stop_file(self.state.bench.root, self.state.sitting_id).unlink(missing_ok=True)
        if self.receiver is None:
            return
        notes = self.state.extra.setdefault("notes", [])
        for gateway_id, (spec, path) in sorted(self.spools.items()):
            if gateway_id in self.settled:
                continue
            gateway = gateway_label(gateway_id, spec)
            spool = Path(path)
            if spool.is_dir() and self.receiver.spool_settled(spool):
                remove_settled_spool(spool)
            elif spool.is_dir():
                merge = f"benchcell merge {spool} --into {self.state.store.root}"
                notes.append(f"the spool of {gateway} holds samples this store lacks: {merge}")
            else:
                why = self.unsettled.get(gateway_id, "it was not reached")
                notes.append(
                    f"the spool of {gateway} stays on its machine ({why}): {spool}; copy it here and run "
                    f"benchcell merge COPY --into {self.state.store.root}"
                )


class _XdistWorker:
    """A worker's side: each stored sample rides on its trial's call report to the controller."""

    def __init__(self, state: SittingState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        # nodeid -> the sample (its store line) and its transcript (bytes or None), until a report carries them
        self.unsent: dict[str, tuple[bytes, bytes | None]] = {}
        controller_store = Path(config.workerinput[WORKER_PLAN_KEY]["store"])  # type: ignore[attr-defined]
        if (state.budget is not None or state.budget_usd is not None) and controller_store.is_dir():
            # The controller's store is in sight (this machine): the budget counts every worker's spend
            # stored so far, plus this worker's own (its spool), each sample once.
            from ..store import StoreSet

            state.extra["spend_in"] = StoreSet([controller_store, state.store.root])
        elif state.budget is not None:
            # Out of sight (another machine): each worker keeps to its share, so the sitting stays within.
            state.budget = max(1, state.budget // int(config.workerinput.get("workercount", 1)))  # type: ignore[attr-defined]
        if state.budget_usd is not None and not controller_store.is_dir():
            state.budget_usd = state.budget_usd / int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]

    def stop_requested(self) -> str | None:
        """The controller's reason to stop the sitting, when its stop file is in sight (this machine)."""
        path = self.config.workerinput[WORKER_PLAN_KEY].get("stop_file")  # type: ignore[attr-defined]
        try:
            return Path(path).read_text(encoding="utf-8") or "stopped" if path else None
        except OSError:
            return None

    def arm_stop_requested(self, arm: str) -> str | None:
        """Why the controller stopped this arm (arm_stops.py), when its file is in sight (this machine)."""
        from ..arm_stops import arm_stops_read

        path = self.config.workerinput[WORKER_PLAN_KEY].get("arm_stop_file")  # type: ignore[attr-defined]
        try:
            return arm_stops_read(Path(path).read_text(encoding="utf-8")).get(arm) if path else None
        except OSError:
            return None

    def record(self, nodeid: str, sample: dict[str, Any]) -> None:
        spool = self.state.store
        self.unsent[nodeid] = (spool.line_of(sample), spool.transcript_of(sample))  # type: ignore[attr-defined]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        from ..remote import SAMPLE_ATTRIBUTE, TRANSCRIPT_ATTRIBUTE

        outcome = yield
        report = outcome.get_result()
        unsent = self.unsent.pop(item.nodeid, None)
        if unsent is not None:
            setattr(report, SAMPLE_ATTRIBUTE, unsent[0])
            setattr(report, TRANSCRIPT_ATTRIBUTE, unsent[1])
        report.benchcell_spool = str(self.state.store.root)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from ..remote import SPOOL_OUTPUT, UNSENT_OUTPUT

        output = self.config.workeroutput  # type: ignore[attr-defined]
        output[UNSENT_OUTPUT] = [list(unsent) for unsent in self.unsent.values()]
        output[SPOOL_OUTPUT] = str(self.state.store.root)
