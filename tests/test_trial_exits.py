"""Every way run_trial can end leaves exactly one sample, teardown runs, and what must escape escapes.

The agent runner is the injected dependency (the real one drives the CLI); here it fails in the ways
the real world does: a harness bug, a pytest-timeout, Ctrl-C. The e2e matrix covers the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benches import BENCH_TOML

from pytest_benchcell import Environment
from pytest_benchcell.config import load_bench
from pytest_benchcell.store import Store
from pytest_benchcell.trial import TrialSpec, run_trial


class Hooks:
    """The bench hooks run_trial calls, as plain callables; records the calls."""

    def __init__(self, snapshot: Any = None) -> None:
        self.calls: list[str] = []
        self.snapshot = snapshot

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("pytest_benchcell_"):
            raise AttributeError(name)

        def hook(**kwargs: Any) -> Any:
            self.calls.append(name.removeprefix("pytest_benchcell_"))
            if name == "pytest_benchcell_provision":
                return Environment(values={"marker": "m"})
            if name == "pytest_benchcell_snapshot":
                return self.snapshot
            return None

        return hook


def spec_for(tmp_path: Path, task: str, bench_toml: str = BENCH_TOML) -> TrialSpec:
    (tmp_path / "bench.toml").write_text(bench_toml)
    bench = load_bench(tmp_path / "bench.toml")
    return TrialSpec(bench=bench, arm="bare", task=task, trial=1, model_kind="scripted", sitting="s",
                     turn_cap=4, wall_clock_ms=30_000, store=Store(bench.store))  # fmt: skip


def stored(spec: TrialSpec) -> list[dict[str, Any]]:
    path = spec.store.root / "scripted" / spec.arm / f"{spec.task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def failing_runner(exc: BaseException) -> Any:
    def run(request: Any) -> Any:
        raise exc

    return run


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (TypeError("unsupported operand"), "internal: TypeError: unsupported operand"),
        (pytest.fail.Exception("Timeout (>1.0s) from pytest-timeout."), "interrupted: Timeout (>1.0s) from pytest-timeout. (during the trial)"),
        (KeyboardInterrupt(), "interrupted: Ctrl-C during the trial"),
        (KeyboardInterrupt("signal 15"), "interrupted: signal 15 during the trial"),
    ],
)
def test_an_escaping_exception_is_recorded_then_re_raised(tmp_path: Path, raised: BaseException, reason: str) -> None:
    spec = spec_for(tmp_path, "say-hello")
    hooks = Hooks()
    seen: list[tuple[str, Any]] = []
    with pytest.raises(type(raised)):
        run_trial(spec, hooks, agent_runner=failing_runner(raised),
                  on_recorded=lambda sample, task_unusable: seen.append((sample["reason"], task_unusable)))  # fmt: skip
    (sample,) = stored(spec)
    assert (sample["status"], sample["outcome"], sample["reason"]) == ("error", None, reason)
    assert seen == [(reason, None)]  # the caller learns the verdict before the exception reaches it
    assert hooks.calls[-2:] == ["teardown", "update_sample"]
    assert sample["ended_at"] is not None


def test_a_crashing_update_sample_hook_still_stores_the_sample(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, "say-hello")

    class Crashing(Hooks):
        def pytest_benchcell_update_sample(self, **_: Any) -> None:
            raise ValueError("bench bug")

    run_trial(spec, Crashing(), agent_runner=_answer("hello"))
    (sample,) = stored(spec)
    assert sample["status"] == "error"
    assert sample["reason"].endswith("raised ValueError: bench bug")


def _answer(text: str) -> Any:
    from pytest_benchcell.agent import AgentResult

    def run(request: Any) -> AgentResult:
        return AgentResult(subtype="success", final_answer=text, turns=1)

    return run


CHANGES_TASK = BENCH_TOML + """
[tasks.close-99]
tier = "single-mutation"
intent = "Close issue 99."
changes = [{ op = "set", path = "issues[number=99].state", value = "closed" }]
"""


def test_changes_that_do_not_resolve_end_the_trial_before_the_agent(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, "close-99", CHANGES_TASK)
    hooks = Hooks(snapshot={"issues": [{"number": 1, "state": "open"}, {"number": 2, "state": "open"}]})
    seen: list[Any] = []
    calls: list[Any] = []
    sample = run_trial(spec, hooks, agent_runner=calls.append,
                       on_recorded=lambda sample, task_unusable: seen.append(task_unusable))  # fmt: skip
    assert calls == []  # the agent never started
    assert "script" not in hooks.calls  # nor the scripted model
    assert sample["status"] == "error" and sample["usage"]["total"] == dict.fromkeys(sample["usage"]["total"], 0)
    assert sample["reason"].startswith(
        "task close-99: change 1 (set issues[number=99].state): issues[number=99] matches no element "
        "(number values present: 1, 2)"
    )
    assert "no model request made" in sample["reason"]
    assert seen == [sample["reason"]]


def test_changes_on_a_dict_shaped_snapshot_use_dotted_keys(tmp_path: Path) -> None:
    """The README's statement: on a snapshot keyed by id, a path walks the keys (`issues.2.state`)."""
    toml = CHANGES_TASK.replace("issues[number=99].state", "issues.2.state")
    spec = spec_for(tmp_path, "close-99", toml)
    hooks = Hooks(snapshot={"issues": {"1": {"state": "open"}, "2": {"state": "open"}}})
    calls: list[Any] = []

    def runner(request: Any) -> Any:
        calls.append(request)
        return _answer("closed")(request)

    sample = run_trial(spec, hooks, agent_runner=runner)
    assert len(calls) == 1  # the changes resolved: the agent ran
    # the end state equals the ground truth (nothing was closed), so the change is missing
    assert sample["outcome"] == "incorrect" and "issues.2.state" in sample["reason"]


def test_provision_may_write_into_the_agents_working_directory(tmp_path: Path) -> None:
    """The README's statement: agent_cwd is empty when provisioning starts, provision may fill it."""
    spec = spec_for(tmp_path, "say-hello")

    class Filling(Hooks):
        def pytest_benchcell_provision(self, trial: Any, **_: Any) -> Environment:
            assert list(trial.agent_cwd.iterdir()) == []
            (trial.agent_cwd / "NOTES.md").write_text("hi")
            return Environment()

    seen: list[list[str]] = []

    def runner(request: Any) -> Any:
        seen.append(sorted(path.name for path in request.cwd.iterdir()))
        return _answer("hello")(request)

    sample = run_trial(spec, Filling(), agent_runner=runner)
    assert seen == [["NOTES.md"]] and sample["outcome"] == "pass"


def test_provision_returning_something_else_is_a_clear_error(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, "say-hello")

    class Wrong(Hooks):
        def pytest_benchcell_provision(self, **_: Any) -> dict[str, str]:
            return {"db": "x"}

    calls: list[Any] = []
    sample = run_trial(spec, Wrong(), agent_runner=calls.append)
    assert calls == [] and sample["status"] == "error"
    assert sample["reason"].startswith("pytest_benchcell_provision returned dict; allowed: pytest_benchcell.Environment(")
