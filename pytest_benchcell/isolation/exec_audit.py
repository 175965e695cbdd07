"""The execution audit: what programs actually ran, independent of the guard and of the transcript.

The guard reads the command line and the tool audit re-reads the tool calls; both see what was
typed. An allowed program can still start others (a git alias, `git difftool -x`, a pager, a hook),
and a write to a file the CLI sources later runs code on the next command. So every Bash command
of a trial runs under a tracer that records each program executed in its process tree, and after
the run the records are checked against the arm's execution policy.

How it runs. The Claude Code CLI honours `CLAUDE_CODE_SHELL_PREFIX`: it starts each Bash command
as `PREFIX "<the whole wrapped command>"` (one argument: it sources the CLI's shell snapshot, then
evals the command). The prefix written here runs `strace -f -e trace=execve,...` on
`bash -c "$1"`, one log per command, in a per-trial folder that is outside the agent's working
directory and the environment's workdir (the only places the guard lets the agent write). strace's
seccomp-bpf filter (`--seccomp-bpf`, used when the installed strace supports it) stops the tracee
only at the traced calls, so the cost is a few milliseconds per command (benchmarks/exec_audit_cost.py).
A launcher may stand between strace and the shell: the trial's sandbox, `nsenter --net=... -- bwrap
... bash -c CMD` (isolation/sandbox.py writes that prefix around `trace_command()`; `ExecAudit(launcher=
...)` writes one itself), its programs named in `wrappers`. `--pidns-translation` makes strace print,
for a fork inside the sandbox's own pid namespace, the child's pid as the log knows it.

What the records show. Each successful execve (path, argv) with the process that ran it; fork,
vfork and clone give the parent. The chain of a record is the programs above it: the image its
process replaced (exec keeps the pid), else the image its parent process had when it forked. The
CLI's own wrapping (sourcing the snapshot, `eval`, `pwd -P`) uses shell builtins only and runs no
program, so nothing needs filtering: the first record of each log is the shell itself, or the
launcher's programs and then the shell.

What a program could not reach. Where this strace knows them, open, openat and connect are traced
too (`ACCESS_CALLS`; the log then holds the successful ones as well, since strace filters by result
for every call or none). `parse_strace` keeps each with the program its process ran at the time,
and how each process ended; `program_failures` picks the failed ones of the arm's own programs whose
binary then ended in failure, and a judge (isolation/blocked.py) keeps those the sandbox caused: the
sample's `sandbox_blocked`. They never make a trial invalid.

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
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..leftovers import read_folder

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
    "is_program",
    "ExecAudit",
    "ExecReport",
    "ProgramFailure",
    "program_failures",
]

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
# calls, and a missing module or file is also met as a failing open).
ACCESS_CALLS = "open,openat,connect"
MAX_STRING = 65536  # strace's -s: strings (and the number of argv entries) printed before "..."
STRACE_OPTIONS = ("-f", "-q", "-e", "signal=none", "-s", str(MAX_STRING))
CALIBRATION_TIMEOUT_S = 20.0
LOG_BYTE_LIMIT = 64 * 1024 * 1024  # one command's log; a larger one is refused (what ran is then unknown)
LOG_COUNT_LIMIT = 10_000  # logs read per trial (one per Bash command: far above any turn cap)
LOG_TOTAL_LIMIT = 512 * 1024 * 1024  # all logs of one trial together


# --------------------------------------------------------------------------------------------
# The tracer: is the audit available here?
# --------------------------------------------------------------------------------------------


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

    def options(self) -> tuple[str, ...]:
        calls = f"{TRACED_CALLS},{ACCESS_CALLS}" if self.accesses else TRACED_CALLS
        return (
            *STRACE_OPTIONS,
            "-e",
            f"trace={calls}",
            *(("--seccomp-bpf",) if self.seccomp_bpf else ()),
            *(("--pidns-translation",) if self.pidns_translation else ()),
        )

    def describe(self) -> str:
        """One line for the pytest header and the sample's provenance."""
        if not self.available:
            return f"off ({self.reason})"
        return f"on (strace {self.version}{', seccomp-bpf' if self.seccomp_bpf else ''})"


