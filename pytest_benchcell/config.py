"""Load and validate bench.toml into frozen dataclasses.

Every problem becomes one BenchConfigError whose message names the file, the key, the bad value and
what is allowed. The plugin turns it into pytest.UsageError; this module knows nothing of pytest.
Unknown keys are errors too: a typo such as `turncap` must not silently fall back to a default.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .isolation.limits import DEFAULT_LIMITS, Limits
from .api_faults import DEFAULT_API_STALL_MS, DEFAULT_STOP_AFTER_API_FAILURES, MIN_API_STALL_MS
from .names import NAME_RULE, PROGRAM_RULE, case_clashes, name_problem, program_problem
from .sample import Definition

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

PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


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

    @property
    def system_prompt_addition(self) -> str:
        parts = [self.bootstrap.strip()]
        if self.skill_body.strip():
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

    def compared_pairs(self, arms: list[str] | None = None) -> list[tuple[str, str]]:
        """The declared comparisons among `arms` (default: every arm), or every pair of them."""
        chosen = list(self.arms) if arms is None else arms
        if self.comparisons:
            return [(a, b) for a, b in self.comparisons if a in chosen and b in chosen]
        return [(a, b) for i, a in enumerate(chosen) for b in chosen[i + 1 :]]

    @property
    def root(self) -> Path:
        return self.path.parent

    # -- what a sample was produced under (README: "Conditions and scoring") ----------------------
    def conditions(self, arm: str, task: str, *, turn_cap: int | None = None, wall_clock_ms: int | None = None) -> dict[str, Any]:
        """What decides whether two samples may be pooled: everything the agent meets during the
        trial. Portable: program names, text content and templates as written, never a folder of
        this machine (the arm's `path` folders are where its binaries are found, not what they are)."""
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
                    "mcp_servers": [
                        {"name": server.name, "command": server.command, "args": list(server.args), "env": sorted(server.env)}
                        for server in arm_def.mcp_servers
                    ],
                    "deny_subcommands": {name: sorted(rules) for name, rules in sorted(arm_def.deny_subcommands.items())},
                    "guard_exempt": sorted(arm_def.guard_exempt),
                    # Absent when unused, so conditions of arms without them stay what they were.
                    **({"arguments": {name: dict(rules) for name, rules in sorted(arm_def.arguments.items())}} if arm_def.arguments else {}),
                    **({"helpers": {name: sorted(progs) for name, progs in sorted(arm_def.helpers.items())}} if arm_def.helpers else {}),
                    **({"probe": dict(sorted(arm_def.probes.items()))} if arm_def.probes else {}),
                    **({"network": list(arm_def.network)} if arm_def.network else {}),
                },
                "task": {"intent": task_def.intent, "tier": task_def.tier},
                "bounds": {
                    "turn_cap": turn_cap or self.turn_cap,
                    "wall_clock_ms": wall_clock_ms or self.wall_clock_ms,
                },
            }
        )

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
        legacy_arm["mcp_servers"] = [asdict(server) for server in arm_def.mcp_servers]
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


