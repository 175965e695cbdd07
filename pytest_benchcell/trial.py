"""One trial, start to finish: provision -> run the agent -> audit -> score -> teardown -> record.

Knows nothing of pytest: it receives the bench's hooks as a pluggy hook relay (anything with the
`benchcell_*` attributes) and the function that runs the agent, so tests can hand it either.
Every way a trial can end produces exactly one complete sample, appended once:
- scored (pass, incorrect, confused, hung): the agent's doing;
- invalid: a tool outside the arm actually ran (audit), never scored;
- error: the harness failed (provisioning, a hook, the model API, the CLI), not the agent's fault.
  A trial the model API ended (api_faults.classify: the CLI gave up on it, was still retrying it at
  the backstop, it stalled, it refused the credentials) is an error naming the status, the error
  category and the attempts, and carries `api_error`; an error sample keeps no final answer.
Anything else that ends a trial early is recorded too, after teardown, and then passed on: an
interrupt (Ctrl-C, SIGTERM, a pytest-timeout, pytest.exit) as `error: interrupted: ...`, a bug of
the harness itself as `error: internal: <exception type>: ...` (re-raised so its traceback shows).
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, checker, isolation, leftovers, transcript
from .agent import AgentRequest, AgentResult, bundled_cli, run_agent, sdk_versions
from .isolation.tool_audit import find_leaks
from .confinement import GUARD_OFF, Confinement, ConfinementError, confine, exec_audit_state, sandbox_limit_note, sandbox_state, write_roots
from .isolation.tool_offer import arm_not_offered, mcp_wait
from .config import Arm, Bench, BenchConfigError, Task, fill_placeholders
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
from .secrets import redact, secret_values
from .store import Store, StoreError

TOOL_OUTPUT_LIMIT = 4000  # characters of each tool result kept in the sample
STATE_LIMIT = 256 * 1024  # characters of JSON per stored state snapshot (kept for --bench-rescore)
READY_POLL_S = 0.5
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
    probe: Mapping[str, Any] | None = None  # the session's capability-probe verdict, if any


class HarnessError(Exception):
    """A failure of the harness or the bench's hooks: recorded as status `error`."""


class TaskUnusable(HarnessError):
    """The task's definition cannot work in this environment (a `changes` path that does not
    resolve against the ground truth): every trial of the task would fail the same way."""


RecordedCallback = Callable[..., None]  # (sample, *, task_unusable: str | None)


AgentRunner = Callable[[AgentRequest], AgentResult]


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


def run_trial(
    spec: TrialSpec,
    hooks: Any,
    *,
    agent_runner: AgentRunner = run_agent,
    on_recorded: RecordedCallback | None = None,
) -> dict[str, Any]:
    """Run one trial and append its sample to the store; return the sample.

    `on_recorded(sample, task_unusable=...)` is called once the sample is stored, before anything
    is re-raised (so a caller learns the verdict of an interrupted trial too); `task_unusable` is
    the reason when the task's definition cannot work here, so its other trials need not start.
    """
    bench = spec.bench
    sample = _new_sample(spec)
    workdir: Path | None = None
    info: TrialInfo | None = None
    environment: Environment | None = None
    escaping: BaseException | None = None
    task_unusable: str | None = None
    recorder = transcript.Recorder()  # the trial's, so an interrupted agent run still leaves its events
    try:
        workdir, info = _trial_folders(spec)
        environment = _provision(hooks, info)
        _run_and_score(spec, hooks, info, environment, workdir, sample, agent_runner, recorder)
    except TaskUnusable as exc:
        task_unusable = str(exc)
        _mark(sample, STATUS_ERROR, None, task_unusable)
    except (HarnessError, BenchConfigError) as exc:
        _mark(sample, STATUS_ERROR, None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug of the harness: recorded, then shown with its traceback
        escaping = exc
        _mark(sample, STATUS_ERROR, None, f"internal: {type(exc).__name__}: {exc}")
    except BaseException as exc:  # Ctrl-C, SIGTERM, pytest-timeout, pytest.exit: recorded, then passed on
        escaping = exc
        _mark(sample, STATUS_ERROR, None, f"interrupted: {_interruption(exc)}")
    finally:
        interrupted = _tear_down(hooks, info, environment, workdir, sample)
        escaping = interrupted or escaping  # an interrupt wins: the sitting must stop
    sample["ended_at"] = utc_now_iso()
    if info is not None:
        try:
            _call_hook(hooks.pytest_benchcell_update_sample, trial=info, sample=sample)
        except HarnessError as exc:
            _mark(sample, STATUS_ERROR, None, "; ".join(part for part in (sample["reason"], str(exc)) if part))
        except BaseException as exc:  # noqa: BLE001 - an interrupt here too: recorded first, then passed on
            escaping = exc
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"update_sample interrupted: {_interruption(exc)}") if part)
    secrets = secret_values(bench, bench.arms[spec.arm], environment)
    sample = redact(sample, secrets)
    # Written before the sample is appended: a stored sample never points at a file never written.
    sample["transcript"] = transcript.keep(spec.store.root, sample, recorder, secrets, store_vanished=spec.store.vanished())
    recorded = _record(spec, sample)
    if on_recorded is not None:
        on_recorded(recorded, task_unusable=task_unusable)
    if escaping is not None:
        raise escaping
    return recorded


