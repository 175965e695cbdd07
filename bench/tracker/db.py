"""The tracker's database: schema, deterministic seed, snapshot, and the operations.

Only the tracker service (bench/tracker/server.py) calls the functions below; every interface (the
`tracker` CLI, the plainer `issuectl` CLI, the MCP server, curl) reaches them through its REST API,
so the arms differ only in how the agent reaches the tracker, never in what the tracker does. Every
operation either changes something or raises TrackerError with a message meant for the agent.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CURRENT_USER = "me"  # who the agent is: the author of its comments
STATES = ("open", "closed")

SCHEMA = """
CREATE TABLE labels (name TEXT PRIMARY KEY, color TEXT NOT NULL);
CREATE TABLE issues (
    number   INTEGER PRIMARY KEY,
    title    TEXT NOT NULL,
    body     TEXT NOT NULL DEFAULT '',
    state    TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    assignee TEXT
);
CREATE TABLE issue_labels (
    issue INTEGER NOT NULL REFERENCES issues(number),
    label TEXT NOT NULL REFERENCES labels(name),
    PRIMARY KEY (issue, label)
);
CREATE TABLE comments (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    issue  INTEGER NOT NULL REFERENCES issues(number),
    author TEXT NOT NULL,
    body   TEXT NOT NULL
);
"""

SEED_LABELS = [
    ("bug", "d73a4a"), ("docs", "0075ca"), ("enhancement", "a2eeef"), ("performance", "fbca04"), ("question", "d876e3"),
]
# (number, title, body, state, labels, assignee)
SEED_ISSUES = [
    (1, "Add a dark mode", "The settings dialog could offer a dark theme.", "open", ["enhancement"], None),
    (2, "CSV export drops the last row", "Exporting 3 issues to CSV writes only 2 rows.", "open", ["bug"], "dana"),
    (3, "Typo in the installation guide", "'pip isntall' should read 'pip install'.", "closed", ["docs"], None),
    (4, "App quits when I open Preferences", "Opening the Preferences dialog crashes the app.", "open", [], None),
    (5, "Search is slow on large projects", "Searching 10k issues takes seconds.", "open", [], None),
    (6, "Document the label colors", "The guide should list what each label color means.", "closed", ["docs"], "me"),
    (7, "Crash on startup with an empty config", "An empty config.toml crashes the app.", "closed", ["bug"], "me"),
    (8, "Keyboard shortcut for a new issue", "Ctrl+N could open the new-issue form.", "open", ["enhancement"], "dana"),
    (9, "Sync fails behind a proxy", "Sync times out when HTTPS_PROXY is set.", "open", ["bug"], "dana"),
    (10, "Dark theme for the editor", "A dark editor background would be easier on the eyes.", "open", ["enhancement"], None),
    (11, "Explain the config file format", "Which keys does config.toml accept?", "open", ["docs", "question"], "sam"),
    (12, "Export to JSON", "Besides CSV, an export to JSON would help scripting.", "open", ["enhancement"], "dana"),
]
# (issue, author, body)
SEED_COMMENTS = [
    (2, "dana", "Reproduced: the last row is missing whatever the list size."),
    (5, "lee", "Takes about 4 seconds on our main project."),
    (7, "me", "Fixed in 1.2.1."),
    (7, "lee", "Confirmed, thanks!"),
    (9, "sam", "Same here with a corporate proxy."),
    (10, "lee", "This duplicates the dark mode request."),
    (12, "me", "Should reuse the CSV code path."),
]


def seed_document() -> dict[str, Any]:
    """The seed as the JSON document the service's admin API loads (POST /api/admin/seed)."""
    comments: dict[int, list[dict[str, str]]] = {}
    for issue, author, body in SEED_COMMENTS:
        comments.setdefault(issue, []).append({"author": author, "body": body})
    return {
        "labels": [{"name": name, "color": color} for name, color in SEED_LABELS],
        "issues": [
            {"number": number, "title": title, "body": body, "state": state, "labels": labels,
             "assignees": [assignee] if assignee else [], "comments": comments.get(number, [])}
            for number, title, body, state, labels, assignee in SEED_ISSUES
        ],
    }  # fmt: skip


class TrackerError(Exception):
    """A request the tracker refuses; the message says why and what to do instead."""


@contextmanager
def _connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    if not Path(path).is_file():
        raise TrackerError(f"no tracker database at {path}")
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    try:
        # One operation = one transaction, taken before its first read: two calls at once (an agent
        # may call tools in parallel) cannot both see "open" and both close.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


