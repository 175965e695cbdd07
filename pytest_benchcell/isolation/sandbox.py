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
  and the Python installation when it lives there), the store, the harness's own package, every
  trial folder (the audit's logs, other trials), the user's credential folders, /run, and whatever
  the environment declares hidden (`Environment.hidden`: the service's data folder).
- **Processes.** A pid namespace per command: /proc shows the command's own processes only.
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
drops the credentials and runs `[strace ... -o LOG] nsenter --net=<the trial's namespace> --
bwrap <mounts> bash -c "$1"`. The execution audit's strace sits outside the sandbox, so its logs are
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

    def describe(self) -> str:
        """One line for the pytest header and the sample's provenance."""
        if not self.available:
            return f"off ({self.reason})"
        return f"on (bubblewrap {self.version}: files, pid and network namespaces)"


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
    problem = _check_namespaces(bwrap)
    if problem:
        return SandboxTool(False, bwrap, nsenter, socat, version, reason=problem)
    return SandboxTool(True, bwrap, nsenter, socat, version)


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


def _check_namespaces(bwrap: str) -> str:
    """Start the namespaces a trial's sandbox uses once; '' when they work, else why not."""
    true = os.path.realpath(shutil.which("true") or "/bin/true")
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-net", "--unshare-pid", "--die-with-parent", true]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot create namespaces here ({last})"
    return ""


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


def bwrap_arguments(plan: SandboxPlan) -> list[str]:
    """bwrap's options for a plan. Order matters: bwrap applies mounts in order, so folders are
    hidden first, then what the arm may read is shown inside them, then the writable folders, and
    last what must never be seen is hidden again wherever it is."""
    args = [
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
        "--die-with-parent", "--new-session",
    ]  # fmt: skip

    def hide(paths: Iterable[str]) -> None:
        for path in sorted(set(paths), key=_depth):
            if not _exists(path) or path in ("/", "/tmp", "/run"):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                args.extend(["--tmpfs", path])
            else:
                args.extend(["--ro-bind", "/dev/null", path])

    hide(plan.hidden)
    for path in sorted(set(plan.readable), key=_depth):
        if _exists(path):
            args.extend(["--ro-bind", path, path])
    if plan.home:
        args.extend(["--tmpfs", plan.home])
    for path in sorted(set(plan.writable), key=_depth):
        args.extend(["--bind", path, path])
    hide(plan.never)
    return args


def write_prefix(
    path: Path,
    tool: SandboxTool | None,
    plan: SandboxPlan | None,
    network: TrialNetwork | None,
    trace: str = "",
    shell: str = "/bin/bash",
) -> Path:
    """The trial's CLAUDE_CODE_SHELL_PREFIX: drop the credentials, then run the command in its shell,
    under `trace` (the execution audit's strace command, a shell fragment) when given and inside the
    sandbox when `tool` is available. Without the sandbox it still drops the credentials."""
    shell = os.path.realpath(shell)
    lines = [
        f"#!{shell}",
        "# pytest-benchcell: the Claude CLI runs every Bash command as PREFIX \"<wrapped command>\".",
        "unset " + " ".join(CREDENTIAL_VARIABLES),
    ]
    words = [trace] if trace else []
    if tool is not None and tool.available and plan is not None and network is not None:
        # The CLI ends each wrapped command with `pwd -P >| <its cwd file>` to follow `cd`: that one
        # file, created here, is shared with the sandbox's private /tmp.
        lines += [
            "share=()",
            r'if [[ $1 =~ (/[A-Za-z0-9._/-]*/claude-[0-9a-f]+-cwd)$ ]]; then',
            '    : >| "${BASH_REMATCH[1]}" && share=(--bind "${BASH_REMATCH[1]}" "${BASH_REMATCH[1]}")',
            "fi",
        ]
        words += [shlex.join([tool.nsenter, *network.enter_options(), "--", tool.bwrap, *bwrap_arguments(plan)])]
        words += ['"${share[@]}" --chdir "$PWD"']
    words += [shlex.quote(shell), '-c "$1"']
    lines.append("exec " + " ".join(words))
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


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
