"""The tracker's MCP server (stdio): the same operations as the `tracker` CLI, as MCP tools.

Run as `python bench/tracker_mcp.py`; the database is the file named by $TRACKER_DB. Tools answer
with the same text the CLI prints, so the arms differ only in the interface.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from tracker import db  # noqa: E402

server = MCPServer("tracker", instructions="A small local issue tracker.", log_level="WARNING")


def _call(operation, *args):
    try:
        return operation(db.db_path(), *args)
    except db.TrackerError as exc:
        raise ToolError(str(exc)) from None  # is_error=True with this message, no traceback


@server.tool(structured_output=False)
def list_issues(state: str = "open", label: str | None = None) -> str:
    """List issues. state: "open" (default), "closed" or "all"; label: only issues with this label."""
    return db.render_list(_call(db.list_issues, state, label))


@server.tool(structured_output=False)
def show_issue(number: int) -> str:
    """Show one issue with its body and comments."""
    return db.render_issue(_call(db.show_issue, number))


@server.tool(structured_output=False)
def create_issue(title: str, body: str = "") -> str:
    """Create an issue; returns its number."""
    return f"created issue #{_call(db.create_issue, title, body)['number']}"


@server.tool(structured_output=False)
def close_issue(number: int) -> str:
    """Close an issue."""
    return f"closed issue #{_call(db.close_issue, number)['number']}"


@server.tool(structured_output=False)
def reopen_issue(number: int) -> str:
    """Reopen a closed issue."""
    return f"reopened issue #{_call(db.reopen_issue, number)['number']}"


@server.tool(structured_output=False)
def comment_issue(number: int, body: str) -> str:
    """Comment on an issue."""
    _call(db.add_comment, number, body)
    return f"commented on issue #{number}"


@server.tool(structured_output=False)
def add_label(number: int, label: str) -> str:
    """Add a label to an issue."""
    _call(db.add_label, number, label)
    return f"added label {label!r} to issue #{number}"


@server.tool(structured_output=False)
def remove_label(number: int, label: str) -> str:
    """Remove a label from an issue."""
    _call(db.remove_label, number, label)
    return f"removed label {label!r} from issue #{number}"


@server.tool(structured_output=False)
def assign_issue(number: int, user: str) -> str:
    """Set an issue's assignee (replaces the current one)."""
    issue = _call(db.assign, number, user)
    return f"assigned issue #{number} to {issue['assignees'][0]}"


if __name__ == "__main__":
    server.run("stdio")
