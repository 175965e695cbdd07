"""A declared horizon ([bench] horizon_pairs): the group-sequential test behind the claims, its record in
the samples, the refusal of a change once pairs exist, the report's settings checked against the store,
and `--bench-fill decide` planning no trial past it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from benches import CONFTEST, write_bench
from sample_factory import cell_samples, write_samples
from test_decide import DECIDE_BENCH, SELECT, store_cells

from pytest_benchcell import statistics as stats
from pytest_benchcell.allocation import plan_decisions
from pytest_benchcell.config import BenchConfigError, parse_bench
from pytest_benchcell.horizon import HORIZON_KEY, horizon_conflict, newest_sample, recorded_horizons
from pytest_benchcell.report import ReportSettings, build_report
from pytest_benchcell.report.model import ReportError
from pytest_benchcell.report.verdict_text import reading
from pytest_benchcell.statistics import group_sequential as gs

SIGMA = math.sqrt(math.log1p(0.3**2))  # trial noise cv 0.3


# -- the test ----------------------------------------------------------------------------------------------
def test_the_spending_function_is_obrien_fleming_type_and_spends_the_share_at_the_horizon() -> None:
    assert gs.spent(0.0, 0.0125) == 0.0
    assert gs.spent(1.0, 0.0125) == pytest.approx(0.0125)
    assert gs.spent(2.0, 0.0125) == pytest.approx(0.0125)  # past the horizon nothing more is spent
    assert gs.spent(0.3, 0.0125) < 0.0125 * 0.3 / 10  # little spent early: the O'Brien-Fleming shape
    assert gs.boundary(80, 80, 0.0125) == pytest.approx(2.4977, abs=1e-4)
    assert gs.boundary(20, 80, 0.0125) == pytest.approx(2 * gs.boundary(80, 80, 0.0125))
    assert gs.boundary(160, 80, 0.0125) == gs.boundary(80, 80, 0.0125)


def test_the_success_test_is_the_exact_sign_test() -> None:
    assert gs.sign_tail(12, 12) == 2.0**-12
    assert gs.sign_tail(0, 7) == 1.0
    assert gs.sign_tail(8, 10) == pytest.approx((45 + 10 + 1) / 1024)
    assert gs.t_tail(gs.t_critical(1e-6, 9), 9) == pytest.approx(1e-6, rel=1e-6)


def test_past_the_horizon_the_verdict_is_frozen() -> None:
    family = stats.Family.of(1, horizon=24)
    rng = random.Random(5)
    noise = [rng.gauss(0, SIGMA) - rng.gauss(0, SIGMA) for _ in range(24)]
    outcomes = [((True, 1000.0), (True, 1000.0 * math.exp(v))) for v in noise]
    at_horizon = stats.decide(outcomes, metric="tokens", family=family, margin=None, tasks=8)
    later = outcomes + [((True, 1000.0), (True, 3000.0))] * 40  # b three times dearer, after the horizon
    past = stats.decide(later, metric="tokens", family=family, margin=None, tasks=8)
    assert at_horizon.decision == past.decision == stats.UNDECIDED
    assert (past.pairs, past.interval, past.e_value) == (24, at_horizon.interval, at_horizon.e_value)
    assert "24 of the 24 pairs of its horizon read; frozen at its horizon" in reading(past, "a", "b")


@pytest.mark.parametrize("ratio", [1.0, 1.2, 1.4])
def test_a_token_claim_under_a_horizon_always_sits_beside_its_own_interval(ratio: float) -> None:
    rng = random.Random(int(10 * ratio))
    family = stats.Family.of(1, horizon=80)
    claims = 0
    for _ in range(30):
        values = [math.log(ratio) + rng.gauss(0, SIGMA) - rng.gauss(0, SIGMA) for _ in range(80)]
        for read in range(24, 81, 8):
            found = gs.sequential_tokens(values[:read], horizon=80, level=family.level)
            low, high = found.interval
            assert bool(found.direction) == (low > 0 or high < 0)
            if found.direction:
                claims += 1
                assert (low > 0) == (found.direction > 0)
    assert claims or ratio == 1.0


def test_under_a_horizon_the_level_holds_read_after_every_sitting_and_power_rises() -> None:
    # 8 tasks x 10 sittings, read after sittings 3 to 10, one pair of arms (two metrics: 0.025 a metric).
    rng = random.Random(41)
    histories = 300
    wrong = claimed_anytime = claimed_horizon = 0
    horizon, anytime = stats.Family.of(1, horizon=80), stats.Family.of(1)
    for _ in range(histories):
        null = [rng.gauss(0, SIGMA) - rng.gauss(0, SIGMA) for _ in range(80)]
        wrong += any(gs.sequential_tokens(null[:n], horizon=80, level=horizon.level).direction for n in range(24, 81, 8))
        dearer = [[((True, 1000.0), (True, 1200.0 * math.exp(rng.gauss(0, SIGMA) - rng.gauss(0, SIGMA))))] for _ in range(80)]
        outcomes = [pair[0] for pair in dearer]
        claimed_horizon += stats.decide(outcomes, metric="tokens", family=horizon, margin=None, tasks=8).decision == stats.DIFFERS
        claimed_anytime += stats.decide(outcomes, metric="tokens", family=anytime, margin=None, tasks=8).decision == stats.DIFFERS
    assert wrong / histories <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / histories)
    assert claimed_horizon / histories >= 0.86 > claimed_anytime / histories


# -- the bench, the record, the refusal -------------------------------------------------------------------
def test_the_bench_reads_horizon_pairs_and_refuses_a_bad_one(tmp_path: Path) -> None:
    document = {
        "bench": {"model": "m", "horizon_pairs": 80}, "arms": {"a": {"tools": ["Read"]}},
        "tasks": {"t": {"tier": "read", "intent": "x", "required_facts": ["y"]}},
    }  # fmt: skip
    assert parse_bench(tmp_path / "bench.toml", document).horizon_pairs == 80
    del document["bench"]["horizon_pairs"]
    assert parse_bench(tmp_path / "bench.toml", document).horizon_pairs is None
    for bad in (1, "80", 2.5, True):
        document["bench"]["horizon_pairs"] = bad
        with pytest.raises(BenchConfigError, match=r"bench.toml.*horizon_pairs.*a whole number >= 2"):
            parse_bench(tmp_path / "bench.toml", document)


def test_a_conflict_names_the_cell_and_the_recorded_horizon() -> None:
    assert horizon_conflict(80, {"a x t": 80, "b x t": 80}) is None
    assert horizon_conflict(None, {}) is None
    assert horizon_conflict(80, {"a x t": None}) == "the store's samples were recorded with no horizon (newest trial of a x t)"
    assert horizon_conflict(None, {"a x t": 40}) == "the store's samples were recorded with horizon_pairs = 40 (newest trial of a x t)"


def with_horizon(bench: str, pairs: int) -> str:
    return bench.replace('comparisons = [["shell", "bare"]]', f'comparisons = [["shell", "bare"]]\nhorizon_pairs = {pairs}')


def test_a_sitting_records_the_horizon_in_every_sample(pytester: pytest.Pytester) -> None:
    write_bench(pytester, with_horizon(DECIDE_BENCH, 40), CONFTEST)
    result = pytester.runpytest("--bench-arm", "shell,bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1")
    assert result.ret == pytest.ExitCode.OK
    for arm in ("shell", "bare"):
        sample = newest_sample(pytester.path / "results" / "scripted" / arm / "say-hello.jsonl")
        assert sample is not None and sample["provenance"][HORIZON_KEY] == 40


def test_a_horizon_declared_once_pairs_exist_is_refused(pytester: pytest.Pytester) -> None:
    write_bench(pytester, with_horizon(DECIDE_BENCH, 40), CONFTEST)
    store_cells(pytester, {"shell": {"count": 3}, "bare": {"count": 3}})  # recorded without a horizon
    result = pytester.runpytest(*SELECT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*bench.toml: [[]bench[]] horizon_pairs: horizon_pairs = 40 is declared, but the store's samples were recorded "
        "with no horizon (newest trial of bare x say-hello) in *results; allowed: the horizon the samples were recorded "
        "with (a horizon is fixed before the first pair: a new horizon is a new analysis, so give it a new store with "
        "[[]bench[]] store)*",
    ])  # fmt: skip
    assert "Traceback" not in result.stderr.str()


def test_a_rescore_appended_after_the_last_trial_keeps_the_cells_recorded_horizon(tmp_path: Path) -> None:
    """A rescore record is not a trial: it carries no horizon, and a cell whose newest line is one still
    speaks with its newest trial's horizon (a sitting after `--bench-rescore` is not refused)."""
    samples = cell_samples("a", "t", 3)
    for sample in samples:
        sample["provenance"][HORIZON_KEY] = 80
    store = write_samples(tmp_path / "results", samples)
    store.append({**samples[-1], "id": "r" * 32, "status": "rescore", "rescore_of": samples[-1]["id"],
                  "outcome": "incorrect", "reason": "rescored", "provenance": {"scoring": "fp-new"}})  # fmt: skip
    assert recorded_horizons([store], "real") == {"a x t": 80}
    assert build_report(store, ReportSettings(horizon_pairs=80, resamples=100)).settings.horizon_pairs == 80


