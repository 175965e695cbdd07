"""What does the harness add to one trial? Target: a plugin trial takes <= 1.10x a bare SDK run.

    .venv/bin/python benchmarks/trial_overhead.py [--runs 10] [--no-breakdown | --breakdown]

Plays the same two-request conversation, ToolUse("Bash", {"command": "echo hi"}) then
Answer("done"), against pytest_benchcell.scripted.ScriptedModel on 127.0.0.1, two ways:

- bare:   claude_agent_sdk.ClaudeSDKClient with the environment the e2e tests give the CLI
          (pytest_benchcell.cli_environment.offline_cli_environment: the scripted model's URL and
          key, extra traffic off, per-run CLAUDE_CONFIG_DIR and HOME), setting_sources=[],
          tools=allowed_tools=["Bash"];
          timed from connect() to the ResultMessage plus disconnect().
- plugin: pytest_benchcell.trial.run_trial(TrialSpec(...), hooks) with a bench loaded by
          load_bench from a temporary bench.toml (one arm tools=["Bash"], one read task with
          required_facts=["done"]) and a tiny hooks object (provision -> Environment(), script ->
          the same steps, the rest None); timed around the whole run_trial call, i.e. everything
          a trial costs: temp folders, curated PATH, the scripted model's start, the CLI launcher,
          the PreToolUse guard, audit, scoring, redaction, the definitions file and the fsynced append.

One warm-up of each, then --runs of each, alternating (bare, plugin, plugin without the execution
audit, bare, ...) so drift of this shared 2-core machine lands on all. Prints the medians and the ratio plugin/bare.

If the ratio misses the target, a breakdown follows: the plugin runs are timed phase by phase
(through wrappers around the hooks and the agent runner, no plugin code is changed), and two extra
bare variants isolate what the agent phase adds: bare + an allow-all PreToolUse hook (the guard's
round trip through the SDK control protocol) and bare + the plugin's CLI launcher and curated
environment (cli_path through /usr/bin/env).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import harness

from pytest_benchcell import Environment
from pytest_benchcell.agent import run_agent
from pytest_benchcell.cli_environment import offline_cli_environment
from pytest_benchcell.config import load_bench
from pytest_benchcell.scripted import Answer, ScriptedModel, ToolUse
from pytest_benchcell.store import Store
from pytest_benchcell.trial import TrialSpec, exec_audit_state, run_trial

TARGET_RATIO = 1.10
MODEL = "claude-sonnet-4-5"
PROMPT = "Say hi with the shell, then say done."
BENCH_TOML = f"""
[bench]
name = "overhead"
model = "{MODEL}"
store = "results"
turn_cap = 5
wall_clock_ms = 60000
base_prompt = "You work in a tiny folder. Answer plainly."

[arms.shell]
tools = ["Bash"]

