"""The trial's shell prefix (CLAUDE_CODE_SHELL_PREFIX): drop the credentials, set the limits, then
run each command inside the trial's network namespace (nsenter), under the execution audit's strace
in a pid namespace of the command's own (unshare), inside bwrap."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ..limits import Limits
from .mounts import SandboxPlan, _inside, bwrap_arguments, mount_aliases
from .network import TrialNetwork
from .tool import SANDBOX_UID, SandboxTool, pid_namespace_options

# Variables only the CLI needs; no command of the agent ever sees them.
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_SHELL_PREFIX",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CONFIG_DIR",
    "AWS_BEARER_TOKEN_BEDROCK",
)


def write_prefix(
    path: Path,
    tool: SandboxTool | None,
    plan: SandboxPlan | None,
    network: TrialNetwork | None,
    trace: str = "",
    shell: str = "/bin/bash",
    limits: Limits | None = None,
    pin: str = "",
    traced_namespace: bool = True,
) -> Path:
    """The trial's CLAUDE_CODE_SHELL_PREFIX: drop the credentials, then run the command in its shell,
    under `trace` (the execution audit's strace command, a shell fragment) when given and inside the
    sandbox when `tool` is available, within `limits`. Without the sandbox it still drops the
    credentials. The seccomp filter, and as root the passwd and group files naming SANDBOX_UID,
    are written beside the prefix (in the trial's own folder, which no command sees). `pin`: a line
    that sets the array `pin` to the words the whole command runs through (ExecAudit.pin_line).
    `traced_namespace`: `trace` (strace) runs in a pid namespace of its own; the exec notifier, which
    reads its pids as the host's, needs none (ExecAudit.notified)."""
    shell = os.path.realpath(shell)
    lines = [
        f"#!{shell}",
        "# pytest-benchcell: the Claude CLI runs every Bash command as PREFIX \"<wrapped command>\".",
        "unset " + " ".join(CREDENTIAL_VARIABLES),
    ]
    words = [trace] if trace else []
    if pin:
        lines.append(pin)
    redirections = []
    sandboxed = tool is not None and tool.available and plan is not None and network is not None
    own_pid_namespace = bool(sandboxed and trace and traced_namespace and tool is not None and tool.unshare)
    if own_pid_namespace and tool is not None and network is not None:
        # strace in a pid namespace of the command's own, entered with the trial's network namespace
        # first: the sandbox's pid namespace is nested in it, so strace reads the pids its tracees'
        # forks return from a /proc of a few processes instead of the host's (its cost grew with
        # the machine's process count and load), and it stays out of the sandbox's sight. The
        # namespace's first process is a shell that waits for strace: it, not strace, inherits the
        # processes whose parent ended (strace would report each one's end a second time).
        init = [tool.nsenter, *network.enter_options(), "--", tool.unshare, *pid_namespace_options(), "--", shell, "-c", '"$@"; exit $?', "benchcell-init"]
        words = [shlex.join(init)] + words
    if tool is not None and tool.available and plan is not None and network is not None:
        # The CLI ends each wrapped command with `pwd -P >| <its cwd file>` to follow `cd`: that one
        # file, created here, is shared with the sandbox's private /tmp.
        lines += [
            "share=()",
            r'if [[ $1 =~ (/[A-Za-z0-9._/-]*/claude-[0-9a-f]+-cwd)$ ]]; then',
            '    : >| "${BASH_REMATCH[1]}" && share=(--bind "${BASH_REMATCH[1]}" "${BASH_REMATCH[1]}")',
            "fi",
        ]
        if limits is not None:
            # Bash counts -f in KiB. Set here, it binds strace, nsenter and bwrap as well (none writes
            # a file that large); the process limit comes after strace's own fork (see limits.py).
            lines.append(f"ulimit -f {limits.disk_mb * 1024}")
            if not tool.as_root and tool.prlimit:
                words.append(shlex.join([tool.prlimit, f"--nproc={limits.processes}:{limits.processes}"]))
        identity = _identity_files(path.parent) if tool.as_root and tool.user_namespace else None
        bwrap = bwrap_arguments(plan, user_namespace=tool.user_namespace, identity=identity, with_aliases=False)
        # Other mounts of the hidden folders, each hidden if it is still there when the command
        # starts (a mount that went away during the trial must not stop every later command).
        # One that holds a folder the command is given is left: hiding it would hide that folder.
        given = [*plan.readable, *plan.writable, plan.home]
        lines.append("aliases=()")
        for alias in dict.fromkeys(mount_aliases([*plan.hidden, *plan.never])):
            if not any(_inside(folder, alias) for folder in given if folder):
                option = "--tmpfs" if os.path.isdir(alias) and not os.path.islink(alias) else "--ro-bind /dev/null"
                lines.append(f"[[ -e {shlex.quote(alias)} ]] && aliases+=({option} {shlex.quote(alias)})")
        if not tool.seccomp:
            from ..seccomp import compiled_filter

            program = path.with_name("seccomp.bpf")
            program.write_bytes(compiled_filter().program)
            bwrap += ["--seccomp", str(SECCOMP_FD)]
            redirections.append(f"{SECCOMP_FD}<{shlex.quote(str(program))}")
        entered = [] if own_pid_namespace else [tool.nsenter, *network.enter_options(), "--"]
        words += [shlex.join([*entered, tool.bwrap, *bwrap])]
        words += ['"${aliases[@]}" "${share[@]}" --chdir "$PWD"']
    words += [shlex.quote(shell), '-c "$1"', *redirections]
    lines.append("exec " + " ".join(['"${pin[@]}"'] * bool(pin) + words))
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


SECCOMP_FD = 9


def _identity_files(folder: Path) -> Path:
    """passwd and group files for a command run as SANDBOX_UID: the host's, with that uid and gid
    named "sandbox" (`whoami`, `ls -l`, git and node's os.userInfo() need a name)."""
    identity = folder / "identity"
    identity.mkdir(exist_ok=True)
    for name, entry in (("passwd", f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::/nonexistent:/bin/bash"),
                        ("group", f"sandbox:x:{SANDBOX_UID}:")):  # fmt: skip
        try:
            host = Path(f"/etc/{name}").read_text().splitlines()
        except OSError:
            host = []
        kept = [line for line in host if line.split(":")[2:3] != [str(SANDBOX_UID)] and not line.startswith("sandbox:")]
        (identity / name).write_text("\n".join([*kept, entry]) + "\n")
    return identity
