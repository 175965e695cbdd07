"""What the sandbox kept from an arm's own programs: the judge of a failed open, exec or connect.

The sandbox hides the bench folder (all but what the arm declares), the store, the harness, every
trial's folder, /tmp, /run, the user's credentials and whatever the environment declares hidden,
and lets commands connect only to the endpoints the arm declares. A program written before those
declarations (a CLI that runs a script from the bench folder, imports its own package from there,
or talks to the bench's service through a variable) works outside the sandbox and fails inside it.
This module says, for one file or endpoint, whether the sandbox is what kept it from the program,
why, and which declaration gives it back: `readable = [...]` or `network = [...]` in the arm's
table, or the environment's `hidden`.

The mounts are read from the bubblewrap command line of the trial's own shell prefix (`Mounts`),
so a file is judged hidden exactly as the sandbox that runs hides it. Pure: no pytest, no SDK.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox
from ..output_lines import lines_naming_the_error
from .exec_audit import FailedRun, ProgramFailure
from .missing_paths import paths_named_missing

__all__ = [
    "Mounts", "Blocked", "SandboxView", "readable_entries", "endpoints_offered", "endpoint_in", "describe_record", "toml_list",
    "SAID_LINES",
]  # fmt: skip
SAID_LINES = 6  # lines of a blocked program's output kept with its entry (the lines naming the error)

# bubblewrap's options by how many arguments they take (its manual, 0.4 to 0.11); the mounts are
# read from these, anything else is skipped with its arguments.
_TAKES_TWO = frozenset({
    "--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind", "--dev-bind-try", "--setenv",
    "--file", "--bind-data", "--ro-bind-data", "--symlink", "--chmod", "--bind-fd", "--ro-bind-fd",
})  # fmt: skip
_TAKES_ONE = frozenset({
    "--args", "--argv0", "--userns", "--userns2", "--pidns", "--uid", "--gid", "--hostname", "--chdir",
    "--unsetenv", "--lock-file", "--sync-fd", "--remount-ro", "--exec-label", "--file-label", "--proc",
    "--dev", "--tmpfs", "--mqueue", "--dir", "--seccomp", "--add-seccomp-fd", "--block-fd",
    "--userns-block-fd", "--info-fd", "--json-status-fd", "--cap-add", "--cap-drop", "--perms", "--size",
    "--overlay-src", "--tmp-overlay", "--ro-overlay", "--level-prefix",
})  # fmt: skip
_BINDS = frozenset({"--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind", "--dev-bind-try"})
_REPLACES = frozenset({"--tmpfs", "--file", "--bind-data", "--ro-bind-data", "--symlink", "--mqueue", "--bind-fd", "--ro-bind-fd"})
_VIRTUAL = ("/proc", "/sys", "/dev")  # never a file of the bench: not judged


@dataclass(frozen=True)
class Mounts:
    """The mount points bubblewrap sets up, in order: (destination, shown) with shown False where the
    destination's own content is replaced (a tmpfs, /dev/null over a file, a file of bwrap's)."""

    points: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def from_arguments(cls, argv: Sequence[str]) -> Mounts:
        points: list[tuple[str, bool]] = []
        at = 0
        while at < len(argv):
            option = argv[at]
            if not option.startswith("--"):
                break  # the command bwrap runs
            if option in _TAKES_TWO and at + 2 < len(argv):
                source, destination = argv[at + 1], argv[at + 2]
                if option in _BINDS:
                    if not (option.endswith("-try") and not os.path.lexists(source)):
                        points.append((_normal(destination), _normal(source) == _normal(destination)))
                elif option in _REPLACES:
                    points.append((_normal(destination), False))
                at += 3
            elif option in _TAKES_ONE and at + 1 < len(argv):
                if option in _REPLACES:
                    points.append((_normal(argv[at + 1]), False))
                at += 2
            else:
                at += 1
        return cls(tuple(points))

    @classmethod
    def from_prefix(cls, text: str, bwrap: str) -> Mounts:
        """The mounts of the bwrap command line in a shell prefix written by sandbox.write_prefix."""
        for line in text.splitlines():
            if not line.startswith("exec "):
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                return cls()
            names = {bwrap, os.path.realpath(bwrap)}
            for at, word in enumerate(words):
                if word in names:
                    return cls.from_arguments(words[at + 1 :])
        return cls()

    def hidden(self, path: str) -> bool:
        """Whether a path of the host is out of sight inside (the last mount over it replaced it)."""
        real = _normal(os.path.realpath(path))
        for destination, shown in reversed(self.points):
            if real == destination or real.startswith(destination.rstrip("/") + "/"):
                return not shown
        return False


    def partly_shown(self, path: str) -> bool:
        """Whether a folder is replaced by an empty one with some of its content shown again inside
        (the bench folder, an arm's `path` folder): the folder itself exists in the sandbox, so a
        failure on it is not a block to declare away."""
        real = _normal(os.path.realpath(path))
        replaced = [at for at, (destination, shown) in enumerate(self.points) if destination == real and not shown]
        return bool(replaced) and any(
            shown and destination.startswith(real.rstrip("/") + "/") for destination, shown in self.points[replaced[-1] + 1 :]
        )


def _normal(path: str) -> str:
    return os.path.realpath(path) if os.path.isabs(path) else path


@dataclass(frozen=True)
class Blocked:
    """One file or endpoint the sandbox kept from a program, why, and what gives it back."""

    kind: str  # "file" or "endpoint"
    target: str  # the path, or HOST:PORT
    why: str  # why the sandbox keeps it
    remedy: str  # what gives it back: "declare [arms.X] readable = [...]" ("" when nothing can: the answer key)

    def describe(self) -> str:
        what = f"could not open {self.target}" if self.kind == "file" else f"could not connect to {self.target}"
        return f"{what} ({self.why})" + (f": {self.remedy}" if self.remedy else "")


@dataclass
class SandboxView:
    """What one trial's sandbox hides and refuses, from the harness's side."""

    arm: str
    mounts: Mounts
    bench_root: str  # real paths
    never: tuple[str, ...]  # bench.toml, conftest.py, the store: the answers, never shown
    harness: str  # the harness's own package
    trial_folder: str
    environment_hidden: tuple[str, ...]  # Environment.hidden, as real paths
    readable: tuple[str, ...] = ()  # the arm's `readable` entries, as bench.toml would write them
    network: tuple[str, ...] = ()  # the arm's `network` entries as written
    declared: frozenset[sandbox.Endpoint] = frozenset()  # the endpoints the sandbox relays
    # endpoints of the bench's environment (the arm's variables, the provision hook's values) ->
    # how the arm would declare it (the template as written: "{url}", "http://127.0.0.1:{port}/")
    offered: Mapping[sandbox.Endpoint, str] = field(default_factory=dict)
    credentials: tuple[str, ...] = ()

    # -- files --------------------------------------------------------------------------------
    def file(self, path: str) -> Blocked | None:
        """The block, when `path` exists outside and the sandbox hides it; else None."""
        if not os.path.isabs(path) or path.startswith(tuple(f"{root}/" for root in _VIRTUAL)) or path in _VIRTUAL:
            return None
        if not os.path.lexists(path) or not self.mounts.hidden(path):
            return None
        real = os.path.realpath(path)
        if self.mounts.partly_shown(real):
            return None
        why, remedy = self._why_hidden(real)
        return Blocked("file", os.path.normpath(path), why, remedy)

    def _why_hidden(self, real: str) -> tuple[str, str]:
        if any(_under(real, path) for path in self.never):
            return "bench.toml, conftest.py and the store are never shown: they hold the answers", ""
        if _under(real, self.harness):
            return "the harness's own package is never shown", ""
        for path in self.environment_hidden:
            if _under(real, path):
                return (
                    f"pytest_benchcell_provision declares {path} hidden",
                    "if the arm's programs need it, leave it out of `hidden` in the Environment the provision hook returns",
                )
        if _under(real, self.trial_folder):
            return "the trial's own folder is never shown but for its working directory and workdir", ""
        if any(_under(real, path) for path in self.credentials):
            return "the user's credential files are never shown", ""
        if _under(real, self.bench_root):
            return "the bench folder is hidden but for what the arm declares", self.readable_remedy([real])
        if _under(real, os.path.realpath(tempfile.gettempdir())) or _under(real, "/tmp"):
            return "each command gets a private, empty /tmp", "keep such files in trial.workdir, which commands share"
        return "hidden in the sandbox", self.readable_remedy([real])

    def readable_remedy(self, paths: Iterable[str]) -> str:
        entries = [*self.readable, *(e for e in readable_entries(paths, self.bench_root) if e not in self.readable)]
        return f"declare [arms.{self.arm}] readable = {toml_list(entries)}"

    # -- endpoints ----------------------------------------------------------------------------
    def endpoint(self, target: str) -> Blocked | None:
        """The block, when a connect to `target` (HOST:PORT) goes to an endpoint of the bench's
        environment that the arm does not declare; else None."""
        try:
            endpoint = sandbox.parse_endpoint(target)
        except ValueError:
            return None
        if endpoint in self.declared or endpoint not in self.offered:
            return None
        entries = [*self.network, self.offered[endpoint]]
        return Blocked(
            "endpoint", str(endpoint), "the sandbox lets commands reach only the endpoints the arm declares",
            f"declare [arms.{self.arm}] network = {toml_list(entries)}",
        )  # fmt: skip

    # -- a failure seen by the execution audit during a trial -----------------------------------
    def judge(self, failure: ProgramFailure) -> dict[str, object] | None:
        """The sample's record of one failed call of the arm's program, when the sandbox caused it;
        None for a failure of the program's own or the agent's making (a path the agent's command
        names: reaching for a hidden file is not the harness's doing)."""
        access = failure.access
        if access.call == "connect":
            blocked = self.endpoint(access.target)
        else:
            blocked = self.file(access.target)
            if blocked is not None and _named_in(access.target, failure.command):
                return None
        if blocked is None:
            return None
        return {
            "program": failure.binary,
            "call": access.call,
            "target": blocked.target,
            "error": access.result,
            "ended": failure.ended,
            "command": failure.command,
            "why": blocked.why,
            "remedy": blocked.remedy,
        }

    def output_blocks(self, output: str, program: str = "", command: str = "") -> list[tuple[Blocked, str]]:
        """The files a failed program's output says it could not find that the sandbox hides, each
        with the line that named it, leaving out a path the agent's command names (as `judge` does)."""
        found = []
        for path, line in paths_named_missing(output, bench_root=self.bench_root, program=program):
            blocked = self.file(path)
            if blocked is not None and not _named_in(path, command):
                found.append((blocked, line))
        return found

    def judge_runs(
        self, runs: Sequence[FailedRun], tool_calls: Sequence[Mapping[str, object]], blocked: Sequence[Mapping[str, object]]
    ) -> list[dict[str, object]]:
        """The sample's `sandbox_blocked`: the audit's verdicts (`blocked`), and for each failed run
        of the arm's binaries what its Bash call's output says it could not find that the sandbox
        hides (a Python import, a Node require: lookups that are no open); each entry with the lines
        of that output naming the error (`said`)."""
        outputs = _outputs_of_runs(runs, tool_calls)
        entries = [dict(entry) for entry in blocked]
        for entry in entries:
            said = next((outputs[run.log] for run in runs if run.command == entry.get("command") and run.log in outputs), "")
            if said:
                entry["said"] = "\n".join(lines_naming_the_error(said, limit=SAID_LINES))
        known = {(entry.get("program"), entry.get("target")) for entry in entries}
        added = 0
        for run in runs:
            output = outputs.get(run.log, "")
            if not output:
                continue
            for block, line in self.output_blocks(output, run.program, run.command):
                if (run.binary, block.target) in known or added >= _OUTPUT_BLOCKS:
                    continue
                known.add((run.binary, block.target))
                added += 1
                entries.append({
                    "program": run.binary, "call": "output", "target": block.target,
                    "error": line[:300], "ended": run.ended, "command": run.command,
                    "why": block.why, "remedy": block.remedy,
                    "said": "\n".join(lines_naming_the_error(output, limit=SAID_LINES)),
                })  # fmt: skip
        return entries


_OUTPUT_BLOCKS = 20  # entries read from outputs per trial, at most


def _outputs_of_runs(runs: Sequence[FailedRun], tool_calls: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """Each failed run's command log -> the output of its Bash call: the call with the run's
    command line, the how-manieth of them the run's command was (`FailedRun.repeat`)."""
    calls: dict[str, list[str]] = {}
    for call in tool_calls:
        given = call.get("input")
        if call.get("tool") == "Bash" and isinstance(given, dict):
            calls.setdefault(str(given.get("command", "")), []).append(str(call.get("output") or ""))
    paired: dict[str, str] = {}
    for run in runs:
        same = calls.get(run.command, []) if run.command else []
        if run.repeat < len(same):
            paired[run.log] = same[run.repeat]
    return paired


def describe_record(entry: Mapping[str, object]) -> str:
    """One line for a sample's `sandbox_blocked` entry."""
    target = entry.get("target", "")
    what = f"could not connect to {target}" if entry.get("call") == "connect" else f"could not open {target}"
    why = entry.get("why")
    if entry.get("call") == "output":  # found by what its output names: that line says so
        what, why = f"could not find {target}", f"{why}; it said: {entry.get('error')}"
    remedy = f"; {entry['remedy']}" if entry.get("remedy") else ""
    return f"{entry.get('program')} {what} ({why}) and {entry.get('ended')}{remedy}"


def readable_entries(paths: Iterable[str], bench_root: str) -> list[str]:
    """What to declare in `readable` for files a program needs: inside the bench folder, relative to
    it, the top folder of a Python package (its modules and caches come with it) or the file itself;
    elsewhere the absolute path. Entries inside another entry are left out."""
    chosen: set[str] = set()
    root = os.path.realpath(bench_root)
    for path in paths:
        real = os.path.realpath(path)
        entry = real
        if _under(real, root) and real != root:
            entry = _package_of(real, root) or real
        chosen.add(entry)
    kept = sorted(entry for entry in chosen if not any(other != entry and _under(entry, other) for other in chosen))
    return [os.path.relpath(entry, root) if _under(entry, root) else entry for entry in kept]


def _package_of(path: str, root: str) -> str | None:
    """The outermost folder with an __init__.py that holds `path` (below the bench folder), if any."""
    folder = os.path.dirname(path)
    if os.path.basename(folder) == "__pycache__":
        folder = os.path.dirname(folder)
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "__init__.py")):
        folder = path
    package = None
    while folder != root and _under(folder, root) and os.path.isfile(os.path.join(folder, "__init__.py")):
        package = folder
        folder = os.path.dirname(folder)
    return package


def endpoints_offered(arm_env: Mapping[str, str], filled_env: Mapping[str, str], values: Mapping[str, str]) -> dict[sandbox.Endpoint, str]:
    """The loopback endpoints the bench hands an arm, each with how the arm would declare it: an
    arm variable's template as written ("http://127.0.0.1:{port}/"), else "{name}" for a provision
    value that is the endpoint, else "127.0.0.1:{name}" for one that is its port."""
    offered: dict[sandbox.Endpoint, str] = {}
    for name, template in arm_env.items():
        endpoint = endpoint_in(filled_env.get(name, ""))
        if endpoint is not None:
            offered.setdefault(endpoint, template)
    for name, value in values.items():
        endpoint = endpoint_in(str(value))
        if endpoint is not None:
            offered.setdefault(endpoint, f"{{{name}}}")
    for name, value in values.items():
        text = str(value)
        if text.isdigit() and 0 < int(text) < 65536:
            offered.setdefault(sandbox.Endpoint("127.0.0.1", int(text)), f"127.0.0.1:{{{name}}}")
    return offered


def endpoint_in(text: str) -> sandbox.Endpoint | None:
    if not text or ("://" not in text and ":" not in text):
        return None
    try:
        return sandbox.parse_endpoint(text)
    except ValueError:
        return None


def _under(path: str, folder: str) -> bool:
    return bool(folder) and (path == folder or path.startswith(folder.rstrip("/") + "/"))


def _named_in(path: str, command: str) -> bool:
    """Whether the agent's command names the path (or its last two parts: `../bench.toml`)."""
    if not command:
        return False
    tail = "/".join(Path(path).parts[-2:])
    return path in command or os.path.realpath(path) in command or (bool(tail) and tail in command)


def toml_list(entries: Sequence[str]) -> str:
    """A TOML array of strings, as bench.toml would hold it."""
    return "[" + ", ".join(json.dumps(entry) for entry in entries) + "]"
