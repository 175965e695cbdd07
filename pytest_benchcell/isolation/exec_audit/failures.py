"""What the arm's own programs could not reach: the failed opens, connects and execs of its
binaries (or of what they started) whose binary then ended in failure, for the judge in
isolation/blocked.py (the sample's `sandbox_blocked`; never a reason to make a trial invalid)."""

from __future__ import annotations

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