@functools.lru_cache(maxsize=1)
def find_tracer() -> Tracer:
    """Whether strace is installed and may trace children here (checked once per process)."""
    if not sys.platform.startswith("linux"):
        return Tracer(False, reason=f"not on Linux ({sys.platform}); the audit needs strace")
    program = shutil.which("strace")
    if program is None:
        return Tracer(False, reason="strace is not installed")
    version = _strace_version(program)
    for seccomp in (True, False):
        for pidns in (True, False):
            for accesses in (True, False):
                tracer = Tracer(True, program, version, seccomp, pidns_translation=pidns, accesses=accesses)
                if _trace_works(tracer):
                    return tracer
    return Tracer(False, program, version, reason=f"{program} cannot trace processes here (ptrace not permitted?)")


def audit_state(mode: str, *, watches_bash: bool, no_bash: str) -> Tracer:
    """Whether the execution audit runs: the tracer, or why not. `mode` is [bench] exec_audit;
    `watches_bash`: whether there is a Bash tool to watch (`no_bash` says why not, for the header or
    the sample). One answer for the sitting's header and refusal and for each trial's provenance."""
    if mode == "off":
        return Tracer(False, reason='[bench] exec_audit = "off"')
    if not watches_bash:
        return Tracer(False, reason=no_bash)
    return find_tracer()


