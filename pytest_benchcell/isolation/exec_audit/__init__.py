"""The execution audit: what programs actually ran, independent of the guard and of the transcript.

The guard reads the command line and the tool audit re-reads the tool calls; both see what was
typed. An allowed program can still start others (a git alias, `git difftool -x`, a pager, a hook),
and a write to a file the CLI sources later runs code on the next command. So every Bash command
of a trial runs under a tracer that records each program executed in its process tree, and after
the run the records are checked against the arm's execution policy.

How it runs. The Claude Code CLI honours `CLAUDE_CODE_SHELL_PREFIX`: it starts each Bash command
as `PREFIX "<the whole wrapped command>"` (one argument: it sources the CLI's shell snapshot, then
evals the command). The prefix written here runs `bash -c "$1"` under a watcher, one log per
command: a trial's commands under the exec notifier where it can be built and works here
(notifier.py: the plugin's own program, which the kernel hands each execve, execveat, connect and
exit_group through a seccomp user-notification listener and which writes them in strace's syntax,
so nothing stops at a fork or an exit; the learned helpers' probes too), else, and for the
pre-flight's traced runs (which trace opens as well), `strace -f -e trace=execve,...`, in a per-trial folder that is outside the agent's working
directory and the environment's workdir (the only places the guard lets the agent write). strace's
seccomp-bpf filter (`--seccomp-bpf`, used when the installed strace supports it) stops the tracee
only at the traced calls, so the cost is a few milliseconds per command (benchmarks/exec_audit_cost.py).
A launcher may stand between strace and the shell: the trial's sandbox, `bwrap ... bash -c CMD`
(isolation/sandbox/prefix.py writes that prefix around `trace_command()`, with strace itself started
by nsenter in the trial's network namespace and by unshare in a pid namespace of its own, the
notifier before nsenter with the host's pids; `ExecAudit(launcher=...)` writes one itself), its
programs named in `wrappers`.
`--pidns-translation` makes strace print, for a fork inside the sandbox's own pid namespace, the
child's pid as the log knows it (read from the small /proc of strace's own pid namespace).

What the records show. Each successful execve (path, argv) with the process that ran it; fork,
vfork and clone give the parent (the notifier writes a clone line for each process when it first
sees it, its parent read from /proc). The chain of a record is the programs above it: the image its
process replaced (exec keeps the pid), else the image its parent process had when it forked. The
CLI's own wrapping (sourcing the snapshot, `eval`, `pwd -P`) uses shell builtins only and runs no
program, so nothing needs filtering: the first record of each log is the shell itself, or the
launcher's programs and then the shell.

What a program could not reach. Where this strace knows them, connect (in a trial) or open, openat
and connect (the pre-flight's traced runs, `ExecAudit(opens=True)`) are traced too (`ACCESS_CALLS`;
the log then holds the successful ones as well, since strace filters by result for every call or
none). Each command runs on one CPU with its strace (`ExecAudit.pin_line`): a stop then costs a task
switch, not a wake-up of another CPU. `parse_strace` keeps each with the program its process ran at the time,
and how each process ended; `program_failures` picks the failed ones of the arm's own programs whose
binary then ended in failure, and a judge (isolation/blocked.py) keeps those the sandbox caused: the
sample's `sandbox_blocked`. They never make a trial invalid. A lookup that is not an open (Python
finds a module with `stat`) leaves no failed call: `failed_runs` gives the runs of the arm's binaries
that ended in failure, and the same judge reads each one's output for what it could not find
(isolation/missing_paths.py), which costs nothing while the trial runs.

What a program is. A record is a program when its file is one of the program's files and it ran
under one of the program's names (`is_program`). The file: the same real path (symlinks and the
alternatives system resolved on both sides), the same inode (a hard link), or the same bytes (the
copy a program's own installation keeps: `git commit` runs `/usr/lib/git-core/git maintenance`,
byte for byte the /usr/bin/git the arm named). Not the rest of the installation folder: git's
exec-path also holds scripts (git-difftool--helper, git-mergetool) that run what they are given.
The names: the arm's name and the file names of the program's files (awk, and mawk behind the
alternatives link), in both the path executed and argv[0], since a multi-call binary (busybox, a
single-binary coreutils) is another program under each name.

The policy (ExecPolicy). A record is allowed when it is
- one of the launcher's programs (`wrappers`, by real path) with only launchers above it, then
  the shell the prefix started, with only launchers above it (the root of the command's tree);
- one of the arm's binaries: the curated wrapper the harness put on PATH or the real program it
  starts (as above, by what its file is);
- a harmless utility: the file the harness linked;
- a helper of a binary above it in the chain: declared by the arm (`helpers = { git = [...] }`,
  matched by name), or learned (matched by real path or inode): what the binary's own start-up
  ran when `BINARY --version`, or the arm's `probe` command for it, was traced once per sitting
  with the binary's PATH: a script's interpreter, a `#!/bin/sh` wrapper's readlink and python3,
  and the bash, pyenv and readlink a version manager's python3 shim runs first.
Anything else makes the trial invalid, stored with its program, argv and parent chain. A git
alias, pager or external diff runs sh or touch, which git's start-up never runs: still caught.

Limits. strace sees execve, not what a program does without starting one (a shell redirection, a
network connection, a library loaded into an allowed program). The logs are files the agent's user
could write; the guard refuses writes outside the working directory and the environment's workdir,
a program that ran is logged before its first instruction, and a removed log (fewer logs than Bash
commands that completed) or a cut one (without its own shell's record) is reported, but a log
rewritten whole by a foreign program that already ran is not noticed. A learned helper is allowed
below its binary whatever its arguments: a binary whose start-up runs a shell lets that shell run
below it (a python3 behind a pyenv shim brings bash).

The modules, lower ones never importing higher ones: `strace_log` (parsing a log) <- `notifier`
(building and checking the exec notifier) <- `tracer` (is strace usable here, one traced run) <- `policy` (the policy, the check, the learned helpers) <-
`failures` (what the arm's programs could not reach) <- `audit` (one trial's prefix, logs, report).
"""

