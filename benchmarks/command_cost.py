"""Per-command figures of the guards, for benchmarks/guards_cost.py --commands, which runs it with each
Python it measures (`python benchmarks/command_cost.py RUNS LOADED`).

A bare `bash -c COMMAND` against the same through the trial's prefix with the sandbox alone and with
the sandbox under the execution audit (the full prefix as a trial writes it, its log then parsed as the
audit reads it; where the exec notifier watches, the same under strace too, as on a machine without
it), alternating, for `git --version` and the example's `tracker list` against a tracker service started
here (the sandbox's network namespace relays its port, its bench/bin and bench/tracker shown).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from sandbox_cost import _plan  # noqa: E402
from tracker import service  # noqa: E402

from pytest_benchcell.isolation import sandbox  # noqa: E402
from pytest_benchcell.isolation.exec_audit import ExecAudit, find_tracer, parse_strace  # noqa: E402
from pytest_benchcell.isolation.limits import DEFAULT_LIMITS  # noqa: E402

GOALS = {"git --version": ("+", 15.0), "tracker list": ("x", 1.2)}


def _time(argv: list[str], cwd: Path, env: dict[str, str], logs: Path | None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    if logs is not None:  # the audit reads each command's log back: part of its cost
        for log in logs.iterdir():
            parse_strace(log.read_text(errors="replace"))
            log.unlink()
    return (time.perf_counter() - started) * 1000


def measure(runs: int, loaded: bool) -> list[str]:
    tool, tracer = sandbox.find_sandbox(), find_tracer()
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"benchcell-command-cost-{os.getpid()}"
    root.mkdir()
    tracker = service.start(root / "tracker.db")
    network = None
    try:
        tracker.seed()
        plan = _plan(root)
        for name in ("tracker", "issuectl"):
            shutil.copy(ROOT / "bench" / "bin" / name, root / "bench" / "bin" / name)
        shutil.copytree(ROOT / "bench" / "tracker", root / "bench" / "tracker", dirs_exist_ok=True)
        cwd = root / "trial" / "cwd"
        network = sandbox.TrialNetwork(tool, root / "net", [sandbox.Endpoint("127.0.0.1", tracker.port)]).start()
        # As a trial's (confinement.confine): no opens, one CPU; an older checkout has neither choice.
        trial_options = {"opens": False} if "opens" in inspect.signature(ExecAudit).parameters else {}
        audit = ExecAudit(root / "audit", tracer, **trial_options)
        variants = {
            "bare": (None, None),
            "sandbox": (sandbox.write_prefix(root / "p-sandbox", tool, plan, network, limits=DEFAULT_LIMITS), None),
            "audited": (_audited_prefix(root / "p-audit", audit, tool, plan, network), audit.logs),
        }
        if getattr(tracer, "notifier", ""):  # the same under strace, as where the notifier cannot be built
            under_strace = ExecAudit(root / "audit-strace", dataclasses.replace(tracer, notifier=""), **trial_options)
            variants["under strace"] = (_audited_prefix(root / "p-strace", under_strace, tool, plan, network), under_strace.logs)
        env = {**os.environ, "PATH": f"{root / 'bench' / 'bin'}:{os.environ['PATH']}", "TRACKER_URL": tracker.url,
               "TRACKER_TOKEN": tracker.token}  # fmt: skip
        commands = {"git --version": "git --version", "tracker list": "tracker list --state open"}
        load = os.getloadavg()[0]
        lines = []
        for label, command in commands.items():
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(runs):
                for name, (prefix, logs) in variants.items():
                    argv = ["/bin/bash", "-c", command] if prefix is None else [str(prefix), command]
                    times[name].append(_time(argv, cwd, env, logs))
            bare, alone, audited = (statistics.median(times[name]) for name in ("bare", "sandbox", "audited"))
            kind, goal = GOALS[label]
            goal = goal * (2 if loaded else 1)
            met = (audited - bare <= goal) if kind == "+" else (audited / bare <= goal)
            watcher = "exec notifier" if getattr(tracer, "notifier", "") else "strace"
            strace = ""
            if "under strace" in times:
                traced = statistics.median(times["under strace"])
                strace = f"; the same under strace {traced:.1f} ms (+{traced - bare:.1f}, {traced / bare:.2f}x)"
            lines.append(
                f"{label} ({'beside a sitting' if loaded else 'quiet'}, load {load:.1f} -> {os.getloadavg()[0]:.1f}): bare {bare:.1f} ms; "
                f"sandbox {alone:.1f} ms (+{alone - bare:.1f}); sandbox + audit ({watcher}) {audited:.1f} ms (+{audited - bare:.1f}, "
                f"{audited / bare:.2f}x; goal {'+' if kind == '+' else ''}{goal:g}{' ms' if kind == '+' else 'x'}: {'met' if met else 'missed'}){strace}"
            )
            print(lines[-1], flush=True)
        return lines
    finally:
        if network is not None:
            network.stop()
        tracker.stop()
        shutil.rmtree(root, ignore_errors=True)


def _audited_prefix(path: Path, audit: ExecAudit, tool: object, plan: object, network: object) -> Path:
    """The trial's full prefix around this audit's watcher, as confinement.confine writes it (an
    older checkout has no pinning or notifier to ask about)."""
    options: dict[str, object] = {}
    parameters = inspect.signature(sandbox.write_prefix).parameters
    if "pin" in parameters:
        options["pin"] = audit.pin_line()
    if "traced_namespace" in parameters:
        options["traced_namespace"] = not audit.notified
    return sandbox.write_prefix(path, tool, plan, network, trace=audit.trace_command(), shell=audit.shell,  # type: ignore[arg-type]
                                limits=DEFAULT_LIMITS, **options)  # type: ignore[arg-type]  # fmt: skip


if __name__ == "__main__":
    measure(int(sys.argv[1]), loaded=sys.argv[2] == "True")