def _strace_version(program: str) -> str:
    try:
        first = subprocess.run([program, "-V"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"version\s+(\S+)", first[0]) if first else None
    return match.group(1) if match else "unknown"


def _trace_works(tracer: Tracer) -> bool:
    """Trace `sh -c 'true; true'` and check both the shell and its child were recorded."""
    true = shutil.which("true") or "/bin/true"
    traced = _trace(tracer, ["/bin/sh", "-c", f"{true}; {true}"], timeout=10)
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
) -> tuple[int, list[ExecRecord]] | None:
    """Run argv once under the tracer: (exit status, records), or None when it could not run or left no log."""
    with tempfile.TemporaryDirectory(prefix="benchcell-tracer-") as folder:
        log = Path(folder) / "log"
        command = [tracer.program, *tracer.options(), "-o", str(log), *argv]
        try:
            done = subprocess.run(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return None
        if not log.exists():
            return None
        return done.returncode, parse_strace_log(log.read_text(errors="replace"))


# --------------------------------------------------------------------------------------------
# Records: parsing strace's output
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecRecord:
    index: int  # position in its log
    pid: int
    path: str  # the file executed, as passed to execve
    argv: tuple[str, ...]
    parent: int | None  # index of the record above it in the chain (None: the root)
    truncated: bool = False  # strace cut a string or the argv list short
    log: str = ""  # the log it came from


@dataclass(frozen=True)
class Access:
    """One open, connect or failed exec of a traced process: what it tried to reach, and how it went."""

    pid: int
    call: str  # open, openat, connect, execve, execveat
    target: str  # a path as given; for connect HOST:PORT, [ADDRESS]:PORT or unix:PATH
    result: str  # "ok", or the error's name (ENOENT, ECONNREFUSED, EINPROGRESS...)
    record: int | None  # the record of the program the process ran at the call (None: before any)

    @property
    def failed(self) -> bool:
        return self.result != "ok"


@dataclass(frozen=True)
class StraceLog:
    """Everything one command's log holds: the programs, what they opened and reached, how they ended."""

    records: list[ExecRecord]
    accesses: list[Access]
    exits: dict[int, str]  # pid -> "exited with N" / "killed by SIGNAL", as strace said it

    def failed_exit(self, pid: int) -> str | None:
        """How a process ended when that was a failure ("exited with 2", "killed by SIGKILL"), else None."""
        ended = self.exits.get(pid)
        return None if ended is None or ended == "exited with 0" else ended


_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(execve|execveat|fork|vfork|clone|clone3|open|openat|connect)\(")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>")
# The end of a completed call: `) = 3`, `) = -1 ENOENT (No such file or directory)`, `) = ?`
_RESULT = re.compile(r"\)\s+=\s+(-?\d+|\?)(?:\s+(E[A-Z0-9]+)(?:\s+\([^()]*\))?)?")
_EXIT = re.compile(r"^\+\+\+ (exited with \d+|killed by SIG\w+)")
# --pidns-translation: `= 2 /* 30122 in strace's PID NS */`, the child's pid as the log shows it
_TRANSLATED = re.compile(r"/\* (\d+) in strace's PID NS \*/")
_INET = re.compile(r"sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\(\"([0-9.]+)\"\)")
_INET6 = re.compile(r"sa_family=AF_INET6, sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, \"([0-9a-fA-F:.]+)\"")
_UNIX = re.compile(r"sa_family=AF_UNIX, sun_path=(@?)\"")


def parse_strace_log(text: str, log: str = "") -> list[ExecRecord]:
    """Successful program starts from one `strace -f` log, with each one's place in the tree."""
    return parse_strace(text, log).records


def parse_strace(text: str, log: str = "") -> StraceLog:
    """One `strace -f` log: the successful program starts with each one's place in the tree, the
    opens and connects (and failed execs) with the program that made them, and how processes ended.

    Lines of different processes interleave; a call interrupted by another process's output is
    printed as `<unfinished ...>` and completed by a `<... NAME resumed>` line, which is joined here.
    A child's first line can come before its parent's fork returns, so parents are resolved after
    the whole log is read.
    """
    pending: dict[int, str] = {}
    calls: list[tuple[int, str]] = []  # (pid, the whole call text), in order of completion
    exits: dict[int, str] = {}
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match is None:
            continue
        pid, rest = int(match.group(1)), match.group(2)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            rest = pending.pop(pid, f"{resumed.group(1)}(") + rest[resumed.end() :]
        if _CALL.match(rest):
            calls.append((pid, rest))
            continue
        ended = _EXIT.match(rest)
        if ended is not None:
            exits[pid] = ended.group(1)

    # A process cannot exec while its own fork is in progress, so the image a child starts with is
    # its parent's latest image before the fork returned, wherever the child's own lines fall.
    execs: list[tuple[int, int, str, tuple[str, ...], bool]] = []  # (position, pid, path, argv, truncated)
    forks: dict[int, tuple[int, int]] = {}  # child pid -> (parent pid, position of the fork)
    reached: list[tuple[int, int, str, str, str]] = []  # (position, pid, call, target, result)
    for position, (pid, call) in enumerate(calls):
        name = call.split("(", 1)[0]
        result = _outcome(call)
        value = int(result.group(1)) if result and result.group(1) != "?" else -1
        translated = _TRANSLATED.search(call, result.end()) if result else None
        if translated is not None:
            value = int(translated.group(1))
        failure = (result.group(2) or "failed") if result and value < 0 else "ok"
        if name in ("execve", "execveat"):
            parsed = _exec_arguments(call, name)
            if parsed is not None and value == 0:
                execs.append((position, pid, *parsed))
            elif parsed is not None and result is not None:  # a failed exec: a PATH search, or a hidden file
                reached.append((position, pid, name, parsed[0], failure))
        elif name in ("open", "openat", "connect"):
            target = _access_target(call, name)
            if target is not None and result is not None:
                reached.append((position, pid, name, target, failure))
        elif value > 0:
            forks.setdefault(value, (pid, position))
    by_pid: dict[int, list[tuple[int, int]]] = {}  # pid -> [(position, record index)]
    for index, (position, pid, *_rest) in enumerate(execs):
        by_pid.setdefault(pid, []).append((position, index))

    def image_at(pid: int, position: int, depth: int = 0) -> int | None:
        before = [index for at, index in by_pid.get(pid, []) if at < position]
        if before:
            return before[-1]
        fork = forks.get(pid)
        if fork is None or depth > len(calls):
            return None
        return image_at(fork[0], fork[1], depth + 1)

    records = [
        ExecRecord(index, pid, path, argv, image_at(pid, position), truncated, log)
        for index, (position, pid, path, argv, truncated) in enumerate(execs)
    ]
    accesses = [
        Access(pid, name, target, outcome, image_at(pid, position))
        for position, pid, name, target, outcome in reached
    ]
    return StraceLog(records, accesses, exits)


def _outcome(call: str) -> re.Match[str] | None:
    """The call's result (the last `) = ...` of its line: strings before it may hold one too)."""
    last = None
    for last in _RESULT.finditer(call):
        pass
    return last


def _access_target(call: str, name: str) -> str | None:
    """The path an open names (absolute, or relative to its folder), or where a connect goes."""
    at = call.index("(") + 1
    if name == "connect":
        inet = _INET.search(call, at)
        if inet is not None:
            return f"{inet.group(2)}:{inet.group(1)}"
        inet6 = _INET6.search(call, at)
        if inet6 is not None:
            return f"[{inet6.group(2)}]:{inet6.group(1)}"
        unix = _UNIX.search(call, at)
        if unix is not None:
            path, _ = _Reader(call, unix.end() - 1).string()
            return None if path is None else f"unix:{unix.group(1)}{path}"
        return None
    if name == "openat":
        comma = call.find(",", at)
        if comma < 0:
            return None
        folder = call[at:comma].strip()
        at = comma + 1
    else:
        folder = "AT_FDCWD"
    path, _ = _Reader(call, at).string()
    if path is None or (folder != "AT_FDCWD" and not path.startswith("/")):
        return None  # relative to an open folder: where it points is not in the log
    return path


def _exec_arguments(call: str, name: str) -> tuple[str, tuple[str, ...], bool] | None:
    """(path, argv, truncated) from `execve("/p", ["a", "b"], ...)` or `execveat(fd, "p", [...], ...)`."""
    at = call.index("(") + 1
    if name == "execveat":
        comma = call.find(",", at)
        if comma < 0:
            return None
        at = comma + 1
    reader = _Reader(call, at)
    path, truncated = reader.string()
    if path is None:
        return None
    reader.expect(",")
    argv, cut = reader.string_list()
    return path, tuple(argv), truncated or cut


class _Reader:
    """Reads strace's C-like string and array syntax."""

    _ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "\\": "\\", '"': '"'}

    def __init__(self, text: str, at: int) -> None:
        self.text = text
        self.at = at

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] == " ":
            self.at += 1

    def expect(self, char: str) -> None:
        self.skip()
        if self.text.startswith(char, self.at):
            self.at += 1

    def string(self) -> tuple[str | None, bool]:
        self.skip()
        if not self.text.startswith('"', self.at):
            return None, False
        out = bytearray()
        i = self.at + 1
        text = self.text
        while i < len(text) and text[i] != '"':
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                if nxt in "01234567":
                    digits = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
                    assert digits is not None
                    out.append(int(digits.group(0), 8) & 0xFF)
                    i += 1 + len(digits.group(0))
                    continue
                if nxt == "x" and re.match(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
                    out.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                    continue
                out.extend(self._ESCAPES.get(nxt, nxt).encode())
                i += 2
                continue
            out.extend(char.encode())
            i += 1
        self.at = i + 1
        truncated = text.startswith("...", self.at)
        if truncated:
            self.at += 3
        return out.decode("utf-8", errors="replace"), truncated

    def string_list(self) -> tuple[list[str], bool]:
        self.skip()
        items: list[str] = []
        truncated = False
        if not self.text.startswith("[", self.at):
            return items, True  # an address: strace could not read the array
        self.at += 1
        while self.at < len(self.text):
            self.skip()
            if self.text.startswith("]", self.at):
                self.at += 1
                break
            if self.text.startswith("...", self.at):
                truncated = True
                self.at += 3
                continue
            value, cut = self.string()
            if value is None:
                truncated = True
                break
            items.append(value)
            truncated = truncated or cut
            self.expect(",")
        return items, truncated


# --------------------------------------------------------------------------------------------
# The policy and the check
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecPolicy:
    """What one arm's Bash commands may execute (see the module docstring)."""

    arm: str
    shell: str  # the shell the prefix starts (a real path)
    binaries: Mapping[str, frozenset[str]]  # arm binary -> the real paths that are it
    harmless: Mapping[str, frozenset[str]]  # harmless utility -> the real paths that are it
    helpers: Mapping[str, frozenset[str]] = field(default_factory=dict)  # binary -> declared helper names
    cli: frozenset[str] = frozenset()  # the real paths of the Claude CLI executable the trial runs
    learned: Mapping[str, frozenset[str]] = field(default_factory=dict)  # binary -> real paths its start-up ran
    wrappers: frozenset[str] = frozenset()  # real paths of the harness's launcher programs above the shell


# The Claude Code CLI carries its own search tools: its shell snapshot defines `grep` and `find` as
# functions that run the CLI's own executable under another argv[0] (measured: `grep -c x` runs
# `claude` as `ugrep -G ... -c x`). Such a record is the utility the agent typed, run by the CLI the
# harness started, so it is allowed as that utility where the arm allows the utility; whatever it
# starts in turn is judged like anything else.
CLI_EMBEDDED_TOOLS = {"ugrep": "grep", "bfs": "find", "rg": "rg"}


@dataclass(frozen=True)
class ExecLeak:
    program: str
    argv: tuple[str, ...]
    chain: tuple[tuple[str, tuple[str, ...]], ...]  # (program, argv) above it, nearest first
    reason: str

    def describe(self) -> str:
        above = " <- ".join(_short(program, argv) for program, argv in self.chain)
        return f"exec {_short(self.program, self.argv)} ran ({self.reason}); started by {above or 'nothing'}"

    def as_dict(self) -> dict[str, object]:
        return {
            "program": self.program,
            "argv": list(self.argv),
            "chain": [{"program": program, "argv": list(argv)} for program, argv in self.chain],
            "reason": self.reason,
        }


def check_records(records: Sequence[ExecRecord], policy: ExecPolicy) -> list[ExecLeak]:
    """Every record the policy does not allow, with its chain ([] = everything that ran was allowed)."""
    return _check(records, policy)[0]


def _check(records: Sequence[ExecRecord], policy: ExecPolicy) -> tuple[list[ExecLeak], dict[int, str]]:
    """(the leaks, record index -> the name each allowed record was allowed as)."""
    allowed_as: dict[int, str] = {}  # record index -> the binary/utility name it was allowed as
    leaked: set[int] = set()
    leaks: list[ExecLeak] = []
    for record in records:
        if record.parent in leaked:
            leaked.add(record.index)  # started by a foreign program: part of that leak, not another one
            continue
        verdict = _judge(record, records, policy, allowed_as)
        if verdict.startswith("!"):
            leaked.add(record.index)
            leaks.append(_leak(record, records, verdict[1:], policy))
        else:
            allowed_as[record.index] = verdict
    return leaks, allowed_as


def _judge(record: ExecRecord, records: Sequence[ExecRecord], policy: ExecPolicy, allowed_as: dict[int, str]) -> str:
    """The name this record is allowed as, or "!" + why it is not."""
    real = _real(record.path)
    name = Path(record.path).name
    chain = _chain(record, records)
    if _under_wrappers_only(chain, policy):  # the prefix's own start: launchers, then the shell
        if real in policy.wrappers:
            return "(sandbox)"
        return "(shell)" if real == policy.shell else f"!the command did not start in the audit's shell {policy.shell}"
    for kind in (policy.binaries, policy.harmless):
        for program, paths in kind.items():
            if is_program(record, program, paths):
                return program
    if real in policy.cli and record.argv:
        stands_for = CLI_EMBEDDED_TOOLS.get(Path(record.argv[0]).name, "")
        if stands_for in policy.harmless or stands_for in policy.binaries:
            return stands_for
    for above in chain:
        binary = allowed_as.get(above.index, "")
        if name in policy.helpers.get(binary, ()) or _same_file(real, policy.learned.get(binary, frozenset())):
            return binary
    if name in policy.binaries or name in policy.harmless:
        return f"!{record.path} is not the {name} the harness put on PATH"
    return f"!{name} is not a program of arm '{policy.arm}' nor a helper of a binary that started it"


def _under_wrappers_only(chain: Sequence[ExecRecord], policy: ExecPolicy) -> bool:
    """Whether everything above a record is the harness's launchers (nothing above: the log's root)."""
    return all(_real(above.path) in policy.wrappers for above in chain)


def is_program(record: ExecRecord, program: str, paths: frozenset[str]) -> bool:
    """Whether a record is `program`, whose files are `paths` (real paths).

    The file decides: the same real path (symlinks and alternatives resolved on both sides), the
    same inode (a hard link), or the same bytes (a copy the program's own installation keeps, such
    as Debian's /usr/lib/git-core/git). The name it ran under must be one of the program's names
    (the arm's name or a file name of the program) in both the path and argv[0], because a
    multi-call binary (busybox, a single-binary coreutils) is a different program under each name.
    """
    names = {program, *(Path(path).name for path in paths)}
    if Path(record.path).name not in names or (record.argv and Path(record.argv[0]).name not in names):
        return False
    real = _real(record.path)
    return _same_file(real, paths) or any(_same_bytes(real, path) for path in paths)


def _same_file(real: str, paths: frozenset[str]) -> bool:
    if real in paths:
        return True
    inode = _inode(real)
    return inode is not None and any((_inode(path) or ())[:2] == inode[:2] for path in paths)


def _inode(path: str) -> tuple[int, int, int, int] | None:
    """(device, inode, size, modification time) of a file, or None where it cannot be read."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _same_bytes(real: str, other: str) -> bool:
    first, second = _inode(real), _inode(other)
    if first is None or second is None or first[2] != second[2]:
        return False
    return _digest(real, first) == _digest(other, second) is not None


@functools.lru_cache(maxsize=256)
def _digest(path: str, inode: tuple[int, int, int, int]) -> str | None:
    """The sha256 of a file, cached per file version (the inode key changes when the file is replaced)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _chain(record: ExecRecord, records: Sequence[ExecRecord]) -> list[ExecRecord]:
    chain = []
    parent = record.parent
    while parent is not None and len(chain) < len(records):
        chain.append(records[parent])
        parent = records[parent].parent
    return chain


def _leak(record: ExecRecord, records: Sequence[ExecRecord], reason: str, policy: ExecPolicy) -> ExecLeak:
    # The chain ends at the command's shell: the sandbox's launchers above it are the harness's own.
    chain = tuple(
        (above.path, _display_argv(above.argv))
        for above in _chain(record, records)
        if not (_real(above.path) in policy.wrappers and _under_wrappers_only(_chain(above, records), policy))
    )
    return ExecLeak(record.path, record.argv, chain, reason + (" (argv cut short by strace)" if record.truncated else ""))


def _display_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The audit's shell gets the CLI's whole wrapper as its command (source the snapshot, then
    `eval '<command>'`, then record the cwd): show the agent's command instead."""
    if len(argv) == 3 and argv[1] == "-c":
        wrapper = argv[2]
        at = wrapper.find(" eval ")
        if at >= 0:
            try:
                return (argv[0], "-c", shlex.split(wrapper[at + len(" eval ") :])[0])
            except (ValueError, IndexError):
                pass
    return argv


def _short(program: str, argv: Sequence[str]) -> str:
    text = shlex.join(argv) if argv else program
    if argv and Path(program).name != Path(argv[0]).name:
        text = f"{program} as {text}"
    elif argv and "/" in program and "/" not in argv[0]:
        text = f"{program} ({text})"
    return text if len(text) <= 300 else text[:297] + "..."


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    return os.path.realpath(path)


# --------------------------------------------------------------------------------------------
# Helpers learned once per sitting: what a binary's own start-up runs
# --------------------------------------------------------------------------------------------


def learned_helpers(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> frozenset[str]:
    """The real paths of what a binary's own start-up runs: `probe` (argv, its first word the
    binary; `BINARY --version` unless the arm declares another) traced once, with the binary's PATH.

    A script's interpreter and whatever that interpreter runs first are found this way: a
    `#!/bin/sh` wrapper's readlink and python3, and behind a version manager's python3 shim the
    bash, pyenv and readlink it starts before the real python3. The probe runs in an empty folder
    with an empty HOME, stdin closed, and the variables a trial's commands keep (locale, terminal),
    so it sees the start-up a trial's command will have. Cached per sitting by the binary's real
    path, the probe and the search path.
    """
    real = shutil.which(program, path=search_path)
    if real is None or not tracer.available:
        return frozenset()
    return _probe_startup(os.path.realpath(real), tuple(probe[1:]), search_path, tracer)


@functools.lru_cache(maxsize=64)
def _probe_startup(real: str, args: tuple[str, ...], search_path: str, tracer: Tracer) -> frozenset[str]:
    from .hygiene import KEPT_NAMES  # the variables a trial's commands keep besides the SDK's own

    with tempfile.TemporaryDirectory(prefix="benchcell-probe-") as home:
        kept = {name: value for name, value in os.environ.items() if name in KEPT_NAMES or name.startswith("LC_")}
        env = {**kept, "PATH": search_path, "HOME": home}
        traced = _trace(tracer, [real, *args], timeout=CALIBRATION_TIMEOUT_S, env=env, cwd=home)
    if traced is None:
        return frozenset()  # the exit status does not matter: what the start-up ran does
    itself = frozenset({real})
    return frozenset(
        path for path in (_real(record.path) for record in traced[1][1:]) if not _same_file(path, itself)
    )


# --------------------------------------------------------------------------------------------
# One trial's audit: the prefix, the logs, the verdict
# --------------------------------------------------------------------------------------------


class ExecAudit:
    """Sets up the shell prefix for one trial and reads back what ran."""

    def __init__(
        self,
        folder: Path,
        tracer: Tracer,
        shell: str | None = None,
        launcher: Sequence[str] = (),
        wrappers: Iterable[str] = (),
    ) -> None:
        """`launcher`: an argv put between strace and the shell (a sandbox: `nsenter ... -- bwrap ...`);
        `wrappers`: the programs it executes before the shell (names or paths), allowed above the
        shell as the harness's own."""
        self.folder = folder
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
            f'exec {self.trace_command()} {between}{shlex.quote(bash)} -c "$1"\n'
        )
        self.prefix.chmod(0o755)

    def trace_command(self) -> str:
        """strace with its options and this command's own log (a shell fragment: the log's name is
        computed by the prefix's shell, one per command)."""
        strace = " ".join(shlex.quote(part) for part in (self.tracer.program, *self.tracer.options()))
        return f'{strace} -o {shlex.quote(str(self.logs))}/"${{EPOCHREALTIME/[.,]/}}-$$.log"'

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
            probe = shlex.split((probes or {}).get(name, "")) or [name, "--version"]
            learned[name] = learned_helpers(name, probe, search_path, self.tracer)
        helpers = {name: frozenset(programs_) for name, programs_ in declared_helpers.items()}
        linked = {
            name: frozenset({os.path.realpath(bin_dir / name)})
            for name in harmless
            if (bin_dir / name).exists() and name not in programs
        }
        cli_paths = frozenset({os.path.realpath(cli)}) if cli else frozenset()
        return ExecPolicy(arm, self.shell, programs, linked, helpers, cli_paths, learned, self.wrappers)

    def report(self, policy: ExecPolicy, commands_ran: int = 0, judge: FailureJudge | None = None) -> ExecReport:
        """What ran over every Bash command of the trial, judged by the policy. `commands_ran`: the
        Bash calls the transcript shows completed; fewer logs than that means records went missing.
        `judge` says which failures of the arm's own programs the harness caused (see `program_failures`)."""
        per_command, refused = self._read_logs()
        leaks: list[ExecLeak] = []
        damaged = 0
        blocked: dict[tuple[str, str, str], dict[str, object]] = {}
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
            for failure in program_failures(log, policy, allowed_as) if judge is not None else ():
                key = (failure.binary, failure.access.call, failure.access.target)
                if key not in blocked and len(blocked) < BLOCKED_LIMIT:
                    verdict = judge(failure)
                    if verdict is not None:
                        blocked[key] = verdict
        missing = max(0, commands_ran - len(per_command))
        refusals = tuple(f"{name}: {why}" for name, why in sorted(refused.items()))
        programs = sum(len(log.records) for log in per_command)
        return ExecReport(len(per_command), programs, leaks, missing, damaged, refusals, tuple(blocked.values()))


BLOCKED_LIMIT = 20  # harness-caused failures kept per trial (each distinct program and target once)


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


@dataclass(frozen=True)
class ExecReport:
    commands: int  # Bash commands the audit recorded
    programs: int  # programs they executed
    leaks: list[ExecLeak]
    missing: int = 0  # Bash commands that completed without a record (a log removed or never written)
    damaged: int = 0  # logs without the record of their own shell (truncated or rewritten)
    refused: tuple[str, ...] = ()  # "name: why" of files in the log folder that were not read (a FIFO, a link...)
    blocked: tuple[dict[str, object], ...] = ()  # the arm's programs' failures the harness caused (the judge's verdicts)

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
