"""One trial, start to finish: provision -> run the agent -> audit -> score -> teardown -> record.

Knows nothing of pytest: it receives the bench's hooks as a pluggy hook relay (anything with the
`benchcell_*` attributes) and the function that runs the agent, so tests can hand it either.
Every way a trial can end produces exactly one complete sample, appended once:
- scored (pass, incorrect, confused, hung): the agent's doing;
- invalid: a tool outside the arm actually ran (audit), never scored;
- error: the harness failed (provisioning, a hook, the model API, the CLI), not the agent's fault.
A Ctrl-C during a trial records `error: interrupted` after teardown, then re-raises.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, checker, guard
from .agent import AgentRequest, AgentResult, run_agent, sdk_versions
from .audit import find_leaks
from .config import Arm, Bench, BenchConfigError, fill_placeholders
from .environment import Environment, TrialInfo
from .sample import (
    MODEL_SCRIPTED,
    OUTCOME_CONFUSED,
    OUTCOME_HUNG,
    OUTCOME_INCORRECT,
    OUTCOME_PASS,
    SCHEMA_VERSION,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_SCORED,
    new_sample_id,
    utc_now_iso,
    zero_tokens,
)
from .store import Store

TOOL_OUTPUT_LIMIT = 4000  # characters of each tool result kept in the sample
REDACTED = "[redacted]"
# Credentials of the harness itself: never stored, whatever a bench declares.
CREDENTIAL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
SCRIPTED_API_KEY = "scripted-model-key"


@dataclass(frozen=True)
class TrialSpec:
    bench: Bench
    arm: str
    task: str
    trial: int
    model_kind: str
    sitting: str
    turn_cap: int
    wall_clock_ms: int
    store: Store


class HarnessError(Exception):
    """A failure of the harness or the bench's hooks: recorded as status `error`."""


AgentRunner = Callable[[AgentRequest], AgentResult]


def arm_rules(arm: Arm) -> guard.ArmRules:
    return guard.ArmRules(
        arm=arm.name,
        binaries=frozenset(arm.binaries),
        builtin_tools=frozenset(arm.tools),
        mcp_servers=frozenset(server.name for server in arm.mcp_servers),
        subcommand_rules=tuple(
            guard.SubcommandRule(binary=binary, deny=tuple(denied))
            for binary, denied in sorted(arm.deny_subcommands.items())
        ),
    )


def decide_with(rules: guard.ArmRules) -> Callable[[str, Mapping[str, Any]], tuple[bool, str]]:
    def decide(tool_name: str, tool_input: Mapping[str, Any]) -> tuple[bool, str]:
        decision = guard.check_tool_call(tool_name, tool_input, rules)
        return decision.allowed, decision.reason

    return decide


def run_trial(spec: TrialSpec, hooks: Any, *, agent_runner: AgentRunner = run_agent) -> dict[str, Any]:
    """Run one trial and append its sample to the store; return the sample."""
    bench, arm, task = spec.bench, spec.bench.arms[spec.arm], spec.bench.tasks[spec.task]
    workdir = Path(tempfile.mkdtemp(prefix=f"benchcell-{spec.arm}-{spec.task}-t{spec.trial}-"))
    info = TrialInfo(
        arm=spec.arm,
        task=spec.task,
        tier=task.tier,
        trial=spec.trial,
        model_kind=spec.model_kind,
        workdir=workdir / "environment",
        agent_cwd=workdir / "cwd",
    )
    info.workdir.mkdir()
    info.agent_cwd.mkdir()
    sample = _new_sample(spec)
    environment: Environment | None = None
    interrupted: BaseException | None = None
    try:
        environment = _call_hook(hooks.pytest_benchcell_provision, trial=info) or Environment()
        _run_and_score(spec, hooks, info, environment, workdir, sample, agent_runner)
    except HarnessError as exc:
        _mark(sample, STATUS_ERROR, None, str(exc))
    except BenchConfigError as exc:
        _mark(sample, STATUS_ERROR, None, str(exc))
    except KeyboardInterrupt as exc:
        interrupted = exc
        _mark(sample, STATUS_ERROR, None, "interrupted (Ctrl-C) during the trial")
    finally:
        try:
            _call_hook(hooks.pytest_benchcell_teardown, trial=info, environment=environment)
        except HarnessError as exc:
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"teardown: {exc}") if part)
        shutil.rmtree(workdir, ignore_errors=True)
    sample["ended_at"] = utc_now_iso()
    _call_hook(hooks.pytest_benchcell_update_sample, trial=info, sample=sample)
    secrets = _secrets(bench, environment)
    recorded = redact(sample, secrets)
    spec.store.write_definitions(recorded["provenance"]["fingerprint"], bench.definitions(spec.arm, spec.task))
    spec.store.append(recorded)
    if interrupted is not None:
        raise interrupted
    return recorded


