"""An arm's rules for the guard and the audits (`arm_rules`), filled with a trial's values, and the
in-band PreToolUse guard made of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import isolation
from ..config import Arm, BenchConfigError, fill_placeholders
from ..confinement import GUARD_OFF


def arm_rules(
    arm: Arm, *, for_guard: bool = False, values: Mapping[str, str] | None = None, write_roots: Sequence[str] = ()
) -> isolation.ArmRules:
    """The arm's rules as declared; the in-band guard also lets `guard_exempt` through (a
    deliberate hole for testing that the independent audits catch what the guard let pass).
    `values` fill {placeholders} in argument rules (allow_urls = ["http://127.0.0.1:{port}/"]) and in
    the arm's variables, which are fixed: the agent cannot set them, so "$TRACKER_URL/..." is known.
    Without `values` (no trial yet) a text with a placeholder is unknown: such a URL reaches nothing."""
    binaries = set(arm.binaries) | (set(arm.guard_exempt) - {GUARD_OFF} if for_guard else set())

    def filled(text: str, where: str) -> str | None:
        try:
            return fill_placeholders(text, values or {}, where=where)
        except BenchConfigError:
            if values is not None:
                raise
            return None

    def urls(binary: str, rule: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
        if "allow_urls" not in rule:
            return None
        where = f"[arms.{arm.name}.arguments.{binary}] allow_urls"
        return tuple(url for url in (filled(url, where) for url in rule["allow_urls"]) if url is not None)

    known = {name: filled(value, f"[arms.{arm.name}.env] {name}") for name, value in arm.env.items()}
    return isolation.ArmRules(
        arm=arm.name,
        binaries=frozenset(binaries),
        builtin_tools=frozenset(arm.tools),
        mcp_servers=frozenset(server.name for server in arm.mcp_servers),
        subcommand_rules=tuple(
            isolation.SubcommandRule(binary=binary, deny=tuple(denied))
            for binary, denied in sorted(arm.deny_subcommands.items())
        ),
        argument_rules=tuple(
            isolation.ArgumentRule(
                binary,
                deny_subcommands=tuple(rule.get("deny_subcommands", ())),
                deny_options=tuple(rule.get("deny_options", ())),
                allow_urls=urls(binary, rule),
                value_options=tuple(rule.get("value_options", ())),
            )
            for binary, rule in sorted(arm.arguments.items())
        ),
        write_roots=tuple(write_roots),
        variables={name: value for name, value in known.items() if value is not None},
        fixed_variables=frozenset(arm.env),
    )


def decide_with(rules: isolation.ArmRules) -> Callable[[str, Mapping[str, Any]], tuple[bool, str]]:
    def decide(tool_name: str, tool_input: Mapping[str, Any]) -> tuple[bool, str]:
        decision = isolation.check_tool_call(tool_name, tool_input, rules)
        return decision.allowed, decision.reason

    return decide


def _in_band_guard(arm: Arm, values: Mapping[str, str], roots: Sequence[str]) -> Callable[[str, Mapping[str, Any]], tuple[bool, str]]:
    """The PreToolUse guard. `guard_exempt = ["*"]` (testing only) lets every Bash command through,
    so a test can show that the audits catch what a guard with a missing rule would let run."""
    decide = decide_with(arm_rules(arm, for_guard=True, values=values, write_roots=roots))
    if GUARD_OFF not in arm.guard_exempt:
        return decide
    return lambda tool, tool_input: (True, "") if tool == "Bash" else decide(tool, tool_input)
