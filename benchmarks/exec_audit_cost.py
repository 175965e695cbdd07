"""What does the execution audit add to one Bash command? Target: <= 30 ms per command.

    .venv/bin/python benchmarks/exec_audit_cost.py [--runs 20]

Each command is wrapped the way the Claude Code CLI wraps it (source the shell snapshot, `eval
'<command>'`, record the cwd) and run three ways, alternating so drift of this shared machine
lands on all of them:

- bare:     `bash -c WRAPPED`, what the CLI runs without a prefix;
- audited:  the trial's prefix (isolation.exec_audit.ExecAudit): strace -f with --seccomp-bpf when
            the installed strace supports it, one log per command; it traces program starts and the
            opens and connects that show what a program could not reach (ACCESS_CALLS);
- execs:    the same tracing program starts only (the audit before it watched opens and connects):
            what watching them costs is audited minus execs;
- ptrace:   the audited prefix without --seccomp-bpf (strace stops at every system call), for comparison;
- lookups:  the audited prefix also tracing the stat and access calls (LOOKUP_CALLS), which is how a
            Python import or a Node require looks for a file: what watching every program's lookups
            would cost is lookups minus audited. The audit reads a failed run's output instead
            (isolation/missing_paths.py); what that costs per failed run is timed at the end, on this
            checkout as the bench folder (a traceback naming a module, a Node error naming a require).

The check after the run (parse the log, judge every record against the arm's policy) is timed
separately and added. Commands: a pipeline of utilities, git status in a small repository (git
starts no helper here), and a python script binary through `#!/usr/bin/env python3`: once as PATH
finds python3 (on this machine a pyenv shim that starts about forty programs before the
interpreter), once with the interpreter's own folder first on PATH.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import harness

from pytest_benchcell.isolation.blocked import Mounts, SandboxView
from pytest_benchcell.isolation.exec_audit import ExecAudit, ExecPolicy, FailedRun, Tracer, check_records, find_tracer
from pytest_benchcell.isolation.exec_audit.tracer import ACCESS_CALLS

TARGET_MS = 30.0
REAL_PYTHON = os.path.dirname(os.path.realpath(sys.executable))  # the interpreter itself, no shim
COMMANDS = {
    "pipeline": "printf 'b\\na\\nb\\n' | sort | uniq -c | wc -l",
    "git status": "git status --short",
    "python script": "./tool hello",
    "python, no shim": f"PATH={REAL_PYTHON}:$PATH ./tool hello",
}


LOOKUP_CALLS = "stat,lstat,newfstatat,statx,access,faccessat,faccessat2"


class LookupTracer(Tracer):
    """The audit's tracer, also tracing the lookups (stat and access calls) of every program."""

    def options(self) -> tuple[str, ...]:
        options = list(super().options())
        at = options.index(next(option for option in options if option.startswith("trace=")))
        options[at] = options[at].replace(ACCESS_CALLS, f"{ACCESS_CALLS},{LOOKUP_CALLS}")
        return tuple(options)


def output_reading_ms(rounds: int = 200) -> dict[str, float]:
    """Median ms to read one failed run's output for what it could not find, this checkout as the bench."""
    root = str(Path(__file__).resolve().parent.parent)
    view = SandboxView("cli", Mounts(((root, False),)), root, (), "/nowhere", "/nowhere/trial", ())
    outputs = {
        "python import": "Traceback (most recent call last):\n  File \"/b/bin/tool\", line 5, in <module>\n    import tracker\n"
        "ModuleNotFoundError: No module named 'tracker'",
        "node require": f"Error: Cannot find module '../tracker/__init__'\nRequire stack:\n- {root}/bench/bin/tool\n"
        + "    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)\n" * 10,
        "nothing named": "error: unknown command frobnicate\n" + "usage: tool list\n" * 20,
    }
    found = {}
    for name, output in outputs.items():
        run = FailedRun("tool", f"{root}/bench/bin/tool", "exited with 1", "tool x", "1.log")
        calls = [{"tool": "Bash", "input": {"command": "tool x"}, "output": output}]
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            view.judge_runs([run], calls, [])
            times.append(time.perf_counter() - started)
        found[name] = statistics.median(times) * 1000
    return found


def _calls_in_last_log(audit: ExecAudit) -> int:
    """The system calls strace logged for the last command (each one a stop of the traced program)."""
    logs = sorted(audit.logs.glob("*.log"), key=lambda path: (len(path.name), path.name))
    return sum(1 for line in logs[-1].read_text(errors="replace").splitlines() if "(" in line) if logs else 0