def _call_hook(hook: Any, **kwargs: Any) -> Any:
    try:
        return hook(**kwargs)
    except (KeyboardInterrupt, HarnessError):
        raise
    except Exception as exc:  # noqa: BLE001 - a crash in the bench's own hook is a harness error
        name = getattr(hook, "name", "hook")
        raise HarnessError(f"{name} raised {type(exc).__name__}: {exc}") from exc


def _new_sample(spec: TrialSpec) -> dict[str, Any]:
    bench, task = spec.bench, spec.bench.tasks[spec.task]
    return {
        "schema": SCHEMA_VERSION,
        "id": new_sample_id(),
        "sitting": spec.sitting,
        "arm": spec.arm,
        "task": spec.task,
        "tier": task.tier,
        "bonus": task.bonus,
        "trial": spec.trial,
        "started_at": utc_now_iso(),
        "ended_at": None,
        "model": bench.model,
        "model_kind": spec.model_kind,
        "usage": {"total": zero_tokens(), "by_model": {}},
        "turns": 0,
        "duration_ms": 0,
        "cost_usd": None,
        "status": STATUS_ERROR,
        "outcome": None,
        "reason": "the trial did not finish",
        "result_subtype": None,
        "final_answer": "",
        "tool_calls": [],
        "leaks": [],
        "score": {"differences": []},
        "bounds": {"turn_cap": spec.turn_cap, "wall_clock_ms": spec.wall_clock_ms},
        "provenance": {
            "plugin": __version__,
            **sdk_versions(),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            "fingerprint": bench.fingerprint(spec.arm, spec.task),
            "model_kind": spec.model_kind,
        },
    }


def _mark(sample: dict[str, Any], status: str, outcome: str | None, reason: str) -> None:
    sample["status"] = status
    sample["outcome"] = outcome
    sample["reason"] = reason


def _run_and_score(
    spec: TrialSpec,
    hooks: Any,
    info: TrialInfo,
    environment: Environment,
    workdir: Path,
    sample: dict[str, Any],
    agent_runner: AgentRunner,
) -> None:
    bench, arm, task = spec.bench, spec.bench.arms[spec.arm], spec.bench.tasks[spec.task]
    values = {
        "python": sys.executable,
        "bench_root": str(bench.root),
        "cwd": str(info.agent_cwd),
        **{str(k): str(v) for k, v in environment.values.items()},
    }
    where = f"{bench.path}: [arms.{arm.name}] / [tasks.{task.id}]"
    system_prompt = "\n\n".join(
        part
        for part in (fill_placeholders(bench.base_prompt, values, where=where).strip(),
                     fill_placeholders(arm.system_prompt_addition, values, where=where))
        if part
    )  # fmt: skip
    env = _agent_environment(arm, values, workdir, where)
    mcp_servers = {
        server.name: {
            "type": "stdio",
            "command": fill_placeholders(server.command, values, where=where),
            "args": [fill_placeholders(arg, values, where=where) for arg in server.args],
            "env": {key: fill_placeholders(value, values, where=where) for key, value in server.env.items()},
        }
        for server in arm.mcp_servers
    }
    scripted_model = None
    if spec.model_kind == MODEL_SCRIPTED:
        from .scripted import ScriptedModel

        steps = _call_hook(hooks.pytest_benchcell_script, trial=info, environment=environment) or []
        scripted_model = ScriptedModel(list(steps), model_name=bench.model).start()
        env.update(
            ANTHROPIC_BASE_URL=scripted_model.base_url,
            ANTHROPIC_API_KEY=SCRIPTED_API_KEY,
            ANTHROPIC_AUTH_TOKEN="",
            CLAUDE_CODE_OAUTH_TOKEN="",
            CLAUDE_CODE_MAX_RETRIES="1",
        )
    rules = arm_rules(arm)
    request = AgentRequest(
        model=bench.model,
        system_prompt=system_prompt,
        prompt=fill_placeholders(task.intent, values, where=where),
        max_turns=spec.turn_cap,
        wall_clock_s=spec.wall_clock_ms / 1000,
        cwd=info.agent_cwd,
        env=env,
        tools=arm.tools,
        mcp_servers=mcp_servers,
        guard=decide_with(rules),
    )
    try:
        result = agent_runner(request)
    finally:
        if scripted_model is not None:
            scripted_model.stop()
    _fill_measurements(sample, result)
    _score(spec, hooks, info, environment, sample, result, rules)


