"""Is the sandbox available here: bubblewrap, nsenter and socat installed, and the namespaces a
trial's sandbox uses start (checked once per process); the user namespace a command runs in."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

INSTALL_HINT = (
    "install bubblewrap and socat (Debian/Ubuntu: apt-get install bubblewrap socat; Fedora: dnf install "
    "bubblewrap socat; Arch: pacman -S bubblewrap socat); the sandbox needs Linux with user or root "
    "namespaces (nsenter from util-linux)"
)
# Started as root, a command runs as this uid in a user namespace of its own (mapped to root
# outside, so what it writes is the harness user's); a passwd line names it "sandbox".
SANDBOX_UID = 1000
CHECK_TIMEOUT_S = 10.0


class SandboxError(Exception):
    """The sandbox could not be set up for a trial (the message says why)."""



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
    # util-linux's unshare, when it can start a pid namespace with its own /proc here: the execution
    # audit's strace then runs in a pid namespace of the command's own, outside the sandbox's
    unshare: str = ""

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
    from ..seccomp import compiled_filter

    return SandboxTool(
        True, bwrap, nsenter, socat, version, as_root=as_root, user_namespace=user_namespace,
        seccomp=compiled_filter().reason, prlimit=os.path.realpath(shutil.which("prlimit") or "") if shutil.which("prlimit") else "",
        unshare=_pid_namespace_tool(),
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


def _pid_namespace_tool() -> str:
    """unshare's real path when it starts a pid namespace with its own /proc here (as another user
    than root, inside a user namespace, as a command's prefix does inside the trial's), else ''."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ""
    unshare = os.path.realpath(unshare)
    true = os.path.realpath(shutil.which("true") or "/bin/true")
    try:
        done = subprocess.run([unshare, *pid_namespace_options(), true], capture_output=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return ""
    return unshare if done.returncode == 0 else ""


# A pid namespace of its own with its /proc (so strace reads its tracees' pids there), ended with
# everything in it when unshare is.
PID_NAMESPACE = ("--pid", "--fork", "--mount-proc", "--kill-child")


def pid_namespace_options() -> list[str]:
    """unshare's options for the audit's pid namespace. As another user than root, inside a user
    namespace of its own mapping that user to itself: joining the trial's user namespace gave
    nsenter capabilities there, but a program it starts under another uid than 0 loses them."""
    return [*PID_NAMESPACE] if os.geteuid() == 0 else ["--user", "--map-current-user", *PID_NAMESPACE]


def _user_options() -> list[str]:
    """A user namespace of the command's own: as root, as SANDBOX_UID; as another user, as that user.
    No namespace may be made inside it (a new one would have every capability over its own mounts)."""
    ids = ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)] if os.geteuid() == 0 else []
    return ["--unshare-user", *ids, "--disable-userns"]
