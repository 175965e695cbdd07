"""The pre-flight of an arm's MCP servers: each started as a trial starts it, spoken to in MCP.

For each MCP server of a selected arm, in the environment the pre-flight provisioned for the arm
(preflight.py): the server is started exactly as the CLI starts it in a trial (mcp_launch.py: the
same command line and supervisor, the CLI's environment with the server's `env` over it, the agent's
working folder; MCP servers run outside the sandbox), and the maintained MCP client (the `mcp`
package, which the agent SDK depends on) initializes a session and lists its tools, all within
[bench] mcp_timeout_ms (the CLI's own wait). A server that exits, does not answer in time, or does
not offer a tool the arm declares for it (`tools` of its table; without one, any tool at all) would
leave every trial of the arm without its tools: the sitting is refused, with the server's own stderr
(the lines naming the error) and what to fix.

The only module that imports `mcp`, inside `check_servers`: pytest imports the plugin in every run.
Knows nothing of pytest.
"""

from __future__ import annotations

import threading

import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Arm, Bench
from .mcp_launch import command_line, passed_on_environment, server_configs, server_ends
from .output_lines import lines_naming_the_error
from .secrets import redact

__all__ = ["McpFailure", "check_servers", "mcp_refusal"]


@dataclass
class McpFailure:
    """An MCP server of an arm that would leave the arm's trials without its tools."""

    arm: str
    server: str
    command: Sequence[str]  # the server's command line, placeholders filled
    what: str  # "exited with status 1 before it answered MCP's initialize (after 0.4 s)", ...
    remedy: str
    stderr: str = ""

    def message(self) -> str:
        lines = [f"arm {self.arm}: MCP server '{self.server}' ({shlex.join(self.command)}) {self.what}"]
        said = lines_naming_the_error(self.stderr)
        if said:
            lines.append("    it said: " + "\n        ".join(said))
        else:
            lines.append("    it wrote nothing to stderr")
        lines.append(f"    -> {self.remedy}")
        return "\n".join(lines)


def mcp_refusal(bench: Bench, failures: Sequence[McpFailure]) -> str:
    """The refusal's part for the MCP servers that fail: a head, then one message per server."""
    count = len(failures)
    head = (
        f"benchcell pre-flight: {count} MCP server{'' if count == 1 else 's'} of the selected arms, started as in a "
        f"trial, would leave {'its arm' if count == 1 else 'their arms'} without the arm's tools, so every trial would "
        f"be invalid (nothing was reserved, no model request was made); fix the server or its table in {bench.path}:"
    )
    return "\n".join([head, *(failure.message() for failure in failures)])


def check_servers(
    bench: Bench, arm: Arm, values: Mapping[str, str], cli_env: Mapping[str, str], cwd: Path, folder: Path,
    secrets: Sequence[str] = (),
) -> list[McpFailure]:
    """Start each of the arm's MCP servers as a trial does and ask it for its tools (see the module
    docstring); the failures, none when every server offers the arm's tools in time. `secrets` are
    redacted from what a server wrote before it is quoted."""
    import anyio  # lazily: the `mcp` client and its event loop cost an import only where an arm has servers

    where = f"{bench.path}: [arms.{arm.name}.mcp_servers]"
    configs = server_configs(arm, values, where, folder)
    outcomes: dict[str, _Outcome] = {}

    async def ask_each() -> None:  # the servers at once, as the CLI starts them: one wait for all
        async with anyio.create_task_group() as group:
            for name, config in configs.items():
                group.start_soon(ask_one, name, config)

    async def ask_one(name: str, config: Mapping[str, Any]) -> None:
        env = passed_on_environment(cli_env, config["env"])
        status = lambda: server_ends(folder, [name])[name].status  # noqa: E731
        outcomes[name] = await _ask_for_tools(config, env, cwd, bench.mcp_timeout_ms / 1000, status)

    anyio.run(ask_each)
    failures = []
    for server in arm.mcp_servers:
        end = server_ends(folder, [server.name])[server.name]
        failure = _judge(bench, arm, server.name, server.tools, command_line(configs[server.name]), outcomes[server.name], end)
        if failure is not None:
            failure.stderr = redact({"stderr": failure.stderr}, secrets)["stderr"]
            failures.append(failure)
    return failures