class _Reader:
    """Reads one table of the TOML document, remembering where it is for error messages."""

    def __init__(self, file: Path, where: str, table: Any) -> None:
        self.file = file
        self.where = where
        if not isinstance(table, dict):
            self.fail(where, table, "a table")
        self.table: dict[str, Any] = table

    def fail(self, key: str, value: Any, allowed: str, *, choices: Any = ()) -> None:
        raise BenchConfigError(
            f"{self.file}: {self._key(key)} has value {_show(value)}{did_you_mean(value, choices)}; allowed: {allowed}"
        )

    def _key(self, key: str) -> str:
        return f"[{self.where}] {key}" if key != self.where else f"[{self.where}]"

    def only(self, *allowed: str) -> None:
        for key in self.table:
            if key not in allowed:
                raise BenchConfigError(
                    f"{self.file}: [{self.where}] has unknown key {key!r}{did_you_mean(key, allowed)}; "
                    f"allowed keys: {', '.join(allowed)}"
                )

    def require(self, key: str) -> Any:
        if key not in self.table:
            raise BenchConfigError(f"{self.file}: [{self.where}] lacks the required key {key!r}")
        return self.table[key]

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        value = self.require(key) if required else self.table.get(key, default)
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(key, value, "a non-empty string" if required else "a string")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        """One of a fixed set of words: a value of any other type or spelling is refused with the set."""
        value = self.table.get(key, default)
        if not isinstance(value, str) or value not in choices:
            self.fail(key, value, ", ".join(f'"{choice}"' for choice in choices), choices=choices)
        return value

    def integer(self, key: str, default: int, *, minimum: int = 1) -> int:
        value = self.table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(key, value, f"a whole number >= {minimum}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.table.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            self.fail(key, value, "a number >= 0")
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, value, "true or false")
        return value

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.table.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, value, "a list of non-empty strings")
        return tuple(value)

    def string_table(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.fail(key, value, "a table of string values")
        return dict(value)

    def sub(self, key: str) -> "_Reader":
        return _Reader(self.file, f"{self.where}.{key}", self.table.get(key, {}))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def load_bench(path: str | Path) -> Bench:
    """Read and validate a bench.toml. Raises BenchConfigError with a complete message."""
    file = Path(path).resolve()
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise BenchConfigError(
            f"{file}: no such bench file; create a bench.toml (see the README) "
            f"or point --bench-config at one"
        ) from None
    except IsADirectoryError:
        raise BenchConfigError(f"{file}: is a folder; allowed: the path of a bench.toml file") from None
    except OSError as exc:
        raise BenchConfigError(f"{file}: cannot be read: {exc.strerror}") from None
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BenchConfigError(f"{file}: is not valid TOML: {exc}") from None
    return parse_bench(file, document)


TOP_LEVEL_TABLES = ("bench", "pricing", "checker", "arms", "tasks")


def parse_bench(file: Path, document: dict[str, Any]) -> Bench:
    """Validate a parsed bench.toml document; `file` is where it lives (relative paths start there)."""
    top = _Reader(file, "bench.toml", document)
    for key in document:
        if key not in TOP_LEVEL_TABLES:
            raise BenchConfigError(
                f"{file}: unknown top-level table [{key}]{did_you_mean(key, TOP_LEVEL_TABLES)}; "
                f"allowed: [bench], [pricing], [checker], [arms.NAME], [tasks.ID]"
            )
    bench = _Reader(file, "bench", top.require("bench"))
    bench.only(
        "name", "model", "store", "trials", "floor", "turn_cap", "wall_clock_ms",
        "base_prompt", "tiers", "secrets", "ready_timeout_ms", "exec_audit", "sandbox", "mcp_timeout_ms",
        "comparisons", "smallest_effect", *SANDBOX_LIMIT_KEYS, "api_stall_ms", "stop_after_api_failures",
    )  # fmt: skip
    model = bench.string("model", required=True)
    trials = bench.integer("trials", DEFAULT_TRIALS)
    floor = bench.integer("floor", DEFAULT_FLOOR)
    tiers = bench.strings("tiers", DEFAULT_TIERS)
    exec_audit = bench.choice("exec_audit", DEFAULT_EXEC_AUDIT, EXEC_AUDIT_MODES)
    sandbox = bench.choice("sandbox", DEFAULT_SANDBOX, SANDBOX_MODES)
    if not tiers:
        bench.fail("tiers", [], "a non-empty list of tier names")

    pricing = _Reader(file, "pricing", document.get("pricing", {}))
    pricing.only(*DEFAULT_WEIGHTS)
    weights = {name: pricing.number(name, default) for name, default in DEFAULT_WEIGHTS.items()}

    arms_table = top.require("arms")
    arms_reader = _Reader(file, "arms", arms_table)
    if not arms_table:
        raise BenchConfigError(f"{file}: [arms] is empty; declare at least one [arms.NAME] table")
    arms = {name: _parse_arm(file, name, arms_reader.sub(name)) for name in arms_table}
    _refuse_case_clashes(file, "arms", arms, "arm")

    tasks_table = top.require("tasks")
    tasks_reader = _Reader(file, "tasks", tasks_table)
    if not tasks_table:
        raise BenchConfigError(f"{file}: [tasks] is empty; declare at least one [tasks.ID] table")
    tasks = {task_id: _parse_task(file, task_id, tasks_reader.sub(task_id), tiers) for task_id in tasks_table}
    _refuse_case_clashes(file, "tasks", tasks, "task")
    for task in tasks.values():
        for arm_name in task.arms:
            if arm_name not in arms:
                raise BenchConfigError(
                    f"{file}: [tasks.{task.id}] arms has value {arm_name!r}{did_you_mean(arm_name, arms)}; "
                    f"allowed: {', '.join(arms)}"
                )

    checker_table = _Reader(file, "checker", document.get("checker", {}))
    checker_table.only("ignore_keys", "multiset_keys", "identity_keys", "whitespace")
    state_policy: dict[str, Any] = {}
    for key in ("ignore_keys", "multiset_keys", "identity_keys"):
        if key in checker_table.table:
            state_policy[key] = checker_table.strings(key)
    if "whitespace" in checker_table.table:
        state_policy["whitespace"] = checker_table.choice("whitespace", "collapse", WHITESPACE_POLICIES)

    comparisons = _comparisons(bench, arms)
    smallest_effect = _smallest_effect(bench.sub("smallest_effect"))
    base_prompt = bench.string("base_prompt", "")
    secrets = bench.strings("secrets")
    _refuse_unknown_secrets(bench, secrets, base_prompt, arms, tasks)
    return Bench(
        path=file,
        name=bench.string("name", file.parent.name),
        model=model,
        store=(file.parent / bench.string("store", DEFAULT_STORE)).resolve(),
        trials=trials,
        floor=floor,
        turn_cap=bench.integer("turn_cap", DEFAULT_TURN_CAP),
        wall_clock_ms=bench.integer("wall_clock_ms", DEFAULT_WALL_CLOCK_MS),
        base_prompt=base_prompt,
        tiers=tiers,
        secrets=secrets,
        weights=weights,
        arms=arms,
        tasks=tasks,
        ready_timeout_ms=bench.integer("ready_timeout_ms", DEFAULT_READY_TIMEOUT_MS),
        state_policy=state_policy,
        exec_audit=exec_audit,
        sandbox=sandbox,
        mcp_timeout_ms=bench.integer("mcp_timeout_ms", DEFAULT_MCP_TIMEOUT_MS, minimum=MIN_MCP_TIMEOUT_MS),
        comparisons=comparisons,
        smallest_effect=smallest_effect,
        sandbox_limits=Limits(**{
            field_name: bench.integer(key, getattr(DEFAULT_LIMITS, field_name))
            for key, field_name in SANDBOX_LIMIT_KEYS.items()
        }),
        api_stall_ms=bench.integer("api_stall_ms", DEFAULT_API_STALL_MS, minimum=MIN_API_STALL_MS),
        stop_after_api_failures=bench.integer("stop_after_api_failures", DEFAULT_STOP_AFTER_API_FAILURES),
    )


COMPARISONS_ALLOWED = 'a list of pairs of declared arm names, e.g. [["cli-skill", "mcp"], ["cli-skill", "raw-api"]]'


def _comparisons(bench: _Reader, arms: Mapping[str, Arm]) -> tuple[tuple[str, str], ...]:
    """[bench] comparisons: the pairs of arms whose comparison matters, each once, two different arms."""
    value = bench.table.get("comparisons", [])
    if not isinstance(value, list) or not value and "comparisons" in bench.table:
        bench.fail("comparisons", value, COMPARISONS_ALLOWED + " (leave the key out to compare every pair)")
    pairs: list[tuple[str, str]] = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(name, str) for name in entry)):
            bench.fail("comparisons", entry, COMPARISONS_ALLOWED)
        for name in entry:
            if name not in arms:
                bench.fail("comparisons", name, f"a declared arm: {', '.join(arms)}", choices=arms)
        if entry[0] == entry[1]:
            bench.fail("comparisons", entry, "a pair of two different arms")
        if any({entry[0], entry[1]} == {a, b} for a, b in pairs):
            bench.fail("comparisons", entry, "each pair once (a pair in either order is the same comparison)")
        pairs.append((entry[0], entry[1]))
    return tuple(pairs)


