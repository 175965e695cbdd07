"""End to end: the real SDK and CLI against a Messages API that fails, one fault per sitting.

The sittings run as a real-model sitting would (no --bench-scripted: the CLI keeps its own retry
schedule, about three minutes for a request that keeps failing) with ANTHROPIC_BASE_URL pointing at
a ScriptedModel on 127.0.0.1 that plays the fault. Each test is a row of issue 25's table: the
faults the CLI recovers from end as the agent's trial, with exact usage; the others end as `error`
with the API's reason, never scored; a bad key stops the sitting after one trial.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator, Sequence

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench

from pytest_benchcell.scripted import Answer, ApiError, BrokenStream, NoUsage, Repeat, ScriptedModel, Stall, Step, ToolUse

pytestmark = pytest.mark.e2e

HELLO = Answer("hello from the agent")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ScriptedModel]]:
    """A holder for the sitting's fake API; the test starts it with its script (serve())."""
    for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_MAX_RETRIES", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-of-the-fault-tests")
    models: list[ScriptedModel] = []
    yield models
    for model in models:
        model.stop()


def serve(api: list[ScriptedModel], steps: Sequence[Step], monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    model = ScriptedModel(list(steps), model_name="claude-sonnet-4-5").start()
    api.append(model)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model.base_url)
    return model


def bench(pytester: pytest.Pytester, **keys: object) -> None:
    extra = "".join(f"{key} = {value}\n" for key, value in keys.items())
    write_bench(pytester, BENCH_TOML.replace('base_prompt = "', extra + 'base_prompt = "', 1), CONFTEST)


def sitting(pytester: pytest.Pytester, *args: str, task: str = "say-hello") -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", "bare", "--bench-task", task, "-rA", "-p", "no:randomly", *args)


def samples(pytester: pytest.Pytester, task: str = "say-hello") -> list[dict]:
    path = pytester.path / "results" / "real" / "bare" / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def transcript(pytester: pytest.Pytester, sample: dict) -> list[dict]:
    path = pytester.path / "results" / sample["transcript"]["path"]
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def total(model: ScriptedModel) -> dict[str, int]:
    usages = model.usages
    return {
        "fresh_input": sum(u.input_tokens for u in usages),
        "cache_write": sum(u.cache_creation_input_tokens for u in usages),
        "cache_read": sum(u.cache_read_input_tokens for u in usages),
        "output": sum(u.output_tokens for u in usages),
    }


# -------------------------------------------------------------- faults the CLI recovers from


@pytest.mark.parametrize(
    ("steps", "retries"),
    [
        pytest.param([ApiError(429, "rate limited", retry_after=1), HELLO], 1, id="429-retry-after"),
        pytest.param([ApiError(529), ApiError(529), HELLO], 2, id="529-twice"),
    ],
)
def test_a_fault_the_cli_retries_past_is_the_agents_trial_with_exact_usage_and_the_wait_apart(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch, steps: list, retries: int
) -> None:
    bench(pytester)
    model = serve(api, steps, monkeypatch)
    result = sitting(pytester, "--bench-trials", "1")
    result.assert_outcomes(passed=1)
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"], sample["api_error"]) == ("scored", "pass", None)
    assert sample["usage"]["total"] == total(model)  # what the API reported, exactly
    assert sample["api_retries"] == retries and sample["turns"] == 1
    # The CLI's waits: at least the first of its schedule (0.6 s), a retry-after of 1 s; inside duration_ms.
    assert 500 <= sample["api_wait_ms"] < sample["duration_ms"]
    if steps[0] == ApiError(429, "rate limited", retry_after=1):
        assert sample["api_wait_ms"] >= 950


