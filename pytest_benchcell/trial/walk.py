"""One trial's walk: provision -> confine -> run the agent -> audit -> score -> teardown -> record,
one sample for every way it ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import isolation, skill_use, transcript
from ..agent import AgentRequest, bundled_cli, run_agent
from ..cli_environment import scripted_model_variables
from ..config import Arm, Bench, BenchConfigError, fill_placeholders
from ..confinement import Confinement, ConfinementError, confine, sandbox_limit_note, write_roots
from ..environment import Environment, TrialInfo
from ..isolation.tool_offer import mcp_wait
from ..mcp_launch import ServerEnd, server_configs, server_ends
from ..output_lines import bounded
from ..sample import MODEL_SCRIPTED, STATUS_ERROR, utc_now_iso
from ..secrets import redact, secret_values
from ..skill_delivery import NATIVE, install, skill_view
from ..skill_use import SkillView
from .measurements import _fill_measurements
from .provisioning import _interruption, _provision, _snapshot, _tear_down, _trial_folders, _wait_until_ready, trial_values
from .recording import _new_sample, _record
from .rules import _in_band_guard, arm_rules
from .spec import AgentRunner, HarnessError, RecordedCallback, TaskUnusable, TrialSpec, _call_hook, _mark
from .verdict import _score, check_changes, not_against_the_arm



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
    mcp_servers = server_configs(arm, values, where, workdir)  # the pre-flight starts them with the same builder
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
            from ..scripted import ScriptedModel

            steps = _call_hook(hooks.pytest_benchcell_script, trial=info, environment=environment) or []
            scripted_model = ScriptedModel(list(steps), model_name=bench.model).start()
            env.update(scripted_model_variables(scripted_model.base_url, max_retries=1))
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
            skills=_native_skills(bench, arm, env),
        )
        result = agent_runner(request)
        mcp_ends = server_ends(workdir, mcp_servers)  # the CLI is gone: what its servers left is complete
        if scripted_model is not None:
            result.first_request_tools = scripted_model.first_request_tools
    finally:
        if scripted_model is not None:
            scripted_model.stop()
        if confined is not None:
            confined.close()
    _fill_measurements(sample, result)
    sample.update(skill_use.measure(recorder.events if recorder is not None else (), _skill_view(bench, arm, env)))
    _keep_server_ends(sample, result.mcp_failed, mcp_ends)
    findings = confined.findings(sample, isolation.HARMLESS_UTILITIES, bundled_cli())
    sample["exec_audit"] = confined.exec_report
    if confined.sandbox_report is not None:
        sample["sandbox"] = confined.sandbox_report
    sample["sandbox_blocked"] = confined.blocked
    _score(spec, hooks, info, environment, sample, result, rules, ground_truth, findings, mcp_ends=mcp_ends)
    if sample.get("sandbox", {}).get("reached"):  # the agent's doing: scored as usual, and said
        sample["reason"] = "; ".join(part for part in (sample["reason"], sandbox_limit_note(sample)) if part)
    not_against_the_arm(sample)


def _native_skills(bench: Bench, arm: Arm, env: Mapping[str, str]) -> tuple[str, ...]:
    """An arm delivering its skill natively: the skill installed in this trial's CLI config folder, its name."""
    if arm.skill_delivery != NATIVE or not arm.skill_path:
        return ()
    try:
        return (install(bench.root / arm.skill_path, Path(env["CLAUDE_CONFIG_DIR"])).name,)
    except OSError as exc:
        raise HarnessError(f"could not install the skill {arm.skill_path} for the trial: {exc}") from exc


def _skill_view(bench: Bench, arm: Arm, env: Mapping[str, str]) -> SkillView | None:
    if not arm.skill_path:
        return None
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    return skill_view(bench.root / arm.skill_path, arm.skill_delivery, Path(config_dir) if config_dir else None)


MCP_STDERR_CHARS = 4000  # of each MCP server's stderr kept in the sample (its start and its end)


def _keep_server_ends(sample: dict[str, Any], failed: Sequence[str], ends: Mapping[str, ServerEnd]) -> None:
    """The sample's `mcp_failed` (the declared servers not connected as the conversation began: the
    mark a sitting reads) and `mcp_stderr` (what each server wrote to stderr, bounded; redacted with
    the rest of the sample)."""
    if failed:
        sample["mcp_failed"] = list(failed)
    said = {name: bounded(end.stderr, MCP_STDERR_CHARS) for name, end in ends.items() if end.stderr.strip()}
    if said:
        sample["mcp_stderr"] = said
