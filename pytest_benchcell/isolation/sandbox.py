"""The sandbox: every Bash command of a trial, and everything it starts, inside bubblewrap.

The guard and the audits judge names and command text; each new binary, option or variable opens
another way around them. The sandbox draws the boundary with the operating system instead, so a
command that gets past every rule still cannot write outside the trial, read the answer key, see
the harness or reach the network:

- **Files.** The system is mounted read-only. Writable: the agent's working directory and the
  environment's workdir (and nothing else: /tmp is a private tmpfs, HOME an empty one). Readable
  but not writable: the curated PATH folder and the CLI's shell snapshots (which the CLI sources
  before every command). Not readable at all: the bench folder (bench.toml, conftest.py, the
  store...) except what the arm needs (its `path` folders, skill, binaries and `readable` paths,
  and the Python installation when it lives there; of an arm's `path` folders only those files),
  the store, the harness's own package, every
  trial folder (the audit's logs, other trials), the user's credential folders, /run, and whatever
  the environment declares hidden (`Environment.hidden`: the service's data folder).
- **Processes.** A pid namespace per command: /proc shows the command's own processes only.
- **Privileges.** Every capability is dropped (`--cap-drop ALL`). Started as root, each command
  also runs in a user namespace of its own as an unprivileged uid (SANDBOX_UID, with its own
  passwd and group lines), so the mounts it inherits are locked (no `umount` reveals what a tmpfs
  hides, no remount makes / writable) and tar, cp -a and friends do not try to give files away;
  files it writes are still the harness user's outside. As root, files only root may read under
  /etc (shadow, ssh host keys) are hidden too, since the command still owns them on disk.
- **The kernel's other doors** (isolation/seccomp.py): a seccomp filter refuses unix sockets,
  keyrings, io_uring, and signals or ptrace aimed at the sandbox's first process.
- **Host places.** Every other mount of a hidden folder (a bind mount, a container volume: found in
  /proc/self/mountinfo, matched by device and inode) is hidden as well, and the world-writable
  folders (/var/tmp, /dev/shm...) are private to the command.
- **Limits** (isolation/limits.py): no file larger than the trial's disk budget (RLIMIT_FSIZE); as
  another user than root, at most the trial's process budget (RLIMIT_NPROC, counted in the trial's
  user namespace); and a watch from outside on the bytes and files added to the writable folders
  and on the processes of the trial's commands.
- **Network.** The command runs in the trial's own network namespace, which has a loopback device
  and nothing else. For each endpoint the arm declares (`network`, and the host:port of its curl
  `allow_urls`), a relay listens on the same loopback address and port inside that namespace and
  forwards through a unix socket to the real service outside. Any other address or port is
  refused at the socket level, for every program (curl, python, bash's /dev/tcp...). MCP servers
  and the environment's services run outside the sandbox, as the CLI starts them.
- **Credentials.** The prefix removes the harness's credentials (ANTHROPIC_*, the CLI's OAuth and
  messaging tokens) before the command starts: only the CLI needs them.

How it runs. The Claude Code CLI starts each Bash command as `PREFIX "<wrapped command>"`
(CLAUDE_CODE_SHELL_PREFIX). The trial's prefix (written by `write_prefix`) is a bash script that
drops the credentials, sets the limits and runs `[strace ... -o LOG] nsenter --net=<the trial's
namespace> -- bwrap <mounts> --seccomp 9 bash -c "$1" 9<filter`. The execution audit's strace sits outside the sandbox, so its logs are
out of the agent's reach; nsenter and bwrap are the harness's own records in those logs.

The network namespace is held for the whole trial by one process (`TrialNetwork`): bwrap with
--unshare-net running one socat per endpoint inside; the outside halves are socat too. Both are
the long-standing tools for this (Claude Code's own sandbox bridges its proxy the same way).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .limits import Limits

__all__ = [
    "INSTALL_HINT",
    "SandboxTool",
    "Endpoint",
    "SandboxPlan",
    "TrialNetwork",
    "SandboxError",
    "find_sandbox",
    "sandbox_state",
    "parse_endpoint",
    "bwrap_arguments",
    "write_prefix",
    "CREDENTIAL_VARIABLES",
]

INSTALL_HINT = (
    "install bubblewrap and socat (Debian/Ubuntu: apt-get install bubblewrap socat; Fedora: dnf install "
    "bubblewrap socat; Arch: pacman -S bubblewrap socat); the sandbox needs Linux with user or root "
    "namespaces (nsenter from util-linux)"
)
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
# Files and folders of the user's home that hold credentials of other tools.
HOME_CREDENTIALS = (
    ".claude", ".claude.json", ".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".kube", ".docker",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".gnupg", ".password-store", ".local/share/keyrings",
)  # fmt: skip
LOOPBACK = re.compile(r"^127(\.\d{1,3}){3}$")
# Started as root, a command runs as this uid in a user namespace of its own (mapped to root
# outside, so what it writes is the harness user's); a passwd line names it "sandbox".
SANDBOX_UID = 1000
READY_TIMEOUT_S = 10.0
CHECK_TIMEOUT_S = 10.0


class SandboxError(Exception):
    """The sandbox could not be set up for a trial (the message says why)."""


# --------------------------------------------------------------------------------------------
# Is the sandbox available here?
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxTool:
    available: bool
    bwrap: str = ""
    nsenter: str = ""
    socat: str = ""
    version: str = ""
    reason: str = ""  # why the sandbox cannot run ("" when available)
    as_root: bool = False  # the harness runs as root
    user_namespace: bool = True  # each command runs in a user namespace of its own
    seccomp: str = ""  # why there is no seccomp filter ("" when there is one)
    prlimit: str = ""  # util-linux's prlimit: sets the process limit where the kernel applies it

    def describe(self) -> str:
        """One line for the pytest header and the sample's provenance."""
        if not self.available:
            return f"off ({self.reason})"
        parts = [f"bubblewrap {self.version}: files, pid and network namespaces", "every capability dropped"]
        if self.as_root:
            parts[-1] += (
                f" (started as root: uid {SANDBOX_UID} in a user namespace)"
                if self.user_namespace
                else " (started as root, without a user namespace: bubblewrap could not create one here)"
            )
        parts.append(f"no seccomp filter: {self.seccomp}" if self.seccomp else "seccomp filter")
        return f"on ({'; '.join(parts)})"