def wrapped(command: str, folder: Path) -> str:
    snapshot = folder / "snapshot.sh"
    quoted = "'" + command.replace("'", "'\"'\"'") + "'"
    return (
        f"source {snapshot} 2>/dev/null || true && eval {quoted} < /dev/null && pwd -P >| {folder}/cwd"
    )


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    args = harness.parser(__doc__, runs=20).parse_args()
    tracer = find_tracer()
    if not tracer.available:
        print(f"the execution audit cannot run here: {tracer.reason}")
        return 1
    bash = os.path.realpath(shutil.which("bash") or "/bin/bash")
    scratch = Path(tempfile.mkdtemp(prefix="exec-audit-bench-"))
    try:
        work = scratch / "work"
        work.mkdir()
        (scratch / "snapshot.sh").write_text("export BENCH_SNAPSHOT=1\n")
        tool = work / "tool"
        tool.write_text("#!/usr/bin/env python3\nimport sys\nprint(' '.join(sys.argv[1:]))\n")
        tool.chmod(0o755)
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        audited = ExecAudit(scratch / "audited", tracer)
        execs = ExecAudit(scratch / "execs", replace(tracer, accesses=False))
        ptrace = ExecAudit(scratch / "ptrace", replace(tracer, seccomp_bpf=False))
        lookups = ExecAudit(scratch / "lookups", LookupTracer(**{f: getattr(tracer, f) for f in tracer.__dataclass_fields__}))
        policy = ExecPolicy("bench", audited.shell, {}, {}, {})
        print(f"strace {tracer.version}, seccomp-bpf {'on' if tracer.seccomp_bpf else 'not supported'}; "
              f"{args.runs} runs per way, medians")  # fmt: skip
        print(f"strace traces opens and connects too: {'yes' if tracer.accesses else 'no (not supported here)'}")
        print(f"{'command':<15} {'bare':>8} {'audited':>9} {'execs':>8} {'ptrace':>8} {'check':>7} {'records':>8} "
              f"{'audit cost':>11} {'of it opens':>12} {'lookups':>9} {'+lookups':>9} {'calls traced':>14}")  # fmt: skip
        worst = 0.0
        for name, command in COMMANDS.items():
            line = wrapped(command, scratch)
            times: dict[str, list[float]] = {"bare": [], "audited": [], "execs": [], "ptrace": [], "lookups": []}
            for _ in range(args.runs + 1):  # the first round warms caches and is dropped
                for way, argv in (
                    ("bare", [bash, "-c", line]),
                    ("audited", [str(audited.prefix), line]),
                    ("execs", [str(execs.prefix), line]),
                    ("ptrace", [str(ptrace.prefix), line]),
                    ("lookups", [str(lookups.prefix), line]),
                ):
                    times[way].append(timed(argv, work))
            traced_calls = {way: _calls_in_last_log(audit) for way, audit in (("audited", audited), ("lookups", lookups))}
            logs = audited.records()
            started = time.perf_counter()
            for records in logs:
                check_records(records, policy)
            check = (time.perf_counter() - started) / len(logs)
            median = {way: statistics.median(values[1:]) * 1000 for way, values in times.items()}
            cost = median["audited"] - median["bare"] + check * 1000
            worst = max(worst, cost)
            print(
                f"{name:<15} {median['bare']:>6.1f}ms {median['audited']:>7.1f}ms {median['execs']:>6.1f}ms "
                f"{median['ptrace']:>6.1f}ms {check * 1000:>5.2f}ms {len(logs[-1]):>8} {cost:>9.1f}ms "
                f"{median['audited'] - median['execs']:>10.1f}ms {median['lookups']:>7.1f}ms "
                f"{median['lookups'] - median['audited']:>7.1f}ms {traced_calls['audited']:>6} -> {traced_calls['lookups']:<6}"
            )
            for audit in (audited, execs, ptrace, lookups):
                for log in audit.logs.glob("*.log"):
                    log.unlink()
        reading = output_reading_ms()
        print("reading a failed run's output instead (per failed run of the arm's binary): "
              + ", ".join(f"{name} {ms:.2f} ms" for name, ms in reading.items()))  # fmt: skip
        verdict = "met" if worst <= TARGET_MS else "missed"
        print(f"worst audit cost per command: {worst:.1f} ms (target <= {TARGET_MS:.0f} ms: {verdict})")
        return 0 if worst <= TARGET_MS else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