def test_the_reports_settings_are_checked_against_the_recorded_horizon(tmp_path: Path) -> None:
    samples = cell_samples("a", "t", 3) + cell_samples("b", "t", 3, minutes=10)
    for sample in samples:
        sample["provenance"][HORIZON_KEY] = 80
    store = write_samples(tmp_path / "results", samples)
    assert build_report(store, ReportSettings(horizon_pairs=80, resamples=100)).settings.horizon_pairs == 80
    with pytest.raises(ReportError, match=r"settings have no horizon_pairs, but the store's samples were recorded "
                                          r"with horizon_pairs = 80 \(newest trial of a x t\)"):  # fmt: skip
        build_report(store, ReportSettings(resamples=100))
    with pytest.raises(ReportError, match="horizon_pairs must be a whole number >= 2 or None, got 0"):
        build_report(store, ReportSettings(horizon_pairs=0))


def test_the_report_under_a_horizon_names_its_test(tmp_path: Path) -> None:
    samples = []
    for index, task in enumerate(("t1", "t2", "t3")):
        samples += cell_samples("a", task, 4, minutes=100 * index, tokens=(1000, 0, 0, 0))
        samples += cell_samples("b", task, 4, minutes=100 * index + 50, tokens=(4000, 0, 0, 0), outcome="incorrect")
    for sample in samples:
        sample["provenance"][HORIZON_KEY] = 12
    document = build_report(write_samples(tmp_path / "results", samples), ReportSettings(horizon_pairs=12, resamples=100)).to_dict()
    pairs = {c["metric"]: c["pairs"][0] for c in json.loads(json.dumps(document))["comparisons"]}
    assert pairs["success"]["within_tasks"]["method"].startswith("group-sequential exact sign test")
    assert pairs["cost_equivalent"]["within_tasks"]["method"].startswith("group-sequential t test")
    assert pairs["success"]["decision"] == pairs["cost_equivalent"]["decision"] == "differs"
    assert pairs["cost_equivalent"]["within_tasks"]["high"] < 1.0


