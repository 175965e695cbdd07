"""A small client of the tracker's REST API (stdlib urllib), shared by the `tracker` CLI, the
`issuectl` CLI and the MCP server. It reads the service's address and token from TRACKER_URL and
TRACKER_TOKEN, as every arm receives them."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode


class ApiError(Exception):
    """The service refused a request; the message is the service's own explanation."""


class Client:
    def __init__(self, base_url: str, token: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    @classmethod
    def from_environment(cls) -> Client:
        url, token = os.environ.get("TRACKER_URL", ""), os.environ.get("TRACKER_TOKEN", "")
        if not url or not token:
            raise ApiError("TRACKER_URL and TRACKER_TOKEN must be set (the tracker service's address and token)")
        return cls(url, token)

    def request(self, method: str, path: str, body: Any = None, **query: Any) -> tuple[Any, dict[str, str]]:
        params = {key: value for key, value in query.items() if value is not None}
        url = self.base_url + path + (f"?{urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - our own service
                return json.loads(response.read() or b"null"), dict(response.headers)
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {exc.code}"
            raise ApiError(message) from None
        except urllib.error.URLError as exc:
            raise ApiError(f"the tracker service at {self.base_url} cannot be reached ({exc.reason})") from None

    # --- the operations ----------------------------------------------------------------------------

    def list_issues(self, state: str = "open", label: str | None = None, assignee: str | None = None) -> list[dict[str, Any]]:
        """Every matching issue (follows the pages)."""
        issues: list[dict[str, Any]] = []
        page: str | None = "1"
        while page is not None:
            chunk, headers = self.request("GET", "/issues", state=state, label=label, assignee=assignee, page=page, per_page=100)
            issues += chunk
            page = headers.get("X-Next-Page")
        return issues

    def list_page(self, state: str, page: int, per_page: int) -> tuple[list[dict[str, Any]], int]:
        """One page of issues and the total count."""
        chunk, headers = self.request("GET", "/issues", state=state, page=page, per_page=per_page)
        return chunk, int(headers.get("X-Total-Count", len(chunk)))

    def show_issue(self, number: int) -> dict[str, Any]:
        return self.request("GET", f"/issues/{number}")[0]

    def create_issue(self, title: str, body: str = "") -> dict[str, Any]:
        return self.request("POST", "/issues", {"title": title, "body": body})[0]

    def patch_issue(self, number: int, **changes: str) -> dict[str, Any]:
        return self.request("PATCH", f"/issues/{number}", changes)[0]

    def add_comment(self, number: int, body: str) -> dict[str, Any]:
        return self.request("POST", f"/issues/{number}/comments", {"body": body})[0]

    def add_label(self, number: int, label: str) -> dict[str, Any]:
        return self.request("POST", f"/issues/{number}/labels", {"label": label})[0]

    def remove_label(self, number: int, label: str) -> dict[str, Any]:
        return self.request("DELETE", f"/issues/{number}/labels/{quote(label, safe='')}")[0]

    def list_labels(self) -> list[dict[str, str]]:
        return self.request("GET", "/labels")[0]

    def create_label(self, name: str, color: str) -> dict[str, str]:
        return self.request("POST", "/labels", {"name": name, "color": color})[0]
