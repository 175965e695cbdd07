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
drops the credentials, sets the limits and runs `nsenter --net=<the trial's namespace> -- [unshare
--pid ... strace ... -o LOG] bwrap <mounts> --seccomp 9 bash -c "$1" 9<filter`. The execution
audit's strace sits outside the sandbox, in a pid namespace of the command's own in which the
sandbox's is nested, so neither it nor its logs are within the agent's reach, and it reads its
tracees' pids from that namespace's small /proc; bwrap is the harness's own record in those logs.

The network namespace is held for the whole trial by one process (`TrialNetwork`): bwrap with
--unshare-net running one socat per endpoint inside; the outside halves are socat too. Both are
the long-standing tools for this (Claude Code's own sandbox bridges its proxy the same way).

The modules, lower ones never importing higher ones: `tool` (is the sandbox available here) <-
`network` (endpoints, the trial's network namespace) <- `mounts` (the plan as bwrap's options, the
host's other mounts) <- `prefix` (the shell prefix that puts it together).
"""

from __future__ import annotations

from .mounts import (
    HOME_CREDENTIALS,
    WORLD_WRITABLE_PLACES,
    Mount,
    SandboxPlan,
    aliases,
    bwrap_arguments,
    home_credentials,
    mount_aliases,
    read_mounts,
    root_only_files,
    world_writable_folders,
)
from .network import LOOPBACK, READY_TIMEOUT_S, Endpoint, TrialNetwork, parse_endpoint
from .prefix import CREDENTIAL_VARIABLES, SECCOMP_FD, write_prefix
from .tool import CHECK_TIMEOUT_S, INSTALL_HINT, SANDBOX_UID, SandboxError, SandboxTool, find_sandbox, sandbox_state

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
    "HOME_CREDENTIALS",
    "WORLD_WRITABLE_PLACES",
    "LOOPBACK",
    "SANDBOX_UID",
    "READY_TIMEOUT_S",
    "CHECK_TIMEOUT_S",
    "SECCOMP_FD",
    "Mount",
    "aliases",
    "home_credentials",
    "mount_aliases",
    "read_mounts",
    "root_only_files",
    "world_writable_folders",
]