def create(path: str | Path) -> None:
    """(Re)create an empty database (the schema only) at `path`."""
    path = Path(path)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(SCHEMA)
    conn.close()


def load(path: str | Path, document: dict[str, Any]) -> None:
    """Replace the content of the database with `document` (the shape of `snapshot`)."""
    try:
        with _connect(path) as conn:
            for table in ("comments", "issue_labels", "issues", "labels"):
                conn.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
            conn.executemany("INSERT INTO labels VALUES (?, ?)", [(label["name"], label["color"]) for label in document["labels"]])
            for issue in document["issues"]:
                assignee = (issue.get("assignees") or [None])[0]
                conn.execute(
                    "INSERT INTO issues VALUES (?, ?, ?, ?, ?)",
                    (issue["number"], issue["title"], issue.get("body", ""), issue.get("state", "open"), assignee),
                )
                conn.executemany("INSERT INTO issue_labels VALUES (?, ?)", [(issue["number"], label) for label in issue.get("labels", [])])
                conn.executemany(
                    "INSERT INTO comments (issue, author, body) VALUES (?, ?, ?)",
                    [(issue["number"], c["author"], c["body"]) for c in issue.get("comments", [])],
                )
    except (KeyError, TypeError, sqlite3.Error) as exc:
        raise TrackerError(f"cannot load this document: {type(exc).__name__}: {exc}") from None


# --- reading -------------------------------------------------------------------------------------


def _issue(conn: sqlite3.Connection, row: sqlite3.Row, *, full: bool) -> dict[str, Any]:
    number = row["number"]
    rows = conn.execute("SELECT label FROM issue_labels WHERE issue = ? ORDER BY label", (number,))
    labels = [r["label"] for r in rows]
    issue: dict[str, Any] = {"number": number, "title": row["title"]}
    if full:
        issue["body"] = row["body"]
    issue.update(state=row["state"], labels=labels, assignees=[row["assignee"]] if row["assignee"] else [])
    if full:
        comments = conn.execute("SELECT author, body FROM comments WHERE issue = ? ORDER BY id", (number,))
        issue["comments"] = [{"author": c["author"], "body": c["body"]} for c in comments]
    return issue


def _row(conn: sqlite3.Connection, number: int) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM issues WHERE number = ?", (number,)).fetchone()
    if row is None:
        raise TrackerError(f"there is no issue #{number}; `list --state all` shows every issue")
    return row


def snapshot(path: str | Path) -> dict[str, Any]:
    """The whole end state as JSON-like data, in a deterministic order (what the bench compares)."""
    with _connect(path) as conn:
        labels = [dict(r) for r in conn.execute("SELECT name, color FROM labels ORDER BY name")]
        rows = conn.execute("SELECT * FROM issues ORDER BY number").fetchall()
        return {"labels": labels, "issues": [_issue(conn, row, full=True) for row in rows]}


def list_issues(path: str | Path, state: str = "open", label: str | None = None) -> list[dict[str, Any]]:
    """Issues in `state` ("open", "closed" or "all"), optionally only those with `label`."""
    if state not in (*STATES, "all"):
        raise TrackerError(f"unknown state {state!r}; use open, closed or all")
    with _connect(path) as conn:
        rows = conn.execute("SELECT * FROM issues ORDER BY number").fetchall()
        issues = [_issue(conn, row, full=False) for row in rows]
    return [
        issue for issue in issues
        if state in ("all", issue["state"]) and (label is None or label in issue["labels"])
    ]  # fmt: skip


def show_issue(path: str | Path, number: int) -> dict[str, Any]:
    with _connect(path) as conn:
        return _issue(conn, _row(conn, number), full=True)


# --- changing ------------------------------------------------------------------------------------


def create_issue(path: str | Path, title: str, body: str = "") -> dict[str, Any]:
    if not title.strip():
        raise TrackerError("an issue needs a non-empty title")
    with _connect(path) as conn:
        cursor = conn.execute("INSERT INTO issues (title, body) VALUES (?, ?)", (title.strip(), body))
        number = cursor.lastrowid
    return show_issue(path, number)


def _set_state(path: str | Path, number: int, state: str) -> dict[str, Any]:
    with _connect(path) as conn:
        if _row(conn, number)["state"] == state:
            raise TrackerError(f"issue #{number} is already {state}")
        conn.execute("UPDATE issues SET state = ? WHERE number = ?", (state, number))
    return show_issue(path, number)


