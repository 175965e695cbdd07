"""A bench.toml read (`load_bench`) and validated as a whole (`parse_bench`): the top-level tables,
[bench], [pricing], [checker], the comparisons, the smallest effects and the secrets."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import tool_identity
from ..api_faults import DEFAULT_API_STALL_MS, DEFAULT_STOP_AFTER_API_FAILURES, MIN_API_STALL_MS
from ..isolation.limits import DEFAULT_LIMITS, Limits
from ..prices import package_table
from .arms import _parse_arm
from .model import (
    DEFAULT_EXEC_AUDIT,
    DEFAULT_EXEC_AUDIT_CPUS,
    DEFAULT_FLOOR,
    DEFAULT_MCP_TIMEOUT_MS,
    DEFAULT_READY_TIMEOUT_MS,
    DEFAULT_SANDBOX,
    DEFAULT_STOP_AFTER_BLOCKED,
    DEFAULT_STORE,
    DEFAULT_TIERS,
    DEFAULT_TRIALS,
    DEFAULT_TURN_CAP,
    DEFAULT_WALL_CLOCK_MS,
    DEFAULT_WEIGHTS,
    EXEC_AUDIT_CPUS,
    EXEC_AUDIT_MODES,
    MIN_MCP_TIMEOUT_MS,
    SANDBOX_LIMIT_KEYS,
    SANDBOX_MODES,
    SMALLEST_EFFECT_RULES,
    WHITESPACE_POLICIES,
    Arm,
    Bench,
    BenchConfigError,
    Task,
    did_you_mean,
)
from .placeholders import PLACEHOLDER
from .price_overrides import price_overrides
from .reader import _Reader, _refuse_case_clashes
from .tasks import _parse_task


def load_bench(path: str | Path) -> Bench:
    """Read and validate a bench.toml. Raises BenchConfigError with a complete message."""
    file = Path(path).resolve()
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise BenchConfigError(
            f"{file}: no such bench file; create a bench.toml (see docs/writing-a-bench.md) "
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


TOP_LEVEL_TABLES = ("bench", "pricing", "prices", "checker", "arms", "tasks")


def parse_bench(file: Path, document: dict[str, Any]) -> Bench:
    """Validate a parsed bench.toml document; `file` is where it lives (relative paths start there)."""
    top = _Reader(file, "bench.toml", document)
    for key in document:
        if key not in TOP_LEVEL_TABLES:
            raise BenchConfigError(
                f"{file}: unknown top-level table [{key}]{did_you_mean(key, TOP_LEVEL_TABLES)}; "
                f"allowed: [bench], [pricing], [prices.MODEL], [checker], [arms.NAME], [tasks.ID]"
            )
    bench = _Reader(file, "bench", top.require("bench"))
    bench.only(
        "name", "model", "store", "trials", "floor", "turn_cap", "wall_clock_ms",
        "base_prompt", "tiers", "secrets", "ready_timeout_ms", "exec_audit", "exec_audit_cpus", "sandbox", "mcp_timeout_ms",
        "comparisons", "smallest_effect", *SANDBOX_LIMIT_KEYS, "api_stall_ms", "stop_after_api_failures",
        "stop_after_blocked", "horizon_pairs",
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
    prices = package_table().with_overrides(price_overrides(file, document, package_table()))

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
        prices=prices,
        arms=arms,
        tasks=tasks,
        ready_timeout_ms=bench.integer("ready_timeout_ms", DEFAULT_READY_TIMEOUT_MS),
        state_policy=state_policy,
        exec_audit=exec_audit,
        exec_audit_cpus=bench.choice("exec_audit_cpus", DEFAULT_EXEC_AUDIT_CPUS, EXEC_AUDIT_CPUS),
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
        stop_after_blocked=bench.integer("stop_after_blocked", DEFAULT_STOP_AFTER_BLOCKED),
        horizon_pairs=bench.integer("horizon_pairs", 0, minimum=2) if "horizon_pairs" in bench.table else None,
        tool_identity=tool_identity,  # the module: what the arms' tools are on this machine
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


