"""A trial's confinement: everything that keeps the agent to its arm, built in one place.

trial.py asks for one `Confinement` after provisioning and gets the CLI's environment and launcher;
after the run it asks what the confinement saw. Inside it, from the outside in:
- the curated PATH folder and the CLI launcher that drops inherited variables (isolation/hygiene.py);
- the shell prefix every Bash command runs through: credentials dropped, the execution audit's
  strace (isolation/exec_audit/), and the sandbox (isolation/sandbox/) with the trial's network
  namespace;
- the execution audit's verdict, and whether the sandbox held for the whole trial.
Knows nothing of pytest or the SDK.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import isolation, tool_identity
from .cli_environment import isolated_cli_variables
from .config import Arm, Bench, BenchConfigError, fill_placeholders
from .environment import Environment, TrialInfo
from .isolation import exec_audit, sandbox
from .isolation.blocked import Mounts, SandboxView, endpoints_offered
from .isolation.hygiene import HygieneError, cli_wrapper, curated_bin, removed_variables
from .isolation.limits import LimitWatch
from .isolation.sandbox import Endpoint, TrialNetwork
from .isolation.tool_offer import mcp_wait

GUARD_OFF = "*"  # in guard_exempt: the in-band guard allows every Bash command (testing the audits)


class ConfinementError(Exception):
    """The arm cannot be confined as declared here (recorded as a harness error)."""


def exec_audit_state(bench: Bench, arm: Arm | None = None) -> exec_audit.Tracer:
    """Whether the execution audit runs for this bench (and arm): the tracer, or why not."""
    watches_bash = arm is None or "Bash" in arm.tools
    return exec_audit.audit_state(
        bench.exec_audit, watches_bash=watches_bash, no_bash="the arm has no Bash tool", one_cpu=bench.exec_audit_cpus == "one"
    )


def sandbox_state(bench: Bench, arm: Arm | None = None) -> sandbox.SandboxTool:
    """Whether the sandbox runs for this bench (and arm): the tool, or why not."""
    watches_bash = arm is None or "Bash" in arm.tools
    return sandbox.sandbox_state(bench.sandbox, watches_bash=watches_bash, no_bash="the arm has no Bash tool")


def search_path(arm: Arm) -> str:
    """The PATH an arm's binaries are found on (their folders first), and that they run with."""
    return tool_identity.search_path(arm.path)


def write_roots(info: TrialInfo) -> tuple[str, ...]:
    """Where the agent's command lines may write: its working directory and the environment's folder
    (as given and with symlinks resolved, since either spelling may reach the agent)."""
    folders = (str(info.agent_cwd), str(info.workdir))
    return tuple(dict.fromkeys([*folders, *(os.path.realpath(folder) for folder in folders)]))


