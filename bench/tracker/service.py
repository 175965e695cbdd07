"""Start, seed, read and stop one tracker service process (what the bench's hooks do per trial).

The process listens on 127.0.0.1 on a port the kernel picks; its two tokens are fresh random
values handed over in its environment. `stop()` is safe to call twice and always leaves no
process and no listening socket: SIGTERM, then SIGKILL after a grace period. The server also exits
by itself when its stdin closes, so even a harness killed with SIGKILL leaves nothing behind.
"""

from __future__ import annotations

import os
import secrets
import selectors
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker import db
from tracker.client import ApiError, Client

SERVER = Path(__file__).resolve().parent / "server.py"
START_TIMEOUT_S = 10.0
STOP_GRACE_S = 3.0


class ServiceError(Exception):
    """The service did not start or did not answer as expected."""


@dataclass
class Service:
    process: subprocess.Popen[bytes]
    url: str  # http://127.0.0.1:PORT/api
    token: str  # the user `me`: what the arms get
    admin_token: str = field(repr=False)  # the harness's: seeding and snapshots

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def client(self) -> Client:
        """A client acting as the agent's user (an independent reader of the service)."""
        return Client(self.url, self.token)

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return Client(self.url, self.admin_token).request(method, "/admin" + path, body)[0]

    def seed(self) -> None:
        self.admin("POST", "/seed", db.seed_document())

    def snapshot(self) -> Any:
        return self.admin("GET", "/snapshot")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def start(database: Path) -> Service:
    """Start a service over a fresh, empty database file; return once it accepts connections."""
    token, admin_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TRACKER_TOKEN": token,
        "TRACKER_ADMIN_TOKEN": admin_token,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--db", str(database)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    service = Service(process, "", token, admin_token)
    try:
        line = _first_line(process)
        if not line.startswith("listening "):
            error = process.stderr.read().decode(errors="replace") if process.poll() is not None else ""
            raise ServiceError(f"the tracker service did not start: {line or error or 'no output'}")
        service.url = line.split(" ", 1)[1]
    except BaseException:
        service.stop()
        raise
    return service


def _first_line(process: subprocess.Popen[bytes]) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(START_TIMEOUT_S):
            raise ServiceError(f"the tracker service printed no address within {START_TIMEOUT_S} s")
    return process.stdout.readline().decode().strip()


def seed_visible(service: Service) -> bool:
    """Does an independent reader, with the agent's own token, see the whole seed?"""
    try:
        issues = service.client().list_issues(state="all")
        labels = service.client().list_labels()
    except (ApiError, OSError):
        return False
    return (
        [issue["number"] for issue in issues] == [number for number, *_ in db.SEED_ISSUES]
        and len(labels) == len(db.SEED_LABELS)
    )

