"""The pure core of model API faults: the ApiLog as agent.py feeds it, classify, and what a sitting
does with the verdicts (sitting.SittingStop). The sequences are those the CLI 2.1.332 sent in the
end-to-end tests (tests/test_api_faults_e2e.py): times in ms since the conversation began."""

from __future__ import annotations

import pytest

from pytest_benchcell.api_faults import (
    CREDENTIAL_ATTEMPTS,
    ApiFault,
    ApiLog,
    RunEnd,
    classify,
    error_category,
)
from pytest_benchcell.config import BenchConfigError, load_bench
from pytest_benchcell.sitting import STOP_PREFIX, SittingStop, stop_line, unmetered
from pytest_benchcell.store import agent_ms


def reply(log: ApiLog, at: int, message_id: str, *, usage: bool = True, complete: bool = True) -> None:
    """One streamed reply as the CLI passes it on: request, start, a delta, the assistant message, stop."""
    log.request_began(at)
    log.stream_event(at + 50, "message_start", message_id)
    log.stream_event(at + 60, "content_block_delta")
    log.reply(message_id, usage_reported=usage)
    if complete:
        log.stream_event(at + 70, "message_stop")


def retries(log: ApiLog, status: int | None, error: str, schedule: list[tuple[int, int]]) -> None:
    for attempt, (at, delay) in enumerate(schedule, start=1):
        log.retry(at, attempt, status, error, delay)


FIVE_HUNDRED = [(100, 607), (720, 1198), (1930, 2215), (4160, 4021)]  # measured: 0.6, 1.2, 2.2, 4.0 s waits


# -------------------------------------------------------------- classify


def test_a_run_that_answered_is_no_fault_and_its_replies_are_its_turns() -> None:
    log = ApiLog()
    reply(log, 0, "msg_1")
    reply(log, 1000, "msg_2")
    assert classify(log, RunEnd(2000)) is None
    assert log.completed_replies == ["msg_1", "msg_2"] and log.usage_unreported == 0 and log.wait_ms(2000) == 0


def test_the_backstop_reached_while_the_cli_retries_a_500_is_the_apis_failure() -> None:
    log = ApiLog()
    log.request_began(0)
    retries(log, 500, "server_error", FIVE_HUNDRED)
    fault = classify(log, RunEnd(6000, backstop=True, is_error=True, terminal_reason="aborted_streaming"))
    assert fault == ApiFault("failing", 500, "server_error", 4, "still failing when the backstop was reached")
    assert fault.reason == (
        "model API error: HTTP 500 server_error on 4 attempts, still failing when the backstop was reached; "
        "not the agent's doing"
    )
    assert log.wait_ms(6000) == 607 + 1198 + 2215 + (6000 - 4160)  # the last wait was cut by the end


def test_attempts_count_the_attempt_after_the_last_retry_once_it_began() -> None:
    log = ApiLog()
    retries(log, 500, "server_error", FIVE_HUNDRED)
    assert log.attempts(4160 + 4020) == 4 and log.attempts(4160 + 4021) == 5
    assert log.attempts(5000, gave_up=True) == 5


def test_the_backstop_after_the_api_recovered_is_the_agents_hung_trial() -> None:
    log = ApiLog()
    log.request_began(0)
    retries(log, 529, "overloaded", [(100, 600), (710, 1100)])
    reply(log, 1900, "msg_1", complete=False)  # the model streams, slowly, when the backstop comes
    for at in range(3960, 20_000, 2000):  # a delta every 2 s
        log.stream_event(at, "content_block_delta")
    log.interrupted(20_000)
    assert classify(log, RunEnd(20_000, backstop=True, is_error=True)) is None
    assert log.wait_ms(20_000) == 1700 and log.completed_replies == []  # the reply it cut is no turn


def test_the_cli_giving_up_names_the_status_the_apis_category_and_every_attempt() -> None:
    log = ApiLog()
    log.request_began(0)
    retries(log, 529, "overloaded", [(100, 600)])
    log.failed_for_good("server_error")  # the synthetic message's coarser category
    fault = classify(log, RunEnd(900, is_error=True, terminal_reason="api_error", api_error_status=529))
    assert fault == ApiFault("failing", 529, "overloaded", 2, "the CLI gave up")


@pytest.mark.parametrize("status", [401, 403])
def test_a_credential_refusal_the_cli_gives_up_on_at_once_is_a_credentials_fault(status: int) -> None:
    log = ApiLog()
    log.request_began(0)
    log.failed_for_good("authentication_failed")
    fault = classify(log, RunEnd(120, is_error=True, terminal_reason="api_error", api_error_status=status))
    assert fault == ApiFault("credentials", status, "authentication_failed", 1, "the CLI gave up")
    assert fault.reason == f"model API refused the credentials: HTTP {status} authentication_failed on 1 attempt, the CLI gave up"


