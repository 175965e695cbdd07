"""The trial's network: the endpoints an arm's commands may connect to (loopback host:port), and
the network namespace held for the whole trial with a relay per endpoint (`TrialNetwork`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..procfs import process_ids, stat_fields
from .tool import SandboxError, SandboxTool

LOOPBACK = re.compile(r"^127(\.\d{1,3}){3}$")
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


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
        """Kill the holder's and the relays' process groups and return once none of their processes
        runs. Waiting for bubblewrap is not enough: its shell and the inner relays are reparented
        when it dies and may still be running their exit under load, holding the namespace."""
        processes = [*([self.holder] if self.holder else []), *self.outside]
        for process in processes:
            _kill(process)
        _wait_groups_gone({process.pid for process in processes}, STOP_TIMEOUT_S)
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


def _wait_groups_gone(groups: set[int], timeout: float) -> bool:
    """Until no process of these process groups runs (exited ones waiting to be reaped do not count);
    False if some still runs after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while _running_in_groups(groups):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _running_in_groups(groups: set[int]) -> bool:
    for pid in process_ids():
        fields = stat_fields(pid)  # None: gone meanwhile
        if fields and int(fields[2]) in groups and fields[0] not in "ZX":
            return True
    return False


def _read_all(fd: int, timeout: float) -> str:
    # selectors, not select.select: a process with many files open (a long xdist worker) gets pipe
    # numbers past FD_SETSIZE (1024), which select() refuses and poll/epoll take.
    import selectors

    chunks = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(max(0.0, deadline - time.monotonic())):
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