class ServerCheck:
    """`check_servers` in a thread of its own, so that a sitting's other arms are checked meanwhile:
    an MCP server's start (often an interpreter importing the `mcp` package) is the pre-flight's
    longest single wait. `result()` waits for it and gives its failures, or raises what it raised."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._failures: list[McpFailure] = []
        self._error: BaseException | None = None
        # A daemon: a Ctrl-C of the sitting does not wait on a server's answer (the client's own
        # timeout ends the thread, and the server dies with its supervisor's shell).
        self._thread = threading.Thread(target=self._run, args=args, kwargs=kwargs, name="benchcell-mcp-preflight", daemon=True)
        self._thread.start()

    def _run(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._failures = check_servers(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread by result()
            self._error = exc

    def result(self) -> list[McpFailure]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._failures


@dataclass
class _Outcome:
    stage: str  # how far the conversation came: "initialize", "tools/list" or "done"
    tools: tuple[str, ...] = ()
    timed_out: bool = False
    error: str = ""  # what the client raised, when it was not the timeout
    exited: int | None = None  # the server's exit status, when it ended by itself before answering
    seconds: float = 0.0  # from its start to the answer, or to the failure


EXIT_GRACE_S = 0.5  # after the connection closed: how long the supervisor may take to record the exit


async def _ask_for_tools(
    config: Mapping[str, Any], env: Mapping[str, str], cwd: Path, timeout_s: float, exit_status: Callable[[], int | None]
) -> _Outcome:
    import anyio
    from mcp import ClientSession, types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    outcome = _Outcome("initialize")
    parameters = StdioServerParameters(command=config["command"], args=list(config["args"]), env=dict(env), cwd=cwd)
    started = time.monotonic()
    with open(os.devnull, "w") as quiet, anyio.move_on_after(timeout_s) as scope:
        try:
            async with stdio_client(parameters, errlog=quiet) as (read, write), ClientSession(read, write) as session:
                try:
                    await session.initialize()
                    outcome.stage = "tools/list"
                    tools: list[str] = []
                    cursor = None
                    while True:
                        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                        tools += [tool.name for tool in page.tools]
                        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
                        if not cursor:
                            break
                    outcome.tools = tuple(tools)
                    outcome.stage = "done"
                except Exception as exc:  # noqa: BLE001 - the connection closed, the server sent garbage: judged later
                    outcome.seconds = time.monotonic() - started
                    outcome.error = f"{type(exc).__name__}: {exc}"
                    # Whether the server ended by itself: asked before the client stops it on the way out.
                    with anyio.move_on_after(EXIT_GRACE_S):
                        while (status := exit_status()) is None:
                            await anyio.sleep(0.02)
                        outcome.exited = status
        except Exception as exc:  # noqa: BLE001 - the same, raised from the client's task group
            outcome.error = outcome.error or f"{type(exc).__name__}: {exc}"
    outcome.timed_out = scope.cancelled_caught
    return outcome


def _judge(
    bench: Bench, arm: Arm, name: str, declared: Sequence[str], command: Sequence[str], outcome: _Outcome, end: Any,
) -> McpFailure | None:  # fmt: skip
    table = f"[arms.{arm.name}.mcp_servers.{name}]"
    start_it = (
        f"make `{shlex.join(command)}` start as in a trial: in an empty working folder (the agent's, new for each "
        f"trial), with the variables of "
        f"{table} (its `command`, `args` and `env` in {bench.path}; a file of the bench named with {{bench_root}})"
    )

    def failure(what: str, remedy: str = start_it) -> McpFailure:
        return McpFailure(arm.name, name, command, what, remedy, end.stderr)

    if outcome.stage == "done":
        missing = [tool for tool in declared if tool not in outcome.tools]
        if missing:
            return failure(
                f"does not offer {', '.join(missing)} of the tools the arm declares for it; it offers: "
                f"{', '.join(outcome.tools) or 'no tool'}",
                f"fix the server, or the `tools` of {table} in {bench.path} to the names it offers",
            )
        if not outcome.tools:
            return failure("offers no tool at all, so the arm would have none", f"fix the server started by {table}")
        return None
    during = "MCP's initialize" if outcome.stage == "initialize" else "its tools/list"
    if outcome.exited is not None:
        return failure(f"exited with status {outcome.exited} before it answered {during} (after {outcome.seconds:.1f} s)")
    if outcome.timed_out:
        return failure(
            f"gave no answer to {during} within {bench.mcp_timeout_ms} ms ([bench] mcp_timeout_ms)",
            f"{start_it}; or, if it needs longer to start, raise [bench] mcp_timeout_ms",
        )
    return failure(f"failed before it answered {during} (after {outcome.seconds:.1f} s: {outcome.error})")