# -- the plan ----------------------------------------------------------------------------------------------
def test_decide_plans_no_trial_past_the_horizon() -> None:
    rng = random.Random(3)
    trials = {}
    for arm in ("a", "b"):
        for task in ("t1", "t2", "t3", "t4"):
            trials[(arm, task)] = [
                (f"2026-01-0{1 + k // 4}T00:00:{k:02d}", rng.random() < 0.5, 1000.0 * math.exp(rng.gauss(0, SIGMA)), f"s{k}")
                for k in range(5)
            ]  # fmt: skip
    arguments = {"floor": 3, "smallest_effect": {}, "trial_limit": 200}
    free = plan_decisions(trials, [("a", "b")], ["t1", "t2", "t3", "t4"], **arguments)
    capped = plan_decisions(trials, [("a", "b")], ["t1", "t2", "t3", "t4"], horizon=24, **arguments)
    assert free.total > 2 * 4  # undecided, no horizon: well past 24 pairs
    assert capped.total == 2 * 4  # 20 pairs so far, 4 left: one more pair per task, no further
    at_horizon = plan_decisions(trials, [("a", "b")], ["t1", "t2", "t3", "t4"], horizon=20, **arguments)
    assert at_horizon.total == 0
    assert at_horizon.nothing_left == ("nothing left to decide: every comparison is decided or reached the horizon "
                                       "of 20 paired trials; no trial runs")  # fmt: skip
    assert any("undecided and frozen: a vs b on success; a vs b on tokens" in note for note in at_horizon.notes)


def test_a_report_of_a_bench_whose_horizon_the_samples_did_not_record_is_refused(pytester: pytest.Pytester) -> None:
    write_bench(pytester, with_horizon(DECIDE_BENCH, 40), CONFTEST)
    store_cells(pytester, {"shell": {"count": 3}, "bare": {"count": 3}})
    result = pytester.runpytest("--bench-report", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bench.toml: [[]bench[]] horizon_pairs: the report's settings have horizon_pairs = 40, "
                                 "but the store's samples were recorded with no horizon (newest trial of bare x say-hello)*"])  # fmt: skip
    assert "Traceback" not in result.stderr.str()


@pytest.mark.slow
def test_under_a_horizon_the_plan_and_the_report_agree_at_every_sitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_one_verdict's replay with horizon_pairs = 24 declared: the plan's listing and the report's JSON
    agree on every comparison at every sitting, past the horizon too, and no plan runs a pair past it."""
    import test_one_verdict as replay

    monkeypatch.setattr("os.fsync", lambda fd: None)
    monkeypatch.setattr(replay, "bench_document", lambda declared, real=replay.bench_document: {
        **real(declared), "bench": {**real(declared)["bench"], "horizon_pairs": 24}})  # fmt: skip
    original_append = replay.Store.append

    def append(self: object, sample: dict, *args: object, **kwargs: object) -> object:
        sample["provenance"][HORIZON_KEY] = 24  # as a trial of this bench records it
        return original_append(self, sample, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replay.Store, "append", append)
    rng = random.Random(41)
    problems, frozen = [], 0
    for world_name, world in replay.WORLDS.items():
        root = tmp_path / world_name
        root.mkdir()
        history = replay.History(root, random.Random(rng.randrange(2**32)), world, declared=True)
        for sitting in range(6):
            plan = history.plan()
            problems += [f"{world_name}, sitting {sitting}: {line}" for line in replay.disagreements(plan, replay.report_verdicts(history))]
            assert all(state.pairs <= 24 for state in plan.comparisons)
            frozen += any("undecided and frozen" in note for note in plan.notes)
            counts = plan.counts()
            history.run(counts if sum(counts.values()) else {(arm, task): 2 for arm in replay.ARMS for task in replay.TASKS})
    assert not problems, "\n".join(problems[:20])
    assert frozen