def test_credentials_refused_again_and_again_end_the_run_at_once() -> None:
    log = ApiLog()
    log.request_began(0)
    for attempt in range(1, CREDENTIAL_ATTEMPTS + 1):
        assert not log.credentials_refused()
        log.retry(attempt * 600, attempt, 401, "authentication_failed", 600 * attempt)
    assert log.credentials_refused()
    log.refused_ms = 1900
    log.interrupted(1900)
    fault = classify(log, RunEnd(1950, is_error=True, terminal_reason="aborted_streaming"))
    assert fault == ApiFault("credentials", 401, "authentication_failed", CREDENTIAL_ATTEMPTS, "the trial was ended at once")


def test_a_reply_between_refusals_starts_the_count_again() -> None:
    log = ApiLog()
    retries(log, 401, "authentication_failed", [(0, 600), (700, 1200)])
    reply(log, 2000, "msg_1")
    log.retry(3000, 1, 401, "authentication_failed", 600)
    assert not log.credentials_refused()


def test_an_old_retry_the_api_recovered_from_does_not_count_for_a_later_failure() -> None:
    log = ApiLog()
    log.request_began(0)
    retries(log, 429, "rate_limit", [(100, 1041)])
    reply(log, 1200, "msg_1")
    log.request_began(3000)
    log.failed_for_good("authentication_failed")
    fault = classify(log, RunEnd(3100, is_error=True, terminal_reason="api_error", api_error_status=401))
    assert fault is not None and (fault.kind, fault.attempts) == ("credentials", 1)
    assert log.wait_ms(3100) == 1041


def test_the_turn_cap_and_an_interrupt_are_no_api_fault() -> None:
    log = ApiLog()
    reply(log, 0, "msg_1")
    assert classify(log, RunEnd(500, is_error=True, terminal_reason="max_turns")) is None
    assert classify(log, RunEnd(500, backstop=True, is_error=True, terminal_reason="aborted_streaming")) is None


def test_a_status_the_cli_did_not_name_gets_its_category() -> None:
    assert [error_category(s) for s in (529, 429, 401, 403, 500, 408, 400, None)] == [
        "overloaded", "rate_limit", "authentication_failed", "authentication_failed", "server_error", "server_error",
        "unknown", "unknown",
    ]  # fmt: skip


# -------------------------------------------------------------- the stall watch


def test_the_stall_watch_runs_only_while_a_request_is_open() -> None:
    log = ApiLog(stall_ms=2000)
    assert log.stall_due_ms() is None  # before any request: the CLI starts, the agent's tools run
    log.request_began(1000)
    assert log.stall_due_ms() == 3000  # no first byte for 2 s is a stall too
    log.stream_event(1500, "message_start", "msg_1")
    log.stream_event(2500, "content_block_delta")
    assert log.stall_due_ms() == 4500  # every event of the API pushes it on
    log.stream_event(2600, "message_stop")
    assert log.stall_due_ms() is None  # answered: the tool call that follows is the agent's time


def test_a_retry_wait_is_no_silence_of_the_api() -> None:
    log = ApiLog(stall_ms=2000)
    log.request_began(0)
    log.retry(100, 1, 500, "server_error", 34_000)
    assert log.stall_due_ms() == 100 + 34_000 + 2000


def test_a_stall_is_classified_with_where_it_happened() -> None:
    log = ApiLog(stall_ms=2000)
    log.request_began(800)
    log.stream_event(900, "message_start", "msg_1")
    log.stream_event(910, "content_block_delta")
    log.stalled_ms = 2910
    log.interrupted(2910)
    log.stream_event(2950, "message_stop")  # made up by the CLI after the interrupt: no sign of the API
    log.reply("msg_1", usage_reported=True)
    fault = classify(log, RunEnd(3000, is_error=True, terminal_reason="aborted_streaming"))
    assert fault is not None and (fault.kind, fault.status, fault.error, fault.attempts) == ("stalled", None, "stall", 1)
    assert fault.reason == (
        "model API stalled: no byte for 2000 ms mid-reply ([bench] api_stall_ms), from 0.9 s into the conversation "
        "(1 attempt); not the agent's doing"
    )
    assert log.completed_replies == [] and log.cut == {"msg_1"}


def test_the_bound_of_silence_at_the_backstop_is_a_quarter_of_api_stall_ms_at_most_15_s() -> None:
    assert ApiLog().backstop_silence_ms == 15_000  # api_stall_ms at its default, 60 s
    assert ApiLog(stall_ms=8000).backstop_silence_ms == 2000
    assert ApiLog(stall_ms=600_000).backstop_silence_ms == 15_000


