"""Intervals: Wilson for a proportion, Student's t (computed here from the regularized incomplete
beta, so the base install needs no scipy), t and lognormal-mean intervals over tasks, and the
anytime-valid confidence sequence for a mean of bounded values."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterable, Sequence

from .descriptive import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, Z_95, check_confidence, mean, quantile, sample_sd


# -- binomial proportion ----------------------------------------------------------------------------
def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a proportion.

    With p = s/n::

        centre    = (p + z^2 / (2n)) / (1 + z^2 / n)
        halfwidth = z * sqrt(p (1 - p) / n + z^2 / (4 n^2)) / (1 + z^2 / n)
        interval  = [centre - halfwidth, centre + halfwidth]

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not degenerate at 0/n or n/n,
    which matters at the small n of a benchmark cell (7/10 gives [0.397, 0.892]). n = 0 carries
    no information and gives the whole range [0, 1].
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    halfwidth = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    # At 0/n and n/n one end is exactly 0 or 1; say so exactly rather than 0.9999999999999999.
    low = 0.0 if successes == 0 else max(0.0, centre - halfwidth)
    high = 1.0 if successes == n else min(1.0, centre + halfwidth)
    return (low, high)


# -- Student's t --------------------------------------------------------------------------------------
def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz, Numerical Recipes 6.4)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b), for a, b > 0 and 0 <= x <= 1 (the CDF of Beta(a, b) at x)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) beyond.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def _t_beyond(t: float, df: float) -> float:
    """P(T >= |t|) for Student's t with df degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2) / 2."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    return 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom: 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0."""
    tail = _t_beyond(t, df)
    return 1.0 - tail if t >= 0 else tail


def t_tail(statistic: float, df: float) -> float:
    """P(T >= statistic), precise far in the upper tail (never 1 minus a probability there), where a
    group-sequential test's early readings test at levels of 1e-15."""
    tail = _t_beyond(statistic, df)
    return tail if statistic >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t (t_{0.975, 3} = 3.182446), by bisection on t_cdf to 1e-12 (cached:
    a report asks for the same few quantiles again and again)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < q:
        low, high = high, 2.0 * high
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


# -- intervals over tasks -------------------------------------------------------------------------------
# Below this many tasks no interval over tasks is printed. From benchmarks/calibration.py: at 2 tasks the
# cost interval's upper end is 10^26 to 10^98 times its lower end and the success interval spans 90
# percentage points, ranges that say nothing; from 3 tasks on every per-arm interval meets its coverage
# goal (success >= 93%, costs >= 90%).
MIN_TASKS_FOR_INTERVAL = 3