[tasks.say-done]
tier = "read"
intent = "{PROMPT}"
required_facts = ["done"]
"""


def steps() -> list[Any]:
    return [ToolUse("Bash", {"command": "echo hi"}), Answer("done")]


# --------------------------------------------------------------------------- bare SDK run


async def _bare(folder: Path, *, guard_hook: bool = False, launcher: bool = False) -> tuple[float, str]:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, ResultMessage

    (folder / "cwd").mkdir(parents=True, exist_ok=True)
    with ScriptedModel(steps(), model_name=MODEL) as model:
        env = offline_cli_environment(model.base_url, folder)
        extra: dict[str, Any] = {}
        if guard_hook:

            async def allow(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
                return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}

            extra["hooks"] = {"PreToolUse": [HookMatcher(matcher=None, hooks=[allow])]}
        if launcher:
            from pytest_benchcell import isolation
            from pytest_benchcell.agent import bundled_cli
            from pytest_benchcell.isolation.hygiene import cli_wrapper, curated_bin, removed_variables

            env["PATH"] = str(curated_bin(folder / "bin", (), isolation.HARMLESS_UTILITIES, os.environ.get("PATH", "")))
            env["SHELL"] = "/bin/bash"
            extra["cli_path"] = str(cli_wrapper(folder / "launcher", bundled_cli(), removed_variables(os.environ, env)))
        options = ClaudeAgentOptions(
            model=MODEL,
            cwd=str(folder / "cwd"),
            setting_sources=[],
            tools=["Bash"],
            allowed_tools=["Bash"],
            max_turns=5,
            env=env,
            **extra,
        )
        answer = ""
        started = time.perf_counter()
        client = ClaudeSDKClient(options)
        await client.connect()
        try:
            await client.query(PROMPT)
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    answer = message.result or ""
        finally:
            await client.disconnect()
        return time.perf_counter() - started, answer


def bare_run(scratch: Path, **variant: bool) -> float:
    folder = Path(tempfile.mkdtemp(prefix="bare-", dir=scratch))
    try:
        elapsed, answer = asyncio.run(_bare(folder, **variant))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if answer != "done":
        raise SystemExit(f"the bare run did not end with the scripted answer: {answer!r}")
    return elapsed


# --------------------------------------------------------------------------- plugin trial


class Hooks:
    """What run_trial calls on the pluggy relay, as plain callables (keyword arguments)."""

    def pytest_benchcell_provision(self, **_: Any) -> Environment:
        return Environment()

    def pytest_benchcell_script(self, **_: Any) -> list[Any]:
        return steps()

    def pytest_benchcell_teardown(self, **_: Any) -> None:
        return None

    def pytest_benchcell_ready(self, **_: Any) -> None:
        return None

    def pytest_benchcell_snapshot(self, **_: Any) -> None:
        return None

    def pytest_benchcell_expected_state(self, **_: Any) -> None:
        return None

    def pytest_benchcell_check_state(self, **_: Any) -> None:
        return None

    def pytest_benchcell_score(self, **_: Any) -> None:
        return None

    def pytest_benchcell_update_sample(self, **_: Any) -> None:
        return None


class TimedHooks(Hooks):
    """Records when run_trial reaches each hook, to split a trial into phases."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

    def _mark(self, name: str) -> None:
        self.marks.setdefault(name, time.perf_counter())

    def pytest_benchcell_provision(self, **kwargs: Any) -> Environment:
        self._mark("provision")
        return super().pytest_benchcell_provision(**kwargs)

    def pytest_benchcell_script(self, **kwargs: Any) -> list[Any]:
        self._mark("script")
        return super().pytest_benchcell_script(**kwargs)

    def pytest_benchcell_ready(self, **kwargs: Any) -> None:
        self._mark("ready")

    def pytest_benchcell_score(self, **kwargs: Any) -> None:
        self._mark("score")

    def pytest_benchcell_teardown(self, **kwargs: Any) -> None:
        self._mark("teardown")

    def pytest_benchcell_update_sample(self, **kwargs: Any) -> None:
        self._mark("update_sample")


class Plugin:
    def __init__(self, scratch: Path, exec_audit: str = "auto") -> None:
        folder = scratch / f"bench-{exec_audit}"
        folder.mkdir()
        (folder / "bench.toml").write_text(BENCH_TOML.replace("[bench]\n", f'[bench]\nexec_audit = "{exec_audit}"\n', 1))
        self.bench = load_bench(folder / "bench.toml")
        self.store = Store(self.bench.store)
        self.trial = 0

    def run(self, *, timed: bool = False) -> tuple[float, dict[str, float]]:
        self.trial += 1
        spec = TrialSpec(
            bench=self.bench, arm="shell", task="say-done", trial=self.trial, model_kind="scripted",
            sitting="overhead", turn_cap=self.bench.turn_cap, wall_clock_ms=self.bench.wall_clock_ms, store=self.store,
        )  # fmt: skip
        hooks = TimedHooks() if timed else Hooks()
        agent: dict[str, float] = {}

        def runner(request: Any) -> Any:
            agent["start"] = time.perf_counter()
            try:
                return run_agent(request)
            finally:
                agent["end"] = time.perf_counter()

        started = time.perf_counter()
        sample = run_trial(spec, hooks, agent_runner=runner)
        elapsed = time.perf_counter() - started
        if (sample["status"], sample["outcome"]) != ("scored", "pass"):
            raise SystemExit(f"the plugin trial did not pass: {sample['status']} {sample['outcome']} {sample['reason']}")
        phases: dict[str, float] = {}
        if timed:
            m = hooks.marks
            phases = {
                "before provision (temp dirs, new sample: versions, fingerprint)": m["provision"] - started,
                "provision -> ready (placeholders, curated PATH bin, config/home dirs)": m["ready"] - m["provision"],
                "ready -> script hook (ground truth, changes check)": m["script"] - m["ready"],
                "script hook -> agent runner (scripted model start, launcher, guard rules)": agent["start"] - m["script"],
                "agent runner (run_agent: CLI + guard hook)": agent["end"] - agent["start"],
                "agent -> score hook (model stop, measurements, audit)": m["score"] - agent["end"],
                "score -> teardown (checker)": m["teardown"] - m["score"],
                "teardown -> update_sample (rmtree of the trial folder)": m["update_sample"] - m["teardown"],
                "update_sample -> return (redact, definitions, fsynced append)": started + elapsed - m["update_sample"],
            }
        return elapsed, phases


