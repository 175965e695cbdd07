"""One [arms.NAME] table read into an `Arm`: its tools, binaries, skill, MCP servers, argument rules,
helpers, probes, sandbox endpoints and readable files, and its pre-flight commands."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..names import PROGRAM_RULE, program_problem
from ..skill_delivery import DELIVERIES, EMBED, NATIVE, frontmatter_text, split_frontmatter
from .model import ARGUMENT_RULE_KEYS, BUILTIN_TOOLS, OPTION_NAME, URL_PREFIX, Arm, McpServer
from .placeholders import PLACEHOLDER
from .reader import _check_name, _Reader


def _parse_arm(file: Path, name: str, arm: _Reader) -> Arm:
    _check_name(arm, "arm", name)
    arm.only(
        "tools", "binaries", "path", "bootstrap", "skill", "env", "mcp_servers", "deny_subcommands",
        "guard_exempt", "arguments", "helpers", "probe", "network", "readable", "preflight", "skill_delivery",
    )  # fmt: skip
    tools = arm.strings("tools", ("Bash",))
    delivery = arm.choice("skill_delivery", EMBED, DELIVERIES)
    for tool in tools:
        if tool not in BUILTIN_TOOLS:
            arm.fail("tools", tool, f"built-in tools {', '.join(BUILTIN_TOOLS)} (MCP tools come from mcp_servers)",
                     choices=BUILTIN_TOOLS)
    binaries = arm.strings("binaries")
    if binaries and "Bash" not in tools:
        arm.fail("binaries", list(binaries), "binaries only with \"Bash\" in tools (this arm has no shell)")
    _check_programs(arm, "binaries", binaries)
    folders = tuple(str((file.parent / folder).resolve()) for folder in arm.strings("path"))
    for folder in folders:
        if not Path(folder).is_dir():
            arm.fail("path", folder, "existing folders (relative to bench.toml)")

    skill_path = arm.table.get("skill")
    skill_body = skill_head = ""
    if skill_path is not None:
        if not isinstance(skill_path, str) or not skill_path:
            arm.fail("skill", skill_path, "a path to a skill file, relative to bench.toml")
        try:
            skill_text = (file.parent / skill_path).read_text(encoding="utf-8")
            skill_body, skill_head = _strip_frontmatter(skill_text), frontmatter_text(skill_text)
        except OSError:
            arm.fail("skill", skill_path, "an existing, readable skill file (relative to bench.toml)")
    if delivery == NATIVE:
        tools = _native_skill_tools(arm, skill_path, tools)

    servers_table = arm.sub("mcp_servers")
    servers = []
    for server_name in servers_table.table:
        server = servers_table.sub(server_name)
        _check_name(server, "MCP server", server_name)
        server.only("command", "args", "env", "tools")
        servers.append(
            McpServer(
                name=server_name,
                command=server.string("command", required=True),
                args=server.strings("args"),
                env=server.string_table("env"),
                tools=server.strings("tools"),
            )
        )
    if not tools and not servers:
        arm.fail("tools", [], "at least one built-in tool or one MCP server (the arm would have no tools)")

    deny_table = arm.sub("deny_subcommands")
    deny = {}
    for binary in deny_table.table:
        if binary not in binaries:
            deny_table.fail(binary, binary, f"one of this arm's binaries ({', '.join(binaries) or 'none'})")
        deny[binary] = deny_table.strings(binary)
    return Arm(
        name=name,
        tools=tools,
        binaries=binaries,
        path=folders,
        bootstrap=arm.string("bootstrap", ""),
        skill_path=skill_path,
        skill_body=skill_body,
        env=arm.string_table("env"),
        mcp_servers=tuple(servers),
        deny_subcommands=deny,
        guard_exempt=_check_programs(arm, "guard_exempt", arm.strings("guard_exempt"), allowed_extra=("*",)),
        arguments=_argument_rules(arm, binaries),
        helpers=_helpers(arm, binaries),
        probes=_probes(arm, binaries),
        network=_network(arm),
        readable=_readable(file, arm),
        preflight=_preflight(arm, tools),
        skill_delivery=delivery,
        skill_frontmatter=skill_head,
    )


def _native_skill_tools(arm: _Reader, skill_path: object, tools: tuple[str, ...]) -> tuple[str, ...]:
    """skill_delivery = "native": the arm's tools with the Skill tool the CLI loads the skill through."""
    if skill_path is None:
        arm.fail("skill_delivery", NATIVE, f'"{EMBED}" for an arm without a skill (native delivery needs `skill`)')
    return tools if "Skill" in tools else (*tools, "Skill")


def _preflight(arm: _Reader, tools: tuple[str, ...]) -> tuple[str, ...]:
    """preflight = ["tracker list --limit 1"]: command lines that must work in the sandbox as they do
    outside it (run once before a sitting, with the trial's environment)."""
    commands = arm.strings("preflight")
    if commands and "Bash" not in tools:
        arm.fail("preflight", list(commands), 'pre-flight commands only with "Bash" in tools (this arm has no shell)')
    for command in commands:
        try:
            shlex.split(command)
        except ValueError as exc:
            arm.fail("preflight", command, f"shell command lines (this one does not parse: {exc})")
    return commands