def _smallest_effect(table: _Reader) -> dict[str, float]:
    table.only(*SMALLEST_EFFECT_RULES)
    found: dict[str, float] = {}
    for metric, (low, high, allowed) in SMALLEST_EFFECT_RULES.items():
        if metric not in table.table:
            continue
        value = table.table[metric]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not low < value < high:
            table.fail(metric, value, allowed)
        found[metric] = float(value)
    return found


def _refuse_unknown_secrets(
    bench: _Reader, secrets: tuple[str, ...], base_prompt: str, arms: Mapping[str, Arm], tasks: Mapping[str, Task]
) -> None:
    """A name in [bench] secrets must be one under which a value can reach an arm: a placeholder
    the bench uses or a variable an arm declares. Whether the provision hook supplies the
    placeholder is known only per trial, and a missing one stops that trial before the agent starts."""
    templates = [base_prompt, *(task.intent for task in tasks.values())]
    variables: set[str] = set()
    for arm in arms.values():
        templates += [arm.bootstrap, arm.skill_body, *arm.env.values()]
        variables |= set(arm.env)
        for server in arm.mcp_servers:
            templates += [server.command, *server.args, *server.env.values()]
            variables |= set(server.env)
        templates += [value for rules in arm.arguments.values() for values in rules.values() for value in values]
    placeholders = {name for text in templates for name in PLACEHOLDER.findall(text)}
    unknown = [name for name in secrets if name not in placeholders and name not in variables]
    if unknown:
        bench.fail(
            "secrets", unknown[0],
            f"a placeholder the bench uses ({', '.join(sorted(placeholders)) or 'none'}) or a variable an arm "
            f"declares ({', '.join(sorted(variables)) or 'none'})",
            choices=sorted(placeholders | variables),
        )  # fmt: skip


