"""One trial's audit: the shell prefix that runs each Bash command under strace, reading back its
logs (never through a link, each within a size limit), and the report judged by the arm's policy."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ...leftovers import read_folder
from .failures import FailedRun, FailureJudge, command_of_log, failed_runs, program_failures
from .policy import ExecLeak, ExecPolicy, _chain, _check, _real, _under_wrappers_only, learned_helpers, probe_again, start_learning
from .strace_log import ExecRecord, StraceLog, parse_strace
from .tracer import Tracer

LOG_BYTE_LIMIT = 64 * 1024 * 1024  # one command's log; a larger one is refused (what ran is then unknown)
LOG_COUNT_LIMIT = 10_000  # logs read per trial (one per Bash command: far above any turn cap)
LOG_TOTAL_LIMIT = 512 * 1024 * 1024  # all logs of one trial together


class ExecAudit:
    """Sets up the shell prefix for one trial and reads back what ran."""

    def __init__(
        self,
        folder: Path,
        tracer: Tracer,
        shell: str | None = None,
        launcher: Sequence[str] = (),
        wrappers: Iterable[str] = (),
        *,
        opens: bool = True,
    ) -> None:
        """`launcher`: an argv put between strace and the shell (a sandbox: `nsenter ... -- bwrap ...`);
        `wrappers`: the programs it executes before the shell (names or paths), allowed above the
        shell as the harness's own. `opens`: trace the opens too (the pre-flight's question), not
        only the connects. Each command runs on one CPU with its strace where the tracer has a
        taskset (`pin_line`; audit_state leaves it out for `exec_audit_cpus = "all"`)."""
        self.folder = folder
        self.opens = opens
        self.logs = folder / "logs"
        self.tracer = tracer
        self.shell = os.path.realpath(shell or shutil.which("bash") or "/bin/bash")
        self.wrappers = frozenset(os.path.realpath(shutil.which(program) or program) for program in wrappers)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.prefix = folder / "shell-prefix"
        bash = self.shell
        between = "".join(f"{shlex.quote(part)} " for part in launcher)
        self.prefix.write_text(
            f"#!{bash}\n"
            "# The execution audit (pytest-benchcell): the Claude CLI runs every Bash command as\n"
            '# `PREFIX "<wrapped command>"`; this runs it under strace, one log per command.\n'
            f"{self.pin_line() or 'pin=()'}\n"
            f'exec "${{pin[@]}}" {self.trace_command()} {between}{shlex.quote(bash)} -c "$1"\n'
        )
        self.prefix.chmod(0o755)

    @property
    def notified(self) -> bool:
        """Whether the commands run under the exec notifier (a trial's, where it works here) rather
        than strace (which alone traces the opens the pre-flight asks for)."""
        return bool(self.tracer.notifier) and not self.opens

    def trace_command(self) -> str:
        """The watcher with its options and this command's own log, ending where the command's argv
        goes (a shell fragment: the log's name is computed by the prefix's shell, one per command):
        the exec notifier, which pins itself to the CPU it starts on, or strace."""
        log = f'{shlex.quote(str(self.logs))}/"${{EPOCHREALTIME/[.,]/}}-$$.log"'
        if self.notified:
            return f"{shlex.quote(self.tracer.notifier)}{' -c' * bool(self.tracer.taskset)} -o {log} --"
        strace = " ".join(shlex.quote(part) for part in (self.tracer.program, *self.tracer.options(opens=self.opens)))
        return f"{strace} -o {log}"

    def pin_line(self) -> str:
        """A line for the prefix's shell that sets the array `pin` to `taskset -c CPU`, CPU being the
        one the prefix runs on (field 39 of /proc/PID/stat, counted after the command's name), for the
        prefix to exec through; "" when commands may use every CPU, and under the exec notifier,
        which pins itself (`-c`). strace stops a tracee at each
        traced call and at each program start; with both on one CPU a stop costs a task switch, where
        waking a tracer on another, idle CPU costs far more (a Python CLI behind a version-manager
        shim, in the sandbox: +42 ms over its bare time on one CPU, +158 ms spread; docs/benchmarks.md). The kernel
        picked that CPU for the prefix a moment ago, so concurrent commands spread as they would. The
        price: a command's own threads and processes share that CPU (`[bench] exec_audit_cpus`)."""
        if not self.tracer.taskset or self.notified:
            return ""
        taskset = shlex.quote(self.tracer.taskset)
        return f'pin=(); read -r stat < /proc/$$/stat && stat=(${{stat##*) }}) && pin=({taskset} -c "${{stat[36]}}")'

    def environment(self) -> dict[str, str]:
        return {"CLAUDE_CODE_SHELL_PREFIX": str(self.prefix)}

    def records(self) -> list[list[ExecRecord]]:
        """One list of records per Bash command that ran, in the order the commands started."""
        return [log.records for log in self._read_logs()[0]]

    def logs_read(self) -> list[StraceLog]:
        """One parsed log per Bash command that ran, in the order the commands started."""
        return self._read_logs()[0]

    def _read_logs(self) -> tuple[list[StraceLog], dict[str, str]]:
        """(records per log, {log name: why it was refused}). The logs sit where the agent's user
        could write, so only regular files with one name are read, never through a link, each up to
        LOG_BYTE_LIMIT (leftovers.read_folder): a FIFO or a huge file planted there cannot hang or
        exhaust the harness, a link cannot make it read a file outside."""
        read, refused = read_folder(
            self.logs, suffix=".log", limit=LOG_BYTE_LIMIT, count_limit=LOG_COUNT_LIMIT, total_limit=LOG_TOTAL_LIMIT
        )
        names = sorted(read, key=lambda name: (len(name), name))
        return [parse_strace(read[name].decode(errors="replace"), log=name) for name in names], refused

    def policy(
        self,
        arm: str,
        binaries: Iterable[str],
        declared_helpers: Mapping[str, Iterable[str]],
        bin_dir: Path,
        search_path: str,
        harmless: Iterable[str],
        cli: str | None = None,
        probes: Mapping[str, str] | None = None,
    ) -> ExecPolicy:
        """The arm's execution policy: its binaries as the harness put them on PATH (the curated
        wrapper and the real program), the harmless utilities linked there, each binary's declared
        helpers (names) and learned ones (the real paths its start-up ran: `probes[binary]`, a
        command line starting with the binary, or `BINARY --version`)."""
        programs: dict[str, frozenset[str]] = {}
        learned: dict[str, frozenset[str]] = {}
        for name in binaries:
            real = shutil.which(name, path=search_path)
            real = os.path.realpath(real) if real else None
            programs[name] = frozenset({os.path.realpath(bin_dir / name), *([real] if real else [])})
            learned[name] = learned_helpers(name, _probe_argv(name, probes), search_path, self.tracer)
        helpers = {name: frozenset(programs_) for name, programs_ in declared_helpers.items()}
        linked = {
            name: frozenset({os.path.realpath(bin_dir / name)})
            for name in harmless
            if (bin_dir / name).exists() and name not in programs
        }
        cli_paths = frozenset({os.path.realpath(cli)}) if cli else frozenset()
        return ExecPolicy(arm, self.shell, programs, linked, helpers, cli_paths, learned, self.wrappers)

    def probe_again(self, binaries: Iterable[str], search_path: str, probes: Mapping[str, str] | None = None) -> bool:
        """Learn again the helpers of the binaries this process took second-hand (policy.probe_again);
        True when any was, so the policy is built again."""
        again = [probe_again(name, _probe_argv(name, probes), search_path, self.tracer) for name in binaries]
        return any(again)

    def report(self, policy: ExecPolicy, commands_ran: int = 0, judge: FailureJudge | None = None) -> ExecReport:
        """What ran over every Bash command of the trial, judged by the policy. `commands_ran`: the
        Bash calls the transcript shows completed; fewer logs than that means records went missing.
        `judge` says which failures of the arm's own programs the harness caused (see `program_failures`)."""
        per_command, refused = self._read_logs()
        leaks: list[ExecLeak] = []
        damaged = 0
        blocked: dict[tuple[str, str, str], dict[str, object]] = {}
        runs: list[FailedRun] = []
        commands: dict[str, int] = {}  # command line -> how many logs ran it so far
        for log in per_command:
            records = log.records
            found, allowed_as = _check(records, policy)
            leaks += found
            # Every log starts with the shell the prefix started (below the launchers, where there are
            # any); one without it was cut or rewritten.
            damaged += not any(
                _real(record.path) == policy.shell and _under_wrappers_only(_chain(record, records), policy)
                for record in records
            )
            if judge is not None:
                for failure in program_failures(log, policy, allowed_as):
                    key = (failure.binary, failure.access.call, failure.access.target)
                    if key not in blocked and len(blocked) < BLOCKED_LIMIT:
                        verdict = judge(failure)
                        if verdict is not None:
                            blocked[key] = verdict
                command = command_of_log(log, policy)
                if len(runs) < BLOCKED_LIMIT:
                    failed = failed_runs(log, policy, allowed_as)[: BLOCKED_LIMIT - len(runs)]
                    runs += [replace(run, repeat=commands.get(command, 0)) for run in failed]
                commands[command] = commands.get(command, 0) + 1
        missing = max(0, commands_ran - len(per_command))
        refusals = tuple(f"{name}: {why}" for name, why in sorted(refused.items()))
        programs = sum(len(log.records) for log in per_command)
        return ExecReport(len(per_command), programs, leaks, missing, damaged, refusals, tuple(blocked.values()), tuple(runs))


def start_probes(tracer: Tracer, binaries: Iterable[str], search_path: str, probes: Mapping[str, str] | None = None) -> None:
    """Start learning what each binary's start-up runs (ExecAudit.policy waits for it), so the
    probes run beside the pre-flight or the trial instead of after the trial."""
    for name in binaries:
        start_learning(name, _probe_argv(name, probes), search_path, tracer)


def _probe_argv(binary: str, probes: Mapping[str, str] | None) -> list[str]:
    """The command whose start-up shows a binary's helpers: the arm's `probe`, or `BINARY --version`."""
    return shlex.split((probes or {}).get(binary, "")) or [binary, "--version"]


BLOCKED_LIMIT = 20  # harness-caused failures kept per trial (each distinct program and target once)


@dataclass(frozen=True)
class ExecReport:
    commands: int  # Bash commands the audit recorded
    programs: int  # programs they executed
    leaks: list[ExecLeak]
    missing: int = 0  # Bash commands that completed without a record (a log removed or never written)
    damaged: int = 0  # logs without the record of their own shell (truncated or rewritten)
    refused: tuple[str, ...] = ()  # "name: why" of files in the log folder that were not read (a FIFO, a link...)
    blocked: tuple[dict[str, object], ...] = ()  # the arm's programs' failures the harness caused (the judge's verdicts)
    failed: tuple[FailedRun, ...] = ()  # the runs of the arm's binaries that ended in failure (with a judge only)

    def lines(self) -> list[str]:
        """One line per finding, for the sample's `leaks`."""
        lines = [leak.describe() for leak in self.leaks]
        if self.missing:
            lines.append(
                f"exec records missing: {self.missing} Bash command(s) completed without an execution record "
                "(a log was removed or the prefix did not run), so what they executed is unknown"
            )
        if self.damaged:
            lines.append(
                f"exec records damaged: {self.damaged} command log(s) lack the record of their own shell "
                "(truncated or rewritten while the trial ran), so what ran is not fully known"
            )
        if self.refused:
            shown = "; ".join(self.refused[:3]) + (f" (+{len(self.refused) - 3} more)" if len(self.refused) > 3 else "")
            lines.append(f"exec records refused: {len(self.refused)} file(s) in the log folder were not read ({shown}), so what ran is not fully known")
        return lines

    def as_dict(self) -> dict[str, object]:
        return {
            "commands": self.commands,
            "programs": self.programs,
            "leaks": [leak.as_dict() for leak in self.leaks],
            "missing": self.missing,
            "damaged": self.damaged,
            "refused": list(self.refused),
        }
