"""The arm's execution policy and the check of a log's records against it (what a program is, who
may start what), and the helpers learned once per sitting from what a binary's own start-up runs."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...user_cache import Records, machine, plugin_digest
from .strace_log import ExecRecord
from .tracer import CALIBRATION_TIMEOUT_S, Tracer, _trace


@dataclass(frozen=True)
class ExecPolicy:
    """What one arm's Bash commands may execute (see the package docstring)."""

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
    names = _names(program, paths)
    if os.path.basename(record.path) not in names or (record.argv and os.path.basename(record.argv[0]) not in names):
        return False
    real = _real(record.path)
    return _same_file(real, paths) or any(_same_bytes(real, path) for path in paths)


@functools.lru_cache(maxsize=1024)
def _names(program: str, paths: frozenset[str]) -> frozenset[str]:
    """A program's names: the arm's name for it and the file names of its files (checked for every
    record against every program of the arm, so computed once)."""
    return frozenset({program, *(os.path.basename(path) for path in paths)})


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
    chain: list[ExecRecord] = []
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
# Helpers learned from a binary's own start-up, kept between sittings
# --------------------------------------------------------------------------------------------


def learned_helpers(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> frozenset[str]:
    """The real paths of what a binary's own start-up runs: `probe` (argv, its first word the
    binary; `BINARY --version` unless the arm declares another) traced once, with the binary's PATH.

    A script's interpreter and whatever that interpreter runs first are found this way: a
    `#!/bin/sh` wrapper's readlink and python3, and behind a version manager's python3 shim the
    bash, pyenv and readlink it starts before the real python3. The probe runs in an empty folder
    with an empty HOME, stdin closed, and the variables a trial's commands keep (locale, terminal),
    so it sees the start-up a trial's command will have. Cached per process by the binary's real
    path, the probe and the search path, and kept between sittings (`_recall`, `probe_again`);
    `start_learning` starts it early.
    """
    return _probe(program, probe, search_path, tracer).result()


def start_learning(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> None:
    """Start `learned_helpers` for a binary on a thread of its own, so its probe runs while the
    trial does instead of after it."""
    _probe(program, probe, search_path, tracer)


_PROBES: dict[tuple[str, tuple[str, ...], str, Tracer], Future[frozenset[str]]] = {}
_PROBES_LOCK = threading.Lock()


def _probe(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> Future[frozenset[str]]:
    """The probe of a binary's start-up, started once per process and key (the sitting's cache),
    unless an earlier sitting's is kept and still holds (`_recall`)."""
    key = _probe_key(program, probe, search_path, tracer)
    if key is None:
        return _known(frozenset())
    with _PROBES_LOCK:
        future = _PROBES.get(key)
        if future is None:
            kept = _recall(key)
            if kept is not None:
                future = _PROBES[key] = _known(kept)
                _SECONDHAND.add(key)
            else:
                future = _PROBES[key] = Future()
                threading.Thread(target=_learn, args=(future, key), name="benchcell-probe", daemon=True).start()
    return future


def _probe_key(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> tuple[str, tuple[str, ...], str, Tracer] | None:
    """A probe's key: the binary's real path, the probe's arguments, the search path and the watcher
    (None where the binary is not found or nothing can watch it)."""
    real = shutil.which(program, path=search_path)
    if real is None or not tracer.available:
        return None
    return (os.path.realpath(real), tuple(probe[1:]), search_path, tracer)


def probe_again(program: str, probe: Sequence[str], search_path: str, tracer: Tracer) -> bool:
    """Where this process took a binary's helpers second-hand (kept from an earlier sitting, or
    handed over by the xdist controller), forget them and run its probe now; True when it did, so
    the caller judges again with what the start-up runs today (a trial that ran a program the kept
    helpers do not explain must not be invalid for that alone)."""
    key = _probe_key(program, probe, search_path, tracer)
    if key is None:
        return False
    future: Future[frozenset[str]] = Future()
    with _PROBES_LOCK:
        if key not in _SECONDHAND:
            return False
        _SECONDHAND.discard(key)
        _PROBES[key] = future  # whoever asks meanwhile waits for this probe, not the kept answer
    _kept().forget(_kept_key(key))
    _learn(future, key)
    return True


# What a binary's start-up ran, kept between sittings in the user's cache (user_cache.Records) under
# a hash of the binary's file (path, size, modification time, inode), the probe, the search path,
# the watcher, the probe's variables, the plugin, the machine and the user; recalled only while every
# helper file it names is still the same file (size, modification time, inode).
_SECONDHAND: set[tuple[str, tuple[str, ...], str, Tracer]] = set()
KEPT_FORMAT = 1


def _kept() -> Records:
    return Records.in_cache("probes")


def _kept_key(key: tuple[str, tuple[str, ...], str, Tracer]) -> str:
    real, args, search_path, tracer = key
    ingredients = [KEPT_FORMAT, plugin_digest(), machine(), os.geteuid(), real, _file_stat(real), list(args),
                   search_path, repr(tracer), sorted(_probe_variables().items())]  # fmt: skip
    return hashlib.sha256(json.dumps(ingredients).encode()).hexdigest()


def _file_stat(path: str) -> list[int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns, status.st_ino, status.st_dev]


def _recall(key: tuple[str, tuple[str, ...], str, Tracer]) -> frozenset[str] | None:
    record = _kept().recall(_kept_key(key))
    if record is None or not isinstance(record.get("helpers"), dict):
        return None
    helpers = record["helpers"]
    if any(_file_stat(str(path)) != stat for path, stat in helpers.items()):
        return None  # a helper was replaced or is gone: what the start-up runs may have changed
    return frozenset(str(path) for path in helpers)


def _keep(key: tuple[str, tuple[str, ...], str, Tracer], helpers: frozenset[str]) -> None:
    stats = {path: _file_stat(path) for path in sorted(helpers)}
    if all(stat is not None for stat in stats.values()):
        _kept().remember(_kept_key(key), {"program": key[0], "helpers": stats})


def learned_so_far() -> list[list[Any]]:
    """Every probe of this process, waited for: [real path, probe arguments, search path, [the
    helpers' real paths]] (JSON), for `teach` in another process of the sitting on this machine (an
    xdist controller hands its workers what its probes learned, so no worker probes again)."""
    finish_learning()
    with _PROBES_LOCK:
        done = list(_PROBES.items())
    return [[real, list(args), search_path, sorted(future.result())]
            for (real, args, search_path, _), future in done if future.exception() is None]  # fmt: skip


def teach(learned: Sequence[Sequence[Any]], tracer: Tracer) -> None:
    """Take what another process of the sitting learned (`learned_so_far`) as this process's probes
    under `tracer`, for binaries whose file is still the one probed (the same real path)."""
    with _PROBES_LOCK:
        for real, args, search_path, paths in learned:
            key = (str(real), tuple(str(arg) for arg in args), str(search_path), tracer)
            if key not in _PROBES and os.path.exists(str(real)):
                _PROBES[key] = _known(frozenset(str(path) for path in paths))
                _SECONDHAND.add(key)


def _known(helpers: frozenset[str]) -> Future[frozenset[str]]:
    """A probe whose answer is known without running it."""
    future: Future[frozenset[str]] = Future()
    future.set_result(helpers)
    return future


def finish_learning() -> None:
    """Wait for the probes still running (each ends within CALIBRATION_TIMEOUT_S): none outlives the sitting."""
    with _PROBES_LOCK:
        pending = list(_PROBES.values())
    for future in pending:
        future.exception()  # waits; what it raised was already handed to whoever asked


def _learn(future: Future[frozenset[str]], key: tuple[str, tuple[str, ...], str, Tracer]) -> None:
    try:
        helpers = _probe_startup(*key)
        _keep(key, helpers)
        future.set_result(helpers)
    except BaseException as exc:  # handed to whoever asks for the result  # noqa: BLE001
        future.set_exception(exc)


def _probe_variables() -> dict[str, str]:
    """The variables a probe keeps: those a trial's commands keep besides the SDK's own."""
    from ..hygiene import KEPT_NAMES

    return {name: value for name, value in os.environ.items() if name in KEPT_NAMES or name.startswith("LC_")}


def _probe_startup(real: str, args: tuple[str, ...], search_path: str, tracer: Tracer) -> frozenset[str]:
    with tempfile.TemporaryDirectory(prefix="benchcell-probe-") as home:
        env = {**_probe_variables(), "PATH": search_path, "HOME": home}
        traced = _trace(tracer, [real, *args], timeout=CALIBRATION_TIMEOUT_S, env=env, cwd=home)
    if traced is None:
        return frozenset()  # the exit status does not matter: what the start-up ran does
    itself = frozenset({real})
    return frozenset(
        path for path in (_real(record.path) for record in traced[1][1:]) if not _same_file(path, itself)
    )