def t_interval(values: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Student-t interval for the mean of per-task values: mean +- t_{1-a/2, T-1} * s / sqrt(T).

    The task is the unit (the clustered standard error of Miller, "Adding Error Bars to Evals", 2024,
    with one value per cluster). Needs at least two values; constant values give a point.
    """
    check_confidence(confidence)
    if len(values) < 2:
        raise ValueError("a t interval needs at least two values")
    centre = mean(values)
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, len(values) - 1) * sample_sd(values) / math.sqrt(len(values))
    return (centre - half, centre + half)


@functools.lru_cache(maxsize=256)
def _pivot_draws(seed: int, df: int, draws: int) -> tuple[tuple[float, float], ...]:
    """(Z, (n-1) / U^2) pairs for lognormal_mean_interval: Z ~ N(0, 1), U^2 = 2 Gamma(df / 2) ~ chi^2_df.

    They depend on the seed and the task count only, so the figures of one arm over one set of tasks
    (seeded alike) share them, and the draws are paid for once.
    """
    rng = random.Random(seed)
    return tuple((rng.gauss(0.0, 1.0), df / (2.0 * rng.gammavariate(df / 2.0, 1.0))) for _ in range(draws))


def lognormal_mean_interval(
    values: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE, draws: int = DEFAULT_RESAMPLES, seed: int
) -> tuple[float, float]:
    """Interval for the population mean of positive, right-skewed per-task values (costs, turns, times).

    Task costs spread over orders of magnitude, so their mean is dominated by the few dear tasks and a
    t interval on the raw scale undercovers (82% at 4 tasks when log-costs have sd 1). This is the
    generalized confidence interval of Krishnamoorthy and Mathew (2003) for the lognormal mean
    exp(mu + sigma^2 / 2): with y = log(values), ybar, s^2 and n, draw Z ~ N(0, 1) and U^2 ~ chi^2_{n-1},

        G = ybar - Z * sqrt(s^2 (n-1) / U^2) / sqrt(n) + s^2 (n-1) / (2 U^2),

    and take exp of the a/2 and 1 - a/2 type-7 quantiles of `draws` seeded draws of G (the same seed and
    task count give the same draws of Z and U^2, whatever the values). Needs values > 0
    (the caller falls back to t_interval otherwise) and at least two of them.
    """
    check_confidence(confidence)
    n = len(values)
    if n < 2 or any(v <= 0 for v in values):
        raise ValueError("a lognormal interval needs at least two positive values")
    logs = [math.log(v) for v in values]
    centre, variance = mean(logs), sample_sd(logs) ** 2
    if variance == 0.0:
        return (float(values[0]), float(values[0]))
    root_n = math.sqrt(n)
    pivots = [
        centre - z * math.sqrt(variance * w) / root_n + variance * w / 2.0 for z, w in _pivot_draws(seed, n - 1, draws)
    ]
    pivots.sort()
    alpha = 1.0 - confidence
    return (math.exp(quantile(pivots, alpha / 2)), math.exp(min(quantile(pivots, 1.0 - alpha / 2), 700.0)))


# -- confidence sequences for a mean of bounded values ---------------------------------------------------
def _psi_e(bet: float) -> float:
    """psi_E(l) = (-log(1 - l) - l) / 4, the cost term of the empirical-Bernstein supermartingale."""
    return (-math.log1p(-bet) - bet) / 4.0


# The predictable plug-in bets of the empirical-Bernstein confidence sequence are cut here (the paper's c).
EB_MAX_BET = 0.75


def confidence_sequence(
    values: Iterable[float], *, low: float, high: float, alpha: float
) -> list[tuple[float, float]]:
    """Anytime-valid confidence sequence for the mean of values in [low, high], in recorded order.

    The predictable plug-in empirical-Bernstein sequence (PrPl-EB, Waudby-Smith & Ramdas 2024,
    Theorem 2) on y = (value - low) / (high - low) in [0, 1]: with mu_hat_t = (1/2 + sum_{i<=t} y_i)/(t+1),
    sigma2_hat_t = (1/4 + sum_{i<=t} (y_i - mu_hat_i)^2)/(t+1), the bet
    lambda_t = min(sqrt(2 log(2/alpha) / (sigma2_hat_{t-1} t log(1 + t))), 0.75) and
    v_t = 4 (y_t - mu_hat_{t-1})^2,

        C_t = sum_i lambda_i y_i / sum_i lambda_i  +-  (log(2/alpha) + sum_i v_i psi_E(lambda_i)) / sum_i lambda_i,

    intersected with every earlier C_s (the running intersection) and with [low, high]; returned on
    the values' own scale, one interval per value. With probability >= 1 - alpha every interval
    contains the lambda-weighted mean of the conditional means so far (the common mean when it does
    not change); in particular if every value's conditional mean is >= X, no upper end ever falls
    below X except with probability alpha / 2.
    """
    if not high > low:
        raise ValueError(f"need low < high, got [{low}, {high}]")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    width = high - low
    log_term = math.log(2.0 / alpha)
    total_y = 0.0
    mu_hat, sigma2_hat = 0.5, 0.25
    sum_bets = sum_weighted = sum_costs = 0.0
    sum_sq_dev = 0.0
    running_low, running_high = 0.0, 1.0
    out: list[tuple[float, float]] = []
    for t, value in enumerate(values, start=1):
        if not low - 1e-12 <= value <= high + 1e-12:
            raise ValueError(f"value {value} lies outside [{low}, {high}]")
        y = min(1.0, max(0.0, (value - low) / width))
        bet = min(math.sqrt(2.0 * log_term / (sigma2_hat * t * math.log1p(t))), EB_MAX_BET)
        sum_bets += bet
        sum_weighted += bet * y
        sum_costs += 4.0 * (y - mu_hat) ** 2 * _psi_e(bet)
        centre = sum_weighted / sum_bets
        half = (log_term + sum_costs) / sum_bets
        running_low = max(running_low, centre - half)
        running_high = min(running_high, centre + half)
        # mu_hat and sigma2_hat of the first t values serve the next value
        total_y += y
        mu_hat = (0.5 + total_y) / (t + 1)
        sum_sq_dev += (y - mu_hat) ** 2
        sigma2_hat = (0.25 + sum_sq_dev) / (t + 1)
        # An empty running intersection can only happen with probability <= alpha; it is shown as the
        # point where the two ends met rather than as an inverted interval.
        shown_low, shown_high = (running_low, running_high) if running_low <= running_high else ((running_low + running_high) / 2,) * 2
        out.append((low + width * shown_low, low + width * shown_high))
    return out