def _tear_down(
    hooks: Any, info: TrialInfo | None, environment: Environment | None, workdir: Path | None, sample: dict[str, Any]
) -> BaseException | None:
    """The bench's teardown, then the trial's folders removed. Nothing escapes from here before the
    sample is recorded: an interrupt (Ctrl-C, a pytest-timeout) is noted in the reason and returned,
    to be passed on after the record. The folders hold what the agent left (deep trees, links out,
    FIFOs): leftovers.remove_tree never follows a link, has no depth limit and a time limit, and
    what it could not remove is kept in the sample's `leftovers`."""
    interrupted: BaseException | None = None
    if info is not None:
        try:
            _call_hook(hooks.pytest_benchcell_teardown, trial=info, environment=environment)
        except HarnessError as exc:
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"teardown: {exc}") if part)
        except BaseException as exc:  # noqa: BLE001 - recorded below, re-raised by run_trial
            interrupted = exc
            sample["reason"] = "; ".join(part for part in (sample["reason"], f"teardown interrupted: {_interruption(exc)}") if part)
    if workdir is not None:
        try:
            removal = leftovers.remove_tree(workdir)
        except BaseException as exc:  # noqa: BLE001 - an interrupt mid-removal: recorded, then passed on
            interrupted = interrupted or exc
            removal = leftovers.Removal(str(workdir), 0, (".: the removal was interrupted",), 1)
        if not removal.complete:
            sample["leftovers"] = removal.as_dict()
    return interrupted


def _trial_folders(spec: TrialSpec) -> tuple[Path, TrialInfo]:
    return trial_folders(spec.bench, spec.arm, spec.task, spec.trial, spec.model_kind)


def trial_folders(bench: Bench, arm: str, task: str, trial: int, model_kind: str) -> tuple[Path, TrialInfo]:
    """A fresh folder per trial: the environment's workdir and the agent's empty cwd inside it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"benchcell-{arm}-{task}-t{trial}-"))
    info = TrialInfo(
        arm=arm,
        task=task,
        tier=bench.tasks[task].tier,
        trial=trial,
        model_kind=model_kind,
        workdir=workdir / "environment",
        agent_cwd=workdir / "cwd",
    )
    info.workdir.mkdir()
    info.agent_cwd.mkdir()
    return workdir, info


def _provision(hooks: Any, info: TrialInfo) -> Environment:
    environment = _call_hook(hooks.pytest_benchcell_provision, trial=info) or Environment()
    if not isinstance(environment, Environment):
        raise HarnessError(
            f"pytest_benchcell_provision returned {type(environment).__name__}; allowed: "
            f"pytest_benchcell.Environment(values=..., data=..., secrets=...) or None"
        )
    return environment


@contextlib.contextmanager
def provisioned(
    bench: Bench, arm: str, task: str, trial: int, model_kind: str, hooks: Any
) -> Iterator[tuple[TrialInfo, Environment, Path, dict[str, str]]]:
    """A trial's environment outside a trial (the pre-flight's): its folders, provisioned by the
    bench's hooks and ready; torn down and removed afterwards, whatever happened. Yields (info,
    environment, the trial's folder, the placeholder values). The bench's hooks failing (teardown
    too) raise HarnessError."""
    workdir, info = trial_folders(bench, arm, task, trial, model_kind)
    environment: Environment | None = None
    noted: dict[str, Any] = {"reason": ""}
    try:
        environment = _provision(hooks, info)
        _wait_until_ready(hooks, info, environment, bench.ready_timeout_ms)
        yield info, environment, workdir, trial_values(bench, info, environment)
    finally:
        interrupted = _tear_down(hooks, info, environment, workdir, noted)
        if interrupted is not None:
            raise interrupted
    if noted["reason"]:
        raise HarnessError(noted["reason"])


def trial_values(bench: Bench, info: TrialInfo, environment: Environment) -> dict[str, str]:
    """The values that fill {placeholders}: the built-ins and the provision hook's."""
    return {
        "python": sys.executable,
        "bench_root": str(bench.root),
        "cwd": str(info.agent_cwd),
        **{str(k): str(v) for k, v in environment.values.items()},
    }