def close_issue(path: str | Path, number: int) -> dict[str, Any]:
    return _set_state(path, number, "closed")


def reopen_issue(path: str | Path, number: int) -> dict[str, Any]:
    return _set_state(path, number, "open")


def add_comment(path: str | Path, number: int, body: str, author: str = CURRENT_USER) -> dict[str, Any]:
    if not body.strip():
        raise TrackerError("a comment needs a non-empty body")
    with _connect(path) as conn:
        _row(conn, number)
        conn.execute("INSERT INTO comments (issue, author, body) VALUES (?, ?, ?)", (number, author, body))
    return show_issue(path, number)


def add_label(path: str | Path, number: int, label: str) -> dict[str, Any]:
    with _connect(path) as conn:
        _row(conn, number)
        known = [r["name"] for r in conn.execute("SELECT name FROM labels ORDER BY name")]
        if label not in known:
            raise TrackerError(f"there is no label {label!r}; known labels: {', '.join(known)}")
        if conn.execute("SELECT 1 FROM issue_labels WHERE issue = ? AND label = ?", (number, label)).fetchone():
            raise TrackerError(f"issue #{number} already has the label {label!r}")
        conn.execute("INSERT INTO issue_labels VALUES (?, ?)", (number, label))
    return show_issue(path, number)


def remove_label(path: str | Path, number: int, label: str) -> dict[str, Any]:
    with _connect(path) as conn:
        _row(conn, number)
        cursor = conn.execute("DELETE FROM issue_labels WHERE issue = ? AND label = ?", (number, label))
        if cursor.rowcount == 0:
            raise TrackerError(f"issue #{number} has no label {label!r}")
    return show_issue(path, number)


def assign(path: str | Path, number: int, user: str) -> dict[str, Any]:
    """Make `user` the issue's assignee (an issue has at most one; this replaces it)."""
    user = user.strip().removeprefix("@")
    if not user:
        raise TrackerError("name a user to assign")
    with _connect(path) as conn:
        if _row(conn, number)["assignee"] == user:
            raise TrackerError(f"issue #{number} is already assigned to {user}")
        conn.execute("UPDATE issues SET assignee = ? WHERE number = ?", (user, number))
    return show_issue(path, number)


def edit_title(path: str | Path, number: int, title: str) -> dict[str, Any]:
    if not title.strip():
        raise TrackerError("an issue needs a non-empty title")
    with _connect(path) as conn:
        _row(conn, number)
        conn.execute("UPDATE issues SET title = ? WHERE number = ?", (title.strip(), number))
    return show_issue(path, number)


def create_label(path: str | Path, name: str, color: str) -> dict[str, str]:
    name, color = name.strip(), color.strip().lstrip("#").lower()
    if not name or " " in name:
        raise TrackerError("a label name is one non-empty word")
    if len(color) != 6 or any(c not in "0123456789abcdef" for c in color):
        raise TrackerError(f"a label color is six hex digits such as d73a4a, not {color!r}")
    with _connect(path) as conn:
        if conn.execute("SELECT 1 FROM labels WHERE name = ?", (name,)).fetchone():
            raise TrackerError(f"the label {name!r} already exists")
        conn.execute("INSERT INTO labels VALUES (?, ?)", (name, color))
    return {"name": name, "color": color}


def list_labels(path: str | Path) -> list[dict[str, str]]:
    with _connect(path) as conn:
        return [dict(r) for r in conn.execute("SELECT name, color FROM labels ORDER BY name")]


# --- text shown to the agent (the CLI and the MCP server print the same) -------------------------


def render_list(issues: list[dict[str, Any]]) -> str:
    if not issues:
        return "(no issues match)"
    lines = []
    for issue in issues:
        line = f"#{issue['number']:<3} {issue['state']:<6} {issue['title']}"
        if issue["labels"]:
            line += f"  [{', '.join(issue['labels'])}]"
        if issue["assignees"]:
            line += "  @" + " @".join(issue["assignees"])
        lines.append(line)
    return "\n".join(lines)


def render_issue(issue: dict[str, Any]) -> str:
    lines = [
        f"#{issue['number']} {issue['title']}",
        f"state: {issue['state']} | labels: {', '.join(issue['labels']) or '-'}"
        f" | assignee: {', '.join(issue['assignees']) or '-'}",
        "",
        issue["body"] or "(no description)",
    ]
    if issue["comments"]:
        lines += ["", "comments:"] + [f"- {c['author']}: {c['body']}" for c in issue["comments"]]
    return "\n".join(lines)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
