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


def test_derive_seed_is_stable_and_separates_labels() -> None:
    assert st.derive_seed(0, "headline", "cli") == st.derive_seed(0, "headline", "cli")
    assert st.derive_seed(0, "headline", "cli") != st.derive_seed(0, "headline", "mcp")
    assert st.derive_seed(0, "a") != st.derive_seed(1, "a")
    # sha256-based, so independent of PYTHONHASHSEED and the Python version.
    assert st.derive_seed(0, "a") == int.from_bytes(__import__("hashlib").sha256(b"0\x1fa").digest()[:8], "big") >> 1


# -- paired comparison over tasks ----------------------------------------------------------------------
def test_paired_difference_by_hand() -> None:
    a = {"t1": [10.0, 12.0], "t2": [20.0], "t3": [5.0, 7.0]}
    b = {"t1": [9.0], "t2": [18.0, 20.0], "t3": [6.0], "t4": [100.0]}
    # shared t1..t3; d = 11-9 = 2, 20-19 = 1, 6-6 = 0; mean 1, sd 1, SE 1/sqrt(3)
    result = st.paired_difference(a, b, seed=3)
    assert result.tasks == ("t1", "t2", "t3")
    assert result.n_tasks == 3
    assert result.estimate == 1.0
    # t interval: 1 +- t_{.975, 2} / sqrt(3) = 1 +- 4.302653 * 0.577350 = 1 +- 2.484138
    assert (result.low, result.high) == (pytest.approx(1 - 2.484138, abs=1e-6), pytest.approx(1 + 2.484138, abs=1e-6))
    # sign patterns of (2, 1, 0): |sum| in {3, 1, 1, 3} twice each; |sum| >= 3 in 4 of 8
    assert result.p_value == 0.5


def test_paired_difference_without_enough_shared_tasks() -> None:
    none = st.paired_difference({"a": [1.0]}, {"b": [2.0]}, seed=0)
    assert (none.estimate, none.n_tasks, none.low) == (None, 0, None)
    one = st.paired_difference({"a": [3.0]}, {"a": [1.0]}, seed=0)
    assert (one.estimate, one.n_tasks, one.low, one.p_value) == (2.0, 1, None, None)
    two = st.paired_difference({"a": [3.0], "b": [4.0]}, {"a": [1.0], "b": [1.0]}, seed=0)
    assert (two.n_tasks, two.low, two.high) == (2, None, None)  # below MIN_TASKS_FOR_INTERVAL: no range
    assert st.MIN_TASKS_FOR_INTERVAL == 3


def test_sign_flip_of_a_zero_sum_is_one_despite_float_noise() -> None:
    noisy = [0.7 - 0.9, 0.3 - 0.1, 0.0]  # sums to -8.3e-17, not exactly 0
    assert math.fsum(noisy) != 0.0
    assert st.sign_flip_p_value(noisy, seed=0) == 1.0
    assert st.sign_flip_p_value([0.7 - 0.9, 0.3 - 0.1, 0.5], seed=0) == 0.75  # a real difference still counts


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


def test_pass_hat_k_curve_matches_the_formula() -> None:
    cells = [(5, 5), (3, 5), (0, 6), (4, 7)]
    curve = st.pass_hat_k_curve(cells, 5)
    assert curve == pytest.approx([st.pass_hat_k(cells, k) for k in range(1, 6)])
    with pytest.raises(ValueError):
        st.pass_hat_k_curve(cells, 6)


# -- Student's t --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("df", "quantile"),
    [(1, 12.706204736), (2, 4.302652730), (3, 3.182446305), (7, 2.364624252), (30, 2.042272456)],
)
def test_t_quantile_matches_the_tables(df: int, quantile: float) -> None:
    assert st.t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-8)
    assert st.t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-8)


def test_incomplete_beta_and_t_cdf_by_hand() -> None:
    # I_x(1, 1) = x; I_x(2, 3) = 6x^2/2 - 8x^3/3 * ... = 1 - (1-x)^3 (1 + 3x) = 0.5248 at x = .4
    assert st.regularized_incomplete_beta(1, 1, 0.3) == pytest.approx(0.3)
    assert st.regularized_incomplete_beta(2, 3, 0.4) == pytest.approx(1 - 0.6**3 * (1 + 3 * 0.4))
    # df = 1 is the Cauchy distribution: P(T <= t) = 1/2 + atan(t) / pi
    assert st.t_cdf(2.0, 1) == pytest.approx(0.5 + math.atan(2.0) / math.pi)
    assert st.t_cdf(0.0, 5) == 0.5


def test_against_scipy_when_installed() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 7, 11, 50):
        for q in (0.9, 0.95, 0.975, 0.995):
            assert st.t_quantile(q, df) == pytest.approx(scipy_stats.t.ppf(q, df), rel=1e-9)
    for a, b, x in ((0.5, 0.5, 0.2), (3.0, 7.5, 0.31), (40.0, 0.5, 0.97)):
        assert st.regularized_incomplete_beta(a, b, x) == pytest.approx(__import__("scipy.special").special.betainc(a, b, x), rel=1e-9)