@dataclass
class Confinement:
    arm: Arm
    folder: Path  # the trial's own folder (holds bin/, the prefix, the audit's logs...)
    env: dict[str, str]  # what the CLI gets on top of the few inherited variables it keeps
    cli_path: Path  # the launcher of the CLI
    audit: exec_audit.ExecAudit | None
    sandbox: sandbox.SandboxTool
    network: TrialNetwork | None = None
    endpoints: tuple[Endpoint, ...] = ()
    network_held: bool = True  # the network namespace was still there when the run ended
    exec_report: dict[str, Any] | None = None  # what the execution audit saw (the sample's exec_audit)
    limits: LimitWatch | None = None  # the watch on the trial's disk, files and processes
    view: SandboxView | None = None  # what the sandbox hides and refuses (None: no sandbox)
    untraced_prefix: Path | None = None  # the shell prefix without the audit's strace (confine(untraced=True))
    blocked: list[dict[str, Any]] = field(default_factory=list)  # the sample's sandbox_blocked

    @property
    def sandbox_report(self) -> dict[str, Any] | None:
        """The sample's `sandbox` record: the limits, which were reached, the peaks (None without it)."""
        return self.limits.report() if self.limits is not None else None

    @property
    def prefix(self) -> Path | None:
        """The shell prefix every Bash command runs through (None: the arm has no Bash)."""
        value = self.env.get("CLAUDE_CODE_SHELL_PREFIX")
        return Path(value) if value else None

    def findings(self, sample: Mapping[str, Any], harmless: Sequence[str], cli: str) -> list[str]:
        """After the run: what the execution audit found, and whether the sandbox held throughout."""
        lines: list[str] = []
        if self.network is not None and not self.network_held:
            lines.append(
                "sandbox: the trial's network namespace ended while the trial ran, so its commands may "
                "have run outside it"
            )
        if self.audit is not None:
            ran = sum(
                1 for call in sample["tool_calls"] if call["tool"] == "Bash" and call["allowed"] and call["is_error"] is False
            )
            while True:
                policy = self.audit.policy(
                    self.arm.name, self.arm.binaries, self.arm.helpers, self.folder / "bin", search_path(self.arm),
                    harmless, cli=cli, probes=self.arm.probes,
                )
                report = self.audit.report(policy, commands_ran=ran, judge=self.view.judge if self.view else None)
                # Helpers kept from an earlier sitting (or handed over) that leave a program unexplained
                # are learned again, and the trial judged with what the binary's start-up runs today.
                if not report.leaks or not self.audit.probe_again(self.arm.binaries, search_path(self.arm), self.arm.probes):
                    break
            self.exec_report = report.as_dict()
            self.blocked = [dict(entry) for entry in report.blocked]
            if self.view is not None:  # what the failed runs' outputs name: lookups that are no open
                self.blocked = self.view.judge_runs(report.failed, sample["tool_calls"], self.blocked)
            lines += report.lines()
        return lines

    def close(self) -> None:
        """Stop the trial's network namespace (noting first whether it lasted the whole run)."""
        if self.limits is not None:
            self.limits.stop()
        if self.network is not None:
            self.network_held = self.network_held and self.network.alive()
            self.network.stop()


def start_arm_probes(bench: Bench, arm: Arm) -> None:
    """Start the probes of the arm's binaries' start-up (what its execution policy learns), on
    threads of their own, where the audit runs and the arm has a shell."""
    tracer = exec_audit_state(bench, arm)
    if tracer.available and "Bash" in arm.tools:
        exec_audit.start_probes(tracer, arm.binaries, search_path(arm), arm.probes)