def _interruption(exc: BaseException) -> str:
    """Why a trial was cut short, in words (the sample's reason)."""
    if isinstance(exc, KeyboardInterrupt):
        return f"{exc} during the trial" if str(exc) else "Ctrl-C during the trial"
    text = str(exc).strip() or type(exc).__name__
    return f"{text} (during the trial)" if text.lower().startswith("timeout") else f"{type(exc).__name__}: {text}"


class StoreUnavailable(Exception):
    """Not even an `error` sample could be written: the sitting must stop (the message says why)."""


def _record(spec: TrialSpec, sample: dict[str, Any]) -> dict[str, Any]:
    """Append the sample; if the store refuses it (disk full, folder gone or read-only), append a
    small `error` sample that keeps the trial's spend; if that fails too, raise StoreUnavailable."""
    provenance = sample["provenance"]
    bounds = {"turn_cap": spec.turn_cap, "wall_clock_ms": spec.wall_clock_ms}
    try:
        spec.store.write_definitions(
            f"{provenance['conditions']}-{provenance['scoring']}", spec.bench.definitions(spec.arm, spec.task, **bounds)
        )
    except StoreError:
        pass  # a missing definitions file loses no measurement; the sample itself must still go in
    try:
        spec.store.append(sample)
        return sample
    except StoreError as exc:
        failure = exc
    kept = {key: sample[key] for key in _KEPT_ON_STORE_FAILURE if key in sample}
    was = sample["outcome"] if sample["status"] == STATUS_SCORED else sample["status"]
    fallback = {
        **kept,
        "status": STATUS_ERROR,
        "outcome": None,
        "reason": f"the trial ended {was}, but its full sample could not be stored: {failure}",
    }
    try:
        spec.store.append(fallback)
    except StoreError as again:
        raise StoreUnavailable(f"{again}; the sitting stops (trial {spec.trial} of {spec.arm} x {spec.task} is not recorded)") from again
    return fallback


# What an `error` sample keeps when the full sample could not be stored: identity, spend, provenance.
_KEPT_ON_STORE_FAILURE = (
    "schema", "id", "sitting", "arm", "task", "tier", "bonus", "trial", "started_at", "ended_at", "model",
    "model_kind", "usage", "turns", "duration_ms", "api_wait_ms", "cost_usd", "result_subtype", "bounds", "provenance",
    "transcript", "api_error",
)  # fmt: skip


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
    definition = bench.definition(spec.arm, spec.task, turn_cap=spec.turn_cap, wall_clock_ms=spec.wall_clock_ms)
    versions = sdk_versions()  # imports the SDK on the first trial: not part of the trial's time
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
        "api_wait_ms": 0,
        "api_retries": 0,
        "cost_usd": None,
        "status": STATUS_ERROR,
        "outcome": None,
        "reason": "the trial did not finish",
        "result_subtype": None,
        "final_answer": "",
        "tool_calls": [],
        "leaks": [],
        "score": {"differences": []},
        "state": None,
        "probe": dict(spec.probe) if spec.probe is not None else None,
        "bounds": {"turn_cap": spec.turn_cap, "wall_clock_ms": spec.wall_clock_ms},
        "provenance": {
            "plugin": __version__,
            **versions,
            "python": f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            "fingerprint": definition.conditions,  # what older readers pool by
            "conditions": definition.conditions,
            "scoring": definition.scoring,
            "model_kind": spec.model_kind,
            "exec_audit": exec_audit_state(bench, bench.arms[spec.arm]).describe(),
            "sandbox": sandbox_state(bench, bench.arms[spec.arm]).describe(),
        },
        "exec_audit": None,  # what the execution audit saw, when it ran
        "sandbox_blocked": [],  # failures of the arm's own programs the sandbox caused (isolation/blocked.py)
        "api_error": None,  # the model API ended the trial: {kind, status, error, attempts} (api_faults.py)
    }