def _check_name(reader: _Reader, kind: str, name: str) -> None:
    problem = name_problem(name)
    if problem:
        table = reader.where[: -len(name) - 1]  # where is "<table>.<name>"
        raise BenchConfigError(
            f"{reader.file}: [{table}] has the {kind} name {_show(name)}, refused because {problem}; "
            f"allowed: {NAME_RULE}"
        )


def _refuse_case_clashes(file: Path, table: str, names: Any, kind: str) -> None:
    for first, second in case_clashes(names):
        raise BenchConfigError(
            f"{file}: [{table}.{second}] differs from [{table}.{first}] only in case; allowed: {kind} names "
            f"that differ in more than case (macOS and Windows would store both in one file)"
        )


def _parse_arm(file: Path, name: str, arm: _Reader) -> Arm:
    _check_name(arm, "arm", name)
    arm.only(
        "tools", "binaries", "path", "bootstrap", "skill", "env", "mcp_servers", "deny_subcommands",
        "guard_exempt", "arguments", "helpers", "probe", "network", "readable", "preflight",
    )  # fmt: skip
    tools = arm.strings("tools", ("Bash",))
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
    skill_body = ""
    if skill_path is not None:
        if not isinstance(skill_path, str) or not skill_path:
            arm.fail("skill", skill_path, "a path to a skill file, relative to bench.toml")
        try:
            skill_body = _strip_frontmatter((file.parent / skill_path).read_text(encoding="utf-8"))
        except OSError:
            arm.fail("skill", skill_path, "an existing, readable skill file (relative to bench.toml)")

    servers_table = arm.sub("mcp_servers")
    servers = []
    for server_name in servers_table.table:
        server = servers_table.sub(server_name)
        _check_name(server, "MCP server", server_name)
        server.only("command", "args", "env")
        servers.append(
            McpServer(
                name=server_name,
                command=server.string("command", required=True),
                args=server.strings("args"),
                env=server.string_table("env"),
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
    )


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
    from .isolation.sandbox import parse_endpoint

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
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[end + 4 :].lstrip("\n")
    return text


def _parse_task(file: Path, task_id: str, task: _Reader, tiers: tuple[str, ...]) -> Task:
    _check_name(task, "task", task_id)
    task.only("tier", "intent", "bonus", "required_facts", "forbidden_facts", "check_state", "changes", "arms")
    tier = task.string("tier", required=True)
    if tier not in tiers:
        task.fail("tier", tier, f"{', '.join(tiers)} (declare your own in [bench] tiers)", choices=tiers)
    intent = task.string("intent", required=True)
    required = _facts(task, "required_facts")
    forbidden = _facts(task, "forbidden_facts")
    is_read = tier == "read"
    check_state = task.boolean("check_state", not is_read)
    if not required and not check_state:
        task.fail("required_facts", [], "at least one fact, or check_state = true (the task could never fail)")
    changes = task.table.get("changes", [])
    if not isinstance(changes, list):
        task.fail("changes", changes, "a list of change tables ({ op = ..., path = ..., value = ... })")
    from . import checker  # pure; the checker's own rules decide what a well-formed change is

    for number, change in enumerate(changes, start=1):
        try:
            checker.validate_change(change)
        except ValueError as exc:
            task.fail(f"changes (change {number})", change, f"{exc}; changes are tables with op = one of "
                      f"{', '.join(CHANGE_OPS)}, a path and (but for delete) a value")
    if changes and not check_state:
        task.fail("changes", changes, "changes only with check_state = true (they describe the expected end state)")
    return Task(
        id=task_id,
        tier=tier,
        intent=intent,
        bonus=task.boolean("bonus", False),
        required_facts=required,
        forbidden_facts=forbidden,
        check_state=check_state,
        changes=tuple(changes),
        arms=task.strings("arms"),
    )


def _facts(task: _Reader, key: str) -> tuple[Any, ...]:
    """The facts as declared, each compiled by the checker now (a bad regex or an `any_of` string
    where a list belongs stops the load), so no trial is reserved for a task that cannot be scored."""
    from . import checker

    value = task.table.get(key, [])
    if not isinstance(value, list):
        task.fail(key, value, "a list of facts (strings, or tables with any_of / pattern)")
    for number, fact in enumerate(value, start=1):
        try:
            checker.fact_from_config(fact)
        except ValueError as exc:
            task.fail(f"{key} (fact {number})", fact,
                      f"a non-empty string or a table with any_of = [...] and/or pattern = '...' ({exc})")
    return tuple(value)


def positive_int(text: str) -> int:
    """An argparse type for counts on the command line: a whole number >= 1, or a clear error."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; allowed: a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small; allowed: a whole number >= 1")
    return value


def fill_placeholders(text: str, values: Mapping[str, str], *, where: str) -> str:
    """Replace {name} with values[name]; other braces (JSON, shell) are left alone.

    An unknown {identifier} is an error, so a typo in a prompt never reaches the agent.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise BenchConfigError(
                f"{where} uses the placeholder {{{key}}}, but the environment supplies only: "
                f"{', '.join(sorted(values)) or 'no values'}"
            )
        return str(values[key])

    return PLACEHOLDER.sub(replace, text)
