"""What the arm's own programs could not reach: the failed opens, connects and execs of its
binaries (or of what they started) whose binary then ended in failure, for the judge in
isolation/blocked.py (the sample's `sandbox_blocked`; never a reason to make a trial invalid); and
the runs of its binaries that ended in failure whatever they failed on (`failed_runs`), whose output
that judge reads for what they could not find (a Python import fails by `stat`, not by an open)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .policy import ExecPolicy, _chain, _check, _display_argv, _real
from .strace_log import Access, ExecRecord, StraceLog


@dataclass(frozen=True)
class ProgramFailure:
    """One of the arm's own programs could not open or reach something, then ended in failure."""

    binary: str  # the arm's binary it ran as, or below
    program: str  # the file the process ran when the call failed
    ended: str  # how the binary's process ended ("exited with 2", "killed by SIGKILL")
    access: Access
    command: str  # the agent's Bash command it ran in


@dataclass(frozen=True)
class FailedRun:
    """One run of the arm's own binary that ended in failure, whatever it failed on: the harness
    reads the command's output for what it could not find (SandboxView.judge_output)."""

    binary: str  # the arm's binary it ran as
    program: str  # the file it ran: the script itself, or what `#!/usr/bin/env` started with the script
    ended: str
    command: str  # the agent's Bash command it ran in
    log: str = ""  # the command's log (one per Bash command): runs of one log share the command's output
    repeat: int = 0  # how many earlier commands of the trial had the same command line (pairs it with its call)


FailureJudge = Callable[[ProgramFailure], "dict[str, object] | None"]


def program_failures(log: StraceLog, policy: ExecPolicy, allowed_as: Mapping[int, str] | None = None) -> list[ProgramFailure]:
    """The failed opens, connects and execs of the arm's binaries (or of what they started) whose
    binary then ended in failure: a call that failed on the way to a success (a PATH search, an
    optional file) is not one."""
    records = log.records
    if allowed_as is None:
        allowed_as = _check(records, policy)[1]
    failures = []
    for access in log.accesses:
        if not access.failed or access.record is None:
            continue
        binary_record = next(
            (record for record in (records[access.record], *_chain(records[access.record], records))
             if allowed_as.get(record.index) in policy.binaries),
            None,
        )  # fmt: skip
        if binary_record is None:
            continue
        ended = log.failed_exit(binary_record.pid)
        if ended is None:
            continue
        failures.append(
            ProgramFailure(
                allowed_as[binary_record.index], records[access.record].path, ended, access, _command_of(records[access.record], records, policy)
            )
        )
    return failures


def _command_of(record: ExecRecord, records: Sequence[ExecRecord], policy: ExecPolicy) -> str:
    """The agent's Bash command a record ran in (its shell's command), or ''."""
    shells = [above for above in (record, *_chain(record, records)) if _real(above.path) not in policy.wrappers]
    argv = _display_argv(shells[-1].argv) if shells else ()
    return argv[2] if len(argv) == 3 and argv[1] == "-c" else ""


def failed_runs(log: StraceLog, policy: ExecPolicy, allowed_as: Mapping[int, str]) -> list[FailedRun]:
    """The runs of the arm's binaries in one command's log that ended in failure, the outermost of
    each (a binary started by another binary of the arm is that one's doing), once per binary."""
    records = log.records
    runs: dict[str, FailedRun] = {}
    for record in records:
        binary = allowed_as.get(record.index)
        if binary is None or binary not in policy.binaries or binary in runs:
            continue
        if any(allowed_as.get(above.index) in policy.binaries for above in _chain(record, records)):
            continue
        ended = log.failed_exit(record.pid)
        if ended is None:
            continue
        runs[binary] = FailedRun(binary, _script_of(record, records), ended, _command_of(record, records, policy), record.log)
    return list(runs.values())


def _script_of(record: ExecRecord, records: Sequence[ExecRecord]) -> str:
    """The file a binary's run is: the real script behind the harness's wrapper of the same name,
    or the script `#!/usr/bin/env node` hands its interpreter (a later program of the same process
    whose path or first argument has the binary's name)."""
    name = os.path.basename(record.path)
    found = record.path
    for other in records:
        if other.pid != record.pid or other.index <= record.index:
            continue
        for candidate in (other.path, *other.argv[1:2]):
            if candidate.startswith("/") and os.path.basename(candidate) == name:
                found = candidate
    return found


def command_of_log(log: StraceLog, policy: ExecPolicy) -> str:
    """The agent's Bash command one log ran ('' when its shell's command line is not the CLI's)."""
    shell = next((record for record in log.records if _real(record.path) == policy.shell), None)
    return _command_of(shell, log.records, policy) if shell is not None else ""
