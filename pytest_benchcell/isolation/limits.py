"""What a trial's commands may use: bytes and files added to the writable folders, processes at once.

Without limits a command wrote 1 GiB, another 20,000 files, into the trial's folder, on the disk the
store lives on. The writable folders are the host's own (the harness reads them after the run), so
no tmpfs can size them; the limits are kept in two ways:
- **by the kernel**, in every command: no file larger than the disk budget (RLIMIT_FSIZE: the write
  fails with "File size limit exceeded"), and, where the harness is not root, no more processes
  than the budget (RLIMIT_NPROC, set after the user namespaces are entered, so it counts the
  trial's own processes only; the kernel does not apply it to root, whatever the namespace);
- **by a watch from outside** (`LimitWatch`, a thread of the harness for the whole trial): every
  0.2 s it counts the processes in the trial's network namespace (its commands, each one's
  bubblewrap, and the trial's relays: what RLIMIT_NPROC counts), and the bytes and files added to
  the writable folders since the trial began as they change (isolation/file_events.py: inotify on
  every folder under them, a full count every second or so; the environment's hidden folders, which
  only its services write, are not counted). A count only every second let a command that creates
  files fast make twice its limit; judged at each batch of changes, with the watch's thread at a
  higher priority where the harness may give it one (as root), it stops within a tenth of the limit.
  Over a limit, every running command of the trial is killed (SIGKILL to the first
  process of each command's pid namespace ends all of it), and again whenever the figure grows
  past it once more; a command that went over between two looks is still seen by the last look
  when the trial ends.

The same watch ends a command that can no longer go on by itself: every process of it stopped or
exited for 2 s (`kill -STOP $$`, or a stopped reaper; the seccomp filter already
refuses signals to the reaper, isolation/seccomp.py). Under the execution audit the kernel does not
protect a pid namespace's first process from its children's signals, and the CLI would otherwise
wait for the command until the trial's backstop.

Reaching a limit is the agent's doing, not the harness's: the trial is scored as usual, and the
sample's `sandbox` record says which limit was reached and the peaks (`sandbox.reached`, `peak`).
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .file_events import FileEvents, entries_below
from .procfs import process_ids, stat_fields

__all__ = ["Limits", "LimitWatch", "usage", "command_processes", "frozen_commands", "DEFAULT_LIMITS"]

PROCESS_LOOK_S = 0.2
FROZEN_LOOKS = 10
USAGE_LOOK_S = 1.0
WATCH_PRIORITY = -10  # the watch thread's nice value where it may lower it
GATHER_S = 0.05  # the longest the watch lets changes gather before it reads them
FASTEST_FILES_S = 100_000  # files a second one program creates here at most (Python: about 50,000)
FASTEST_BYTES_S = 2 * 1024**3  # bytes a second it writes at most
MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    disk_mb: int  # MiB added to the writable folders (and the largest file)
    files: int  # files, folders and links added to them
    processes: int  # processes of the trial's commands at once

    def as_dict(self) -> dict[str, int]:
        return {"disk_mb": self.disk_mb, "files": self.files, "processes": self.processes}


DEFAULT_LIMITS = Limits(disk_mb=1024, files=20_000, processes=256)


def usage(folders: Iterable[str], skip: Iterable[str] = ()) -> tuple[int, int]:
    """(bytes on disk, entries) under these folders: never following a link, never entering
    another file system nor a folder in `skip`."""
    skipped = {os.path.realpath(path) for path in skip}
    total_bytes = entries = 0
    seen: set[str] = set()
    for top in folders:
        top = os.path.realpath(top)
        if top in seen or top in skipped:
            continue
        seen.add(top)
        try:
            device = os.lstat(top).st_dev
        except OSError:
            continue
        for _path, size, _is_folder, _entered in entries_below(top, device, skipped):
            entries += 1
            total_bytes += size
    return total_bytes, entries


def _namespace(pid: int | str, kind: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return ""


@dataclass(frozen=True)
class CommandProcess:
    pid: int
    command: str  # the pid namespace: one per Bash command
    first: bool  # the first process of that namespace (bubblewrap's reaper)
    state: str  # /proc/PID/stat's state letter: T and t stopped, Z exited


def command_processes(network: str, own_pid_namespace: str) -> tuple[int, list[CommandProcess]]:
    """(how many processes the trial's network namespace holds, the processes of the trial's
    commands among them: those in another pid namespace than the harness's). The count is the one
    the kernel's RLIMIT_NPROC keeps as another user than root: the commands, each one's bubblewrap
    and the trial's relays."""
    found = []
    total = 0
    for name in process_ids():
        if _namespace(name, "net") != network:
            continue
        total += 1
        command = _namespace(name, "pid")
        if command in ("", own_pid_namespace):
            continue
        fields = stat_fields(name)
        if not fields:
            continue  # gone meanwhile
        try:
            with open(f"/proc/{name}/status") as status:
                first = next((line.split()[-1] == "1" for line in status if line.startswith("NSpid:")), False)
        except OSError:
            continue
        found.append(CommandProcess(int(name), command, first, fields[0]))
    return total, found


def frozen_commands(processes: Sequence[CommandProcess]) -> set[str]:
    """Commands that cannot go on by themselves: every process but the reaper stopped or exited (a
    command that stopped itself, or its reaper, which then never reaps)."""
    by_command: dict[str, list[CommandProcess]] = {}
    for process in processes:
        by_command.setdefault(process.command, []).append(process)
    return {
        command for command, members in by_command.items()
        if all(member.state in "TtZ" for member in members if not member.first)
    }  # fmt: skip


@dataclass
class LimitWatch:
    """Watches one trial's commands from outside (see the module doc)."""

    limits: Limits
    writable: Sequence[str]
    network_pid: int  # a process in the trial's network namespace (its holder)
    skip: Sequence[str] = ()  # folders inside `writable` the commands cannot write (the services' own)
    reached: list[str] = field(default_factory=list)
    peak: dict[str, float] = field(default_factory=lambda: {"disk_mb": 0.0, "files": 0, "processes": 0})
    killed: int = 0  # times the running commands were killed
    frozen_killed: int = 0  # commands ended because nothing in them could run any more

    def __post_init__(self) -> None:
        self._network = _namespace(self.network_pid, "net")
        self._own_pid_namespace = _namespace("self", "pid")
        self._events = FileEvents(self.writable, self.skip)
        self._baseline = self._events.recount() if self._events.available else usage(self.writable, self.skip)
        self._over: dict[str, float] = {}  # the figure at the last kill, per limit
        self._frozen: dict[str, int] = {}  # commands frozen at the last look: looks in a row
        self._stop = threading.Event()
        self._wake_up, self._waker = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # ends a wait for changes at stop()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="benchcell-limits", daemon=True)

    def start(self) -> LimitWatch:
        if self._network:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, after one last look at the writable folders (once: later calls do nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        os.write(self._waker, b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._look_at_usage(kill=False)
        self._events.close()
        for fd in (self._wake_up, self._waker):
            os.close(fd)

    def report(self) -> dict[str, Any]:
        """The sample's `sandbox` record."""
        return {
            "limits": self.limits.as_dict(),
            "reached": list(self.reached),
            "peak": {"disk_mb": round(self.peak["disk_mb"], 1), "files": int(self.peak["files"]), "processes": int(self.peak["processes"])},
            "commands_killed": self.killed,
            "stopped_commands_ended": self.frozen_killed,
        }

    def _run(self) -> None:
        # Where it may (as root), the watch runs before the commands it watches on a busy machine: it
        # sleeps until files change, and a command that writes fast must not outrun it.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WATCH_PRIORITY)
        except OSError:
            pass
        next_usage = next_processes = 0.0
        while not self._stop.is_set():
            # Between the looks, the writable folders' changes are read as they come (FileEvents):
            # a command that writes fast is stopped near the limit, not a second later.
            self._wait_for_changes(next_processes - time.monotonic())
            if self._stop.is_set():
                return
            if time.monotonic() >= next_processes:
                self._look_at_processes()
                next_processes = time.monotonic() + PROCESS_LOOK_S
            if time.monotonic() >= next_usage or self._events.stale:
                started = time.monotonic()
                self._look_at_usage(kill=True)
                # A large tree is walked less often: at most a tenth of the time goes to walking it.
                next_usage = time.monotonic() + max(USAGE_LOOK_S, 10 * (time.monotonic() - started))

    def _wait_for_changes(self, seconds: float) -> None:
        """Wait up to `seconds`, judging the writable folders' figures whenever they change."""
        if not self._events.available or not self._events.complete:
            self._stop.wait(max(0.0, seconds))
            return
        deadline = time.monotonic() + max(0.0, seconds)
        last = (time.monotonic(), self._events.bytes, self._events.entries)
        while not self._stop.is_set() and (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self._events.fd, self._wake_up], [], [], left)
            while self._events.fd in readable and self._events.read():
                if self._events.stale:
                    return  # events were lost: a walk now (in _run) gives the figures
                self._judge_usage(self._events.bytes, self._events.entries, kill=True)
            # Far from the limits, changes are gathered a little before they are read: waking for
            # each few events made a command that writes many files twice as slow. The pause is a
            # tenth of the time the figures would take to reach a limit at the rate they just grew.
            now = (time.monotonic(), self._events.bytes, self._events.entries)
            self._stop.wait(min(self._pause(last, now), max(0.0, deadline - now[0])))
            last = now

    def _pause(self, last: tuple[float, int, int], now: tuple[float, int, int]) -> float:
        # Never longer than a twentieth of a limit takes at the fastest a program writes here,
        # whatever the rate just seen (a burst can start after a quiet spell).
        elapsed = max(now[0] - last[0], 1e-3)
        pause = min(GATHER_S, self.limits.files / FASTEST_FILES_S / 20, self.limits.disk_mb * MiB / FASTEST_BYTES_S / 20)
        for grown, left in (
            (now[1] - last[1], self.limits.disk_mb * MiB - (now[1] - self._baseline[0])),
            (now[2] - last[2], self.limits.files - (now[2] - self._baseline[1])),
        ):
            if grown > 0:
                pause = min(pause, max(0.0, left) / (grown / elapsed) / 10)
        return pause

    def _look_at_processes(self) -> None:
        total, processes = command_processes(self._network, self._own_pid_namespace)
        self._judge("processes", total, self.limits.processes, "processes at once", kill=True)
        # A command frozen for FROZEN_LOOKS looks in a row (2 s) is ended: nothing inside it can
        # resume it, and the CLI would wait for it until the trial's backstop. Not sooner: under the
        # execution audit a process waits in "tracing stop" while a busy machine schedules strace.
        frozen = frozen_commands(processes)
        self._frozen = {command: self._frozen.get(command, 0) + 1 for command in frozen}
        for command, looks in self._frozen.items():
            if looks == FROZEN_LOOKS:
                self.frozen_killed += 1
                _kill([process.pid for process in processes if process.command == command and process.first])

    def _look_at_usage(self, *, kill: bool) -> None:
        now_bytes, now_entries = self._events.recount() if self._events.available else usage(self.writable, self.skip)
        self._judge_usage(now_bytes, now_entries, kill=kill)

    def _judge_usage(self, now_bytes: int, now_entries: int, *, kill: bool) -> None:
        added_mb = max(0, now_bytes - self._baseline[0]) / MiB
        added_files = max(0, now_entries - self._baseline[1])
        self._judge("disk_mb", added_mb, self.limits.disk_mb, "MiB written into the writable folders", kill=kill)
        self._judge("files", added_files, self.limits.files, "files and folders created", kill=kill)

    def _judge(self, name: str, value: float, limit: int, what: str, *, kill: bool) -> None:
        with self._lock:
            self.peak[name] = max(self.peak[name], value)
            if value < limit:
                return
            if not any(line.startswith(f"{name}:") for line in self.reached):
                self.reached.append(f"{name}: {what} reached the limit of {limit} ({_show(value)})")
            if kill and value > self._over.get(name, -1.0):
                self._over[name] = value
                self._kill()

    def _kill(self) -> None:
        _, processes = command_processes(self._network, self._own_pid_namespace)
        if processes:
            self.killed += 1
            # The first process of a pid namespace first: its end takes the whole command with it.
            _kill([process.pid for process in processes if process.first] + [process.pid for process in processes])


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _show(value: float) -> str:
    return f"{value:.1f}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"