def confine(
    bench: Bench,
    arm: Arm,
    info: TrialInfo,
    environment: Environment,
    values: Mapping[str, str],
    folder: Path,
    cli: str,
    where: str,
    *,
    require_audit: bool,
    untraced: bool = False,
) -> Confinement:
    """Build the trial's confinement (raises ConfinementError with the reason). `untraced` also
    writes the shell prefix without the audit's strace (the pre-flight's first pass; a trial has
    no use for it)."""
    env = _agent_environment(arm, values, folder, where)
    env.update(mcp_wait(bench, arm).environment())  # the CLI waits for the arm's MCP servers
    tracer = exec_audit_state(bench, arm)
    if not tracer.available and bench.exec_audit == "required" and "Bash" in arm.tools and require_audit:
        raise ConfinementError(f'{bench.path}: [bench] exec_audit = "required", but {tracer.reason}: {exec_audit.INSTALL_HINT}')
    tool = sandbox_state(bench, arm)
    if not tool.available and bench.sandbox == "required" and "Bash" in arm.tools:
        raise ConfinementError(f'{bench.path}: [bench] sandbox = "required", but {tool.reason}: {sandbox.INSTALL_HINT}')
    # The sandbox's launchers run between strace and the command's shell: the audit allows them there.
    launchers = tuple(path for path in (tool.prlimit, tool.nsenter, tool.bwrap) if path) if tool.available else ()
    # A trial traces what ran and what it connected to; the pre-flight (`untraced`), which asks why a
    # program fails in the sandbox, traces its opens too (exec_audit/tracer.py, OPEN_CALLS).
    audit = (
        exec_audit.ExecAudit(folder / "exec-audit", tracer, wrappers=launchers, opens=untraced)
        if tracer.available
        else None
    )
    if audit is not None and not untraced:
        start_arm_probes(bench, arm)  # begun by the pre-flight already where this process runs trials
    confinement = Confinement(arm, folder, env, folder / "claude-launcher", audit, tool)
    plan = None
    if tool.available:
        confinement.endpoints = _endpoints(arm, values, where)
        plan = _plan(bench, arm, info, environment, folder, env)
        try:
            confinement.network = sandbox.TrialNetwork(tool, folder / "network", confinement.endpoints).start()
        except (sandbox.SandboxError, OSError) as exc:
            raise ConfinementError(f"the sandbox could not start: {exc}") from exc
        confinement.limits = LimitWatch(
            bench.sandbox_limits, plan.writable, confinement.network.child_pid,
            skip=[path for path in plan.never if any(path.startswith(folder + "/") for folder in plan.writable)],
        ).start()  # fmt: skip
    if "Bash" in arm.tools:

        def shell_prefix(path: Path, trace: str) -> Path:
            return sandbox.write_prefix(
                path, tool, plan, confinement.network, trace=trace, shell=audit.shell if audit else "/bin/bash",
                limits=bench.sandbox_limits, pin=audit.pin_line() if audit and trace else "",
                traced_namespace=not (audit and audit.notified),
            )

        prefix = shell_prefix(folder / "shell-prefix", audit.trace_command() if audit else "")
        env["CLAUDE_CODE_SHELL_PREFIX"] = str(prefix)
        # The same without the audit's strace, which costs a few ms per process started in the sandbox:
        # the pre-flight's first pass only asks whether the programs work (preflight.py).
        if untraced:
            confinement.untraced_prefix = shell_prefix(folder / "shell-prefix-untraced", "") if audit else prefix
        if plan is not None:
            confinement.view = _view(bench, arm, environment, values, confinement, Mounts.from_prefix(prefix.read_text(), tool.bwrap))
    confinement.cli_path = cli_wrapper(folder / "claude-launcher", cli, removed_variables(os.environ, declared=env))
    return confinement


def sandbox_limit_note(sample: Mapping[str, Any]) -> str:
    """One line for the trial's reason and progress line when its commands reached a limit."""
    reached = (sample.get("sandbox") or {}).get("reached") or []
    return f"sandbox limit reached: {'; '.join(reached)}" if reached else ""


def _endpoints(arm: Arm, values: Mapping[str, str], where: str) -> tuple[sandbox.Endpoint, ...]:
    """Where the arm's commands may connect: its `network` entries and its curl allow_urls."""
    declared = [*arm.network, *arm.arguments.get("curl", {}).get("allow_urls", ())]
    endpoints = []
    for text in declared:
        try:
            filled = fill_placeholders(text, values, where=where)
        except BenchConfigError as exc:
            raise ConfinementError(str(exc)) from exc
        try:
            endpoints.append(sandbox.parse_endpoint(filled))
        except ValueError as exc:
            raise ConfinementError(f"{where}: network endpoint {filled!r}: {exc}") from None
    return tuple(sorted(set(endpoints)))


def _harness_package() -> str:
    return str(Path(__file__).resolve().parent)


def _never_shown(bench: Bench) -> list[str]:
    """bench.toml, conftest.py and the store: the answers, hidden even inside what an arm may read."""
    root = os.path.realpath(bench.root)
    return [os.path.realpath(bench.path), os.path.join(root, "conftest.py"), str(bench.store)]