@pytest.mark.parametrize(
    ("streamed", "where"), [(True, "mid-reply"), (False, "before the reply began")], ids=["mid-reply", "no-first-byte"]
)
def test_a_request_silent_past_the_bound_when_the_backstop_fires_is_the_apis_stall(streamed: bool, where: str) -> None:
    """The issue's sitting: backstop 20 s, api_stall_ms 60 s, a stream that stops after its first delta
    (or a request that never gets its first byte): the API stalled, the watch had not yet fired."""
    log = ApiLog()
    reply(log, 0, "msg_1")  # an earlier reply, then a tool ran
    log.request_began(3000)
    if streamed:
        log.stream_event(3400, "message_start", "msg_2")
        log.stream_event(3500, "content_block_delta")
    log.interrupted(20_000)
    fault = classify(log, RunEnd(20_400, backstop=True, is_error=True, terminal_reason="aborted_streaming"))
    assert fault is not None and fault.as_dict() == {"kind": "stalled", "status": None, "error": "stall", "attempts": 1}
    silent = 20_000 - (3500 if streamed else 3000)
    assert fault.reason == (
        f"model API stalled: no byte for {silent} ms {where} when the wall-clock backstop was reached (a stall from "
        f"15000 ms at the backstop: a quarter of [bench] api_stall_ms, at most 15 s), from {(20_000 - silent) / 1000:.1f} "
        "s into the conversation (1 attempt); not the agent's doing"
    )
    # The sitting's stop rule counts it as the API's failure, as it does the watch's stall.
    stop = SittingStop(after_api_failures=2)
    assert stop.record("t1", "error", fault.as_dict()) is None
    assert stop.record("t2", "error", fault.as_dict()) is not None and stop.api_failures_in_row == 2


@pytest.mark.parametrize(
    ("last_sign", "open_request"),
    [(5001, True), (19_000, True), (1000, False)],
    ids=["silent-just-under-the-bound", "streaming-slowly", "a-tool-running"],
)
def test_the_backstop_is_the_agents_hang_unless_an_open_request_was_silent_past_the_bound(
    last_sign: int, open_request: bool
) -> None:
    log = ApiLog()
    reply(log, 0, "msg_1", complete=not open_request)
    if open_request:
        log.stream_event(last_sign, "content_block_delta")
    else:
        log.stream_event(last_sign, "message_stop")  # answered: the agent's tool runs until the backstop
    log.interrupted(20_000)
    assert classify(log, RunEnd(20_100, backstop=True, is_error=True)) is None
    assert classify(log, RunEnd(20_100)) is None  # and no backstop, no stall of this kind


def test_nothing_new_counts_after_the_interrupt() -> None:
    log = ApiLog()
    reply(log, 0, "msg_1")
    log.interrupted(1000)
    log.request_began(1100)
    log.retry(1200, 1, 500, "server_error", 600)
    log.reply("msg_2", usage_reported=True)
    assert log.requests == 1 and log.retries == [] and log.completed_replies == ["msg_1"]


# -------------------------------------------------------------- usage and time


def test_a_reply_without_usage_leaves_the_usage_unknown() -> None:
    log = ApiLog()
    reply(log, 0, "msg_1")
    reply(log, 1000, "msg_2", usage=False)
    assert log.usage_unreported == 1


def test_the_agents_time_leaves_the_apis_waits_out() -> None:
    assert agent_ms({"duration_ms": 3200, "api_wait_ms": 2100}) == 1100
    assert agent_ms({"duration_ms": 3200}) == 3200  # a sample from before api_wait_ms
    assert agent_ms({"duration_ms": 3200, "api_wait_ms": 0}) == 3200
    assert agent_ms({"duration_ms": 100, "api_wait_ms": 5000}) == 100  # inconsistent: left as it is
    assert agent_ms({"duration_ms": None, "api_wait_ms": 5}) is None


def test_unmetered_means_replies_came_without_usage() -> None:
    assert unmetered({"usage": {"total": None}, "turns": 2})
    assert not unmetered({"usage": {"total": None}, "turns": 0})  # no reply, nothing spent
    assert not unmetered({"usage": {"total": {"fresh_input": 1}}, "turns": 2})


# -------------------------------------------------------------- the sitting's stop


FAILING = {"kind": "failing", "status": 500, "error": "server_error", "attempts": 4}


