"""The tracker's MCP server (stdio): the same operations as the `tracker` CLI, as MCP tools.

Run as `python bench/tracker_mcp.py`; it talks to the tracker service named by $TRACKER_URL with the
token in $TRACKER_TOKEN. Tools answer with the same text the CLI prints, so the arms differ only in
the interface. It alone can create labels (a bonus task), and it has no export (another).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from tracker import db  # noqa: E402  (only its text rendering)
from tracker.client import ApiError, Client  # noqa: E402

server = MCPServer("tracker", instructions="A small local issue tracker.", log_level="WARNING")


def _call(operation, *args, **kwargs):
    try:
        return operation(Client.from_environment(), *args, **kwargs)
    except ApiError as exc:
        raise ToolError(str(exc)) from None  # is_error=True with this message, no traceback


@server.tool(structured_output=False)
def list_issues(state: str = "open", label: str | None = None) -> str:
    """List issues. state: "open" (default), "closed" or "all"; label: only issues with this label."""
    return db.render_list(_call(Client.list_issues, state, label))


@server.tool(structured_output=False)
def show_issue(number: int) -> str:
    """Show one issue with its body and comments."""
    return db.render_issue(_call(Client.show_issue, number))


@server.tool(structured_output=False)
def create_issue(title: str, body: str = "") -> str:
    """Create an issue; returns its number."""
    return f"created issue #{_call(Client.create_issue, title, body)['number']}"


@server.tool(structured_output=False)
def close_issue(number: int) -> str:
    """Close an issue."""
    return f"closed issue #{_call(Client.patch_issue, number, state='closed')['number']}"


@server.tool(structured_output=False)
def reopen_issue(number: int) -> str:
    """Reopen a closed issue."""
    return f"reopened issue #{_call(Client.patch_issue, number, state='open')['number']}"


@server.tool(structured_output=False)
def comment_issue(number: int, body: str) -> str:
    """Comment on an issue."""
    _call(Client.add_comment, number, body)
    return f"commented on issue #{number}"


@server.tool(structured_output=False)
def add_label(number: int, label: str) -> str:
    """Add a label to an issue."""
    _call(Client.add_label, number, label)
    return f"added label {label!r} to issue #{number}"


@server.tool(structured_output=False)
def remove_label(number: int, label: str) -> str:
    """Remove a label from an issue."""
    _call(Client.remove_label, number, label)
    return f"removed label {label!r} from issue #{number}"


@server.tool(structured_output=False)
def assign_issue(number: int, user: str) -> str:
    """Set an issue's assignee (replaces the current one)."""
    issue = _call(Client.patch_issue, number, assignee=user)
    return f"assigned issue #{number} to {issue['assignees'][0]}"


@server.tool(structured_output=False)
def list_labels() -> str:
    """List the labels with their colors."""
    return "\n".join(f"{label['name']} #{label['color']}" for label in _call(Client.list_labels))


@server.tool(structured_output=False)
def create_label(name: str, color: str) -> str:
    """Create a label; color is six hex digits such as d73a4a."""
    label = _call(Client.create_label, name, color)
    return f"created label {label['name']!r} (#{label['color']})"


if __name__ == "__main__":
    server.run("stdio")
