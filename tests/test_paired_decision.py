"""The betting e-process, the confidence sequence and compare_paired (issue 17), against hand values,
exact expectations and seeded simulations."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pytest_benchcell import statistics as st
from pytest_benchcell.statistics.intervals import _psi_e


# -- the betting e-process ------------------------------------------------------------------------------
def test_betting_e_process_equals_its_closed_form_on_a_hand_case() -> None:
    # x = 0.5, -0.2, 0.9 (bound 1), bets 0.7 and 0.95 each way:
    # K_up = ((1.35)(0.86)(1.63) + (1.475)(0.81)(1.855)) / 2, K_down = ((0.65)(1.14)(0.37) + (0.525)(1.19)(0.145)) / 2.
    evidence = st.betting_e_process([0.5, -0.2, 0.9], bound=1.0)
    k_up = (1.35 * 0.86 * 1.63 + 1.475 * 0.81 * 1.855) / 2
    k_down = (0.65 * 1.14 * 0.37 + 0.525 * 1.19 * 0.145) / 2
    assert st.BETS == (0.7, 0.95)
    assert evidence.e_value == pytest.approx((k_up + k_down) / 2)
    assert evidence.max_up == pytest.approx((k_up + k_down) / 2)  # the peak is at the end
    assert evidence.max_down == 1.0 and evidence.direction == 1 and evidence.pairs == 3
    assert evidence.anytime_p == pytest.approx(2.0 / (k_up + k_down))


def test_token_e_process_mixes_signs_and_the_adaptive_bet() -> None:
    values = [0.3, 0.4, -0.1, 0.5]
    mixed = st.token_e_process(values)
    sign = st.sign_e_value(3, 4)
    adaptive = st.adaptive_e_process(values).e_value
    assert mixed.e_value == pytest.approx(0.1 * sign + 0.9 * adaptive)
    assert st.TOKEN_SIGN_WEIGHT == 0.1
    # Twelve pairs all 1.3 times apart: the adaptive bet sees no variance and stakes up to 90%.
    consistent = st.token_e_process([math.log(1.3)] * 12)
    assert st.adaptive_e_process([math.log(1.3)] * 12).max_up > 60
    assert st.betting_e_process([math.log(1.3)] * 12, bound=st.TOKEN_LOG_RATIO_CLIP).max_up < 10
    assert consistent.max_up >= 40


def test_the_adaptive_bet_equals_its_closed_form_on_a_hand_case() -> None:
    # Two pairs, 0.2 then -0.1 (inside the clip). Before the first: variance = the prior 0.17, mean 0, so
    # both sides bet on the effect log 1.2: stake tanh(log(1.2) * 0.2 / 0.17). Before the second: one value
    # seen, variance (0.17 * 5 + 0) / 6, shrunk mean 0.2 / 11 (below the effect): both sides bet the effect.
    first = math.tanh(math.log(1.2) * 0.2 / 0.17)
    second = math.tanh(math.log(1.2) * -0.1 / (0.17 * 5 / 6))
    up, down = (1 + first) * (1 + second), (1 - first) * (1 - second)
    evidence = st.adaptive_e_process([0.2, -0.1])
    assert evidence.e_value == pytest.approx((up + down) / 2)
    assert (up + down) / 2 < 1.0 and evidence.max_up == evidence.max_down == 1.0  # never above its start
    # A run of large values: the shrunk mean passes the effect, and no stake exceeds 90%.
    big = st.adaptive_e_process([0.9] * 30)
    assert big.max_up <= ((1 + st.TOKEN_MAX_BET) ** 30 + 1) / 2 and big.max_up > 1e6


def test_the_adaptive_bet_learns_the_noise() -> None:
    # Tokens 20% dearer with quiet trials (cv 0.05): the constant bets stake at most 95% of a gap that is a
    # fifth of the clip, the adaptive bet learns that the gap hardly varies and stakes up to 90% of the
    # wealth on each pair, so it claims (e >= 40) after far fewer pairs (seeded).
    rng = random.Random(11)
    sigma = math.sqrt(math.log1p(0.05**2))

    def pairs_to_claim(process: object, ratios: list[float]) -> int:
        return next(n for n in range(1, len(ratios) + 1) if process(ratios[:n]).max_up >= 40)  # type: ignore[operator]

    adaptive = constant = 0
    for _ in range(20):
        ratios = [math.log(1.2) + rng.gauss(0, sigma) - rng.gauss(0, sigma) for _ in range(60)]
        adaptive += pairs_to_claim(st.adaptive_e_process, ratios)
        constant += pairs_to_claim(lambda r: st.betting_e_process(r, bound=st.TOKEN_LOG_RATIO_CLIP), ratios)
    assert adaptive < 0.6 * constant


def test_values_beyond_the_bound_are_clipped() -> None:
    assert st.betting_e_process([3.0, 5.0, -7.0], bound=2.0) == st.betting_e_process([2.0, 2.0, -2.0], bound=2.0)
    with pytest.raises(ValueError, match="bound"):
        st.betting_e_process([1.0], bound=0.0)


def test_betting_e_process_is_a_martingale_under_symmetry() -> None:
    # Exact expectation over every sequence of 5 draws from a symmetric distribution: E[e_5] = 1, for the
    # betting e-process, the adaptive bet and the token e-process (with the sign e-process mixed in).
    support = (-1.3, -0.4, 0.0, 0.4, 1.3)
    processes = (
        lambda seq: st.betting_e_process(seq, bound=1.0),
        lambda seq: st.adaptive_e_process(seq, bound=1.0),
        lambda seq: st.token_e_process(seq, bound=1.0),
    )
    for process in processes:
        total = math.fsum(process(seq).e_value for seq in itertools.product(support, repeat=5))
        assert total / len(support) ** 5 == pytest.approx(1.0, abs=1e-12)


def test_the_adaptive_bet_is_a_martingale_at_every_step_and_a_supermartingale_when_b_is_lower() -> None:
    # Exact: after every prefix of 4 draws, the mean of e over the next draw is e itself (symmetric
    # support). With the support tilted down (negatives likelier), the side betting up only loses on average.
    for prefix in itertools.product((-0.9, -0.2, 0.3, 0.9), repeat=3):
        now = st.adaptive_e_process(prefix).e_value
        following = [st.adaptive_e_process((*prefix, v)).e_value for v in (-0.9, -0.3, -0.2, 0.0, 0.2, 0.3, 0.9)]
        assert math.fsum(following) / 7 == pytest.approx(now, rel=1e-12)
    tilted = [(-0.5, 0.6), (0.5, 0.4)]  # value, chance: b lower
    for prefix in itertools.product((-0.5, 0.5), repeat=4):
        state = st.e_processes._AdaptiveBetting(st.TOKEN_LOG_RATIO_CLIP)
        for v in prefix:
            state.add(v)
        before = state.up()
        after = 0.0
        for value, chance in tilted:
            step = st.e_processes._AdaptiveBetting(st.TOKEN_LOG_RATIO_CLIP)
            for v in (*prefix, value):
                step.add(v)
            after += chance * step.up()
        assert after <= before * (1 + 1e-12)


def test_betting_e_process_keeps_its_level_read_after_every_pair() -> None:
    # Identical arms read after every pair (optional stopping at any reading): the running maximum of the
    # token e-process reaches 20 in at most 5% of histories, in null worlds of three noise levels, one
    # with heavy tails (Student-t, 3 degrees of freedom) and one whose noise grows from pair to pair.
    rng = random.Random(3)
    worlds = {
        "cv 0.3": lambda k: rng.gauss(0, 0.3) - rng.gauss(0, 0.3),
        "cv 0.1": lambda k: rng.gauss(0, 0.1) - rng.gauss(0, 0.1),
        "t(3)": lambda k: 0.3 * (rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 1 / 1.5)) - rng.gauss(0, 1)),
        "growing": lambda k: (0.05 + k / 100) * (rng.gauss(0, 1) - rng.gauss(0, 1)),
    }
    for name, draw in worlds.items():
        hits = 0
        for _ in range(200):
            evidence = st.token_e_process([draw(k) for k in range(80)])
            hits += max(evidence.max_up, evidence.max_down) >= 20
        assert hits / 200 <= 0.05, name


def test_betting_beats_signs_on_tokens_20_percent_dearer() -> None:
    # The reason for issue 17: the sign of a pair throws the size of the gap away.
    rng = random.Random(5)
    betting = signs = 0
    for _ in range(300):
        ratios = [math.log(1.2) + rng.gauss(0, 0.294) - rng.gauss(0, 0.294) for _ in range(80)]
        evidence = st.token_e_process(ratios)
        betting += max(evidence.max_up, evidence.max_down) >= 40
        sign = st.sign_e_process(ratios)
        signs += max(sign.max_up, sign.max_down) >= 40
    assert betting / 300 >= 0.78 and betting > signs + 60


def test_token_log_ratio() -> None:
    assert st.token_log_ratio(999, 1999) == pytest.approx(math.log(2.0))
    assert st.token_log_ratio(0, 0) == 0.0
    with pytest.raises(ValueError):
        st.token_log_ratio(-1, 5)


# -- the confidence sequence ------------------------------------------------------------------------------
def test_confidence_sequence_first_interval_by_hand() -> None:
    # y = (0.2 + 1) / 2 = 0.6; lambda_1 = min(sqrt(2 log 40 / (0.25 * 1 * log 2)), 0.75) = 0.75;
    # centre 0.6, half (log 40 + 4 (0.6 - 0.5)^2 psi_E(0.75)) / 0.75 > 1: the whole range.
    first = st.confidence_sequence([0.2], low=-1.0, high=1.0, alpha=0.05)[0]
    assert first == (-1.0, 1.0)
    psi = (-math.log(0.25) - 0.75) / 4
    assert _psi_e(0.75) == pytest.approx(psi)


def test_confidence_sequence_is_nested_and_shrinks() -> None:
    rng = random.Random(11)
    values = [rng.choice((-1.0, 0.0, 0.0, 1.0)) for _ in range(300)]
    intervals = st.confidence_sequence(values, low=-1.0, high=1.0, alpha=0.05)
    for (low_before, high_before), (low, high) in zip(intervals, intervals[1:]):
        assert low_before <= low <= high <= high_before
    widths = [intervals[n - 1][1] - intervals[n - 1][0] for n in (30, 100, 300)]
    assert widths[0] > widths[1] > widths[2] > 0


def test_confidence_sequence_covers_at_every_time_in_a_seeded_simulation() -> None:
    # Bernoulli(0.3) on [0, 1]: the whole sequence (200 values) ever misses 0.3 in at most 5% of runs.
    rng = random.Random(2)
    misses = 0
    for _ in range(300):
        values = [1.0 if rng.random() < 0.3 else 0.0 for _ in range(200)]
        misses += any(not low <= 0.3 <= high for low, high in st.confidence_sequence(values, low=0.0, high=1.0, alpha=0.05))
    assert misses / 300 <= 0.05


def test_confidence_sequence_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="outside"):
        st.confidence_sequence([2.0], low=-1.0, high=1.0, alpha=0.05)
    with pytest.raises(ValueError, match="low < high"):
        st.confidence_sequence([0.0], low=1.0, high=1.0, alpha=0.05)
    with pytest.raises(ValueError, match="alpha"):
        st.confidence_sequence([0.0], low=-1.0, high=1.0, alpha=1.0)


# -- compare_paired ------------------------------------------------------------------------------------
def test_compare_paired_claims_a_clear_token_difference() -> None:
    rng = random.Random(7)
    ratios = [math.log(1.5) + rng.gauss(0, 0.2) for _ in range(40)]
    decision = st.compare_paired(ratios, metric="tokens", alpha=0.05, margin=None)
    assert decision.decision == "differs" and decision.direction == 1
    assert decision.e_value >= 20 and decision.n == 40
    assert decision.interval[0] > 0 and decision.interval[0] <= decision.estimate <= decision.interval[1]


def test_compare_paired_claims_equivalence_inside_the_margin() -> None:
    rng = random.Random(9)
    ratios = [rng.gauss(0, 0.05) for _ in range(300)]
    decision = st.compare_paired(ratios, metric="tokens", alpha=0.05, margin=math.log(1.2))
    assert decision.decision == "equivalent" and decision.direction == 0
    assert -math.log(1.2) < decision.interval[0] < decision.interval[1] < math.log(1.2)
    # Without a margin, the same data decide nothing.
    assert st.compare_paired(ratios, metric="tokens", alpha=0.05, margin=None).decision == "undecided"


def test_compare_paired_success_uses_the_sign_e_process() -> None:
    differences = [1.0] * 12
    decision = st.compare_paired(differences, metric="success", alpha=0.05, margin=None)
    assert decision.e_value == pytest.approx(st.sign_e_value(12, 12)) and decision.decision == "differs"
    assert st.compare_paired([-1.0, 0.0], metric="success", alpha=0.05, margin=0.1).decision == "undecided"


def test_compare_paired_with_no_pair() -> None:
    decision = st.compare_paired([], metric="tokens", alpha=0.05, margin=0.2)
    assert (decision.decision, decision.estimate, decision.n, decision.e_value) == ("undecided", None, 0, 1.0)


def test_compare_paired_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="metric"):
        st.compare_paired([0.0], metric="cost", alpha=0.05, margin=None)
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        st.compare_paired([0.5], metric="success", alpha=0.05, margin=None)
    with pytest.raises(ValueError, match="margin"):
        st.compare_paired([0.0], metric="tokens", alpha=0.05, margin=0.0)


def test_a_wrong_equivalence_is_rare() -> None:
    # b is 20% dearer in every pair; margin log(1.2): read after every pair, equivalence is claimed at most alpha/2.
    rng = random.Random(4)
    wrong = 0
    for _ in range(200):
        ratios = [math.log(1.2) + rng.gauss(0, 0.294) - rng.gauss(0, 0.294) for _ in range(120)]
        intervals = st.confidence_sequence([st.clip(r, st.TOKEN_LOG_RATIO_CLIP) for r in ratios],
                                           low=-st.TOKEN_LOG_RATIO_CLIP, high=st.TOKEN_LOG_RATIO_CLIP, alpha=0.05)  # fmt: skip
        wrong += any(high < math.log(1.2) for _, high in intervals)
    assert wrong / 200 <= 0.025


# -- cost per verified success -------------------------------------------------------------------------
def test_cost_per_success_estimate_and_fieller_ends() -> None:
    cells = [[(1000.0, True), (1400.0, False), (1200.0, True)], [(3000.0, True), (2600.0, True), (3100.0, False)]]
    figure = st.cost_per_success(cells)
    tokens_sum, passes_sum = 1200.0 + 2900.0, 2 / 3 + 2 / 3
    assert figure.estimate == pytest.approx(tokens_sum / passes_sum)  # = all tokens / all passes: 12,300 / 4 x 2/... equal trials
    assert figure.estimate == pytest.approx(sum(t for cell in cells for t, _ in cell) / 4)
    assert figure.tokens_per_trial == pytest.approx(2050.0) and figure.success_rate == pytest.approx(2 / 3)
    # Each end R of Fieller's interval solves (M - R P)^2 = z^2 sum_t s_t^2(tokens - R passed) / n_t.
    z = st.two_sided_z(0.95)
    for end in (figure.low, figure.high):
        assert end is not None
        spread = sum(st.sample_sd([t - end * p for t, p in cell]) ** 2 / len(cell) for cell in cells)
        assert (tokens_sum - end * passes_sum) ** 2 == pytest.approx(z * z * spread, rel=1e-9)
    assert figure.low < figure.estimate < figure.high


def test_cost_per_success_without_passes_and_unbounded() -> None:
    assert st.cost_per_success([[(10.0, False), (12.0, False)]]).estimate is None
    rare = st.cost_per_success([[(10.0, True), (12.0, False), (11.0, False)]])
    assert rare.estimate == pytest.approx(33.0) and rare.high is None  # one pass in 3: zero passes is plausible
    with pytest.raises(ValueError):
        st.cost_per_success([[(10.0, True)]])


def test_cost_per_success_of_trials_without_spread_is_the_point_not_unbounded() -> None:
    """Every trial of a task alike and passing (a scripted sitting): the interval is the estimate
    itself, whatever rounding the means' floats carry (it read [0-unbounded] for the example bench)."""
    cells = [[(6140.4, True)] * 3, [(6899.3, True)] * 3, [(7730.1, True)] * 3]
    figure = st.cost_per_success(cells)
    assert figure.high is not None and figure.low == pytest.approx(figure.estimate) == pytest.approx(figure.high)


def test_cost_per_success_covers_in_a_seeded_simulation() -> None:
    rng = random.Random(6)
    rates, means = [0.3, 0.5, 0.7, 0.9], [2000.0, 5000.0, 12000.0, 30000.0]
    truth = sum(means) / sum(rates)
    hits = 0
    for _ in range(300):
        cells = [[(m * math.exp(rng.gauss(-0.045, 0.3)), rng.random() < p) for _ in range(10)] for p, m in zip(rates, means)]
        figure = st.cost_per_success(cells)
        hits += figure.low is not None and figure.low <= truth and (figure.high is None or truth <= figure.high)
    assert hits / 300 >= 0.90


def test_cost_per_success_ratio_on_the_log_scale() -> None:
    a = st.CostPerSuccess(20000.0, 15000.0, 27000.0, 10000.0, 0.5, 0.01)
    b = st.CostPerSuccess(10000.0, 8000.0, 13000.0, 8000.0, 0.8, 0.02)
    ratio, low, high = st.cost_per_success_ratio(a, b)
    half = st.two_sided_z(0.95) * math.sqrt(0.03)
    assert (ratio, low, high) == pytest.approx((2.0, 2.0 * math.exp(-half), 2.0 * math.exp(half)))