def test_refused_credentials_stop_the_sitting_at_once_with_what_to_fix() -> None:
    stop = SittingStop()
    headline = stop.record("a-t-t1", "error", {"kind": "credentials", "status": 401, "error": "authentication_failed",
                                               "attempts": 1})  # fmt: skip
    assert headline == f"{STOP_PREFIX}the model API refused the credentials in a-t-t1 (HTTP 401 authentication_failed on 1 attempt)"
    assert stop.reason is not None and "ANTHROPIC_API_KEY" in stop.reason and "CLAUDE_CODE_OAUTH_TOKEN" in stop.reason
    assert stop.record("a-t-t2", "scored", None) == headline  # once stopped, stopped


def test_n_api_failures_in_a_row_stop_it_and_a_scored_trial_breaks_the_row() -> None:
    stop = SittingStop(after_api_failures=3)
    assert stop.record("t1", "error", FAILING) is None
    assert stop.record("t2", "error", FAILING) is None
    assert stop.record("t3", "scored", None) is None  # the API answered in between
    assert stop.record("t4", "error", None) is None  # a provisioning error: neither counts nor breaks
    assert stop.record("t5", "error", FAILING) is None
    assert stop.record("t6", "invalid", None) is None
    for trial in ("t7", "t8"):
        assert stop.record(trial, "error", FAILING) is None
    headline = stop.record("t9", "error", {"kind": "stalled", "status": None, "error": "stall", "attempts": 1})
    assert headline == f"{STOP_PREFIX}3 trials in a row ended by the model API (the last, t9: stall on 1 attempt)"


def test_replies_without_usage_stop_a_budgeted_sitting_only() -> None:
    assert SittingStop().record("t1", "scored", None, unmetered=True) is None
    budgeted = SittingStop(budget=True)
    assert budgeted.record("t1", "scored", None, unmetered=True) == f"{STOP_PREFIX}the model API reported no usage for the replies of t1"
    assert budgeted.reason is not None and "--bench-budget cannot be kept unmetered" in budgeted.reason


def test_the_stop_line_says_what_did_not_run() -> None:
    assert stop_line("why", 8, 2) == "the sitting stopped: why; 6 planned trial(s) did not run (their numbers stay unused)"
    assert stop_line(f"{STOP_PREFIX}why", 2, 2) == "the sitting stopped: why"


# -------------------------------------------------------------- bench.toml


@pytest.mark.parametrize(
    ("line", "allowed"),
    [("api_stall_ms = 999", "a whole number >= 1000"), ("api_stall_ms = '60s'", "a whole number >= 1000"),
     ("stop_after_api_failures = 0", "a whole number >= 1")],
)  # fmt: skip
def test_the_api_fault_keys_are_validated(tmp_path, line: str, allowed: str) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(f'[bench]\nmodel = "m"\n{line}\n[arms.a]\ntools = ["Bash"]\n[tasks.t]\ntier = "read"\nintent = "x"\nrequired_facts = ["y"]\n')
    with pytest.raises(BenchConfigError) as raised:
        load_bench(path)
    key = line.split(" =")[0]
    assert f"[bench] {key}" in str(raised.value) and allowed in str(raised.value) and str(path) in str(raised.value)


def test_the_api_fault_keys_leave_the_conditions_alone(tmp_path) -> None:
    base = '[bench]\nmodel = "m"\n{}[arms.a]\ntools = ["Bash"]\n[tasks.t]\ntier = "read"\nintent = "x"\nrequired_facts = ["y"]\n'
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "bench.toml").write_text(base.format(""))
    (tmp_path / "b" / "bench.toml").write_text(base.format("api_stall_ms = 5000\nstop_after_api_failures = 9\n"))
    plain, tuned = load_bench(tmp_path / "a" / "bench.toml"), load_bench(tmp_path / "b" / "bench.toml")
    assert (plain.api_stall_ms, plain.stop_after_api_failures) == (60_000, 3)
    assert (tuned.api_stall_ms, tuned.stop_after_api_failures) == (5000, 9)
    assert plain.definition("a", "t").conditions == tuned.definition("a", "t").conditions


# -------------------------------------------------------------- reports


@pytest.mark.parametrize("index", [True, False], ids=["index", "parsed"])
def test_reports_show_the_agents_time_without_the_apis_waits(tmp_path, index: bool) -> None:
    from sample_factory import cell_samples, write_samples

    from pytest_benchcell.report import ReportSettings, build_report
    from pytest_benchcell.store import Cell

    samples = cell_samples("a", "t", 3, duration_ms=3000)
    samples[0]["api_wait_ms"] = 2000  # a 429 with retry-after: 2 s of the 3 s were the API's
    store = write_samples(tmp_path, samples)
    if not index:
        store.index_path(Cell("real", "a", "t")).unlink()  # the same figures from a parse of the samples
    report = build_report(store, ReportSettings())
    (cell,) = report.cells
    assert cell.duration_s.mean == pytest.approx((1.0 + 3.0 + 3.0) / 3)
