"""What does the sandbox add to one Bash command? Target: <= 10 ms per command.

    .venv/bin/python benchmarks/sandbox_cost.py [--runs 40]

Each command is run through a trial's shell prefix (isolation.sandbox.write_prefix) the way the
Claude Code CLI runs it (`PREFIX "<command>"`), alternating so drift of this shared machine lands on
every variant alike:

- bare:       `bash -c COMMAND`, what the CLI runs without a prefix;
- prefix:     the prefix without the sandbox (it only drops the harness's credentials);
- sandbox:    the prefix with the sandbox: the limits set, nsenter into the trial's network
              namespace, bubblewrap with a trial's mounts (about forty: the bench hidden, the arm's
              folders shown, the trial's folders writable, credentials, root's own /etc files and
              the world-writable folders hidden), its own pid namespace, every capability dropped,
              as root a user namespace of its own, and the seccomp filter;
- +audit:     the sandbox under the execution audit's strace (the trial's full prefix);
- unhardened: the sandbox without what issue 24 added (no user namespace, no seccomp filter, no
              limits; capabilities and the extra mounts stay): on a loaded machine, the difference
              to `sandbox` in the same run is the hardening's own cost.

The figures are the medians added to `bare`: the sandbox's (target <= 10 ms) and, beside it, the
sandbox's under the audit. The network namespace and its relays are started once
per trial, not per command: their start-up is printed separately.
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.exec_audit import ExecAudit, find_tracer
from pytest_benchcell.isolation.limits import DEFAULT_LIMITS

TARGET_MS = 10.0
COMMANDS = {"git --version": "git --version", "pipeline": "printf 'b\\na\\nb\\n' | sort | uniq -c | wc -l"}


def _plan(root: Path) -> sandbox.SandboxPlan:
    folders = {name: root / name for name in ("bench", "bench/bin", "bench/tracker", "store", "trial/cwd",
                                              "trial/environment", "trial/environment/service", "trial/bin",
                                              "trial/snapshots", "trial/home")}  # fmt: skip
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    (root / "bench" / "bench.toml").write_text("")
    (root / "bench" / "conftest.py").write_text("")
    return sandbox.SandboxPlan(
        writable=(str(folders["trial/cwd"]), str(folders["trial/environment"])),
        readable=(str(folders["bench/bin"]), str(folders["bench/tracker"]), str(folders["trial/bin"]),
                  str(folders["trial/snapshots"]), sys.prefix),  # fmt: skip
        hidden=(str(folders["bench"]), str(folders["store"]), str(root / "trial"), *sandbox.home_credentials()),
        home=str(folders["trial/home"]),
        never=(str(root / "bench" / "bench.toml"), str(root / "bench" / "conftest.py"), str(folders["trial/environment/service"])),
    )


def _time(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    runs = harness.parser(__doc__, runs=40).parse_args().runs
    tool = sandbox.find_sandbox()
    if not tool.available:
        print(f"the sandbox cannot run here: {tool.reason}")
        return 1
    tracer = find_tracer()
    with tempfile.TemporaryDirectory(prefix="benchcell-sandbox-cost-") as folder:
        root = Path(folder)
        plan = _plan(root)
        cwd = root / "trial" / "cwd"
        (root / "plain").mkdir()
        started = time.perf_counter()
        network = sandbox.TrialNetwork(tool, root / "net", [sandbox.Endpoint("127.0.0.1", 9)]).start()
        network_ms = (time.perf_counter() - started) * 1000
        try:
            variants = {
                "bare": None,
                "prefix": sandbox.write_prefix(root / "p-plain", None, None, None),
                "sandbox": sandbox.write_prefix(root / "p-sandbox", tool, plan, network, limits=DEFAULT_LIMITS),
                "unhardened": sandbox.write_prefix(
                    root / "plain" / "p-unhardened", dataclasses.replace(tool, user_namespace=False, seccomp="off"), plan, network
                ),
            }
            if tracer.available:
                audit = ExecAudit(root / "audit", tracer)
                variants["+audit"] = sandbox.write_prefix(
                    root / "p-audit", tool, plan, network, trace=audit.trace_command(), shell=audit.shell,
                    limits=DEFAULT_LIMITS,
                )
            print(f"sandbox {tool.describe()}; execution audit {tracer.describe()}; {runs} runs per variant")
            print(f"network namespace with one relay, started once per trial: {network_ms:.0f} ms")
            worst = 0.0
            worst_audited = None
            for label, command in COMMANDS.items():
                times: dict[str, list[float]] = {name: [] for name in variants}
                for _ in range(runs):
                    for name, prefix in variants.items():
                        argv = ["/bin/bash", "-c", command] if prefix is None else [str(prefix), command]
                        times[name].append(_time(argv, cwd))
                bare = statistics.median(times["bare"])
                cells = []
                for name, values in times.items():
                    median = statistics.median(values)
                    cells.append(f"{name} {median:.1f} ms" + ("" if name == "bare" else f" (+{median - bare:.1f})"))
                print(f"{label}: " + "; ".join(cells))
                worst = max(worst, statistics.median(times["sandbox"]) - bare)
                if "+audit" in times:
                    worst_audited = max(worst_audited or 0.0, statistics.median(times["+audit"]) - bare)
        finally:
            network.stop()
    verdict = "met" if worst <= TARGET_MS else "missed"
    audited = f"; under the execution audit: at most +{worst_audited:.1f} ms" if worst_audited is not None else ""
    print(f"sandbox per command: at most +{worst:.1f} ms over bare (target <= {TARGET_MS:.0f} ms: {verdict}){audited}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