def test_t_interval_by_hand() -> None:
    # mean 5, s = sqrt(20/3) = 2.581989, SE = 1.290994; t_{.975, 3} = 3.182446 -> half width 4.108520
    low, high = st.t_interval([2.0, 4.0, 6.0, 8.0])
    assert (low, high) == (pytest.approx(5 - 4.108520, abs=1e-5), pytest.approx(5 + 4.108520, abs=1e-5))
    assert st.t_interval([3.0, 3.0, 3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError):
        st.t_interval([1.0])


# -- lognormal mean ----------------------------------------------------------------------------------
def test_lognormal_interval_is_seeded_and_brackets_the_lognormal_mean() -> None:
    values = [2_000.0, 3_500.0, 9_000.0, 5_200.0]
    first = st.lognormal_mean_interval(values, seed=1)
    assert first == st.lognormal_mean_interval(values, seed=1)
    assert first != st.lognormal_mean_interval(values, seed=2)
    logs = [math.log(v) for v in values]
    lognormal_mean = math.exp(st.mean(logs) + st.sample_sd(logs) ** 2 / 2)  # exp(mu + sigma^2 / 2) = 5,306
    low, high = first
    assert low < lognormal_mean < high
    assert low > 0 and high < 10 * max(values)
    assert st.lognormal_mean_interval([7.0, 7.0, 7.0], seed=0) == (7.0, 7.0)
    with pytest.raises(ValueError):
        st.lognormal_mean_interval([1.0, 0.0, 2.0], seed=0)


def test_lognormal_interval_matches_its_pivot_in_closed_form() -> None:
    # With Z and U^2 drawn, G's quantiles are those of the pivot; compare with a direct computation.
    import random as _random

    values = [1.0, math.e, math.e**2]  # logs 0, 1, 2: ybar = 1, s^2 = 1, n = 3
    rng = _random.Random(5)
    pivots = []
    for _ in range(2000):
        z = rng.gauss(0.0, 1.0)
        scaled = 1.0 * 2 / (2.0 * rng.gammavariate(1.0, 1.0))  # s^2 (n-1) / U^2 with U^2 = 2 Gamma(1)
        pivots.append(1.0 - z * math.sqrt(scaled / 3) + scaled / 2.0)
    pivots.sort()
    expected = (math.exp(st.quantile(pivots, 0.025)), math.exp(st.quantile(pivots, 0.975)))
    assert st.lognormal_mean_interval(values, seed=5) == pytest.approx(expected)


# -- sign e-process ----------------------------------------------------------------------------------
def test_sign_e_value_by_hand() -> None:
    assert st.sign_e_value(0, 0) == 1.0
    assert st.sign_e_value(12, 12) == pytest.approx(2**12 / 13)  # 315.08: every one of 12 pairs agrees
    assert st.sign_e_value(0, 12) == st.sign_e_value(12, 12)  # two-sided
    assert st.sign_e_value(3, 6) == pytest.approx(2**6 / (7 * 20))  # C(6, 3) = 20


def test_sign_e_value_is_a_fair_bet_under_the_null() -> None:
    # E[e_m] = sum_k C(m, k) / 2^m * e(k, m) = 1 exactly, at every m: the process is a test martingale.
    for m in (1, 2, 5, 17, 40):
        expectation = sum(math.comb(m, k) / 2**m * st.sign_e_value(k, m) for k in range(m + 1))
        assert expectation == pytest.approx(1.0)


def test_sign_e_process_keeps_peaks_per_direction_and_ignores_ties() -> None:
    evidence = st.sign_e_process([1.0, 0.0, 2.0, 3.0, -1.0])
    assert (evidence.pairs, evidence.nonzero, evidence.positives) == (5, 4, 3)
    assert evidence.max_up == pytest.approx(st.sign_e_value(3, 3))  # 8 / 4 = 2, before the negative pair
    assert evidence.e_value == pytest.approx(st.sign_e_value(3, 4))
    assert evidence.max_down == 1.0 and evidence.direction == 1
    assert evidence.anytime_p == pytest.approx(0.5)
    assert st.sign_e_process([]).anytime_p == 1.0 and st.sign_e_process([]).direction == 0


def test_sign_claim_power_by_hand() -> None:
    # m = 5, threshold 5: e(5, 5) = e(0, 5) = 32 / 6 = 5.33 >= 5, e(4, 5) = 32 / 30 < 5
    assert st.sign_claim_power(5, 0.5, 5.0) == pytest.approx(2 / 32)
    assert st.sign_claim_power(5, 0.9, 5.0) == pytest.approx(0.9**5 + 0.1**5)
    assert st.sign_claim_power(0, 0.9, 5.0) == 0.0


def test_success_mde_reaches_the_asked_power() -> None:
    rates, pairs, threshold = [0.5] * 8, [10] * 8, 40.0
    mde = st.success_mde(rates, pairs, threshold)
    assert mde is not None and 0.2 < mde < 0.5
    plus = minus = 0.0
    for rate, n in zip(rates, pairs):
        p_a, p_b = rate + mde / 2, rate - mde / 2
        plus += n * p_a * (1 - p_b)
        minus += n * p_b * (1 - p_a)
    assert st.sign_claim_power(round(plus + minus), plus / (plus + minus), threshold) >= 0.8
    assert st.success_mde([0.5], [2], threshold) is None  # two pairs can never reach e = 40


def test_shift_mde_scales_with_the_noise() -> None:
    residuals = [[-100.0, 0.0, 100.0, -50.0, 50.0, 0.0]] * 4
    one = st.shift_mde(residuals, [3] * 4, 40.0)
    ten = st.shift_mde([[10 * r for r in task] for task in residuals], [3] * 4, 40.0)
    assert one is not None and ten == pytest.approx(10 * one)
    assert st.shift_mde([[0.0, 0.0, 0.0, 0.0]] * 4, [12] * 4, 40.0) == 0.0  # no noise: any shift shows
    assert st.shift_mde([[0.0, 0.0]], [1], 40.0) is None  # one pair can never reach 40
