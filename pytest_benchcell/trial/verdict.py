"""A finished trial judged: invalid (tools not offered, a foreign tool ran), the API's error, hung,
confused, or the checker's differences (`differences_for`, shared with --bench-rescore); a trial the
harness broke never counted for or against the arm; a task's changes checked before the agent starts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import checker, isolation
from ..agent import AgentResult
from ..config import Bench, Task
from ..environment import Environment, TrialInfo
from ..harness_broke import harness_broke, judge
from ..isolation.tool_audit import find_leaks
from ..isolation.tool_offer import arm_not_offered
from ..sample import OUTCOME_CONFUSED, OUTCOME_HUNG, OUTCOME_INCORRECT, OUTCOME_PASS, STATUS_ERROR, STATUS_INVALID, STATUS_SCORED
from .provisioning import _snapshot
from .rules import decide_with
from .spec import HarnessError, TaskUnusable, TrialSpec, _call_hook, _mark

STATE_LIMIT = 256 * 1024  # characters of JSON per stored state snapshot (kept for --bench-rescore)


def not_against_the_arm(sample: dict[str, Any]) -> None:
    """A trial the harness broke is never counted for or against the arm (harness_broke.py): when one
    of the arm's own programs failed because the sandbox hid a file it needs or refused an endpoint of
    the bench's environment (`sandbox_blocked`), or its MCP server failed, a scored trial is an
    `error` whatever its verdict, a pass included; invalid stays invalid."""
    if sample["status"] != STATUS_SCORED or not harness_broke(sample):
        return
    judge(sample)
    _mark(sample, STATUS_ERROR, None, sample["reason"])  # as every error: no final answer kept as the agent's


def check_changes(bench: Bench, task: Task, ground_truth: Any) -> None:
    """The task's `changes` must resolve against this ground truth; checked right after provisioning,
    so a task whose expected state cannot be built never reaches the model."""
    if ground_truth is None or not task.changes:
        return
    try:
        checker.apply_changes(ground_truth, task.changes)
    except ValueError as exc:
        raise TaskUnusable(
            f"task {task.id}: {exc} ([tasks.{task.id}] changes in {bench.path} do not resolve against the "
            f"ground truth from pytest_benchcell_snapshot; checked before the agent started, no model request made)"
        ) from None


def _score(
    spec: TrialSpec,
    hooks: Any,
    info: TrialInfo,
    environment: Environment,
    sample: dict[str, Any],
    result: AgentResult,
    rules: isolation.ArmRules,
    ground_truth: Any,
    exec_leaks: Sequence[str] = (),
    mcp_ends: Mapping[str, Any] | None = None,
) -> None:
    task = spec.bench.tasks[spec.task]
    arm = spec.bench.arms[spec.arm]
    not_offered = arm_not_offered(spec.bench, arm, result, mcp_ends)  # the agent never saw its arm's tools: no measure
    if not_offered:
        _mark(sample, STATUS_INVALID, None, not_offered)
        return
    servers = tuple(f"mcp__{server.name}__" for server in arm.mcp_servers)
    leaks = find_leaks(
        result.transcript,
        result.denied_ids,
        decide_with(rules),
        provided=lambda tool: tool in arm.tools or tool.startswith(servers),
    ) + list(exec_leaks)
    if leaks:
        sample["leaks"] = leaks
        more = f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else ""
        _mark(sample, STATUS_INVALID, None, f"foreign tool call ran: {leaks[0]}{more}")
        return
    if result.api_fault is not None:
        sample["api_error"] = result.api_fault.as_dict()
        _mark(sample, STATUS_ERROR, None, result.api_fault.reason)
        return
    if result.hung:
        waited = f" ({result.api_wait_ms / 1000:.1f} s of it waiting on the model API's retries)" if result.api_wait_ms else ""
        _mark(sample, STATUS_SCORED, OUTCOME_HUNG, f"wall-clock backstop of {spec.wall_clock_ms} ms reached{waited}")
        return
    if result.error:
        detail = f" (CLI said: {result.stderr_tail[-1]})" if result.stderr_tail else ""
        _mark(sample, STATUS_ERROR, None, f"{result.error}{detail}")
        return
    if result.hit_turn_cap:
        _mark(sample, STATUS_SCORED, OUTCOME_CONFUSED, f"turn cap of {spec.turn_cap} reached")
        return
    if result.subtype != "success":
        _mark(sample, STATUS_ERROR, None, f"the agent run ended without a result (subtype {result.subtype})")
        return
    after = _snapshot(hooks, info, environment) if task.check_state else None
    sample["state"] = bounded_state(ground_truth, after)
    differences = differences_for(spec.bench, task, hooks, info, environment, result.final_answer, ground_truth, after)
    apply_verdict(sample, differences)


def apply_verdict(sample: dict[str, Any], differences: Sequence[str]) -> None:
    sample["score"] = {"differences": list(differences)}
    if differences:
        more = f" (+{len(differences) - 1} more)" if len(differences) > 1 else ""
        _mark(sample, STATUS_SCORED, OUTCOME_INCORRECT, f"{differences[0]}{more}")
    else:
        _mark(sample, STATUS_SCORED, OUTCOME_PASS, "")


def differences_for(
    bench: Bench,
    task: Task,
    hooks: Any,
    info: TrialInfo,
    environment: Environment | None,
    answer: str,
    ground_truth: Any,
    after: Any,
) -> list[str]:
    """The checker's verdict as differences ([] = pass). Pure but for the bench's own hooks, so
    --bench-rescore reaches exactly the verdict a live trial would with the same inputs."""
    override = _call_hook(hooks.pytest_benchcell_score, trial=info, answer=answer, ground_truth=ground_truth, snapshot=after)
    if override is not None:
        return [str(line) for line in override]
    differences = checker.check_answer(
        answer,
        [checker.fact_from_config(fact) for fact in task.required_facts],
        [checker.fact_from_config(fact) for fact in task.forbidden_facts],
    )
    if task.check_state:
        expected = _call_hook(
            hooks.pytest_benchcell_expected_state, trial=info, environment=environment, ground_truth=ground_truth
        )
        if expected is None:
            try:
                expected = checker.apply_changes(ground_truth, task.changes)
            except ValueError as exc:
                raise HarnessError(f"{bench.path}: [tasks.{task.id}] changes: {exc}") from exc
        custom = _call_hook(
            hooks.pytest_benchcell_check_state, trial=info, environment=environment, snapshot=after, expected=expected
        )
        if custom is not None:
            differences += [str(line) for line in custom]
        else:
            differences += checker.diff_states(expected, after, checker.StatePolicy(**bench.state_policy))
    return differences


def bounded_state(before: Any, after: Any) -> dict[str, Any] | None:
    """The ground truth and end state, kept for re-scoring when they are small enough."""
    if before is None and after is None:
        return None
    state = {"before": before, "after": after}
    size = len(json.dumps(state, ensure_ascii=False, default=str))
    if size > STATE_LIMIT:
        return {"omitted": f"{size} characters of JSON, over the {STATE_LIMIT} limit"}
    return state
