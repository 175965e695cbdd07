"""The tracker as a local REST service: JSON over HTTP on 127.0.0.1, token authentication.

Run as ``python bench/tracker/server.py --db PATH``. It creates an empty database at PATH, listens
on 127.0.0.1 on an ephemeral port, prints ``listening http://127.0.0.1:PORT/api`` on stdout once it
accepts connections, and serves until SIGTERM, SIGINT, or the end of its stdin (the parent that
started it is gone: a killed harness leaves no server behind).

Two bearer tokens come from the environment, never from the command line: ``TRACKER_TOKEN`` is the
user ``me`` (what every arm gets) and ``TRACKER_ADMIN_TOKEN`` is the harness's (seeding and
snapshots, under /api/admin). Built on the standard library's ThreadingHTTPServer: the service is
a few routes over bench/tracker/db.py, so a framework would add a dependency and start-up time
(measured: benchmarks/service_startup.py) without adding anything the bench needs.

``GET /api`` lists the routes (what an agent with only curl reads first).
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker import db  # noqa: E402

PER_PAGE_DEFAULT = 30
PER_PAGE_MAX = 100

ROUTES = [
    ("GET", "/api/issues", "list issues; query: state=open|closed|all (default open), label=NAME, assignee=USER, page=N, per_page=N (default 30); X-Total-Count header"),
    ("GET", "/api/issues/{number}", "one issue with its body and comments"),
    ("POST", "/api/issues", 'create an issue; body {"title": "...", "body": "..."}'),
    ("PATCH", "/api/issues/{number}", 'change an issue; body with any of {"state": "open|closed", "title": "...", "assignee": "USER"}'),
    ("POST", "/api/issues/{number}/comments", 'comment as the token\'s user; body {"body": "..."}'),
    ("POST", "/api/issues/{number}/labels", 'add a label; body {"label": "NAME"}'),
    ("DELETE", "/api/issues/{number}/labels/{name}", "remove a label"),
    ("GET", "/api/labels", "list the labels"),
    ("POST", "/api/labels", 'create a label; body {"name": "...", "color": "rrggbb"}'),
    ("GET", "/api/user", "who the token belongs to"),
]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _number(text: str) -> int:
    if not text.isdigit():
        raise ApiError(404, f"{text!r} is not an issue number")
    return int(text)


def _field(body: dict[str, Any], key: str, *, required: bool = True) -> Any:
    if key not in body:
        if required:
            raise ApiError(422, f"the request body needs {key!r}")
        return None
    if not isinstance(body[key], str):
        raise ApiError(422, f"{key!r} must be a string")
    return body[key]


class Service:
    """The routes, over one database file; `user_token` acts as user `me`."""

    def __init__(self, path: Path, user_token: str, admin_token: str) -> None:
        self.path = path
        self.user_token = user_token
        self.admin_token = admin_token

    def who(self, authorization: str) -> str:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("bearer", "token") or not token:
            raise ApiError(401, "authenticate with the header 'Authorization: Bearer <token>'")
        if hmac.compare_digest(token.strip(), self.admin_token):
            return "admin"
        if hmac.compare_digest(token.strip(), self.user_token):
            return db.CURRENT_USER
        raise ApiError(401, "this token is not valid")

    def handle(self, method: str, target: str, authorization: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        user = self.who(authorization)
        url = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        parts = [unquote(part) for part in url.path.strip("/").split("/")]
        if parts[:1] != ["api"]:
            raise ApiError(404, "every route starts with /api; GET /api lists them")
        parts = parts[1:]
        if parts[:1] == ["admin"]:
            if user != "admin":
                raise ApiError(403, "the admin routes need the admin token")
            return self.admin(method, parts[1:], body)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return self.route(method, parts, query, body, user)

    def route(self, method: str, parts: list[str], query: dict[str, str], body: dict[str, Any], user: str) -> tuple[int, Any, dict[str, str]]:
        path = self.path
        match method, parts:
            case "GET", []:
                return 200, {"routes": [{"method": m, "path": p, "does": d} for m, p, d in ROUTES]}, {}
            case "GET", ["user"]:
                return 200, {"login": user}, {}
            case "GET", ["labels"]:
                return 200, db.list_labels(path), {}
            case "POST", ["labels"]:
                return 201, db.create_label(path, _field(body, "name"), _field(body, "color")), {}
            case "GET", ["issues"]:
                return self.list_issues(query)
            case "POST", ["issues"]:
                return 201, db.create_issue(path, _field(body, "title"), _field(body, "body", required=False) or ""), {}
            case "GET", ["issues", number]:
                return 200, db.show_issue(path, _number(number)), {}
            case "PATCH", ["issues", number]:
                return 200, self.patch(_number(number), body), {}
            case "POST", ["issues", number, "comments"]:
                return 201, db.add_comment(path, _number(number), _field(body, "body"), author=user), {}
            case "POST", ["issues", number, "labels"]:
                return 200, db.add_label(path, _number(number), _field(body, "label")), {}
            case "DELETE", ["issues", number, "labels", name]:
                return 200, db.remove_label(path, _number(number), name), {}
        known = {p.split("/{")[0] for _, p, _ in ROUTES}
        if "/api/" + "/".join(parts[:1]) in known or not parts:
            raise ApiError(405, f"{method} is not supported here; GET /api lists the routes")
        raise ApiError(404, f"no route /api/{'/'.join(parts)}; GET /api lists the routes")

    def list_issues(self, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        unknown = set(query) - {"state", "label", "assignee", "page", "per_page"}
        if unknown:
            raise ApiError(400, f"unknown query parameter {sorted(unknown)[0]!r}; use state, label, assignee, page, per_page")
        try:
            page = int(query.get("page", "1"))
            per_page = int(query.get("per_page", str(PER_PAGE_DEFAULT)))
        except ValueError:
            raise ApiError(400, "page and per_page are whole numbers") from None
        if page < 1 or not 1 <= per_page <= PER_PAGE_MAX:
            raise ApiError(400, f"page >= 1 and 1 <= per_page <= {PER_PAGE_MAX}")
        issues = db.list_issues(self.path, query.get("state", "open"), query.get("label"))
        if "assignee" in query:
            issues = [issue for issue in issues if query["assignee"] in issue["assignees"]]
        start = (page - 1) * per_page
        headers = {"X-Total-Count": str(len(issues))}
        if start + per_page < len(issues):
            headers["X-Next-Page"] = str(page + 1)
        return 200, issues[start : start + per_page], headers

    def patch(self, number: int, body: dict[str, Any]) -> dict[str, Any]:
        unknown = set(body) - {"state", "title", "assignee"}
        if unknown or not body:
            raise ApiError(422, "PATCH takes any of state, title, assignee")
        issue = db.show_issue(self.path, number)
        if "title" in body:
            issue = db.edit_title(self.path, number, _field(body, "title"))
        if "assignee" in body:
            issue = db.assign(self.path, number, _field(body, "assignee"))
        if "state" in body:
            state = _field(body, "state")
            if state not in db.STATES:
                raise ApiError(422, "state is open or closed")
            issue = db.close_issue(self.path, number) if state == "closed" else db.reopen_issue(self.path, number)
        return issue

    def admin(self, method: str, parts: list[str], body: Any) -> tuple[int, Any, dict[str, str]]:
        if (method, parts) == ("POST", ["seed"]):
            db.load(self.path, body)
            return 200, {"loaded": len(body["issues"])}, {}
        if (method, parts) == ("GET", ["snapshot"]):
            return 200, db.snapshot(self.path), {}
        raise ApiError(404, "admin routes: POST /api/admin/seed, GET /api/admin/snapshot")


class Handler(BaseHTTPRequestHandler):
    server_version = "tracker/1.0"
    protocol_version = "HTTP/1.1"
    service: Service  # set on the subclass made in serve()

    def _answer(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        data = (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise ApiError(400, "the request body is not valid JSON") from None
            status, payload, headers = self.service.handle(
                self.command, self.path, self.headers.get("Authorization", ""), body
            )
        except ApiError as exc:
            status, payload, headers = exc.status, {"error": str(exc)}, {}
        except db.TrackerError as exc:
            missing = str(exc).startswith("there is no issue")
            status, payload, headers = (404 if missing else 422), {"error": str(exc)}, {}
        self._answer(status, payload, headers)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _dispatch

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # quiet: the harness reads stdout for the address only


def serve(path: Path, user_token: str, admin_token: str) -> ThreadingHTTPServer:
    """Create the database and a bound server (not yet serving)."""
    db.create(path)
    handler = type("BoundHandler", (Handler,), {"service": Service(path, user_token, admin_token)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The tracker's REST service (127.0.0.1, ephemeral port).")
    parser.add_argument("--db", required=True, type=Path, help="database file (created empty)")
    args = parser.parse_args(argv)
    user_token, admin_token = os.environ.get("TRACKER_TOKEN", ""), os.environ.get("TRACKER_ADMIN_TOKEN", "")
    if len(user_token) < 16 or len(admin_token) < 16 or user_token == admin_token:
        print("TRACKER_TOKEN and TRACKER_ADMIN_TOKEN must be two different tokens of 16+ characters", file=sys.stderr)
        return 2
    server = serve(args.db, user_token, admin_token)

    def stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch_parent() -> None:
        # os.read, not sys.stdin: a thread blocked in a buffered read aborts interpreter shutdown.
        while os.read(0, 4096):
            pass  # EOF: whoever started us is gone
        stop()

    threading.Thread(target=watch_parent, daemon=True).start()
    host, port = server.server_address[:2]
    print(f"listening http://{host}:{port}/api", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