from __future__ import annotations

from .audit import BLOCKED_LIMIT, LOG_BYTE_LIMIT, LOG_COUNT_LIMIT, LOG_TOTAL_LIMIT, ExecAudit, ExecReport, start_probes
from .failures import FailedRun, FailureJudge, ProgramFailure, failed_runs, program_failures
from .policy import CLI_EMBEDDED_TOOLS, ExecLeak, ExecPolicy, check_records, is_program, learned_helpers, learned_so_far, teach
from .strace_log import Access, ExecRecord, StraceLog, parse_strace, parse_strace_log
from .tracer import (
    ACCESS_CALLS,
    CALIBRATION_TIMEOUT_S,
    INSTALL_HINT,
    MAX_STRING,
    STRACE_OPTIONS,
    TRACED_CALLS,
    Tracer,
    audit_state,
    find_tracer,
)

__all__ = [
    "INSTALL_HINT",
    "Tracer",
    "ExecRecord",
    "ExecLeak",
    "ExecPolicy",
    "find_tracer",
    "parse_strace_log",
    "parse_strace",
    "Access",
    "StraceLog",
    "check_records",
    "learned_helpers",
    "learned_so_far",
    "teach",
    "is_program",
    "ExecAudit",
    "start_probes",
    "ExecReport",
    "ProgramFailure",
    "program_failures",
    "FailedRun",
    "failed_runs",
    "FailureJudge",
    "audit_state",
    "ACCESS_CALLS",
    "TRACED_CALLS",
    "MAX_STRING",
    "STRACE_OPTIONS",
    "CALIBRATION_TIMEOUT_S",
    "CLI_EMBEDDED_TOOLS",
    "LOG_BYTE_LIMIT",
    "LOG_COUNT_LIMIT",
    "LOG_TOTAL_LIMIT",
    "BLOCKED_LIMIT",
]
