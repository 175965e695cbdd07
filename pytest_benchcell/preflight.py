"""The pre-flight: before the first model request, every selected arm's programs run once as a trial
runs them, so a sitting the sandbox would break is refused instead of scored against the arm.

For each selected arm with a Bash tool and the sandbox, or with MCP servers, the bench's own hooks
provision an environment (trial number 0, the arm's first selected task) and wait until it is ready; the arm is
confined exactly as a trial is (confinement.confine: the curated PATH, the arm's variables, the shell
prefix, the sandbox and the trial's network namespace); then, in one command through that prefix
(without the audit's strace, which only slows this pass down), each check runs:

- each binary: its declared `probe`, else `BINARY --help`, else (when that fails) `BINARY --version`;
  or, where the arm declares `preflight = [...]`, those command lines instead;
- each of the arm's variables that names a loopback endpoint the arm does not declare, when a
  service answers there outside the sandbox: a connection from inside.

A check that fails inside is run outside the sandbox, with the same variables and folder. One that
works outside and fails inside (again, alone, through the prefix with the audit's strace) is what the
sandbox broke: the sitting is refused (exit 4), with one
message per check naming what the program could not reach and the declaration that gives it back
(isolation/blocked.py): the execution audit's trace of the run inside (failed opens, execs and
connects) and a trace of the run outside (what the program opened and reached there). Where the
audit is off, the message says what failed and what it printed. A check that fails outside as well
says nothing about the sandbox and is only noted. An arm's MCP servers are checked in the same
environment, outside the sandbox as in a trial (preflight_mcp.py): a server that exits, hangs or
lacks a tool the arm declares refuses the sitting too. Then the environment is torn down.

Knows nothing of pytest: plugin/planning.py calls `run_preflight` for the arms whose same pre-flight
did not pass lately (preflight_memory.py) and turns its refusal into a UsageError.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import Arm, Bench, fill_placeholders
from .confinement import Confinement, ConfinementError, confine, sandbox_state, search_path
from .isolation import exec_audit
from .isolation.blocked import Blocked, SandboxView, endpoint_in, readable_entries, toml_list
from .output_lines import lines_naming_the_error
from .preflight_mcp import McpFailure, ServerCheck, mcp_refusal
from .preflight_runner import COMMAND_TIMEOUT_S, Runner
from .secrets import secret_values
from .trial import HarnessError, provisioned

__all__ = ["Check", "Broken", "Unjudged", "Preflight", "run_preflight", "checks_for_binaries", "PREFLIGHT_TRIAL"]

PREFLIGHT_TRIAL = 0  # the trial number the pre-flight's environment is provisioned with
CONNECT_TIMEOUT_S = 2.0
OUTPUT_LINES = 6  # lines of a failing program's output quoted in its message (those naming the error)
# Where no declared or default check of a binary works outside the sandbox: the usual spellings of a
# help or version request, tried outside in this order (the first that works is the check), each with
# the trial's variables and folder, stdin closed, stopped after SPELLING_TIMEOUT_S.
USUAL_SPELLINGS = ("--help", "-h", "help", "--version", "version")
SPELLING_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    """What the pre-flight runs for one program or endpoint: alternatives, the first that works wins."""

    label: str  # what the message names: "tracker", "the preflight command ...", "$SERVICE_URL"
    commands: tuple[str, ...]
    endpoint: str = ""  # for a variable's endpoint: HOST:PORT
    template: str = ""  # ... and how the arm would declare it ("http://127.0.0.1:{port}/")
    binary: str = ""  # the binary a default check (`BINARY --help`) is of: its usual spellings may be tried
    declared: bool = False  # the bench's own command (a `preflight` line or a `probe`): it must work outside


@dataclass
class Broken:
    """A check that works outside the sandbox and fails inside it."""

    arm: str
    check: Check
    command: str  # the alternative that works outside
    inside: int  # exit status inside
    outside: int  # exit status outside
    output: str  # what it printed inside
    blocked: list[Blocked] = field(default_factory=list)  # what the traces show the sandbox kept from it
    traced: bool = True  # whether the execution audit traced it (else only the output tells)
    view: SandboxView | None = None
    failed_first: tuple[str, ...] = ()  # the checks that failed outside too before a usual spelling worked

    def message(self) -> str:
        if self.check.endpoint:
            return (
                f"arm {self.arm}: {self.check.label} ({self.check.endpoint}) is a service that answers outside the "
                f"sandbox, but inside it the connection is refused: declare [arms.{self.arm}] network = "
                f"{toml_list(self._network_entries())}"
            )
        lines = [
            f"arm {self.arm}: `{self.command}` works outside the sandbox (exit {self.outside}) and fails inside it "
            f"(exit {self.inside})"
        ]
        if self.failed_first:
            tried = " and ".join(f"`{command}`" for command in self.failed_first)
            lines.append(
                f"    ({tried} fail outside the sandbox too; `{self.command}` is the first usual spelling that works: "
                f"declare [arms.{self.arm}] preflight = {toml_list([self.command])}, or a command that does what trials do)"
            )
        if not self.traced and not self.blocked:
            lines.append(
                "    the execution audit is off here, so what it could not reach is not traced: declare the files of the "
                f"bench it reads in [arms.{self.arm}] readable = [...], the endpoints it connects to in network = [...]"
            )
        elif not self.blocked:
            lines.append("    the traces show no hidden file and no refused endpoint it needed")
        lines += [f"    {line}" for line in self._what_it_could_not_reach()]
        for remedy in self.remedies():
            lines.append(f"    -> {remedy}")
        if self.output.strip():
            lines.append("    it said: " + "\n        ".join(lines_naming_the_error(self.output, limit=OUTPUT_LINES)))
        return "\n".join(lines)

    def _what_it_could_not_reach(self) -> list[str]:
        """One line per file or endpoint; files of one entry to declare (a package's modules) in one line."""
        groups: dict[str, list[Blocked]] = {}
        for blocked in self.blocked:
            entry = blocked.target
            if self.view is not None and blocked.kind == "file" and "readable" in blocked.remedy:
                entry = os.path.join(self.view.bench_root, readable_entries([blocked.target], self.view.bench_root)[0])
            groups.setdefault(entry, []).append(blocked)
        lines = []
        for entry, members in groups.items():
            if len(members) == 1:
                lines.append(_without_remedy(members[0]))
                continue
            names = [os.path.relpath(member.target, entry) for member in members]
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            lines.append(f"could not open {len(members)} files in {entry} ({members[0].why}): {shown}")
        return lines

    def remedies(self) -> list[str]:
        """One line per declaration: every hidden file of the bench in one `readable`, and so on."""
        view = self.view
        bench_files = [b.target for b in self.blocked if b.kind == "file" and b.remedy.startswith(f"declare [arms.{self.arm}] readable")]
        endpoints = [b for b in self.blocked if b.kind == "endpoint" and b.remedy]
        out: list[str] = []
        if bench_files and view is not None:
            out.append(view.readable_remedy(bench_files))
        if endpoints and view is not None:
            offered = []
            for blocked in endpoints:
                endpoint = endpoint_in(blocked.target)
                offered.append(view.offered.get(endpoint, blocked.target) if endpoint is not None else blocked.target)
            out.append(f"declare [arms.{self.arm}] network = {toml_list(list(dict.fromkeys([*view.network, *offered])))}")
        for blocked in self.blocked:
            if blocked.remedy and blocked not in endpoints and blocked.target not in bench_files and blocked.remedy not in out:
                out.append(blocked.remedy)
        return out

    def _network_entries(self) -> list[str]:
        view = self.view
        declared = list(view.network) if view is not None else []
        return list(dict.fromkeys([*declared, self.check.template]))


@dataclass
class Unjudged:
    """A check whose every command fails outside the sandbox too: it cannot say whether the sandbox
    breaks the arm, so the sitting is refused rather than spent on a program that may not run."""

    arm: str
    check: Check
    attempts: list[tuple[str, int, str]]  # (command, exit status outside, output) for every one tried

    def message(self) -> str:
        if self.check.declared:
            head = f"arm {self.arm}: {self.check.label} fails outside the sandbox too, so it says nothing of the sandbox:"
        else:
            head = (
                f"arm {self.arm}: no usual spelling of a help or version request of {self.check.label} works outside the "
                "sandbox, so the pre-flight cannot tell whether the sandbox breaks it:"
            )
        lines = [head]
        for command, status, output in self.attempts:
            said = lines_naming_the_error(output, limit=OUTPUT_LINES // 2)
            lines.append(f"    `{command}` exit {status}" + (": " + "\n        ".join(said) if said else " (no output)"))
        example = f"{self.check.binary} <arguments that work>" if self.check.binary else "<a command that works>"
        lines.append(
            f"    -> declare [arms.{self.arm}] preflight = {toml_list([example])}: a command line that works outside the "
            "sandbox and does what trials do (reads the files, reaches the services)"
        )
        return "\n".join(lines)


def _without_remedy(blocked: Blocked) -> str:
    what = f"could not open {blocked.target}" if blocked.kind == "file" else f"could not connect to {blocked.target}"
    return f"{what} ({blocked.why})"


@dataclass
class Preflight:
    """What the pre-flight found for a sitting."""

    broken: list[Broken] = field(default_factory=list)
    unjudged: list[Unjudged] = field(default_factory=list)  # checks that fail outside too: refused as well
    notes: list[str] = field(default_factory=list)  # checks it could not judge, arms it could not set up
    noted: set[str] = field(default_factory=set)  # the arms the notes are about
    arms: list[str] = field(default_factory=list)  # the arms whose programs ran
    checks: int = 0
    seconds: float = 0.0
    mcp_failures: list[McpFailure] = field(default_factory=list)  # MCP servers that would leave an arm without its tools
    mcp_arms: list[str] = field(default_factory=list)  # the arms whose MCP servers were started
    mcp_servers: int = 0

    def note(self, arm: str, text: str) -> None:
        self.notes.append(text)
        self.noted.add(arm)

    def passed(self, arm: str) -> bool:
        """Whether the arm's programs or MCP servers were checked and nothing at all was said of it."""
        said = {item.arm for item in self.broken} | {item.arm for item in self.unjudged}
        said |= {item.arm for item in self.mcp_failures} | self.noted
        return arm in {*self.arms, *self.mcp_arms} and arm not in said

    @property
    def refuses(self) -> bool:
        """Whether the sitting is refused: a check the sandbox breaks, one that cannot tell, or an MCP
        server that would leave its arm without its tools."""
        return bool(self.broken or self.unjudged or self.mcp_failures)

    def refusal(self, bench: Bench) -> str:
        """The UsageError's text: one message per broken check, then one per check that cannot tell,
        then one per failing MCP server."""
        lines = []
        if self.broken:
            count = len(self.broken)
            verb = "s" if count == 1 else ""
            lines.append(
                f"benchcell pre-flight: {_plural(count, 'check')} of the selected arms work{verb} outside the sandbox and "
                f"fail{verb} inside it, so every trial would measure the sandbox, not the arm (nothing was reserved, no "
                f"model request was made); declare what the arms need in {bench.path}:"
            )
            lines += [broken.message() for broken in self.broken]
        if self.unjudged:
            count = len(self.unjudged)
            verb = "s" if count == 1 else ""
            lines.append(
                f"benchcell pre-flight: {_plural(count, 'check')} of the selected arms fail{verb} outside the sandbox too, "
                "so the pre-flight cannot tell whether the sandbox breaks the arm and every trial could spend tokens on a "
                f"program that does not run (nothing was reserved, no model request was made); declare in {bench.path}:"
            )
            lines += [unjudged.message() for unjudged in self.unjudged]
        if self.mcp_failures:
            lines.append(mcp_refusal(bench, self.mcp_failures))
        return "\n".join(lines)

    def summary(self) -> str:
        parts = []
        if self.arms:
            parts.append(
                f"{_plural(self.checks, 'check')} of {_plural(len(self.arms), 'arm')} ran in the sandbox as in a trial "
                f"and work there"
            )
        if self.mcp_arms:
            parts.append(
                f"{_plural(self.mcp_servers, 'MCP server')} of {_plural(len(self.mcp_arms), 'arm')} started as in a trial "
                f"and offer{'s' if self.mcp_servers == 1 else ''} the arm's tools"
            )
        return f"pre-flight: {'; '.join(parts)} ({self.seconds:.2f} s)" if parts else ""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def checks_for_binaries(arm: Arm) -> list[Check]:
    """The checks of an arm's programs: its declared preflight commands, else per binary its probe,
    else `--help` then `--version` (and, where both fail outside too, the other USUAL_SPELLINGS)."""
    if arm.preflight:
        return [Check(f"the preflight command `{command}`", (command,), declared=True) for command in arm.preflight]
    checks = []
    for binary in arm.binaries:
        probe = arm.probes.get(binary)
        if probe:
            checks.append(Check(f"the probe of {binary} `{probe}`", (probe,), binary=binary, declared=True))
        else:
            commands = (f"{shlex.quote(binary)} --help", f"{shlex.quote(binary)} --version")
            checks.append(Check(binary, commands, binary=binary))
    return checks


def run_preflight(bench: Bench, arms: Mapping[str, str], hooks: Any, model_kind: str, *, cli: str) -> Preflight:
    """Run the pre-flight for `arms` (arm -> the task its environment is provisioned for). An arm's
    MCP servers are asked in a thread while the next arms are checked; its environment is torn down
    once they have answered."""
    started = time.monotonic()
    found = Preflight()
    asking: list[tuple[str, ServerCheck]] = []
    # Arms with MCP servers first: their servers start while the other arms are checked.
    ordered = sorted(arms.items(), key=lambda item: not bench.arms[item[0]].mcp_servers)
    with ExitStack() as kept:  # the environments of arms whose MCP servers are still being asked
        for name, task in ordered:
            arm = bench.arms[name]
            programs = "Bash" in arm.tools and sandbox_state(bench, arm).available and bool(checks_for_binaries(arm) or arm.env)
            if not programs and not arm.mcp_servers:
                continue
            try:
                with ExitStack() as environment_of_arm:
                    info, environment, folder, values = environment_of_arm.enter_context(
                        provisioned(bench, name, task, PREFLIGHT_TRIAL, model_kind, hooks)
                    )
                    servers = _check_arm(bench, arm, task, info, environment, folder, values, cli, found, programs=programs)
                    if servers is not None:
                        asking.append((name, servers))
                        kept.enter_context(_until_answered(servers, environment_of_arm.pop_all()))
            except (HarnessError, ConfinementError) as exc:
                found.note(name, f"pre-flight: arm {name} was not checked ({exc}); its trials will say what fails")
        for _name, servers in asking:
            found.mcp_failures += servers.result()
    found.seconds = time.monotonic() - started
    return found


@contextmanager
def _until_answered(servers: ServerCheck, environment: ExitStack) -> Iterator[None]:
    """Keep an arm's environment until its MCP servers have answered (or failed), then tear it down."""
    try:
        yield
    finally:
        _wait_quietly(servers)  # also when the sitting is stopped half-way
        environment.close()


def _wait_quietly(servers: ServerCheck) -> None:
    """Wait for the servers' answers; what their check raised is read from result() by whoever reports it."""
    try:
        servers.result()
    except Exception:  # noqa: BLE001 - only waiting here
        pass


def _check_arm(
    bench: Bench, arm: Arm, task: str, info: Any, environment: Any, folder: Path, values: Mapping[str, str], cli: str,
    found: Preflight, *, programs: bool = True,
) -> ServerCheck | None:  # fmt: skip
    """Check the arm's programs in its sandbox; its MCP servers are asked meanwhile, in a thread
    whose check is returned (None for an arm without servers)."""
    where = f"{bench.path}: [arms.{arm.name}] preflight"
    confined = confine(bench, arm, info, environment, values, folder, cli, where, require_audit=False, untraced=True)
    servers = None
    try:
        if arm.mcp_servers:  # outside the sandbox, as the CLI starts them: the same environment serves both checks
            servers = ServerCheck(
                bench, arm, values, dict(confined.env), info.agent_cwd, folder, secret_values(bench, arm, environment)
            )
            found.mcp_arms.append(arm.name)
            found.mcp_servers += len(arm.mcp_servers)
        if not programs:
            return servers
        checks = [
            replace(check, commands=tuple(fill_placeholders(command, values, where=where) for command in check.commands))
            for check in checks_for_binaries(arm)
        ]
        checks += _endpoint_checks(arm, confined)
        if not checks or confined.prefix is None:
            return servers
        found.arms.append(arm.name)
        found.checks += len(checks)
        runner = Runner(confined, info.agent_cwd)
        inside = runner.inside_all([check.commands for check in checks])
        for check, (command, status, _) in zip(checks, inside):
            if status == 0:
                continue
            attempts: list[tuple[str, int, str]] = []
            broken = _judge(arm, check, runner, confined, attempts)
            if broken is None and check.binary and not check.declared:
                broken = _try_spellings(arm, check, runner, confined, attempts)
                if broken == FLAKY:  # works outside and inside: the check is that spelling
                    works = next(c for c in _spellings(check) if c not in {attempt[0] for attempt in attempts})
                    found.note(
                        arm.name,
                        f"pre-flight: arm {arm.name}: {' and '.join(f'`{c}`' for c in check.commands)} fail outside the "
                        f"sandbox too; `{works}` works, in the sandbox as well (declare [arms.{arm.name}] preflight = "
                        f"{toml_list([works])}, or a command that does what trials do)"
                    )
                    continue
            if isinstance(broken, Broken):
                found.broken.append(broken)
            elif broken == FLAKY:
                found.note(arm.name, f"pre-flight: arm {arm.name}: `{command}` failed once in the sandbox and worked when run again")
            elif check.endpoint:
                found.note(arm.name, f"pre-flight: arm {arm.name}: {check.label} ({check.endpoint}) stopped answering outside the sandbox")
            else:
                found.unjudged.append(Unjudged(arm.name, check, attempts))
    except BaseException:
        if servers is not None:  # its environment is torn down as this propagates: let the servers answer first
            _wait_quietly(servers)
        raise
    finally:
        confined.close()
    return servers


def _endpoint_checks(arm: Arm, confined: Confinement) -> list[Check]:
    """A connection check per variable of the arm naming a loopback endpoint that the arm does not
    declare and that answers outside the sandbox (the bench's service, reached through $VAR)."""
    checks = []
    declared = set(confined.endpoints)
    for name, template in arm.env.items():
        endpoint = endpoint_in(confined.env.get(name, ""))
        if endpoint is None or endpoint in declared or not _answers(endpoint.host, endpoint.port):
            continue
        command = f"exec 3<>/dev/tcp/{endpoint.host}/{endpoint.port}"
        checks.append(Check(f"${name}", (command,), endpoint=str(endpoint), template=template))
    return checks


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


FLAKY = "flaky"  # a check that failed inside worked when run there again


def _judge(
    arm: Arm, check: Check, runner: Runner, confined: Confinement, attempts: list[tuple[str, int, str]],
    timeout: float = COMMAND_TIMEOUT_S, *, ran_inside: bool = True,
) -> Broken | str | None:  # fmt: skip
    """Run a check that failed inside outside the sandbox; when one of its commands works there, it
    is broken: run that one inside again, alone, and read both traces (or, untraced or where they
    show nothing, its output) for what the sandbox kept. None when every command fails outside too
    (each appended to `attempts`); FLAKY when the one that works outside works inside now. Outside,
    a command runs untraced first (most fail, or work inside again); only a broken one runs there
    once more under the audit's strace, for what it opened and reached. `ran_inside`: whether the
    commands already failed inside untraced (the first pass); if not, that is tried first too."""
    tracer = confined.audit.tracer if confined.audit is not None else None
    for command in check.commands:
        if check.endpoint:
            endpoint = endpoint_in(check.endpoint)
            works = endpoint is not None and _answers(endpoint.host, endpoint.port)
            outside: tuple[int, str, exec_audit.StraceLog | None] = (0 if works else 1, "", None)
        else:
            outside = runner.outside(command, None, timeout=timeout)
        if outside[0] != 0:
            attempts.append((command, outside[0], outside[1]))
            continue
        if not ran_inside and runner.inside_one(command, traced=False)[0] == 0:
            return FLAKY  # it works inside as well
        status, output, inside_log = runner.inside_one(command)
        if status == 0:
            return FLAKY  # a program that fails now and then, not the sandbox
        broken = Broken(arm.name, check, command, status, outside[0], output, traced=tracer is not None, view=confined.view)
        if confined.view is not None and tracer is not None:
            outside_log = None if check.endpoint else runner.outside(command, tracer, timeout=timeout)[2]
            broken.blocked = _what_was_kept(confined.view, inside_log, outside_log)
        if confined.view is not None and not broken.blocked:  # a lookup that is no open: what its output names
            broken.blocked = [block for block, _ in confined.view.output_blocks(output, _program_of(command, confined), command)]
        return broken
    return None


def _try_spellings(arm: Arm, check: Check, runner: Runner, confined: Confinement, attempts: list[tuple[str, int, str]]) -> Broken | str | None:
    """A binary whose default checks fail outside too: its other usual spellings, outside, the first
    that works judged inside as any check (SPELLING_TIMEOUT_S each)."""
    verdict = _judge(arm, replace(check, commands=_spellings(check)), runner, confined, attempts, SPELLING_TIMEOUT_S, ran_inside=False)
    if isinstance(verdict, Broken):
        verdict.failed_first = check.commands
    return verdict


def _spellings(check: Check) -> tuple[str, ...]:
    """The usual spellings of a binary's help or version request its default checks did not try."""
    binary = shlex.quote(check.binary)
    return tuple(command for command in (f"{binary} {spelling}" for spelling in USUAL_SPELLINGS) if command not in check.commands)


def _program_of(command: str, confined: Confinement) -> str:
    """The real file of a command line's first word, on the arm's PATH ('' when not found)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return ""
    found = shutil.which(words[0], path=search_path(confined.arm)) if words else None
    return os.path.realpath(found) if found else ""


def _what_was_kept(view: SandboxView, inside: exec_audit.StraceLog | None, outside: exec_audit.StraceLog | None) -> list[Blocked]:
    """The files and endpoints the sandbox kept from a program: failed inside on what exists outside
    and is hidden, or opened and reached outside where the sandbox hides or refuses it."""
    found: dict[str, Blocked] = {}
    reached_outside = {a.target for a in outside.accesses if a.call == "connect" and not a.failed} if outside else set()
    for access in inside.accesses if inside else ():
        if not access.failed:
            continue
        if access.call == "connect":
            blocked = view.endpoint(access.target)
            if blocked is None and access.target in reached_outside:
                blocked = Blocked("endpoint", access.target, "the sandbox lets commands reach only the endpoints the arm declares", "")
        else:
            blocked = view.file(access.target)
        if blocked is not None:
            found.setdefault(blocked.target, blocked)
    if outside is not None:
        paths = [record.path for record in outside.records] + [
            a.target for a in outside.accesses if a.call != "connect" and not a.failed
        ]
        files = [blocked for blocked in (view.file(path) for path in dict.fromkeys(paths)) if blocked is not None]
        for blocked in _deepest(files, view.bench_root):
            found.setdefault(blocked.target, blocked)
        for target in reached_outside:
            blocked = view.endpoint(target)
            if blocked is not None:
                found.setdefault(blocked.target, blocked)
    return list(found.values())


def _deepest(files: Sequence[Blocked], bench_root: str) -> list[Blocked]:
    """Leave out the folders that hold another of the files (a package's folder when its modules are
    listed) and the bench folder itself (a program lists it on the way to its files)."""
    reals = {os.path.realpath(b.target) for b in files}
    kept = []
    for blocked in files:
        real = os.path.realpath(blocked.target)
        if real == os.path.realpath(bench_root):
            continue
        if os.path.isdir(real) and any(other != real and other.startswith(real + "/") for other in reals):
            continue
        kept.append(blocked)
    return kept
