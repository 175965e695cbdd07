"""What a loaded bench is: the defaults and rules of bench.toml's keys, `BenchConfigError`, and the
frozen dataclasses (`McpServer`, `Arm`, `Task`, `Bench`) with the conditions and scoring a sample is
produced under and their fingerprints."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..api_faults import DEFAULT_API_STALL_MS, DEFAULT_STOP_AFTER_API_FAILURES
from ..isolation.limits import DEFAULT_LIMITS, Limits
from ..prices import PriceTable, package_table
from ..sample import Definition

DEFAULT_STORE = "bench/results"
DEFAULT_TRIALS = 5
DEFAULT_FLOOR = 3
DEFAULT_TURN_CAP = 40
DEFAULT_WALL_CLOCK_MS = 300_000
DEFAULT_READY_TIMEOUT_MS = 60_000
# How long the CLI waits for an arm's MCP servers before its first model request (its MCP_TIMEOUT).
# The CLI's own default, 30 s, let a server that needs 35 s miss the first request; twice that
# costs nothing to a server that starts fast. At least 1 s: below, every server would miss it.
DEFAULT_MCP_TIMEOUT_MS = 60_000
MIN_MCP_TIMEOUT_MS = 1_000
# Trials of an arm the harness broke (harness_broke.py) before the arm's other trials of the sitting are
# not run: one block an agent can cause by itself (its command naming a hidden file through the arm's program).
DEFAULT_STOP_AFTER_BLOCKED = 2
# [bench.smallest_effect]: the smallest difference worth knowing about, per compared metric. Below
# it, `--bench-fill decide` may conclude "no difference larger than this" and stop (allocation.py).
# success: a difference of success rates (0.15 = 15 percentage points); tokens: a ratio of
# cost-equivalent tokens (0.2 = one arm needs 20% more or fewer).
SMALLEST_EFFECT_RULES = {"success": (0.0, 1.0, "a number above 0 and below 1 (0.15 = 15 percentage points)"),
                         "tokens": (0.0, 10.0, "a number above 0 and below 10 (0.2 = 20% more or fewer tokens)")}
WHITESPACE_POLICIES = ("exact", "strip", "collapse")
CHANGE_OPS = ("set", "append", "add", "remove", "delete")
DEFAULT_TIERS = ("read", "single-mutation", "find-then-act", "multi-step")
DEFAULT_WEIGHTS = {"fresh_input": 1.0, "cache_write": 1.25, "cache_read": 0.1, "output": 5.0}
# The execution audit (isolation/exec_audit/): "auto" runs it where strace can (the header and
# every sample say whether it ran), "required" refuses a sitting without it, "off" never runs it.
EXEC_AUDIT_MODES = ("auto", "required", "off")
DEFAULT_EXEC_AUDIT = "auto"
# Where an audited command runs: "one" CPU with its strace (a stop of the tracee then costs a task
# switch, not a wake-up of another CPU), or "all" (a command that builds in parallel keeps every CPU).
EXEC_AUDIT_CPUS = ("one", "all")
DEFAULT_EXEC_AUDIT_CPUS = "one"
# The sandbox (isolation/sandbox/): the same three modes. "auto" runs every Bash command in
# bubblewrap where it can and says so; "required" refuses a sitting without it (for published numbers).
SANDBOX_MODES = ("auto", "required", "off")
DEFAULT_SANDBOX = "auto"
# What a trial's commands may use inside the sandbox (isolation/limits.py): MiB and files added to the
# writable folders, processes at once.
SANDBOX_LIMIT_KEYS = {"sandbox_disk_mb": "disk_mb", "sandbox_files": "files", "sandbox_processes": "processes"}
ARGUMENT_RULE_KEYS = ("deny_subcommands", "deny_options", "allow_urls", "value_options")
OPTION_NAME = re.compile(r"^(-[^-\s]|--[A-Za-z0-9][A-Za-z0-9._-]*)$")
# An allowed URL prefix: scheme://host[:port]/ (no user info; the "/" after the authority means
# nothing written after the prefix can change the host or port). The host is literal: a name, an
# IPv4 or a bracketed IPv6 address (no wildcard: the guard compares hosts as written), and the
# scheme is a network one (file:// has no host to hold the agent to). isolation.arguments checks
# URLs against the prefixes validated here; placeholders are read as "0" for this check.
URL_PREFIX = re.compile(r"^(?!file:)[a-z][a-z0-9+.-]*://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/", re.IGNORECASE)

# Claude Code's built-in tools an arm may declare. Anything not declared is unavailable to the arm.
BUILTIN_TOOLS = (
    "Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "NotebookEdit",
    "WebFetch", "WebSearch", "Task", "Agent", "TodoWrite", "Skill",
)  # fmt: skip


class IdentifiesTools(Protocol):
    """What an arm's tools are on this machine (the module tool_identity is one)."""

    def arm_identities(
        self, binaries: Sequence[str], folders: Sequence[str], bench_root: Path, every: Sequence[tuple[Sequence[str], Sequence[str]]] = ()
    ) -> Mapping[str, Mapping[str, Any]]: ...

    def server_files(self, command: str, args: Sequence[str], bench_root: Path) -> Mapping[str, str]: ...