@functools.lru_cache(maxsize=1)
def find_sandbox() -> SandboxTool:
    """Whether bubblewrap, nsenter and socat are installed and a sandbox starts here (checked once)."""
    if not sys.platform.startswith("linux"):
        return SandboxTool(False, reason=f"not on Linux ({sys.platform}); the sandbox needs bubblewrap")
    programs = {name: shutil.which(name) or "" for name in ("bwrap", "nsenter", "socat")}
    missing = [name for name, path in programs.items() if not path]
    if missing:
        listed = " and ".join(missing) if len(missing) < 3 else f"{', '.join(missing[:-1])} and {missing[-1]}"
        return SandboxTool(False, reason=f"{listed} not installed")
    bwrap, nsenter, socat = (os.path.realpath(programs[name]) for name in ("bwrap", "nsenter", "socat"))
    version = _version(bwrap)
    as_root = os.geteuid() == 0
    problem = _check_namespaces(bwrap, user_namespace=True)
    user_namespace = not problem
    if problem and as_root:  # root can still sandbox without one; another user cannot
        problem = _check_namespaces(bwrap, user_namespace=False)
    if problem:
        return SandboxTool(False, bwrap, nsenter, socat, version, reason=problem)
    from .seccomp import compiled_filter

    return SandboxTool(
        True, bwrap, nsenter, socat, version, as_root=as_root, user_namespace=user_namespace,
        seccomp=compiled_filter().reason, prlimit=os.path.realpath(shutil.which("prlimit") or "") if shutil.which("prlimit") else "",
    )  # fmt: skip


def sandbox_state(mode: str, *, watches_bash: bool, no_bash: str) -> SandboxTool:
    """Whether the sandbox runs: the tool, or why not. `mode` is [bench] sandbox."""
    if mode == "off":
        return SandboxTool(False, reason='[bench] sandbox = "off"')
    if not watches_bash:
        return SandboxTool(False, reason=no_bash)
    return find_sandbox()


def _version(bwrap: str) -> str:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"(\d+(?:\.\d+)+)", out)
    return match.group(1) if match else "unknown"


def _check_namespaces(bwrap: str, *, user_namespace: bool) -> str:
    """Start the namespaces a trial's sandbox uses once; '' when they work, else why not."""
    true = os.path.realpath(shutil.which("true") or "/bin/true")
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-net", "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL",
            *(_user_options() if user_namespace else []), true]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot create namespaces here ({last})"
    return ""


def _user_options() -> list[str]:
    """A user namespace of the command's own: as root, as SANDBOX_UID; as another user, as that user.
    No namespace may be made inside it (a new one would have every capability over its own mounts)."""
    ids = ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)] if os.geteuid() == 0 else []
    return ["--unshare-user", *ids, "--disable-userns"]


