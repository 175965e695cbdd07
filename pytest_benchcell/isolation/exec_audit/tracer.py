"""The tracer: whether strace is installed and may trace child processes here, its options, and
one traced run (the pre-flight's calibration and the learned helpers' probe)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .notifier import find_notifier
from .strace_log import ExecRecord, parse_strace_log

INSTALL_HINT = (
    "install strace (Debian/Ubuntu: apt-get install strace; Fedora: dnf install strace; Arch: pacman -S "
    "strace); the execution audit needs Linux and a strace that may trace child processes"
)
# The calls that show programs and their parents. execve/execveat: a program starts; fork, vfork,
# clone, clone3: a process starts (its parent). Everything else runs untraced under seccomp-bpf.
TRACED_CALLS = "execve,execveat,fork,vfork,clone,clone3"
# The calls that show what a program could not reach (a file the sandbox hides, an endpoint it
# refuses): traced too where this strace knows them. strace filters by status for every call or
# none, so successful opens are logged as well; stat and access calls are left out (the commonest
# calls, and a missing module or file is also met as a failing open). Opens are most of what a
# program's start-up calls (a Python CLI behind a version-manager shim: 1,500), each a stop of the
# tracee: only the pre-flight, which asks why a program fails in the sandbox, traces them; a trial
# traces connects (few) and reads what a failed program could not find from its output.
OPEN_CALLS = "open,openat"
CONNECT_CALLS = "connect"
ACCESS_CALLS = f"{OPEN_CALLS},{CONNECT_CALLS}"
MAX_STRING = 65536  # strace's -s: strings (and the number of argv entries) printed before "..."
STRACE_OPTIONS = ("-f", "-q", "-e", "signal=none", "-s", str(MAX_STRING))
CALIBRATION_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Tracer:
    available: bool
    program: str = ""  # the strace executable
    version: str = ""
    seccomp_bpf: bool = False  # whether --seccomp-bpf works here
    reason: str = ""  # why the audit cannot run ("" when available)
    # whether --pidns-translation works here: a fork inside a sandbox's own pid namespace returns
    # the child's pid there; strace then adds the pid the log uses, which ties the child to its parent
    pidns_translation: bool = False
    accesses: bool = False  # whether ACCESS_CALLS are traced too (what programs could not open or reach)
    taskset: str = ""  # util-linux's taskset, which keeps a command and its tracer on one CPU ("" when absent)
    # the exec notifier (notifier.py) that watches a trial's commands in strace's place ("" when not
    # available here: strace watches them)
    notifier: str = ""

    def options(self, opens: bool = True) -> tuple[str, ...]:
        """strace's options; `opens`: the opens as well as the connects (where this strace traces accesses)."""
        accesses = ACCESS_CALLS if opens else CONNECT_CALLS
        calls = f"{TRACED_CALLS},{accesses}" if self.accesses else TRACED_CALLS
        return (
            *STRACE_OPTIONS,
            "-e",
            f"trace={calls}",
            *(("--seccomp-bpf",) if self.seccomp_bpf else ()),
            *(("--pidns-translation",) if self.pidns_translation else ()),
        )

    def on_this_cpu(self) -> list[str]:
        """`taskset -c CPU`, the CPU this process runs on, for a traced run (ExecAudit.pin_line says
        why); [] without taskset."""
        return _on_this_cpu(self.taskset) if self.taskset else []

    def describe(self) -> str:
        """One line for the pytest header and the sample's provenance."""
        if not self.available:
            return f"off ({self.reason})"
        strace = f"strace {self.version}{', seccomp-bpf' if self.seccomp_bpf else ''}"
        watched = f"exec notifier and {strace}" if self.notifier else strace
        return f"on ({watched}{', one CPU per command' if self.taskset else ''})"