def _network(arm: _Reader) -> tuple[str, ...]:
    """network = ["127.0.0.1:{port}", "http://127.0.0.1:{port}/"]: where the sandbox lets commands connect."""
    from ..isolation.sandbox import parse_endpoint

    entries = arm.strings("network")
    for entry in entries:
        try:
            parse_endpoint(PLACEHOLDER.sub("1", entry))
        except ValueError as exc:
            if PLACEHOLDER.search(entry):
                continue  # "{url}": known per trial, checked when the trial starts
            arm.fail("network", entry, f"loopback endpoints written as HOST:PORT or a URL, e.g. \"127.0.0.1:{{port}}\" ({exc})")
    return entries


def _readable(file: Path, arm: _Reader) -> tuple[str, ...]:
    """readable = ["bench/tracker"]: files or folders of the bench the arm's binaries read (the
    sandbox hides the rest of the bench folder)."""
    paths = []
    for entry in arm.strings("readable"):
        path = (file.parent / entry).resolve()
        if not path.exists():
            arm.fail("readable", entry, "existing files or folders, relative to bench.toml")
        if path == file.parent.resolve() or path == file.resolve():
            arm.fail("readable", entry, "files or folders inside the bench folder other than the folder itself and bench.toml")
        paths.append(str(path))
    return tuple(paths)


def _check_programs(reader: _Reader, key: str, names: tuple[str, ...], *, allowed_extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Program names as given, or a BenchConfigError: each is linked or wrapped under its name in
    the trial's PATH folder, so a path-shaped one would write outside it."""
    for name in names:
        problem = None if name in allowed_extra else program_problem(name)
        if problem:
            extra = f" (or {', '.join(repr(value) for value in allowed_extra)})" if allowed_extra else ""
            reader.fail(key, name, f"{PROGRAM_RULE}{extra}; refused because {problem}")
    return names


def _argument_rules(arm: _Reader, binaries: tuple[str, ...]) -> dict[str, dict[str, tuple[str, ...]]]:
    """[arms.NAME.arguments.BINARY]: what one binary may be given (see isolation/arguments.py)."""
    table = arm.sub("arguments")
    rules: dict[str, dict[str, tuple[str, ...]]] = {}
    for binary in table.table:
        if binary not in binaries:
            table.fail(binary, binary, f"one of this arm's binaries ({', '.join(binaries) or 'none'})")
        rule = table.sub(binary)
        rule.only(*ARGUMENT_RULE_KEYS)
        values = {key: rule.strings(key) for key in ARGUMENT_RULE_KEYS if key in rule.table}
        for key in ("deny_options", "value_options"):
            for option in values.get(key, ()):
                if not OPTION_NAME.match(option):
                    rule.fail(key, option, "options written as -x or --name")
        if values.get("allow_urls") == ():
            # An empty list would read as "no URL rule" somewhere and "nowhere" elsewhere: refuse it.
            rule.fail(
                "allow_urls", [],
                f"at least one URL prefix (e.g. \"http://127.0.0.1:{{port}}/\"); to keep the arm from the "
                f"network, leave {binary} out of its binaries",
            )  # fmt: skip
        for url in values.get("allow_urls", ()):
            if not URL_PREFIX.match(PLACEHOLDER.sub("0", url)):
                rule.fail(
                    "allow_urls", url,
                    "URL prefixes written up to the / after the host and port, e.g. \"http://127.0.0.1:{port}/\" "
                    "(a network scheme, not file://; a literal host name or address, no wildcard; no user@ part)",
                )  # fmt: skip
        rules[binary] = values
    return rules


def _helpers(arm: _Reader, binaries: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """helpers = { BINARY = ["sh", ...] }: programs a binary starts itself (execution audit)."""
    table = arm.sub("helpers")
    helpers: dict[str, tuple[str, ...]] = {}
    for binary in table.table:
        if binary not in binaries:
            table.fail(binary, binary, f"one of this arm's binaries ({', '.join(binaries) or 'none'})")
        helpers[binary] = _check_programs(table, binary, table.strings(binary))
    return helpers


def _probes(arm: _Reader, binaries: tuple[str, ...]) -> dict[str, str]:
    """probe = { BINARY = "BINARY --help" }: the command whose start-up the execution audit traces
    to learn the binary's helpers (instead of `BINARY --version`)."""
    table = arm.sub("probe")
    probes: dict[str, str] = {}
    for binary in table.table:
        if binary not in binaries:
            table.fail(binary, binary, f"one of this arm's binaries ({', '.join(binaries) or 'none'})")
        command = table.string(binary, required=True)
        try:
            words = shlex.split(command)
        except ValueError:
            words = []
        if not words or words[0] != binary:
            table.fail(binary, command, f'a command line that runs {binary} itself, e.g. "{binary} --help"')
        probes[binary] = command
    return probes


def _strip_frontmatter(text: str) -> str:
    # Claude Code loads a skill's frontmatter description ambiently; only the body is the arm's guide.
    head, body = split_frontmatter(text)
    return body.lstrip("\n") if head else text

