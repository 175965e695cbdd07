"""One statement per comparison: a claim of a difference never sits beside an interval that includes no
difference, in any format; and a cost per verified success with no spread reads one way everywhere.

The figures are the ones a reader met: a token claim carried by the sign part of the token e-process
(21 of 22 pairs one way) printed beside the empirical-Bernstein interval [0.44x, 1.55x]; a success claim
of 12 agreeing pairs among 52 beside an interval from -13 to +60 pp; and "6,395 [0–unbounded]" beside
"7,387 [7,387–7,387]" for two arms whose trials were alike within every task.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from sample_factory import cell_samples, write_samples

from pytest_benchcell import statistics as stats
from pytest_benchcell.report import ReportSettings, build_report, render_html, render_markdown, render_terminal
from pytest_benchcell.report.renderers.document.summary import NO_SPREAD
from pytest_benchcell.report.verdict_text import estimate_text, reading
from pytest_benchcell.statistics.claim_interval import rejected, token_claim_interval

FAMILY = stats.Family.of(3)  # the example's three declared pairs: a claim needs e >= 120


def token_outcomes(log_ratios: list[float]) -> list[tuple[stats.Outcome, stats.Outcome]]:
    return [((True, 1000.0), (True, 1000.0 * math.exp(v))) for v in log_ratios]


def sign_carried() -> list[float]:
    """21 of 22 pairs b cheaper, half of them by little: the sign part claims, the mean is unsure."""
    values = [-0.02] * 10 + [-0.9] * 11 + [1.2]
    random.Random(1).shuffle(values)
    return values


def test_a_token_claim_carried_by_the_signs_prints_an_interval_that_excludes_no_difference() -> None:
    values = sign_carried()
    verdict = stats.decide(token_outcomes(values), metric="tokens", family=FAMILY, margin=None, tasks=4)
    assert verdict.decision == stats.DIFFERS and verdict.direction == -1
    # The mean's own confidence sequence holds 0 here: the two procedures disagreed before.
    clipped = [stats.clip(v, stats.TOKEN_LOG_RATIO_CLIP) for v in values]
    eb_low, eb_high = stats.confidence_sequence(clipped, low=-stats.TOKEN_LOG_RATIO_CLIP,
                                                high=stats.TOKEN_LOG_RATIO_CLIP, alpha=FAMILY.level)[-1]  # fmt: skip
    assert eb_low < 0 < eb_high
    low, high = verdict.interval
    assert low <= high < 0
    assert "1.00x" not in estimate_text(verdict)


def test_the_claim_interval_is_the_set_of_shifts_the_claims_own_test_keeps() -> None:
    values = sign_carried()
    low, high = token_claim_interval(values, claim_e=FAMILY.claim_e, direction=-1)
    assert rejected(values, 0.0, FAMILY.claim_e)  # the claim itself
    assert not rejected(values, low, FAMILY.claim_e) and not rejected(values, high, FAMILY.claim_e)
    assert rejected(values, high + 0.01, FAMILY.claim_e) and rejected(values, low - 0.01, FAMILY.claim_e)


@pytest.mark.parametrize("ratio", [1.0, 1.2, 1.5])
def test_every_token_claim_in_simulated_histories_excludes_no_difference(ratio: float) -> None:
    rng = random.Random(41)
    sigma = math.sqrt(math.log1p(0.3**2))
    claimed = 0
    for _ in range(40):
        values = [math.log(ratio) + rng.gauss(0, sigma) - rng.gauss(0, sigma) for _ in range(48)]
        verdict = stats.decide(token_outcomes(values), metric="tokens", family=stats.Family.of(1), margin=None, tasks=8)
        if verdict.decision == stats.DIFFERS:
            claimed += 1
            low, high = verdict.interval
            assert (low > 0) if verdict.direction > 0 else (high < 0)
    assert claimed or ratio == 1.0


def test_a_success_claim_prints_the_sign_count_it_rests_on_instead_of_an_interval() -> None:
    outcomes = [((False, 1.0), (True, 1.0))] * 12 + [((True, 1.0), (True, 1.0))] * 40
    verdict = stats.decide(outcomes, metric="success", family=FAMILY, margin=None, tasks=4)
    assert verdict.decision == stats.DIFFERS
    # The mean difference's interval would have held 0 (-13 to +60 pp): it is not printed beside the claim.
    low, _ = stats.confidence_sequence([1.0] * 12 + [0.0] * 40, low=-1.0, high=1.0, alpha=FAMILY.level)[-1]
    assert low < 0
    assert verdict.interval is None
    text = reading(verdict, "a", "b")
    assert "b passed where a failed in 12 of the 12 paired trials that differ" in text
    assert "no interval" not in text


def report_of(tmp_path: Path, cells: dict[tuple[str, str], tuple[list[int], list[str]]]) -> dict:
    samples = []
    for minutes, ((arm, task), (tokens, outcomes)) in enumerate(sorted(cells.items())):
        samples += cell_samples(arm, task, len(tokens), minutes=100.0 * minutes,
                                tokens_by_trial=[(t, 0, 0, 0) for t in tokens], outcomes=outcomes)  # fmt: skip
    store = write_samples(tmp_path / "results", samples)
    settings = ReportSettings(resamples=100)
    report = build_report(store, settings)
    return {"json": json.loads(json.dumps(report.to_dict())), "markdown": render_markdown(report),
            "terminal": "\n".join(render_terminal(report)), "html": render_html(report)}


def test_no_format_prints_a_claimed_difference_beside_an_interval_holding_no_difference(tmp_path: Path) -> None:
    rng = random.Random(7)
    cells = {}
    for task in ("t1", "t2", "t3", "t4"):
        cost = rng.randint(3000, 9000)
        cells[("a", task)] = ([int(cost * rng.uniform(0.95, 1.05)) for _ in range(6)], ["pass"] * 6)
        cells[("b", task)] = ([int(1.8 * cost * rng.uniform(0.95, 1.05)) for _ in range(6)], ["incorrect"] * 6)
    found = report_of(tmp_path, cells)
    pairs = {c["metric"]: c["pairs"][0] for c in found["json"]["comparisons"]}
    assert {metric: pair["decision"] for metric, pair in pairs.items()} == {"success": "differs", "cost_equivalent": "differs"}
    tokens = pairs["cost_equivalent"]["within_tasks"]
    assert tokens["high"] < 1.0 and tokens["statement"] is None
    success = pairs["success"]["within_tasks"]
    assert success["low"] is None and success["high"] is None
    assert success["statement"] == "a passed where b failed in 24 of the 24 paired trials that differ"
    assert "+100.0 pp (a passed where b failed in 24 of the 24 paired trials that differ)" in found["markdown"]


def test_a_cost_per_success_without_spread_reads_one_way_for_every_arm(tmp_path: Path) -> None:
    # Trials alike within every task (a scripted model), costs that are not whole numbers after the
    # weights: the quadratic of Fieller's interval rounded to "0-unbounded" for one arm and a point for
    # the other.
    cells = [[(12731.7, True)] * 4, [(2756.7, True)] * 3, [(4413.5, True)] * 3, [(9433.15, True)] * 2, [(13256.25, True)] * 2]
    figure = stats.cost_per_success(cells)
    assert figure.low == figure.high == figure.estimate
    cells_by_arm = {}
    for arm, scale, trials in (("a", 1.0, 4), ("b", 1.3, 3)):
        for task, cost in zip(("t1", "t2", "t3"), (12731, 2757, 4413)):
            cells_by_arm[(arm, task)] = ([int(scale * cost)] * trials, ["pass"] * trials)
    found = report_of(tmp_path, cells_by_arm)
    for name in ("markdown", "terminal", "html"):
        section = found[name].split("Cost per verified success")[1]
        assert section.count(NO_SPREAD) == 3, name  # both arms and their ratio
        assert "unbounded" not in section
