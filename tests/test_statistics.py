"""Every statistic against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from pytest_benchcell import statistics as st


# -- descriptive ----------------------------------------------------------------------------------
def test_mean_and_median() -> None:
    assert st.mean([1, 2, 3, 4]) == 2.5
    assert st.median([3, 1, 2]) == 2
    assert st.median([4, 1, 3, 2]) == 2.5  # (2 + 3) / 2
    with pytest.raises(ValueError):
        st.mean([])
    with pytest.raises(ValueError):
        st.median([])


def test_mean_does_not_depend_on_order() -> None:
    values = [1e16, 1.0, -1e16, 1.0]
    assert st.mean(values) == st.mean(list(reversed(values))) == 0.5  # fsum: exact


def test_sample_sd() -> None:
    # mean 5, squared deviations 9+1+1+9 = 20, / (4-1) -> sqrt(20/3)
    assert st.sample_sd([2, 4, 6, 8]) == pytest.approx(math.sqrt(20 / 3))
    with pytest.raises(ValueError):
        st.sample_sd([1.0])


def test_type_7_quantile() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert st.quantile(values, 0.25) == pytest.approx(1.75)  # h = 3 * 0.25 = 0.75 -> 1 + 0.75 * (2 - 1)
    assert st.quantile(values, 0.5) == pytest.approx(2.5)
    assert st.quantile(values, 0.0) == 1.0
    assert st.quantile(values, 1.0) == 4.0


# -- Wilson -----------------------------------------------------------------------------------------
def test_wilson_seven_of_ten() -> None:
    # p = .7, z^2 = 3.8415: centre = (.7 + .19207) / 1.38415 = .64450,
    # half = 1.96 * sqrt(.021 + .0096037) / 1.38415 = .24772  ->  [.3968, .8922]
    low, high = st.wilson_interval(7, 10)
    assert (round(low, 3), round(high, 3)) == (0.397, 0.892)


def test_wilson_extremes_are_not_degenerate() -> None:
    # 0/10: centre = half = .19207 / 1.38415 = .13877 -> [0, .2775]; 10/10 mirrors it.
    assert st.wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    low, high = st.wilson_interval(10, 10)
    assert (low, high) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert st.wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        st.wilson_interval(4, 3)


# -- bootstrap --------------------------------------------------------------------------------------
def test_bootstrap_is_deterministic_with_a_seed() -> None:
    values = [3.0, 9.0, 4.0, 12.0, 7.0, 1.0]
    first = st.bootstrap_mean_interval(values, seed=42)
    assert first == st.bootstrap_mean_interval(values, seed=42)
    assert first != st.bootstrap_mean_interval(values, seed=43)
    low, high = first
    assert 1.0 <= low < st.mean(values) < high <= 12.0


def test_bootstrap_of_constant_values_is_a_point() -> None:
    assert st.bootstrap_mean_interval([5.0, 5.0, 5.0], seed=0) == (5.0, 5.0)


def test_bootstrap_interval_narrows_with_confidence() -> None:
    values = [float(v) for v in range(1, 21)]
    wide = st.bootstrap_mean_interval(values, seed=1, confidence=0.99)
    narrow = st.bootstrap_mean_interval(values, seed=1, confidence=0.80)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_clustered_bootstrap_weighs_tasks_equally() -> None:
    # task a: mean of 1 and 3 = 2; task b: 10 (one trial); the empty task is skipped.
    result = st.clustered_bootstrap({"b": [10.0], "a": [1.0, 3.0], "c": []}, seed=7)
    assert result.value == 6.0  # (2 + 10) / 2, not the pooled (1 + 3 + 10) / 3
    assert (result.n_tasks, result.n_samples) == (2, 3)
    assert 2.0 <= result.low <= result.high <= 10.0
    # The mapping's order does not matter: tasks are sorted before resampling.
    assert result == st.clustered_bootstrap({"a": [1.0, 3.0], "b": [10.0]}, seed=7)


def test_derive_seed_is_stable_and_separates_labels() -> None:
    assert st.derive_seed(0, "headline", "cli") == st.derive_seed(0, "headline", "cli")
    assert st.derive_seed(0, "headline", "cli") != st.derive_seed(0, "headline", "mcp")
    assert st.derive_seed(0, "a") != st.derive_seed(1, "a")
    # sha256-based, so independent of PYTHONHASHSEED and the Python version.
    assert st.derive_seed(0, "a") == int.from_bytes(__import__("hashlib").sha256(b"0\x1fa").digest()[:8], "big") >> 1


# -- paired comparison ------------------------------------------------------------------------------
def test_paired_difference_by_hand() -> None:
    a = {"t1": [10.0, 12.0], "t2": [20.0], "t3": [5.0, 7.0]}
    b = {"t1": [9.0], "t2": [18.0, 20.0], "t3": [6.0], "t4": [100.0]}
    # shared t1..t3; d = 11-9 = 2, 20-19 = 1, 6-6 = 0; mean 1, sd 1, SE 1/sqrt(3)
    result = st.paired_difference(a, b, seed=3)
    assert result.tasks == ("t1", "t2", "t3")
    assert result.n_tasks == 3
    assert result.estimate == 1.0
    assert result.standard_error == pytest.approx(1 / math.sqrt(3))
    # MDE = (1.95996 + 0.84162) * 0.57735 = 1.6175
    assert result.minimum_detectable_effect == pytest.approx(2.801585 / math.sqrt(3), rel=1e-5)
    # sign patterns of (2, 1, 0): |sum| in {3, 1, 1, 3} twice each; |sum| >= 3 in 4 of 8
    assert result.p_value == 0.5
    assert result.low is not None and result.high is not None
    assert 0.0 <= result.low <= 1.0 <= result.high <= 2.0
    assert result.spans_zero


def test_paired_difference_without_enough_shared_tasks() -> None:
    none = st.paired_difference({"a": [1.0]}, {"b": [2.0]}, seed=0)
    assert (none.estimate, none.n_tasks, none.low) == (None, 0, None)
    one = st.paired_difference({"a": [3.0]}, {"a": [1.0]}, seed=0)
    assert (one.estimate, one.n_tasks, one.low, one.minimum_detectable_effect) == (2.0, 1, None, None)
    assert one.spans_zero  # no interval: never a claim


def test_minimum_detectable_effect_formula() -> None:
    assert st.minimum_detectable_effect(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert st.minimum_detectable_effect(2.0, power=0.9) == pytest.approx(2 * (1.959964 + 1.281552), abs=1e-5)


def test_sign_flip_exact() -> None:
    # Six equal positive differences: only the all-plus and all-minus patterns reach |sum| = 6.
    assert st.sign_flip_p_value([1.0] * 6, seed=0) == pytest.approx(2 / 64)
    # Three tasks can never give p below 2/8.
    assert st.sign_flip_p_value([5.0, 6.0, 7.0], seed=0) == 0.25
    assert st.sign_flip_p_value([0.0, 0.0], seed=0) == 1.0


def test_sign_flip_monte_carlo_is_seeded() -> None:
    values = [1.0 + 0.1 * i for i in range(20)]
    p = st.sign_flip_p_value(values, resamples=2000, seed=5)
    assert p == st.sign_flip_p_value(values, resamples=2000, seed=5)
    assert p == pytest.approx(1 / 2001)  # no random pattern reaches the all-plus sum
    mixed = [(-1) ** i * (1.0 + 0.01 * i) for i in range(20)]
    assert st.sign_flip_p_value(mixed, resamples=2000, seed=5) > 0.5


# -- Holm -------------------------------------------------------------------------------------------
def test_holm_known_example() -> None:
    # sorted: .005*4 = .02, .01*3 = .03, .03*2 = .06, .04*1 = .04 -> max-so-far .06
    assert st.holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_keeps_order() -> None:
    assert st.holm_adjust([0.5, 0.01]) == pytest.approx([0.5, 0.02])
    assert st.holm_adjust([0.6, 0.7, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    assert st.holm_adjust([]) == []
    with pytest.raises(ValueError):
        st.holm_adjust([1.5])


# -- pass^k -----------------------------------------------------------------------------------------
def test_pass_hat_k_task() -> None:
    assert st.pass_hat_k_task(3, 5, 2) == pytest.approx(0.3)  # C(3,2)/C(5,2) = 3/10
    assert st.pass_hat_k_task(5, 5, 5) == 1.0
    assert st.pass_hat_k_task(1, 5, 2) == 0.0
    assert st.pass_hat_k_task(3, 5, 1) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        st.pass_hat_k_task(3, 5, 6)


def test_pass_hat_k_averages_over_tasks() -> None:
    cells = [(5, 5), (3, 5)]
    assert st.pass_hat_k(cells, 1) == pytest.approx(0.8)  # mean success (1 + .6) / 2
    assert st.pass_hat_k(cells, 2) == pytest.approx(0.65)  # (1 + .3) / 2
    assert st.pass_hat_k(cells, 3) == pytest.approx((1 + 1 / 10) / 2)  # C(3,3)/C(5,3) = 1/10
    with pytest.raises(ValueError):
        st.pass_hat_k([], 1)


def test_two_sided_z() -> None:
    assert st.two_sided_z(0.95) == pytest.approx(st.Z_95, abs=1e-6)
    assert st.two_sided_z(0.90) == pytest.approx(1.644854, abs=1e-6)


def test_bootstrap_columns_share_draws() -> None:
    a = [1.0, 5.0, 2.0, 8.0, 3.0]
    b = [10 * v for v in a]
    (low_a, high_a), (low_b, high_b) = st.bootstrap_mean_intervals([a, b], seed=9)
    assert (low_b, high_b) == pytest.approx((10 * low_a, 10 * high_a))  # same resampled tasks for both
    assert st.bootstrap_mean_intervals([a], seed=9)[0] == st.bootstrap_mean_interval(a, seed=9)
    with pytest.raises(ValueError):
        st.bootstrap_mean_intervals([a, a[:3]], seed=9)


def test_pass_hat_k_curve_matches_the_formula() -> None:
    cells = [(5, 5), (3, 5), (0, 6), (4, 7)]
    curve = st.pass_hat_k_curve(cells, 5)
    assert curve == pytest.approx([st.pass_hat_k(cells, k) for k in range(1, 6)])
    with pytest.raises(ValueError):
        st.pass_hat_k_curve(cells, 6)