def _mark(sample: dict[str, Any], status: str, outcome: str | None, reason: str) -> None:
    sample["status"] = status
    sample["outcome"] = outcome
    sample["reason"] = reason
    if status == STATUS_ERROR:
        sample["final_answer"] = ""  # whatever the CLI said then (its error text) is no answer of the agent


def _run_and_score(
    spec: TrialSpec,
    hooks: Any,
    info: TrialInfo,
    environment: Environment,
    workdir: Path,
    sample: dict[str, Any],
    agent_runner: AgentRunner,
    recorder: transcript.Recorder | None = None,
) -> None:
    bench, arm, task = spec.bench, spec.bench.arms[spec.arm], spec.bench.tasks[spec.task]
    values = trial_values(bench, info, environment)
    where = f"{bench.path}: [arms.{arm.name}] / [tasks.{task.id}]"
    system_prompt = "\n\n".join(
        part
        for part in (fill_placeholders(bench.base_prompt, values, where=where).strip(),
                     fill_placeholders(arm.system_prompt_addition, values, where=where))
        if part
    )  # fmt: skip
    mcp_servers = {
        server.name: {
            "type": "stdio",
            "command": fill_placeholders(server.command, values, where=where),
            "args": [fill_placeholders(arg, values, where=where) for arg in server.args],
            "env": {key: fill_placeholders(value, values, where=where) for key, value in server.env.items()},
        }
        for server in arm.mcp_servers
    }
    prompt = fill_placeholders(task.intent, values, where=where)
    _wait_until_ready(hooks, info, environment, bench.ready_timeout_ms)
    ground_truth = _snapshot(hooks, info, environment) if task.check_state else None
    check_changes(bench, task, ground_truth)  # before the agent: a broken task spends nothing
    scripted_model = None
    confined: Confinement | None = None
    try:
        try:
            confined = confine(bench, arm, info, environment, values, workdir, bundled_cli(), where, require_audit=True)
        except ConfinementError as exc:
            raise HarnessError(str(exc)) from exc
        env = confined.env
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
        roots = write_roots(info)
        rules = arm_rules(arm, values=values, write_roots=roots)
        request = AgentRequest(
            model=bench.model,
            system_prompt=system_prompt,
            prompt=prompt,
            max_turns=spec.turn_cap,
            wall_clock_s=spec.wall_clock_ms / 1000,
            cwd=info.agent_cwd,
            env=env,
            tools=arm.tools,
            mcp_servers=mcp_servers,
            guard=_in_band_guard(arm, values, roots),
            cli_path=confined.cli_path,
            startup_wait_s=mcp_wait(bench, arm).seconds,
            recorder=recorder,
            api_stall_ms=bench.api_stall_ms,
        )
        result = agent_runner(request)
        if scripted_model is not None:
            result.first_request_tools = scripted_model.first_request_tools
    finally:
        if scripted_model is not None:
            scripted_model.stop()
        if confined is not None:
            confined.close()
    _fill_measurements(sample, result)
    findings = confined.findings(sample, isolation.HARMLESS_UTILITIES, bundled_cli())
    sample["exec_audit"] = confined.exec_report
    if confined.sandbox_report is not None:
        sample["sandbox"] = confined.sandbox_report
    sample["sandbox_blocked"] = confined.blocked
    _score(spec, hooks, info, environment, sample, result, rules, ground_truth, findings)
    if sample.get("sandbox", {}).get("reached"):  # the agent's doing: scored as usual, and said
        sample["reason"] = "; ".join(part for part in (sample["reason"], sandbox_limit_note(sample)) if part)
    not_against_the_arm(sample)


def not_against_the_arm(sample: dict[str, Any]) -> None:
    """A trial the sandbox broke is never scored against the arm: when one of the arm's own programs
    failed because the sandbox hid a file it needs or refused an endpoint of the bench's environment
    (`sandbox_blocked`), a trial that would count as incorrect, confused or hung is an `error`. A pass
    stays a pass (the block did not cost the arm), and invalid stays invalid."""
    blocked = sample.get("sandbox_blocked") or []
    if not blocked or sample["status"] != STATUS_SCORED or sample["outcome"] == OUTCOME_PASS:
        return
    from .isolation.blocked import describe_record

    more = f" (+{len(blocked) - 1} more)" if len(blocked) > 1 else ""
    was = f"{sample['outcome']}: {sample['reason']}" if sample["reason"] else str(sample["outcome"])
    _mark(
        sample, STATUS_ERROR, None,
        f"sandbox: {describe_record(blocked[0])}{more}; the trial would have been {was}, which the harness "
        f"caused, so it is not scored against the arm",
    )  # fmt: skip