# --------------------------------------------------------------------------- main


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.0f} ms"


def main() -> int:
    args = harness.parser(
        __doc__, runs=10, no_breakdown=(False, "skip the breakdown even if the target is missed"),
        breakdown=(False, "print the breakdown even if the target is met"), breakdown_runs=5,
    ).parse_args()  # fmt: skip

    scratch = Path(tempfile.mkdtemp(prefix="benchcell-overhead-"))
    try:
        plugin = Plugin(scratch)
        unaudited = Plugin(scratch, exec_audit="off")
        bare_run(scratch)  # warm-ups: SDK import, CLI binary in the page cache, first definitions file
        plugin.run()
        unaudited.run()
        bare: list[float] = []
        ours: list[float] = []
        off: list[float] = []
        for _ in range(args.runs):
            bare.append(bare_run(scratch))
            ours.append(plugin.run()[0])
            off.append(unaudited.run()[0])
        ratio = statistics.median(ours) / statistics.median(bare)
        print(f"trial overhead: ToolUse(Bash 'echo hi') + Answer('done') against the scripted model, "
              f"{args.runs} runs each after one warm-up, alternating")
        print(f"  bare ClaudeSDKClient (connect -> ResultMessage + disconnect): median {median_ms(bare)} "
              f"(min {min(bare) * 1000:,.0f}, max {max(bare) * 1000:,.0f})")
        print(f"  plugin run_trial (whole trial, sample appended):             median {median_ms(ours)} "
              f"(min {min(ours) * 1000:,.0f}, max {max(ours) * 1000:,.0f})")
        print(f"  the same with [bench] exec_audit = \"off\":                   median {median_ms(off)} "
              f"(min {min(off) * 1000:,.0f}, max {max(off) * 1000:,.0f})")
        print(f"  execution audit of this trial: {exec_audit_state(plugin.bench).describe()}; its share "
              f"{(statistics.median(ours) - statistics.median(off)) * 1000:+,.0f} ms; ratio without it "
              f"{statistics.median(off) / statistics.median(bare):.2f}")
        print(f"  ratio plugin/bare: {ratio:.2f} (target <= {TARGET_RATIO:.2f}: {'met' if ratio <= TARGET_RATIO else 'MISSED'}); "
              f"difference {(statistics.median(ours) - statistics.median(bare)) * 1000:+,.0f} ms")
        if args.breakdown or (ratio > TARGET_RATIO and not args.no_breakdown):
            breakdown(scratch, plugin, args.breakdown_runs)
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def breakdown(scratch: Path, plugin: Plugin, runs: int) -> None:
    phases: dict[str, list[float]] = defaultdict(list)
    totals, bare, hooked, launched = [], [], [], []
    for _ in range(runs):
        bare.append(bare_run(scratch))
        hooked.append(bare_run(scratch, guard_hook=True))
        launched.append(bare_run(scratch, launcher=True))
        elapsed, timed = plugin.run(timed=True)
        totals.append(elapsed)
        for name, value in timed.items():
            phases[name].append(value)
    print(f"  breakdown (medians of {runs} more runs of each, timed through hook and runner wrappers):")
    print(f"    plugin trial total {median_ms(totals)}:")
    for name, values in phases.items():
        print(f"      {statistics.median(values) * 1000:8,.1f} ms  {name}")
    stops = []
    for _ in range(10):
        model = ScriptedModel(steps()).start()
        time.sleep(0.02)  # as after a conversation: the server loop is idle in its poll
        t0 = time.perf_counter()
        model.stop()
        stops.append(time.perf_counter() - t0)
    print(f"    ScriptedModel.stop() alone (inside 'agent -> score hook'): median {median_ms(stops)} (shutdown() waits for serve_forever's "
          f"50 ms poll interval)")
    base = statistics.median(bare)
    print(f"    bare run {median_ms(bare)}; + allow-all PreToolUse hook {median_ms(hooked)} "
          f"({(statistics.median(hooked) - base) * 1000:+,.0f} ms); + plugin launcher and curated env "
          f"{median_ms(launched)} ({(statistics.median(launched) - base) * 1000:+,.0f} ms)")


if __name__ == "__main__":
    sys.exit(main())