def _view(
    bench: Bench, arm: Arm, environment: Environment, values: Mapping[str, str], confinement: Confinement, mounts: Mounts
) -> SandboxView:
    """What the trial's sandbox hides and refuses, to judge the failures of the arm's own programs."""
    root = os.path.realpath(bench.root)
    return SandboxView(
        arm=arm.name,
        mounts=mounts,
        bench_root=root,
        never=tuple(_never_shown(bench)),
        harness=_harness_package(),
        trial_folder=os.path.realpath(confinement.folder),
        environment_hidden=tuple(os.path.realpath(str(path)) for path in getattr(environment, "hidden", ())),
        readable=tuple(os.path.relpath(path, root) if path.startswith(root + "/") else path for path in arm.readable),
        network=arm.network,
        declared=frozenset(confinement.endpoints),
        offered=endpoints_offered(arm.env, confinement.env, values),
        credentials=tuple(os.path.realpath(path) for path in sandbox.home_credentials()),
    )


def _plan(
    bench: Bench, arm: Arm, info: TrialInfo, environment: Environment, folder: Path, env: Mapping[str, str]
) -> sandbox.SandboxPlan:
    """What the trial's commands may see (see isolation/sandbox/ for the rules)."""
    snapshots = folder / "claude-config" / "shell-snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)  # the CLI writes it; it must exist to be mounted
    declared_hidden = [os.path.realpath(str(path)) for path in getattr(environment, "hidden", ())]
    root = os.path.realpath(bench.root)
    never = [*_never_shown(bench), *declared_hidden]
    hidden = [
        root,
        str(bench.store),
        _harness_package(),
        os.path.realpath(tempfile.gettempdir()),
        os.path.realpath(folder),
        *sandbox.home_credentials(),
        *never,
    ]
    readable = [str(folder / "bin"), str(snapshots), *arm.readable]
    if arm.skill_path:
        readable.append(os.path.realpath(bench.root / arm.skill_path))
    # An arm's `path` folders show its binaries and `readable` files only: a maintainer keeps
    # helpers and secrets beside a CLI. (Folders on the harness's own PATH are the system's.)
    system_path = {os.path.realpath(folder) for folder in os.environ.get("PATH", "").split(os.pathsep) if folder}
    path_folders = [folder for folder in arm.path if os.path.realpath(folder) not in system_path]
    hidden += path_folders
    binaries_path = search_path(arm)
    for name in arm.binaries:
        found = shutil.which(name, path=binaries_path)
        if found:
            readable.append(os.path.realpath(found))
            if os.path.dirname(found) in path_folders:  # a link there: the name the wrapper runs, too
                readable.append(found)
    # The Python the harness runs (a venv inside the project is common): scripts of the arm and the
    # CLI's own search tools (its executable lives in the SDK's package) need it.
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix}:
        readable.append(os.path.realpath(prefix))
    writable = [os.path.realpath(info.agent_cwd), os.path.realpath(info.workdir)]
    return sandbox.SandboxPlan(
        writable=tuple(writable),
        readable=tuple(readable),
        hidden=tuple(hidden),
        home=env["HOME"],
        never=tuple(never + [_harness_package()]),
    )


def _agent_environment(arm: Arm, values: Mapping[str, str], folder: Path, where: str) -> dict[str, str]:
    """The variables the CLI and the agent's tools get on top of the few inherited ones kept."""
    try:
        exempt = tuple(name for name in arm.guard_exempt if name != GUARD_OFF)
        harmless = isolation.HARMLESS_UTILITIES if "Bash" in arm.tools else ()
        bin_dir = curated_bin(folder / "bin", (*arm.binaries, *exempt), harmless, search_path(arm))
    except HygieneError as exc:
        raise ConfinementError(f"{where}: {exc}") from exc
    env = {
        **isolated_cli_variables(folder),
        "PATH": str(bin_dir),
        "SHELL": "/bin/bash",
    }
    for key, value in arm.env.items():
        try:
            env[key] = fill_placeholders(value, values, where=where)
        except BenchConfigError as exc:
            raise ConfinementError(str(exc)) from exc
    return env