def _in_band_guard(arm: Arm, values: Mapping[str, str], roots: Sequence[str]) -> Callable[[str, Mapping[str, Any]], tuple[bool, str]]:
    """The PreToolUse guard. `guard_exempt = ["*"]` (testing only) lets every Bash command through,
    so a test can show that the audits catch what a guard with a missing rule would let run."""
    decide = decide_with(arm_rules(arm, for_guard=True, values=values, write_roots=roots))
    if GUARD_OFF not in arm.guard_exempt:
        return decide
    return lambda tool, tool_input: (True, "") if tool == "Bash" else decide(tool, tool_input)


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


def _fill_measurements(sample: dict[str, Any], result: AgentResult) -> None:
    if result.usage_known:
        sample["usage"] = {"total": dict(result.usage_total), "by_model": {k: dict(v) for k, v in result.usage_by_model.items()}}
    else:
        sample["usage"] = {"total": None, "by_model": {}}  # unknown, not zero: reports leave it out
    # One definition of a turn: a model reply. The CLI's own num_turns counts differently at the
    # cap (cap + 1) and after an interrupt (2 with no reply at all); it is kept as cli_num_turns.
    sample["turns"] = result.replies
    sample["cli_num_turns"] = result.turns
    sample["duration_ms"] = result.duration_ms
    # The CLI's waits between attempts of failing model requests: the API's time, within duration_ms.
    sample["api_wait_ms"] = min(result.api_wait_ms, result.duration_ms)
    sample["api_retries"] = len(result.api.retries)
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
        outcome = call.get("result") or {}
        allowed, reason = _decision(decisions.get(call["id"]), outcome)
        calls.append(
            {
                "id": call["id"],
                "tool": call["tool"],
                "input": call["input"],
                "allowed": allowed,
                "reason": reason,
                "is_error": outcome.get("is_error"),
                "output": _clip(outcome.get("content", "")),
            }
        )
        seen.add(call["id"])
    for attempt in result.attempts:  # decided by the guard but never streamed back (cut off)
        if attempt.get("id") not in seen:
            calls.append({**attempt, "is_error": None, "output": ""})
    return calls


def _decision(attempt: Mapping[str, Any] | None, outcome: Mapping[str, Any]) -> tuple[bool | None, str]:
    """Whether a streamed call was allowed, and why: the guard's decision, or, for a call the guard
    never saw, the CLI's own refusal (a tool the arm does not have is refused before any hook)."""
    if attempt is not None:
        return attempt.get("allowed"), attempt.get("reason", "")
    if outcome.get("is_error"):
        said = str(outcome.get("content", "")).strip().splitlines()
        return False, "refused by the Claude Code CLI before the guard: " + (said[0][:200] if said else "no reason given")
    return None, "not seen by the guard"


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
    rules: isolation.ArmRules,
    ground_truth: Any,
    exec_leaks: Sequence[str] = (),
) -> None:
    task = spec.bench.tasks[spec.task]
    arm = spec.bench.arms[spec.arm]
    not_offered = arm_not_offered(spec.bench, arm, result)  # the agent never saw its arm's tools: no measure
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


def _snapshot(hooks: Any, info: TrialInfo, environment: Environment) -> Any:
    snapshot = _call_hook(hooks.pytest_benchcell_snapshot, trial=info, environment=environment)
    if snapshot is None:
        raise HarnessError(
            f"task {info.task!r} has check_state = true but no pytest_benchcell_snapshot hook returned a state"
        )
    return snapshot


def _wait_until_ready(hooks: Any, info: TrialInfo, environment: Environment, timeout_ms: int) -> None:
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        ready = _call_hook(hooks.pytest_benchcell_ready, trial=info, environment=environment)
        if ready is None or ready:
            return
        if time.monotonic() >= deadline:
            raise HarnessError(f"the environment was not ready after {timeout_ms} ms (pytest_benchcell_ready)")
        time.sleep(READY_POLL_S)
