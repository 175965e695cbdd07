"""Two definitions of one arm compared unpaired (statistics/unpaired.py): the figures, and the coverage of
their intervals when read after every trial (fixed seeds, so the measured rates are the same every run)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_benchcell import statistics as stats
from pytest_benchcell.statistics.intervals import confidence_sequence


def test_a_side_without_values_gives_no_figure() -> None:
    found = stats.success_difference([True, False], [], alpha=0.05)
    assert (found.estimate, found.low, found.high, found.n_earlier, found.n_current) == (None, None, None, 2, 0)


def test_the_interval_joins_each_sides_confidence_sequence_at_half_the_level() -> None:
    earlier, current = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    found = stats.unpaired_difference(earlier, current, low=0.0, high=1.0, alpha=0.1)
    e_low, e_high = confidence_sequence(earlier, low=0.0, high=1.0, alpha=0.05)[-1]
    c_low, c_high = confidence_sequence(current, low=0.0, high=1.0, alpha=0.05)[-1]
    assert found.estimate == pytest.approx(6 / 7 - 4 / 6)
    assert (found.low, found.high) == pytest.approx((c_low - e_high, c_high - e_low))
    assert found.low < found.estimate < found.high


def test_a_large_gap_excludes_zero_and_a_small_sample_does_not() -> None:
    assert stats.success_difference([False] * 200, [True] * 200, alpha=0.05).low > 0.5
    few = stats.success_difference([False, False], [True, True], alpha=0.05)
    assert few.estimate == 1.0 and few.low < 0 < few.high  # two trials a side prove nothing


def test_tokens_are_anchored_per_task_on_the_earlier_definitions_first_trial() -> None:
    earlier = [("a", 1000.0), ("b", 10000.0), ("a", 1000.0), ("b", 10000.0)]
    current = [("a", 500.0), ("b", 5000.0), ("c", 7.0)]  # c: no earlier trial, no anchor, left out
    earlier_values, current_values = stats.anchored_log_tokens(earlier, current)
    assert earlier_values == [0.0, 0.0]
    assert current_values == pytest.approx([math.log(501 / 1001), math.log(5001 / 10001)])
    found = stats.token_ratio(earlier, current, alpha=0.05)
    assert found.estimate == pytest.approx(math.exp(sum(current_values) / 2))
    assert (found.n_earlier, found.n_current) == (2, 2)
    assert found.low < found.estimate < found.high


def test_dollars_are_compared_as_tokens_are_at_the_scale_of_cents() -> None:
    """A trial costs cents: the one added to each count is a millionth of a dollar, not a whole one
    (which would take every ratio to about 1)."""
    earlier = [("a", 0.02), ("b", 0.2), ("a", 0.02), ("b", 0.2)]
    current = [("a", 0.01), ("b", 0.1)]
    found = stats.dollar_ratio(earlier, current, alpha=0.05)
    assert found.estimate == pytest.approx(0.5, rel=1e-3)
    assert stats.token_ratio(earlier, current, alpha=0.05).estimate == pytest.approx(1.0, abs=0.1)
    assert (found.n_earlier, found.n_current) == (2, 2) and found.low < found.estimate < found.high
    assert stats.dollar_ratio(earlier, [("a", 0.0)], alpha=0.05).estimate == pytest.approx(math.exp(-stats.TOKEN_LOG_RATIO_CLIP))


def test_a_trial_far_from_its_anchor_counts_at_the_clip() -> None:
    _, current = stats.anchored_log_tokens([("a", 100.0)], [("a", 1_000_000.0)])
    assert current == [stats.TOKEN_LOG_RATIO_CLIP]


def _ever_missed(earlier: list[float], current: list[float], truth: float, alpha: float, low: float, high: float) -> bool:
    """Whether the difference's interval missed `truth` at any reading (one reading after each trial of
    each side, the sides growing together)."""
    earlier_seq = confidence_sequence(earlier, low=low, high=high, alpha=alpha / 2)
    current_seq = confidence_sequence(current, low=low, high=high, alpha=alpha / 2)
    return any(
        not c_low - e_high <= truth <= c_high - e_low
        for (e_low, e_high), (c_low, c_high) in zip(earlier_seq, current_seq)
    )


@pytest.mark.parametrize(("p_earlier", "p_current"), [(0.5, 0.5), (0.3, 0.7), (0.9, 0.6)])
def test_success_coverage_read_after_every_trial_stays_above_the_level(p_earlier: float, p_current: float) -> None:
    rng = random.Random(20261206)
    alpha, runs, trials = 0.1, 300, 120
    missed = sum(
        _ever_missed(
            [float(rng.random() < p_earlier) for _ in range(trials)],
            [float(rng.random() < p_current) for _ in range(trials)],
            p_current - p_earlier, alpha, 0.0, 1.0,
        )
        for _ in range(runs)
    )  # fmt: skip
    assert missed / runs <= alpha  # measured: 0 of 300 in each case (the union bound is conservative)


def test_token_ratio_coverage_read_after_every_trial_stays_above_the_level() -> None:
    """Tasks at levels 10x apart, trial noise cv ~0.25, the current definition 20% cheaper: the
    interval of the ratio, read after every trial, ever misses 0.8 in far fewer than alpha of the runs."""
    rng = random.Random(40)
    alpha, runs, rounds, ratio = 0.1, 200, 40, 0.8
    levels = {"t1": 2_000.0, "t2": 20_000.0, "t3": 6_000.0}
    missed = 0
    for _ in range(runs):
        earlier = [(task, level * math.exp(rng.gauss(0, 0.25))) for _ in range(rounds) for task, level in levels.items()]
        current = [(task, ratio * level * math.exp(rng.gauss(0, 0.25))) for _ in range(rounds) for task, level in levels.items()]
        earlier_values, current_values = stats.anchored_log_tokens(earlier, current)
        # what the sequences estimate: each side's mean log distance from the (random) anchors, whose
        # difference is log(0.8) up to the clip, which these spreads almost never reach
        shown = len(earlier_values)
        bound = stats.TOKEN_LOG_RATIO_CLIP
        missed += _ever_missed(earlier_values, current_values[:shown], math.log(ratio), alpha, -bound, bound)
    assert missed / runs <= alpha
