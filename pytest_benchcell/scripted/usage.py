"""Token accounting computed from the request received (see the package docstring): the prompt's
deterministic text, the tools a request offers, the prompt cache that splits fresh input, cache
writes and cache reads, and `Usage`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
# With tool search on, the CLI defers MCP tools: it names them in a system reminder of the first user
# message instead of the tools array (CLI 2.1.332: "The following deferred tools are now available
# via ToolSearch. ...:" then one name per line).
DEFERRED_TOOLS = re.compile(r"deferred tools are now available[^\n]*\n(.*?)</system-reminder>", re.DOTALL)

@dataclass(frozen=True)
class Usage:
    """Token usage of one answered request, in the API's four components, with its cache writes split
    by lifetime as the API reports them (`cache_creation`: 5 minutes, 1 hour)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cache_write_1h: int = 0  # of cache_creation_input_tokens, written for an hour

    def input_fields(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens - self.cache_write_1h,
                "ephemeral_1h_input_tokens": self.cache_write_1h,
            },
        }

    def as_dict(self) -> dict[str, Any]:
        return {**self.input_fields(), "output_tokens": self.output_tokens}


def cache_lifetime(body: dict[str, Any]) -> str:
    """The lifetime ("5m" or "1h") of the cache the request writes: its last cache breakpoint's `ttl`
    (the API's default, 5 minutes, where it names none). The fake writes every new cached token with
    it: it keeps one cache, not one per breakpoint."""
    last: Any = None

    def visit(value: Any) -> None:
        nonlocal last
        if isinstance(value, dict):
            if isinstance(value.get("cache_control"), dict):
                last = value["cache_control"]
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit([body.get("system"), body.get("tools"), body.get("messages")])
    return "1h" if isinstance(last, dict) and last.get("ttl") == "1h" else "5m"


def _without_cache_control(value: Any) -> Any:
    """A copy of ``value`` with every ``cache_control`` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_without_cache_control(value), sort_keys=True, ensure_ascii=False)


def prompt_text(body: dict[str, Any]) -> tuple[str, str]:
    """The request's prompt as (everything before the final message, the final message).

    Deterministic serialization of system + tools + messages (see the package docstring).
    """
    messages = body.get("messages") or []
    head_parts = [_dumps(body.get("system") or ""), _dumps(body.get("tools") or [])]
    head_parts.extend(_dumps(message) for message in messages[:-1])
    final = _dumps(messages[-1]) if messages else ""
    return "".join(head_parts), final


def offered_tools(body: dict[str, Any]) -> tuple[str, ...]:
    """The tools a Messages API request offers the model: the tools array (but for entries with
    `defer_loading`, which the CLI adds as placeholders) and the deferred tools it names."""
    tools = [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict) and not tool.get("defer_loading")]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [{"text": content}]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            for listing in DEFERRED_TOOLS.findall(text if isinstance(text, str) else ""):
                tools.extend(line.strip() for line in listing.splitlines() if line.strip())
    return tuple(dict.fromkeys(tools))


def _common_prefix_length(left: str, right: str) -> int:
    """Length of the longest common prefix, by binary search over C-level slice comparisons.

    Prompts reach hundreds of kilobytes and are compared against every earlier prompt, so a
    per-character Python loop would make a long conversation visibly slow.
    """
    low, high = 0, min(len(left), len(right))
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class _PromptCache:
    """Remembers answered prompts and splits a new prompt into fresh / cache write / cache read."""

    def __init__(self) -> None:
        self._seen: list[str] = []

    def account(self, head: str, final: str, *, remember: bool = True) -> tuple[int, int, int]:
        """(fresh_input, cache_write, cache_read) tokens for this prompt; remembers it unless told not to."""
        prompt = head + final
        cached_chars = 0
        # Newest first: in a conversation each prompt extends the previous one, so the newest
        # usually wins at once and older (shorter) prompts can be skipped without comparing.
        for earlier in reversed(self._seen):
            if len(earlier) <= cached_chars:
                continue
            if prompt.startswith(earlier):
                cached_chars = len(earlier)
            else:
                cached_chars = max(cached_chars, _common_prefix_length(prompt, earlier))
        # New characters before the final message are written to the cache; those inside it are
        # fresh input (the real CLI puts its last cache breakpoint on the final message).
        write_chars = max(0, len(head) - cached_chars)
        fresh_chars = len(prompt) - max(cached_chars, len(head))
        if remember:
            self._seen.append(prompt)
        return (
            max(1, fresh_chars // CHARS_PER_TOKEN),
            write_chars // CHARS_PER_TOKEN,
            cached_chars // CHARS_PER_TOKEN,
        )