def _agent_environment(arm: Arm, values: Mapping[str, str], workdir: Path, where: str) -> dict[str, str]:
    """The variables layered over the harness's environment for the CLI and the agent's tools."""
    (workdir / "claude-config").mkdir()
    (workdir / "home").mkdir()
    no_proxy = ",".join(
        part for part in (os.environ.get("NO_PROXY", ""), "127.0.0.1,localhost") if part
    )
    env = {
        # An isolated config dir per trial: no user settings, skills, CLAUDE.md or MCP servers leak
        # into an arm, and nothing is written into the user's ~/.claude.
        "CLAUDE_CONFIG_DIR": str(workdir / "claude-config"),
        "HOME": str(workdir / "home"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
        "PATH": os.pathsep.join([*arm.path, os.environ.get("PATH", "")]),
    }
    for key, value in arm.env.items():
        env[key] = fill_placeholders(value, values, where=where)
    return env


def _fill_measurements(sample: dict[str, Any], result: AgentResult) -> None:
    sample["usage"] = {"total": dict(result.usage_total), "by_model": {k: dict(v) for k, v in result.usage_by_model.items()}}
    sample["turns"] = result.turns
    sample["duration_ms"] = result.duration_ms
    sample["cost_usd"] = result.cost_usd
    sample["result_subtype"] = result.subtype
    sample["final_answer"] = result.final_answer
    sample["tool_calls"] = _tool_calls(result)


def _tool_calls(result: AgentResult) -> list[dict[str, Any]]:
    """The ordered tool calls, as streamed by the CLI, with the guard's decision beside each."""
    decisions = {attempt["id"]: attempt for attempt in result.attempts if attempt.get("id")}
    calls = []
    seen = set()
    for call in result.transcript:
        attempt = decisions.get(call["id"], {})
        outcome = call.get("result") or {}
        calls.append(
            {
                "id": call["id"],
                "tool": call["tool"],
                "input": call["input"],
                "allowed": attempt.get("allowed"),  # None: the guard never saw this call
                "reason": attempt.get("reason", ""),
                "is_error": outcome.get("is_error"),
                "output": _clip(outcome.get("content", "")),
            }
        )
        seen.add(call["id"])
    for attempt in result.attempts:  # decided by the guard but never streamed back (cut off)
        if attempt.get("id") not in seen:
            calls.append({**attempt, "is_error": None, "output": ""})
    return calls


def _clip(text: str) -> str:
    if len(text) <= TOOL_OUTPUT_LIMIT:
        return text
    return text[:TOOL_OUTPUT_LIMIT] + f"... [{len(text) - TOOL_OUTPUT_LIMIT} more characters]"


def _score(
    spec: TrialSpec,
    hooks: Any,
    info: TrialInfo,
    environment: Environment,
    sample: dict[str, Any],
    result: AgentResult,
    rules: guard.ArmRules,
) -> None:
    task = spec.bench.tasks[spec.task]
    leaks = find_leaks(result.transcript, result.denied_ids, decide_with(rules))
    if leaks:
        sample["leaks"] = leaks
        more = f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else ""
        _mark(sample, STATUS_INVALID, None, f"foreign tool call ran: {leaks[0]}{more}")
        return
    if result.hung:
        _mark(sample, STATUS_SCORED, OUTCOME_HUNG, f"wall-clock backstop of {spec.wall_clock_ms} ms reached")
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
    differences = checker.check_answer(
        result.final_answer,
        [checker.fact_from_config(fact) for fact in task.required_facts],
        [checker.fact_from_config(fact) for fact in task.forbidden_facts],
    )
    if task.check_state:
        differences += _state_differences(hooks, info, environment)
    sample["score"] = {"differences": differences}
    if differences:
        more = f" (+{len(differences) - 1} more)" if len(differences) > 1 else ""
        _mark(sample, STATUS_SCORED, OUTCOME_INCORRECT, f"{differences[0]}{more}")
    else:
        _mark(sample, STATUS_SCORED, OUTCOME_PASS, "")


def _state_differences(hooks: Any, info: TrialInfo, environment: Environment) -> list[str]:
    snapshot = _call_hook(hooks.pytest_benchcell_snapshot, trial=info, environment=environment)
    if snapshot is None:
        raise HarnessError(
            f"task {info.task!r} has check_state = true but no pytest_benchcell_snapshot hook returned a state"
        )
    differences = _call_hook(hooks.pytest_benchcell_check_state, trial=info, environment=environment, snapshot=snapshot)
    if differences is None:
        raise HarnessError(
            f"task {info.task!r} has check_state = true but no pytest_benchcell_check_state hook answered"
        )
    return [str(line) for line in differences]


def _secrets(bench: Bench, environment: Environment | None) -> list[str]:
    names = (*CREDENTIAL_VARIABLES, *bench.secrets)
    values = [os.environ.get(name, "") for name in names]
    if environment is not None:
        values += list(environment.secrets)
        values += [str(environment.values[name]) for name in bench.secrets if name in environment.values]
    # Very short values would redact ordinary words; a secret that short is no secret.
    return sorted({value for value in values if len(value) >= 6}, key=len, reverse=True)


def redact(sample: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """A copy of the sample with every secret value replaced, wherever it appears."""
    text = json.dumps(sample, ensure_ascii=False)
    for secret in secrets:
        encoded = json.dumps(secret, ensure_ascii=False)[1:-1]  # as it appears inside JSON strings
        text = text.replace(encoded, REDACTED)
    return json.loads(text)