@pytest.mark.parametrize("fault", ["cut", "invalid", "error"])
def test_a_broken_stream_the_cli_asks_again_for_is_the_agents_trial(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """A stream cut mid-message, an SSE event that is not JSON, an `event: error` in a 200 stream: the
    CLI asks again (with a retry message or without, depending on where the stream broke). Its usage
    may then also count the broken reply (its start, as the API reported it, and the CLI's own count
    of its partial output): what was served, never less than the answer's."""
    bench(pytester)
    model = serve(api, [BrokenStream(HELLO, fault), HELLO], monkeypatch)
    sitting(pytester, "--bench-trials", "1").assert_outcomes(passed=1)
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"], sample["turns"]) == ("scored", "pass", 1)
    assert len(model.requests) == 2
    measured, reported = sample["usage"]["total"], total(model)
    assert all(measured[name] >= reported[name] for name in reported)


# -------------------------------------------------------------- faults that end the trial


@pytest.mark.slow
def test_500_on_every_request_is_an_api_error_at_the_backstop_never_hung(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(pytester)
    serve(api, [Repeat(ApiError(500, "internal error"))], monkeypatch)
    result = sitting(pytester, "--bench-trials", "1", "--bench-wall-clock-ms", "5000")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["model API error: HTTP 500 server_error on * attempts, still failing when the backstop was reached; *"])
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"]) == ("error", None)
    fault = sample["api_error"]
    assert (fault["kind"], fault["status"], fault["error"]) == ("failing", 500, "server_error")
    assert fault["attempts"] >= 3  # the CLI's schedule: 0, 0.6, 1.8, 4.0 s
    assert f"on {fault['attempts']} attempts, still failing when the backstop was reached" in sample["reason"]
    assert sample["final_answer"] == "" and sample["turns"] == 0 and sample["usage"]["total"] is None
    assert sample["api_wait_ms"] >= 1500
    events = transcript(pytester, sample)
    retries = [e for e in events if e["kind"] == "system" and e["subtype"] == "api_retry"]
    assert len(retries) == sample["api_retries"] >= 3 and retries[0]["data"]["error_status"] == 500
    assert [e["fault"] for e in events if e["kind"] == "api_fault"] == ["failing"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("step", "attempts", "ended"),
    [
        pytest.param(ApiError(401, "invalid x-api-key"), 3, "the trial was ended at once", id="401"),
        pytest.param(ApiError(401, "invalid x-api-key", should_retry=False), 1, "the CLI gave up", id="401-no-retry"),
        pytest.param(ApiError(403, "forbidden"), 1, "the CLI gave up", id="403"),
    ],
)
def test_refused_credentials_end_the_trial_and_stop_the_sitting_after_it(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch, step: ApiError, attempts: int, ended: str
) -> None:
    bench(pytester)
    model = serve(api, [Repeat(step)], monkeypatch)
    started = time.monotonic()
    result = sitting(pytester, "--bench-trials", "3")
    elapsed = time.monotonic() - started
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    (sample,) = samples(pytester)  # trials 2 and 3 never ran
    assert sample["api_error"] == {"kind": "credentials", "status": step.status, "error": "authentication_failed",
                                   "attempts": attempts}  # fmt: skip
    assert sample["reason"].startswith(f"model API refused the credentials: HTTP {step.status} authentication_failed "
                                       f"on {attempts} attempt")  # fmt: skip
    assert sample["reason"].endswith(ended)
    assert len(model.requests) == attempts
    # One message on what to fix, in the sitting's summary; pytest's own line names the cause.
    result.stdout.fnmatch_lines([
        f"the sitting stopped: the model API refused the credentials in bare-say-hello-t1 (HTTP {step.status} "
        f"authentication_failed on {attempts} attempt*): no trial of this sitting can succeed; check the credentials "
        "the CLI is given: ANTHROPIC_API_KEY (API users), CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` "
        "(subscription users), or ANTHROPIC_AUTH_TOKEN with ANTHROPIC_BASE_URL (a gateway); 2 planned trial(s) did "
        "not run (their numbers stay unused)",
        "*! Interrupted: benchcell stops the sitting: the model API refused the credentials in bare-say-hello-t1 (HTTP "
        f"{step.status} authentication_failed on {attempts} attempt*) !*",
    ])  # fmt: skip
    assert result.stdout.str().count("ANTHROPIC_API_KEY") == 1
    assert elapsed < 25  # not the CLI's three minutes of retries
    # The numbers stay reserved and unused: the next sitting goes on after them.
    again = sitting(pytester, "--bench-trials", "1", "--collect-only", "-q")
    again.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t4"])


def test_an_api_that_stalls_mid_reply_is_an_error_at_api_stall_ms_not_at_the_backstop(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(pytester, api_stall_ms=2000)
    serve(api, [Stall(45, HELLO)], monkeypatch)
    started = time.monotonic()
    result = sitting(pytester, "--bench-trials", "1", "--bench-wall-clock-ms", "30000")
    assert time.monotonic() - started < 20
    result.assert_outcomes(errors=1)
    (sample,) = samples(pytester)
    assert sample["api_error"] == {"kind": "stalled", "status": None, "error": "stall", "attempts": 1}
    assert sample["reason"].startswith("model API stalled: no byte for 2000 ms mid-reply ([bench] api_stall_ms)")
    assert 2000 <= sample["duration_ms"] < 8000
    # The reply it cut off is no turn, and its transcript says it was incomplete.
    assert sample["turns"] == 0 and sample["final_answer"] == ""
    events = transcript(pytester, sample)
    (response,) = [e for e in events if e["kind"] == "model_response"]
    assert response["complete"] is False and response["stop_reason"] is None
    assert [e["stall_ms"] for e in events if e["kind"] == "api_stall"] == [2000]


def test_a_stream_silent_past_the_bound_when_the_backstop_fires_is_a_stall_and_stops_the_sitting(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's sitting scaled down: api_stall_ms = 8000 (the bound at the backstop is a quarter, 2 s),
    a backstop of 4 s, streams that stop after their first delta for 45 s. The watch never fires (8 s);
    the backstop does, with the request silent for over 2 s: the API stalled, an error, and two in a row
    stop the sitting like any API failure."""
    bench(pytester, api_stall_ms=8000, stop_after_api_failures=2)
    serve(api, [Repeat(Stall(45, HELLO))], monkeypatch)
    result = sitting(pytester, "--bench-trials", "3", "--bench-wall-clock-ms", "4000")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=2)
    first, second = samples(pytester)
    for sample in (first, second):
        assert sample["api_error"] == {"kind": "stalled", "status": None, "error": "stall", "attempts": 1}
        assert sample["reason"].startswith("model API stalled: no byte for ")
        assert " ms mid-reply when the wall-clock backstop was reached (a stall from 2000 ms at the backstop" in sample["reason"]
        assert sample["turns"] == 0 and sample["outcome"] is None
    result.stdout.fnmatch_lines([
        "the sitting stopped: 2 trials in a row ended by the model API (the last, bare-say-hello-t2: stall on 1 "
        "attempt): [[]bench] stop_after_api_failures = 2; *1 planned trial(s) did not run*",
    ])  # fmt: skip


def test_a_model_that_streams_slowly_until_the_backstop_stays_hung(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bounds, a model whose every reply pauses 1 s (under the 2 s bound) and then calls a
    tool, again and again: the backstop ends the agent's trial, hung, as before."""
    bench(pytester, api_stall_ms=8000)
    serve(api, [Repeat(Stall(1, ToolUse("Bash", {"command": "true"})))], monkeypatch)
    result = sitting(pytester, "--bench-trials", "1", "--bench-wall-clock-ms", "4000")
    result.assert_outcomes(failed=1)
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"], sample["api_error"]) == ("scored", "hung", None)
    assert sample["reason"] == "wall-clock backstop of 4000 ms reached" and sample["turns"] >= 1


@pytest.mark.slow
def test_a_slow_model_that_never_falls_silent_for_api_stall_ms_is_no_stall(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three pauses of 1.2 s each (3.6 s of waiting in all) under api_stall_ms = 2000: a model that
    is slow, not an API that stopped."""
    bench(pytester, api_stall_ms=2000)
    serve(api, [Stall(1.2, ToolUse("Bash", {"command": "echo hello"})), Stall(1.2, ToolUse("Bash", {"command": "true"})),
                Stall(1.2, HELLO)], monkeypatch)  # fmt: skip
    sitting(pytester, "--bench-trials", "1").assert_outcomes(passed=1)
    (sample,) = samples(pytester)
    assert sample["turns"] == 3 and sample["api_error"] is None and sample["api_wait_ms"] == 0


@pytest.mark.slow
def test_a_reply_cut_by_the_backstop_is_incomplete_and_no_turn(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop falls inside a reply after the API recovered from a 529: the agent's trial (hung),
    its reason says how much of it the API's retries took, and the reply it cut is no turn."""
    bench(pytester)
    serve(api, [ApiError(529), ToolUse("Bash", {"command": "echo one"}), Stall(30, HELLO)], monkeypatch)
    result = sitting(pytester, "--bench-trials", "1", "--bench-wall-clock-ms", "4000")
    result.assert_outcomes(failed=1)
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"], sample["turns"], sample["api_error"]) == ("scored", "hung", 1, None)
    waited = sample["api_wait_ms"] / 1000
    assert sample["reason"] == f"wall-clock backstop of 4000 ms reached ({waited:.1f} s of it waiting on the model API's retries)"
    assert sample["api_retries"] == 1 and waited > 0
    responses = [e for e in transcript(pytester, sample) if e["kind"] == "model_response"]
    assert [(r["complete"], r["stop_reason"]) for r in responses] == [(True, "tool_use"), (False, None)]


@pytest.mark.slow
def test_replies_without_usage_are_stored_as_unknown_and_a_budget_stops_the_sitting(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(pytester)
    serve(api, [Repeat(NoUsage(HELLO))], monkeypatch)
    result = sitting(pytester, "--bench-trials", "3", "--bench-budget", "3000")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(passed=1)
    (sample,) = samples(pytester)
    assert (sample["status"], sample["outcome"], sample["turns"]) == ("scored", "pass", 1)
    assert sample["usage"] == {"total": None, "by_model": {}}  # unknown, never 0/0/0/0
    result.stdout.fnmatch_lines([
        "the sitting stopped: the model API reported no usage for the replies of bare-say-hello-t1: --bench-budget "
        "cannot be kept unmetered *",
        "spent: 0 cost-equivalent tokens this sitting of a budget of 3,000, not counting 1 trial(s) whose replies came "
        "without usage",
    ])  # fmt: skip
    # Without a budget the sitting runs on, each trial's usage unknown.
    sitting(pytester, "--bench-trials", "2").assert_outcomes(passed=2)
    assert [s["usage"]["total"] for s in samples(pytester)] == [None, None, None]


@pytest.mark.slow
def test_n_trials_in_a_row_the_api_ended_stop_the_sitting(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(pytester, stop_after_api_failures=2)
    serve(api, [HELLO, ApiError(529), ApiError(529), ApiError(529), ApiError(529), ApiError(529), ApiError(529),
                Repeat(ApiError(500))], monkeypatch)  # fmt: skip
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")  # each trial gives up after two attempts
    result = sitting(pytester, "--bench-trials", "5")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(passed=1, errors=2)
    assert [s["api_error"] and s["api_error"]["kind"] for s in samples(pytester)] == [None, "failing", "failing"]
    result.stdout.fnmatch_lines([
        "the sitting stopped: 2 trials in a row ended by the model API (the last, bare-say-hello-t3: HTTP 529 "
        "overloaded on 2 attempts): [bench] stop_after_api_failures = 2; run the sitting again once the API answers; "
        "2 planned trial(s) did not run (their numbers stay unused)",
    ])  # fmt: skip


# -------------------------------------------------------------- under xdist


@pytest.mark.slow
def test_under_xdist_refused_credentials_stop_every_worker_after_its_first_trial(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(pytester)
    serve(api, [Repeat(ApiError(401, "invalid x-api-key", should_retry=False))], monkeypatch)
    result = sitting(pytester, "--bench-trials", "8", "-n", "2")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    recorded = samples(pytester)
    assert 1 <= len(recorded) <= 2  # the trials both workers had started; none after
    assert {s["api_error"]["kind"] for s in recorded} == {"credentials"}
    result.stdout.fnmatch_lines([
        "the sitting stopped: the model API refused the credentials in bare-say-hello-t* (HTTP 401 authentication_failed "
        f"on 1 attempt): no trial of this sitting can succeed; *; {8 - len(recorded)} planned trial(s) did not run *",
    ])  # fmt: skip
    assert not list((pytester.path / ".benchcell-spool").glob("*.stop"))  # the stop note is gone with the sitting


@pytest.mark.slow
def test_under_xdist_the_controller_stops_the_sitting_on_failures_across_its_workers(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop_after_api_failures = 3 and two workers: the controller counts the failures of both in the
    order they arrive, so it stops the sitting while each worker has seen fewer than three (a worker
    stops at its own third at the latest). Of 24 trials at most 6 run."""
    bench(pytester, stop_after_api_failures=3)
    serve(api, [Repeat(ApiError(500, "internal error"))], monkeypatch)
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")  # each trial gives up after two attempts
    result = sitting(pytester, "--bench-trials", "24", "-n", "2")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    recorded = samples(pytester)
    assert 3 <= len(recorded) <= 6
    assert all(s["api_error"]["kind"] == "failing" for s in recorded)
    result.stdout.fnmatch_lines([
        "the sitting stopped: 3 trials in a row ended by the model API (the last, bare-say-hello-t*: HTTP 500 "
        f"server_error on 2 attempts): *; {24 - len(recorded)} planned trial(s) did not run *",
    ])  # fmt: skip


STOP_NOTE = """
def pytest_benchcell_update_sample(trial, sample):
    # As the controller does when it stops the sitting (remote.stop_file), after this worker's first trial.
    import pathlib
    note = pathlib.Path(TEARDOWN_LOG).parent / ".benchcell-spool" / (sample["sitting"] + ".stop")
    note.parent.mkdir(exist_ok=True)
    partial = note.with_name(note.name + ".partial")  # whole, then renamed, as the controller writes it
    partial.write_text("benchcell stops the sitting: a note of the controller")
    partial.replace(note)
"""


@pytest.mark.slow
def test_under_xdist_a_worker_runs_no_trial_once_the_controller_noted_the_stop(
    pytester: pytest.Pytester, api: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials xdist already handed to a worker do not run once the stop note is there: of 24 trials
    (three handed to each worker at first), only those already running when it appeared."""
    write_bench(pytester, BENCH_TOML, CONFTEST + STOP_NOTE)
    serve(api, [Repeat(HELLO)], monkeypatch)
    result = sitting(pytester, "--bench-trials", "24", "-n", "2")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    recorded = samples(pytester)
    assert 1 <= len(recorded) <= 2 and all(s["outcome"] == "pass" for s in recorded)
    result.stdout.fnmatch_lines([f"the sitting stopped: a note of the controller; {24 - len(recorded)} planned trial(s) did not run *"])