# --------------------------------------------------------------------------------------------
# Endpoints: where an arm's commands may connect
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Endpoint:
    host: str  # an IPv4 loopback address
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_endpoint(text: str) -> Endpoint:
    """`host:port` or a URL (`http://127.0.0.1:8080/api`) -> the endpoint; ValueError says why not.
    Only loopback hosts: the sandbox relays into its namespace on the same address, and a service
    elsewhere is not something a per-trial environment provides."""
    value = text.strip()
    match = re.match(r"^([a-z][a-z0-9+.-]*)://([^/?#]*)", value, re.IGNORECASE)
    scheme = ""
    if match:
        scheme, value = match.group(1).lower(), match.group(2)
    if "@" in value:
        raise ValueError("no user@ part")
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = value, str(_DEFAULT_PORTS.get(scheme, ""))
    host = "127.0.0.1" if host.lower() == "localhost" else host
    if not LOOPBACK.match(host) or any(int(part) > 255 for part in host.split(".")):
        raise ValueError(f"host {host or '(none)'!r} is not a loopback address (127.x.x.x or localhost)")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text or '(none)'!r} is not a number from 1 to 65535")
    return Endpoint(host, int(port_text))


# --------------------------------------------------------------------------------------------
# The mounts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxPlan:
    """What one trial's commands may see and change (all paths absolute)."""

    writable: tuple[str, ...]  # the agent's cwd, the environment's workdir
    readable: tuple[str, ...]  # shown read-only inside hidden folders (PATH folder, snapshots, the arm's files)
    hidden: tuple[str, ...]  # never readable (folders become empty, files /dev/null)
    home: str  # the trial's HOME: an empty tmpfs per command
    endpoints: tuple[Endpoint, ...] = ()
    never: tuple[str, ...] = field(default=())  # hidden again even inside writable or readable paths


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def bwrap_arguments(
    plan: SandboxPlan, *, user_namespace: bool = False, identity: Path | None = None, with_aliases: bool = True
) -> list[str]:
    """bwrap's options for a plan. Order matters: bwrap applies mounts in order, so folders are
    hidden first (at every place the host shows them), then what the arm may read is shown inside
    them, then the writable folders, and last what must never be seen is hidden again wherever it
    is. `user_namespace`: run the command in a user namespace of its own; `identity`: a folder with
    the passwd and group files naming SANDBOX_UID (as root); `with_aliases`: hide the other mounts
    of the hidden folders here (write_prefix hides them itself, only those still there when each
    command starts)."""
    args = [
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]  # fmt: skip
    if user_namespace:
        args.extend(_user_options())
    private = {"/", "/tmp", "/run", "/dev", "/proc"}
    for folder in world_writable_folders():
        if folder not in private:
            args.extend(["--tmpfs", folder])
            private.add(folder)
    if identity is not None:
        for name in ("passwd", "group"):
            args.extend(["--ro-bind", str(identity / name), f"/etc/{name}"])

    def hide(paths: Iterable[str]) -> None:
        for path in sorted(set(paths), key=_depth):
            if not _exists(path) or path in private:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                args.extend(["--tmpfs", path])
            else:
                args.extend(["--ro-bind", "/dev/null", path])

    hidden = [*plan.hidden, *(root_only_files() if os.geteuid() == 0 else ())]
    hide([*hidden, *(mount_aliases(hidden) if with_aliases else ())])
    for path in sorted(set(plan.readable), key=_depth):
        if _exists(path):
            args.extend(["--ro-bind", path, path])
    if plan.home:
        args.extend(["--tmpfs", plan.home])
    for path in sorted(set(plan.writable), key=_depth):
        args.extend(["--bind", path, path])
    hide([*plan.never, *(mount_aliases(plan.never) if with_aliases else ())])
    return args


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# --------------------------------------------------------------------------------------------
# The host: other mounts of a folder, world-writable folders, root's own files
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    device: str  # "major:minor" of the file system
    root: str  # the folder of that file system the mount shows
    point: str  # where it shows it