class BenchConfigError(Exception):
    """bench.toml is missing or invalid. The message is complete and meant for the user."""


def did_you_mean(value: Any, allowed: Any) -> str:
    """' (did you mean 'x'?)' for a near-miss of one of the allowed names, else ''."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(name) for name in allowed], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class McpServer:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # The tools the arm needs from it (names as the server offers them), checked by the pre-flight
    # (preflight_mcp.py); not a condition: the agent meets whatever the server offers.
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Arm:
    name: str
    tools: tuple[str, ...]
    binaries: tuple[str, ...]
    path: tuple[str, ...]  # absolute folders that hold the arm's binaries
    bootstrap: str
    skill_path: str | None
    skill_body: str
    env: Mapping[str, str]
    mcp_servers: tuple[McpServer, ...]
    deny_subcommands: Mapping[str, tuple[str, ...]]
    # A deliberate hole for testing the audit: the in-band guard lets these programs through, but
    # they are not the arm's, so the independent audit marks any trial that ran one invalid.
    guard_exempt: tuple[str, ...] = ()
    # Per binary: deny_subcommands, deny_options, allow_urls, value_options (isolation.arguments).
    arguments: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    # Per binary: programs it may start itself (the execution audit allows them only below it).
    helpers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Per binary: the command line whose traced start-up teaches the execution audit its helpers
    # (`BINARY --version` when not declared).
    probes: Mapping[str, str] = field(default_factory=dict)
    # Sandbox: endpoints the arm's commands may connect to ("127.0.0.1:{port}" or a URL), besides
    # its curl allow_urls; and files or folders of the bench (absolute) its binaries need to read.
    network: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    # The command lines the pre-flight runs in the sandbox for this arm before a sitting (instead of
    # each binary's probe or `--version`); not part of the conditions: the agent never meets them.
    preflight: tuple[str, ...] = ()
    # How the skill reaches the agent (skill_delivery.py): "embed" in the prompt, "native" through the Skill tool.
    skill_delivery: str = "embed"
    skill_frontmatter: str = ""  # the skill file's frontmatter as written (native delivery's description)

    @property
    def system_prompt_addition(self) -> str:
        parts = [self.bootstrap.strip()]
        if self.skill_body.strip() and self.skill_delivery == "embed":
            parts.append(self.skill_body.strip())
        return "\n\n".join(part for part in parts if part)


@dataclass(frozen=True)
class Task:
    id: str
    tier: str
    intent: str
    bonus: bool
    required_facts: tuple[Any, ...]
    forbidden_facts: tuple[Any, ...]
    check_state: bool
    changes: tuple[Any, ...] = ()  # the intended change, applied to the ground truth (checker.apply_changes)
    arms: tuple[str, ...] = ()  # arms that can do the task at all (bonus tasks); () = every arm

    def applies_to(self, arm: str) -> bool:
        return not self.arms or arm in self.arms


@dataclass(frozen=True)
class Bench:
    path: Path  # the bench.toml file
    name: str
    model: str
    store: Path  # absolute
    trials: int
    floor: int
    turn_cap: int
    wall_clock_ms: int
    base_prompt: str
    tiers: tuple[str, ...]
    secrets: tuple[str, ...]
    weights: Mapping[str, float]
    arms: Mapping[str, Arm]
    tasks: Mapping[str, Task]
    ready_timeout_ms: int = DEFAULT_READY_TIMEOUT_MS
    state_policy: Mapping[str, Any] = field(default_factory=dict)  # [checker] table, for checker.StatePolicy
    exec_audit: str = DEFAULT_EXEC_AUDIT  # auto | required | off
    exec_audit_cpus: str = DEFAULT_EXEC_AUDIT_CPUS  # one | all
    sandbox: str = DEFAULT_SANDBOX  # auto | required | off
    mcp_timeout_ms: int = DEFAULT_MCP_TIMEOUT_MS  # the CLI's wait for MCP servers (isolation/tool_offer.py)
    # Pairs of arms whose comparison matters (`--bench-fill decide`); () = every pair of arms.
    comparisons: tuple[tuple[str, str], ...] = ()
    smallest_effect: Mapping[str, float] = field(default_factory=dict)  # metric -> smallest effect of interest
    sandbox_limits: Limits = DEFAULT_LIMITS  # [bench] sandbox_disk_mb, sandbox_files, sandbox_processes
    # The model API's faults (api_faults.py). Neither is part of the conditions: they decide whether
    # a trial the API ended is recorded as the API's, never how an agent's trial is scored.
    api_stall_ms: int = DEFAULT_API_STALL_MS  # no byte from the API for this long mid-request: the trial ends, error
    stop_after_api_failures: int = DEFAULT_STOP_AFTER_API_FAILURES  # trials in a row the API ended: the sitting stops
    # Nor is this: trials of an arm the harness broke, after which the arm's other trials of the sitting do not run.
    stop_after_blocked: int = DEFAULT_STOP_AFTER_BLOCKED
    # The most paired trials any declared comparison is planned to get: its claims then come from a
    # group-sequential test that spends the error up to it (statistics/group_sequential.py); None: the
    # anytime e-processes, without end. Recorded with every sample (horizon.py), never changed after.
    horizon_pairs: int | None = None
    # What an arm's tools are on this machine (the module tool_identity: `arm_identities` for its
    # binaries, `server_files` for its MCP servers), given by parse_bench so this module stays pure.
    # None (a Bench built by hand): conditions without identities.
    tool_identity: IdentifiesTools | None = field(default=None, compare=False, repr=False)
    # What each model's tokens cost in dollars: the package's table with the bench's [prices."MODEL"]
    # over it (prices.py). None (a Bench built by hand): the package's table. Never part of the conditions.
    prices: PriceTable | None = field(default=None, compare=False, repr=False)

    @property
    def price_table(self) -> PriceTable:
        return self.prices if self.prices is not None else package_table()

    def compared_pairs(self, arms: list[str] | None = None) -> list[tuple[str, str]]:
        """The declared comparisons among `arms` (default: every arm), or every pair of them."""
        chosen = list(self.arms) if arms is None else arms
        if self.comparisons:
            return [(a, b) for a, b in self.comparisons if a in chosen and b in chosen]
        return [(a, b) for i, a in enumerate(chosen) for b in chosen[i + 1 :]]

    @property
    def root(self) -> Path:
        return self.path.parent

    # -- what a sample was produced under (docs/store.md: "conditions and scoring") ----------------------
    def conditions(self, arm: str, task: str, *, turn_cap: int | None = None, wall_clock_ms: int | None = None) -> dict[str, Any]:
        """What decides whether two samples may be pooled: everything the agent meets during the
        trial. Portable: program names, text content and templates as written, never a folder of
        this machine (the arm's `path` folders are where its binaries are found, not what they are);
        what the binaries and an MCP server's files are (content hashes, version lines) comes from
        `tool_identity`, the same for the same build on any machine."""
        arm_def, task_def = self.arms[arm], self.tasks[task]
        return _toml_safe(
            {
                "model": self.model,
                "base_prompt": self.base_prompt,
                "arm": {
                    "tools": sorted(arm_def.tools),
                    "binaries": sorted(arm_def.binaries),
                    "bootstrap": arm_def.bootstrap,
                    "skill": arm_def.skill_body,
                    "env": sorted(arm_def.env),
                    "mcp_servers": [self._server(server) for server in arm_def.mcp_servers],
                    "deny_subcommands": {name: sorted(rules) for name, rules in sorted(arm_def.deny_subcommands.items())},
                    "guard_exempt": sorted(arm_def.guard_exempt),
                    # Absent when unused, so conditions of arms without them stay what they were.
                    **({"arguments": {name: dict(rules) for name, rules in sorted(arm_def.arguments.items())}} if arm_def.arguments else {}),
                    **({"helpers": {name: sorted(progs) for name, progs in sorted(arm_def.helpers.items())}} if arm_def.helpers else {}),
                    **({"probe": dict(sorted(arm_def.probes.items()))} if arm_def.probes else {}),
                    **({"network": list(arm_def.network)} if arm_def.network else {}),
                    **({"readable": self._readable_as_written(arm_def)} if arm_def.readable else {}),
                    # Native delivery puts the frontmatter (the description) in context, the body on demand.
                    **({"skill_delivery": arm_def.skill_delivery, "skill_frontmatter": arm_def.skill_frontmatter}
                       if arm_def.skill_delivery != "embed" else {}),
                    # What each binary is (content hash, files its script names, version): a new build
                    # of the tool under test is a new definition.
                    **({"identity": identities} if (identities := self.tool_identities(arm)) else {}),
                },
                "task": {"intent": task_def.intent, "tier": task_def.tier},
                "bounds": {
                    "turn_cap": turn_cap or self.turn_cap,
                    "wall_clock_ms": wall_clock_ms or self.wall_clock_ms,
                },
            }
        )

    def tool_identities(self, arm: str) -> dict[str, Any]:
        """{binary: what it is here} for the arm's declared binaries; {} without a provider."""
        arm_def = self.arms[arm]
        if self.tool_identity is None or not arm_def.binaries:
            return {}
        every = [(other.binaries, other.path) for other in self.arms.values() if other.binaries]
        return dict(self.tool_identity.arm_identities(arm_def.binaries, arm_def.path, self.root, every))

    def _server(self, server: McpServer) -> dict[str, Any]:
        """An MCP server's conditions: its command line as written, and the files it names as they are here."""
        written = {"name": server.name, "command": server.command, "args": list(server.args), "env": sorted(server.env)}
        files = self.tool_identity.server_files(server.command, server.args, self.root) if self.tool_identity else {}
        return {**written, "files": dict(files)} if files else written

    def binaries_found(self, arm: str) -> bool:
        """Whether this machine has every declared binary of the arm (else its cells' current
        definitions cannot be known here: a report reads their newest fingerprint instead)."""
        return all(identity.get("found", True) for identity in self.tool_identities(arm).values())

    def _readable_as_written(self, arm_def: Arm) -> list[str]:
        """The arm's readable files relative to the bench folder, not this machine's folders."""
        root = self.root.resolve()
        return sorted(Path(os.path.relpath(entry, root)).as_posix() for entry in arm_def.readable)

    def scoring(self, task: str) -> dict[str, Any]:
        """How a finished trial is judged: the task's facts and changes and the [checker] settings.
        A rescore under a new scoring brings a sample up to date without running it again."""
        task_def = self.tasks[task]
        return _toml_safe(
            {
                "required_facts": list(task_def.required_facts),
                "forbidden_facts": list(task_def.forbidden_facts),
                "check_state": task_def.check_state,
                "changes": list(task_def.changes),
                "checker": dict(self.state_policy),
            }
        )

    def definition(self, arm: str, task: str, *, turn_cap: int | None = None, wall_clock_ms: int | None = None) -> Definition:
        """The cell's current conditions and scoring fingerprints (and the schema-1 one, to pool old samples)."""
        conditions = _hash(self.conditions(arm, task, turn_cap=turn_cap, wall_clock_ms=wall_clock_ms))
        return Definition(conditions, _hash(self.scoring(task)), self.legacy_fingerprint(arm, task))

    def definitions(self, arm: str, task: str, *, turn_cap: int | None = None, wall_clock_ms: int | None = None) -> dict[str, Any]:
        """What the store keeps in definitions/<conditions>-<scoring>.toml: both parts, readable."""
        return {
            "bench": {"name": self.name},
            "conditions": self.conditions(arm, task, turn_cap=turn_cap, wall_clock_ms=wall_clock_ms),
            "scoring": self.scoring(task),
        }

    def legacy_fingerprint(self, arm: str, task: str) -> str:
        """The single fingerprint plugins before sample schema 2 recorded, for the same definitions
        in this checkout (it held absolute folders, so it only matches in the folder it was made in).
        Frozen: the field lists are those of that plugin, whatever fields Arm and Task gain later."""
        arm_def, task_def = self.arms[arm], self.tasks[task]
        legacy_arm = {name: getattr(arm_def, name) for name in _LEGACY_ARM_FIELDS}
        legacy_arm["mcp_servers"] = [
            {name: value for name, value in asdict(server).items() if name in _LEGACY_SERVER_FIELDS} for server in arm_def.mcp_servers
        ]
        legacy = {
            "bench": {"name": self.name, "model": self.model, "base_prompt": self.base_prompt},
            "arm": legacy_arm,
            "task": {name: getattr(task_def, name) for name in _LEGACY_TASK_FIELDS},
        }
        return _hash(_toml_safe(legacy))

    def fingerprint(self, arm: str, task: str) -> str:
        """The conditions fingerprint at the bench's own bounds (what pools samples)."""
        return self.definition(arm, task).conditions


_LEGACY_ARM_FIELDS = (
    "name", "tools", "binaries", "path", "bootstrap", "skill_path", "skill_body", "env", "deny_subcommands",
    "guard_exempt",
)  # fmt: skip
_LEGACY_SERVER_FIELDS = ("name", "command", "args", "env")
_LEGACY_TASK_FIELDS = (
    "id", "tier", "intent", "bonus", "required_facts", "forbidden_facts", "check_state", "changes", "arms",
)  # fmt: skip


def _hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _toml_safe(value: Any) -> Any:
    """TOML has no null and no tuples: drop None, turn tuples into lists, keep the rest."""
    if isinstance(value, Mapping):
        return {str(k): _toml_safe(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_safe(v) for v in value if v is not None]
    if isinstance(value, Path):
        return str(value)
    return value
