"""Planning figures: the chance a sign claim is made by m pairs, and the smallest success difference
or shift a bench of this shape detects with the wanted power."""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist  # the stdlib module: imports are absolute

from .descriptive import DEFAULT_POWER
from .e_processes import sign_e_value


@functools.lru_cache(maxsize=4096)
def _claim_region(nonzero: int, threshold: float) -> tuple[int, int]:
    """(k_low, k_high): sign_e_value(k, m) >= threshold exactly when k <= k_low or k >= k_high.

    The e-value falls from k = 0 to k = m/2 and rises symmetrically after it, so the region is two
    tails; k_high is found by bisection over [ceil(m/2), m + 1] (m + 1: no k reaches the threshold).
    """
    low, high = (nonzero + 1) // 2, nonzero + 1
    while low < high:
        middle = (low + high) // 2
        if sign_e_value(middle, nonzero) >= threshold:
            high = middle
        else:
            low = middle + 1
    return nonzero - high, high


# Above this many pairs the binomial tails of sign_claim_power use the normal approximation.
EXACT_POWER_MAX_PAIRS = 2000


def sign_claim_power(nonzero: int, theta: float, threshold: float) -> float:
    """P(sign_e_value(k, m) >= threshold) for k ~ Binomial(m, theta): the chance a claim is made by m pairs.

    Counts the end of the sequence only, so it slightly understates a claim rule that also counts
    earlier peaks (see benchmarks/calibration.py for the claim rates that result). Exact binomial sums
    up to EXACT_POWER_MAX_PAIRS pairs, the normal approximation with continuity correction above.
    """
    if nonzero <= 0:
        return 0.0
    k_low, k_high = _claim_region(nonzero, threshold)
    if nonzero > EXACT_POWER_MAX_PAIRS:
        spread = math.sqrt(max(nonzero * theta * (1.0 - theta), 1e-12))
        normal = NormalDist(nonzero * theta, spread)
        return min(1.0, normal.cdf(k_low + 0.5) + 1.0 - normal.cdf(k_high - 0.5))
    log_theta, log_rest = math.log(max(theta, 1e-300)), math.log(max(1.0 - theta, 1e-300))
    log_m = math.lgamma(nonzero + 1.0)
    total = 0.0
    for k in itertools.chain(range(k_low + 1), range(k_high, nonzero + 1)):
        log_choose = log_m - math.lgamma(k + 1.0) - math.lgamma(nonzero - k + 1.0)
        total += math.exp(log_choose + k * log_theta + (nonzero - k) * log_rest)
    return min(1.0, total)


def smallest_detectable(
    power_at: Callable[[float], float], *, upper: float, power: float = DEFAULT_POWER, steps: int = 30
) -> float | None:
    """The smallest effect in (0, upper] whose claim probability power_at(effect) reaches `power`, by
    bisection (power_at must grow with the effect); None when even `upper` does not reach it."""
    if upper <= 0 or power_at(upper) < power:
        return None
    low, high = 0.0, upper
    for _ in range(steps):
        middle = (low + high) / 2.0
        if power_at(middle) >= power:
            high = middle
        else:
            low = middle
    return high


def success_mde(
    base_rates: Sequence[float], pairs_per_task: Sequence[int], threshold: float, *, power: float = DEFAULT_POWER
) -> float | None:
    """Success difference (a - b, same in every task) that the sign claim detects with `power`.

    For a difference delta on a task with base rate p: p_a = p + delta/2, p_b = p - delta/2 (kept in
    [0, 1]); a pair is + with chance p_a (1 - p_b) and - with chance p_b (1 - p_a). The expected number
    of non-zero pairs m and the share theta of + among them, summed over tasks, give the power through
    sign_claim_power(round(m), theta).
    """

    def power_at(delta: float) -> float:
        plus = minus = 0.0
        for rate, pairs in zip(base_rates, pairs_per_task):
            p_a = min(1.0, max(0.0, rate + delta / 2.0))
            p_b = min(1.0, max(0.0, rate - delta / 2.0))
            plus += pairs * p_a * (1.0 - p_b)
            minus += pairs * p_b * (1.0 - p_a)
        if plus + minus == 0:
            return 0.0
        return sign_claim_power(round(plus + minus), plus / (plus + minus), threshold)

    return smallest_detectable(power_at, upper=1.0, power=power)


RESIDUALS_PER_TASK = 30


def shift_mde(
    residuals_by_task: Sequence[Sequence[float]],
    pairs_per_task: Sequence[int],
    threshold: float,
    *,
    power: float = DEFAULT_POWER,
) -> float | None:
    """Shift (a - b, in the metric's units, same in every task) that the sign claim detects with `power`.

    A pair's difference is delta + e_1 - e_2 with e_1, e_2 drawn from the task's residuals (each trial
    minus its cell's mean, both arms pooled); theta(delta) is the share of residual pairs (i != j) with
    r_i - r_j + delta > 0, weighted by the task's pairs. A deep cell's residuals are thinned to
    RESIDUALS_PER_TASK evenly spaced order statistics first (the same distribution, a bounded cost).
    None when no task has two residuals.
    """
    spreads: list[tuple[list[float], int]] = []
    for residuals, pairs in zip(residuals_by_task, pairs_per_task):
        if len(residuals) > RESIDUALS_PER_TASK:
            ordered = sorted(residuals)
            step = (len(ordered) - 1) / (RESIDUALS_PER_TASK - 1)
            residuals = [ordered[round(i * step)] for i in range(RESIDUALS_PER_TASK)]
        if len(residuals) >= 2 and pairs:
            spreads.append((sorted(r_i - r_j for i, r_i in enumerate(residuals) for j, r_j in enumerate(residuals) if i != j), pairs))
    if not spreads:
        return None
    total_pairs = sum(pairs for _, pairs in spreads)
    widest = max(max(abs(d) for d in diffs) for diffs, _ in spreads)

    def power_at(delta: float) -> float:
        # share of residual differences above -delta (ties count half), per task, weighted by its pairs
        theta = 0.0
        for diffs, pairs in spreads:
            below = bisect.bisect_left(diffs, -delta)
            ties = bisect.bisect_right(diffs, -delta) - below
            theta += pairs * (len(diffs) - below - ties / 2.0) / len(diffs)
        return sign_claim_power(total_pairs, theta / total_pairs, threshold)

    if widest == 0.0:  # trials of a cell do not vary: any shift shows in every pair, or none is enough
        return 0.0 if sign_claim_power(total_pairs, 1.0, threshold) >= power else None
    return smallest_detectable(power_at, upper=2.0 * widest, power=power)