def read_mounts(text: str) -> list[Mount]:
    """The mounts of a /proc/PID/mountinfo text, in mount order."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            mounts.append(Mount(fields[2], _unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _unescape(field_text: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field_text)


def aliases(path: str, mounts: Sequence[Mount]) -> list[tuple[str, bool]]:
    """Other places where the host shows `path` (an absolute path without symlinks), each with
    whether it is the same file or folder: each other mount of its file system whose folder holds
    it (a bind mount of a parent, a container volume) shows it at the matching place (True), and a
    mount whose folder lies inside it shows a part of it (False)."""
    home = _mount_of(path, mounts)
    if home is None:
        return []
    inside_fs = _join(home.root, os.path.relpath(path, home.point))
    found: dict[str, bool] = {}
    for mount in mounts:
        if mount.device != home.device or mount == home:
            continue
        if _inside(inside_fs, mount.root):
            found.setdefault(_join(mount.point, os.path.relpath(inside_fs, mount.root)), True)
        elif _inside(mount.root, inside_fs):
            found.setdefault(mount.point, False)
    return [(alias, same) for alias, same in found.items() if alias != path]


def _mount_of(path: str, mounts: Sequence[Mount]) -> Mount | None:
    """The mount `path` is on: the deepest mount point above it, the last mounted of equals."""
    best = None
    for mount in mounts:
        if _inside(path, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


def _join(folder: str, relative: str) -> str:
    return os.path.normpath(folder if relative == "." else os.path.join(folder, relative))


def mount_aliases(paths: Iterable[str]) -> list[str]:
    """Other mounts of these files and folders on this host (read from /proc/self/mountinfo), each
    confirmed by device and inode: a place a later mount covers shows something else and is left."""
    try:
        mounts = read_mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            target = os.stat(path)
        except OSError:
            continue
        for alias, same in aliases(os.path.realpath(path), mounts):
            try:
                seen = os.stat(alias)
            except OSError:
                continue
            # A mount showing a part of the folder is a mount point by construction (os.path.ismount
            # cannot tell a bind mount of the same file system from a folder).
            if not same or (seen.st_dev, seen.st_ino) == (target.st_dev, target.st_ino):
                found.append(alias)
    return found


# Where world-writable folders usually are; each one found is made private (an empty tmpfs).
WORLD_WRITABLE_PLACES = ("/var", "/var/lib", "/var/spool", "/var/cache", "/srv", "/opt", "/usr/local", "/home", "/mnt", "/media")


@functools.lru_cache(maxsize=1)
def world_writable_folders() -> tuple[str, ...]:
    """World-writable folders of the host outside /tmp, /run and /dev (each already private): read
    once per process from the usual places and one level below them (/var/tmp, /var/crash,
    /var/lib/php/sessions...). Another user's file or socket left there stays out of reach."""
    found = []
    for place in WORLD_WRITABLE_PLACES:
        for folder in (place, *_subfolders(place)):
            try:
                mode = os.lstat(folder).st_mode
            except OSError:
                continue
            if os.path.isdir(folder) and not os.path.islink(folder) and mode & 0o002:
                found.append(folder)
    return tuple(dict.fromkeys(found))


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


@functools.lru_cache(maxsize=1)
def root_only_files() -> tuple[str, ...]:
    """Files and folders under /etc that other users may not read (shadow, ssh host keys, TLS
    private keys). Started as root, a command is their owner on disk even without capabilities."""
    found = []
    for folder, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not (mode & 0o004) and not os.path.islink(path):
                found.append(path)
        dirs[:] = [name for name in dirs if os.path.join(folder, name) not in found]
    return tuple(found)


def write_prefix(
    path: Path,
    tool: SandboxTool | None,
    plan: SandboxPlan | None,
    network: TrialNetwork | None,
    trace: str = "",
    shell: str = "/bin/bash",
    limits: Limits | None = None,
) -> Path:
    """The trial's CLAUDE_CODE_SHELL_PREFIX: drop the credentials, then run the command in its shell,
    under `trace` (the execution audit's strace command, a shell fragment) when given and inside the
    sandbox when `tool` is available, within `limits`. Without the sandbox it still drops the
    credentials. The seccomp filter, and as root the passwd and group files naming SANDBOX_UID,
    are written beside the prefix (in the trial's own folder, which no command sees)."""
    shell = os.path.realpath(shell)
    lines = [
        f"#!{shell}",
        "# pytest-benchcell: the Claude CLI runs every Bash command as PREFIX \"<wrapped command>\".",
        "unset " + " ".join(CREDENTIAL_VARIABLES),
    ]
    words = [trace] if trace else []
    redirections = []
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
            from .seccomp import compiled_filter

            program = path.with_name("seccomp.bpf")
            program.write_bytes(compiled_filter().program)
            bwrap += ["--seccomp", str(SECCOMP_FD)]
            redirections.append(f"{SECCOMP_FD}<{shlex.quote(str(program))}")
        words += [shlex.join([tool.nsenter, *network.enter_options(), "--", tool.bwrap, *bwrap])]
        words += ['"${aliases[@]}" "${share[@]}" --chdir "$PWD"']
    words += [shlex.quote(shell), '-c "$1"', *redirections]
    lines.append("exec " + " ".join(words))
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


