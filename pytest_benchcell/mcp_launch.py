"""How an arm's MCP servers are started, in one place: the stdio configs the CLI gets in a trial
(trial/walk.py) and the pre-flight's MCP client starts (preflight_mcp.py), and what a server left
behind (its stderr and exit status).

MCP servers run outside the sandbox, started by the CLI with its own environment (the trial's:
confinement.py, and a few variables the CLI adds of its own, such as CLAUDECODE) plus the server's
`env`, in the agent's working folder. The CLI keeps neither a
server's stderr nor its exit status (measured with CLI 2.1.332: a server that dies at start is only
`failed`, its error "Connection closed"), so each server is started through a small /bin/sh
supervisor that appends the server's stderr to a file in the trial's folder (outside what the agent's
commands may write) and, when the server ends, writes its exit status beside it. The supervisor
passes the signals the CLI stops a server with (INT, then TERM) on to the server, so a server ends
as it would without it. Pure but for reading those files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Arm, fill_placeholders
from .isolation.hygiene import removed_variables
from .leftovers import printable

__all__ = ["STDERR_FOLDER", "ServerEnd", "server_configs", "server_ends", "passed_on_environment"]

STDERR_FOLDER = "mcp-servers"  # in the trial's folder: <name>.stderr and <name>.status
READ_BYTES = 64 * 1024  # of a server's stderr read back at most (its start and its end)

# $1: the stderr file; $2: setpriv, where there is one (else empty); the rest: the server's command
# line. The server runs in the background so the shell can pass signals on; its stdin is given
# explicitly (a background command's stdin is /dev/null otherwise) and the shell keeps no copy of the
# server's stdout, so the CLI sees the stream end when the server ends. With setpriv the server is
# killed if the shell is (the CLI's last resort against a server that ignores its signals), as it
# would be without the shell. `wait` returns early when a signal is passed on: wait again until the
# server is gone, then record its status.
SUPERVISOR = r"""f=$1; g=$2; shift 2
if [ -n "$g" ]; then set -- "$g" --pdeathsig KILL -- "$@"; fi
exec 3<&0 4>&1 0</dev/null 1>/dev/null
"$@" <&3 >&4 3<&- 4>&- 2>>"$f" &
pid=$!
exec 3<&- 4>&-
trap 'kill -s INT $pid 2>/dev/null' INT
trap 'kill -s TERM $pid 2>/dev/null' TERM
trap 'kill -s HUP $pid 2>/dev/null' HUP
while :; do wait $pid; s=$?; kill -0 $pid 2>/dev/null || break; done
echo $s >"${f%.stderr}.status"
exit $s
"""


def server_configs(arm: Arm, values: Mapping[str, str], where: str, folder: Path) -> dict[str, dict[str, Any]]:
    """The arm's MCP servers as the stdio configs the CLI gets: placeholders filled from the trial's
    values, each started through the supervisor that keeps its stderr and exit status in `folder`."""
    (folder / STDERR_FOLDER).mkdir(parents=True, exist_ok=True)
    guard = shutil.which("setpriv") or ""
    configs = {}
    for server in arm.mcp_servers:
        command = fill_placeholders(server.command, values, where=where)
        args = [fill_placeholders(arg, values, where=where) for arg in server.args]
        configs[server.name] = {
            "type": "stdio",
            "command": "/bin/sh",
            "args": ["-c", SUPERVISOR, "mcp-server", str(_stderr_path(folder, server.name)), guard, command, *args],
            "env": {key: fill_placeholders(value, values, where=where) for key, value in server.env.items()},
        }
    return configs


def command_line(config: Mapping[str, Any]) -> list[str]:
    """The server's own command line in a config of server_configs (without the supervisor)."""
    return list(config["args"][5:])


def passed_on_environment(cli_env: Mapping[str, str], server_env: Mapping[str, str]) -> dict[str, str]:
    """The variables a server started by the CLI runs with: what the CLI keeps of the harness's
    environment, the CLI's own (the trial's), and the server's `env` over them."""
    kept = {name: value for name, value in os.environ.items() if name not in set(removed_variables(os.environ, declared=cli_env))}
    return {**kept, **cli_env, **server_env}


@dataclass(frozen=True)
class ServerEnd:
    """What a server left behind: its stderr (printable, its start and end where long) and its exit
    status (None: still running when read, or never started)."""

    stderr: str
    status: int | None


def server_ends(folder: Path, names: Iterable[str]) -> dict[str, ServerEnd]:
    """Each server's stderr and exit status, read back from `folder` (the one server_configs got)."""
    ends = {}
    for name in names:
        stderr_path = _stderr_path(folder, name)
        status_path = stderr_path.with_suffix(".status")
        try:
            status: int | None = int(status_path.read_text().strip())
        except (OSError, ValueError):
            status = None
        ends[name] = ServerEnd(_read_bounded(stderr_path), status)
    return ends


def _stderr_path(folder: Path, name: str) -> Path:
    return folder / STDERR_FOLDER / f"{name}.stderr"


def _read_bounded(path: Path) -> str:
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size <= READ_BYTES:
                data = file.read()
            else:
                head = file.read(READ_BYTES // 4)
                file.seek(size - (READ_BYTES - len(head)))
                data = head + f"\n... ({size - READ_BYTES} bytes left out) ...\n".encode() + file.read()
    except OSError:
        return ""
    return printable(data.decode(errors="replace"), newlines=True)