@functools.lru_cache(maxsize=1)
def find_tracer() -> Tracer:
    """Whether strace is installed and may trace children here (checked once per process)."""
    if not sys.platform.startswith("linux"):
        return Tracer(False, reason=f"not on Linux ({sys.platform}); the audit needs strace")
    program = shutil.which("strace")
    if program is None:
        return Tracer(False, reason="strace is not installed")
    version = _strace_version(program)
    taskset = _working_taskset()
    for seccomp in (True, False):
        for pidns in (True, False):
            for accesses in (True, False):
                tracer = Tracer(True, program, version, seccomp, pidns_translation=pidns, accesses=accesses, taskset=taskset)
                if _trace_works(tracer):
                    watched = replace(tracer, notifier=find_notifier()[0])  # a trial's commands under the notifier
                    return watched if watched.notifier and _trace_works(watched, opens=False) else tracer
    return Tracer(False, program, version, reason=f"{program} cannot trace processes here (ptrace not permitted?)")


def _working_taskset() -> str:
    """util-linux's taskset where it may set a program's CPU here (a container may refuse it), else ""."""
    found = shutil.which("taskset")
    if found is None:
        return ""
    taskset = os.path.realpath(found)
    try:
        done = subprocess.run([*_on_this_cpu(taskset), shutil.which("true") or "/bin/true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return taskset if done.returncode == 0 else ""


def _on_this_cpu(taskset: str) -> list[str]:
    """`TASKSET -c CPU`, CPU being the one this process runs on (field 39 of /proc/self/stat,
    counted after the command's name)."""
    with open("/proc/self/stat") as stat:
        return [taskset, "-c", stat.read().rsplit(")", 1)[1].split()[36]]


def audit_state(mode: str, *, watches_bash: bool, no_bash: str, one_cpu: bool = True) -> Tracer:
    """Whether the execution audit runs: the tracer, or why not. `mode` is [bench] exec_audit;
    `watches_bash`: whether there is a Bash tool to watch (`no_bash` says why not, for the header or
    the sample); `one_cpu`: [bench] exec_audit_cpus = "one" (the tracer keeps its taskset), else
    commands may use every CPU. One answer for the sitting's header and refusal and for each trial's
    provenance."""
    if mode == "off":
        return Tracer(False, reason='[bench] exec_audit = "off"')
    if not watches_bash:
        return Tracer(False, reason=no_bash)
    tracer = find_tracer()
    return tracer if one_cpu else replace(tracer, taskset="")


def _strace_version(program: str) -> str:
    try:
        first = subprocess.run([program, "-V"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"version\s+(\S+)", first[0]) if first else None
    return match.group(1) if match else "unknown"


def _trace_works(tracer: Tracer, opens: bool = True) -> bool:
    """Trace `sh -c 'true; true'` and check both the shell and its child were recorded; without
    `opens`, under the tracer's exec notifier (`_trace`)."""
    true = shutil.which("true") or "/bin/true"
    # With the opens: the pre-flight's traced runs name them, and a strace that does not know one
    # (arm64 has no `open`) must fall back to tracing program starts only.
    traced = _trace(tracer, ["/bin/sh", "-c", f"{true}; {true}"], timeout=10, opens=opens)
    if traced is None or traced[0] != 0:
        return False
    records = traced[1]
    return [Path(record.path).name for record in records[1:]] == ["true", "true"] and records[2].parent == 0


def _trace(
    tracer: Tracer,
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    opens: bool = False,
) -> tuple[int, list[ExecRecord]] | None:
    """Run argv once under the tracer, on one CPU with it as a trial's commands run, its opens traced
    too with `opens`: (exit status, records), or None when it could not run or left no log. Without
    the opens, under the exec notifier where it works here (what a trial's commands run under)."""
    with tempfile.TemporaryDirectory(prefix="benchcell-tracer-") as folder:
        log = Path(folder) / "log"
        if tracer.notifier and not opens:
            command = [tracer.notifier, *(["-c"] if tracer.taskset else []), "-o", str(log), "--", *argv]
        else:
            command = [*tracer.on_this_cpu(), tracer.program, *tracer.options(opens=opens), "-o", str(log), *argv]
        try:
            done = subprocess.run(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return None
        if not log.exists():
            return None
        return done.returncode, parse_strace_log(log.read_text(errors="replace"))