# --------------------------------------------------------------------------------------------
# The trial's network namespace and its relays
# --------------------------------------------------------------------------------------------


class TrialNetwork:
    """One network namespace for a trial's commands, with a relay per endpoint (see module doc)."""

    def __init__(self, tool: SandboxTool, folder: Path, endpoints: Sequence[Endpoint]) -> None:
        self.tool = tool
        self.folder = folder
        self.endpoints = tuple(sorted(set(endpoints)))
        self.outside: list[subprocess.Popen[bytes]] = []
        self.holder: subprocess.Popen[bytes] | None = None
        self.child_pid = 0

    def enter_options(self) -> list[str]:
        """nsenter's options to join the namespace. As root, the network namespace alone; as another
        user bubblewrap made it inside a user namespace of its own, which must be joined with it."""
        options = [f"--net=/proc/{self.child_pid}/ns/net"]
        if os.geteuid() != 0:
            options = [f"--user=/proc/{self.child_pid}/ns/user", *options, "--preserve-credentials"]
        return options

    def start(self) -> TrialNetwork:
        self.folder.mkdir(parents=True, exist_ok=True)
        inner = []
        for endpoint in self.endpoints:
            socket = self.folder / f"{endpoint.host}-{endpoint.port}.sock"
            self.outside.append(
                _spawn([self.tool.socat, f"UNIX-LISTEN:{socket},fork,unlink-early", f"TCP:{endpoint.host}:{endpoint.port}"])
            )
            inner.append(
                f"{shlex.quote(self.tool.socat)} TCP-LISTEN:{endpoint.port},bind={endpoint.host},fork,reuseaddr "
                f"UNIX-CONNECT:{shlex.quote(str(socket))} &"
            )
        script = "\n".join([*inner, "wait"]) if inner else "exec sleep infinity"
        read_end, write_end = os.pipe()
        try:
            self.holder = _spawn(
                [self.tool.bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent",
                 "--info-fd", str(write_end), "--", "/bin/sh", "-c", script],
                pass_fds=(write_end,),
            )  # fmt: skip
            os.close(write_end)
            write_end = -1
            info = _read_all(read_end, READY_TIMEOUT_S)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        try:
            self.child_pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError, TypeError):
            self.stop()
            raise SandboxError(f"the sandbox's network namespace did not start (bwrap said {info!r})") from None
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Until every inner relay listens (read from the namespace's own /proc/PID/net/tcp) and
        every outside socket exists."""
        wanted = {f"{_hex_address(endpoint.host)}:{endpoint.port:04X}" for endpoint in self.endpoints}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            listening = _listening(self.child_pid)
            sockets = all((self.folder / f"{e.host}-{e.port}.sock").exists() for e in self.endpoints)
            if wanted <= listening and sockets:
                return
            if not self.alive() or time.monotonic() > deadline:
                self.stop()
                missing = ", ".join(str(e) for e in self.endpoints if f"{_hex_address(e.host)}:{e.port:04X}" not in listening)
                raise SandboxError(f"the sandbox's relays did not start (not listening: {missing or 'outside sockets'})")
            time.sleep(0.01)

    def alive(self) -> bool:
        return self.holder is not None and self.holder.poll() is None and all(p.poll() is None for p in self.outside)

    def stop(self) -> None:
        for process in [*([self.holder] if self.holder else []), *self.outside]:
            _kill(process)
        self.outside = []
        self.holder = None


def _spawn(argv: Sequence[str], pass_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, pass_fds=tuple(pass_fds), close_fds=True, cwd="/",
    )  # fmt: skip


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _read_all(fd: int, timeout: float) -> str:
    import select

    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
        if b"}" in chunk:
            break
    return b"".join(chunks).decode(errors="replace")


def _hex_address(host: str) -> str:
    return "".join(f"{int(part):02X}" for part in reversed(host.split(".")))


def _listening(pid: int) -> set[str]:
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {fields[1] for fields in (line.split() for line in lines) if len(fields) > 3 and fields[3] == "0A"}


def home_credentials(home: str | None = None) -> list[str]:
    """The user's credential files and folders that exist (hidden in the sandbox)."""
    base = home or os.path.expanduser("~")
    return [os.path.join(base, name) for name in HOME_CREDENTIALS if os.path.lexists(os.path.join(base, name))]
