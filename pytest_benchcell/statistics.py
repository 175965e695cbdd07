"""The statistics behind the report: Wilson intervals, bootstraps, paired differences, Holm, pass^k.

Pure and stdlib-only. Every resampling function takes an explicit integer ``seed`` and draws from its
own ``random.Random(seed)``, so the same inputs always give the same numbers (the report promises
byte-identical output for the same store). Inputs are used in the order given; callers that want
order independence sort first (the report sorts tasks by name).

Conventions
-----------
* A *task* is the unit of replication. Trials of one task are correlated (same prompt, same
  environment), so intervals are built by resampling tasks, never by pretending every trial is an
  independent draw. That was the upstream report's mistake: three trials per cell pooled into one
  mean with no interval at all.
* Percentile intervals use the linear-interpolation quantile (Hyndman & Fan type 7, the default of
  numpy and R): for sorted x_0..x_{m-1} and level q, h = (m-1)q, Q(q) = x_floor(h) +
  (h - floor(h)) (x_floor(h)+1 - x_floor(h)).
* A central interval at confidence c takes Q(a/2) and Q(1 - a/2) with a = 1 - c.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist  # the stdlib module: imports are absolute

Z_95 = 1.959964  # two-sided 95% normal quantile, z_{0.975}
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_POWER = 0.80
# Up to this many tasks the sign-flip test enumerates all 2^n sign patterns (4,096 at 12), so its
# p-value is exact; above it, a seeded Monte-Carlo sample of sign patterns is used.
EXACT_SIGN_FLIP_MAX_TASKS = 12


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


# -- small descriptive statistics -----------------------------------------------------------------
def mean(values: Iterable[float]) -> float:
    """Arithmetic mean, sum(x_i) / n, summed with math.fsum so the result does not depend on order.

    Raises ValueError for no values: a mean of nothing is undefined, never 0.
    """
    items = list(values)
    if not items:
        raise ValueError("mean of no values")
    return math.fsum(items) / len(items)


def median(values: Iterable[float]) -> float:
    """Middle value of the sorted values; the mean of the two middle values when n is even."""
    items = sorted(values)
    if not items:
        raise ValueError("median of no values")
    middle = len(items) // 2
    if len(items) % 2:
        return float(items[middle])
    return (items[middle - 1] + items[middle]) / 2.0


def sample_sd(values: Sequence[float]) -> float:
    """Sample standard deviation, s = sqrt(sum((x_i - mean)^2) / (n - 1)). Needs n >= 2."""
    if len(values) < 2:
        raise ValueError("a standard deviation needs at least two values")
    centre = mean(values)
    return math.sqrt(math.fsum((x - centre) ** 2 for x in values) / (len(values) - 1))


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Type-7 quantile of already sorted values: h = (m-1)q, linear interpolation between neighbours."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level must be in [0, 1], got {q}")
    h = (len(sorted_values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


def derive_seed(base: int, *labels: str) -> int:
    """A stable 63-bit seed for one statistic: sha256 of the base seed and labels.

    Each figure of a report gets its own stream, so adding or removing one figure never shifts the
    random numbers (and hence the intervals) of another. Python's hash() is salted per process and
    would break reproducibility; sha256 is not.
    """
    text = "\x1f".join([str(base), *labels])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def two_sided_z(confidence: float = DEFAULT_CONFIDENCE) -> float:
    """z_{1 - a/2} with a = 1 - confidence: 1.959964 at 95%."""
    _check_confidence(confidence)
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2)


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


# -- bootstrap ----------------------------------------------------------------------------------------
_WORD = "I"  # native unsigned int: one 32-bit random word per drawn index
_WORD_BYTES = struct.calcsize(_WORD)


def _draw_indices(rng: random.Random, n: int) -> list[int]:
    """n indices in [0, n) drawn uniformly with replacement.

    One getrandbits call yields all n 32-bit words at once, several times faster than n calls of
    random(). Reducing a 32-bit word modulo n favours some indices by at most n / 2^32 (below 1e-7
    for any realistic task count), far below the Monte-Carlo error of the bootstrap itself.
    """
    words = rng.getrandbits(8 * _WORD_BYTES * n).to_bytes(_WORD_BYTES * n, "little")
    return [word % n for word in memoryview(words).cast(_WORD)]


def bootstrap_mean_intervals(
    columns: Sequence[Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[tuple[float, float]]:
    """Percentile bootstrap intervals for the means of several columns measured on the same units.

    All columns have the same length n (row i of every column is the same task). Each of the
    B = `resamples` resamples draws one set of n row indices with replacement and applies it to every
    column, so the figures of one arm over one set of tasks come from the same resampled task sets
    (and the draws are paid for once). For each column the resampled means m*_b are sorted and the
    interval is [Q(a/2), Q(1 - a/2)] (type-7 quantiles, a = 1 - confidence). With one column this is
    exactly bootstrap_mean_interval.
    """
    if not columns:
        return []
    n = len(columns[0])
    if n == 0 or any(len(column) != n for column in columns):
        raise ValueError("bootstrap columns must be non-empty and of equal length")
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = random.Random(seed)
    data = [[float(v) for v in column] for column in columns]
    means: list[list[float]] = [[] for _ in data]
    for _ in range(resamples):
        drawn = _draw_indices(rng, n)
        for column, out in zip(data, means):
            out.append(sum(map(column.__getitem__, drawn)) / n)
    alpha = 1.0 - confidence
    intervals = []
    for out in means:
        out.sort()
        intervals.append((quantile(out, alpha / 2), quantile(out, 1.0 - alpha / 2)))
    return intervals


def bootstrap_mean_interval(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean of `values`.

    Draw B = `resamples` samples of size n with replacement, compute each sample's mean m*_b, and
    return [Q(a/2), Q(1 - a/2)] of the m*_b (type-7 quantiles, a = 1 - confidence). One value gives
    the degenerate interval [x, x]: the caller should treat fewer than two values as "no interval".
    The percentile bootstrap is somewhat too narrow for very small n; the report therefore also
    states n next to every interval.
    """
    if not values:
        raise ValueError("bootstrap of no values")
    return bootstrap_mean_intervals([values], resamples=resamples, seed=seed, confidence=confidence)[0]


@dataclass(frozen=True)
class ClusteredEstimate:
    """Mean over tasks of per-task means, with its task-clustered bootstrap interval."""

    value: float
    low: float
    high: float
    n_tasks: int
    n_samples: int


def clustered_bootstrap(
    per_task: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int,
    confidence: float = DEFAULT_CONFIDENCE,
) -> ClusteredEstimate:
    """Task-clustered estimate: per-task means first, then the mean over tasks.

    value = (1/T) sum_t xbar_t, with xbar_t = (1/n_t) sum_i x_ti, so every task weighs the same
    however many trials it has (a deep cell cannot dominate, as it did upstream).

    Interval: resample *tasks only* with replacement (each drawn task brings its whole per-task
    mean) and take the percentile interval of the resampled means of means. Resampling tasks and
    then trials within each task (two-stage) was rejected: the per-task mean already carries its own
    trial noise, so the one-stage cluster bootstrap captures both between-task and within-task
    variation, while the second stage double-counts the within-task part (it overstates the
    variance) and costs T * n_t draws per resample. Tasks with no values are skipped; tasks are
    taken in sorted name order so the result does not depend on the mapping's order.
    """
    tasks = sorted(task for task, values in per_task.items() if len(values) > 0)
    if not tasks:
        raise ValueError("clustered bootstrap of no tasks")
    task_means = [mean(per_task[task]) for task in tasks]
    low, high = bootstrap_mean_interval(task_means, resamples=resamples, seed=seed, confidence=confidence)
    return ClusteredEstimate(
        value=mean(task_means),
        low=low,
        high=high,
        n_tasks=len(tasks),
        n_samples=sum(len(per_task[task]) for task in tasks),
    )


# -- paired comparison --------------------------------------------------------------------------------
def sign_flip_p_value(differences: Sequence[float], *, resamples: int = 10_000, seed: int) -> float:
    """Two-sided paired sign-flip (randomisation) test of "the mean difference is zero".

    Under the null hypothesis each per-task difference d_t is as likely to be +d_t as -d_t. The
    statistic is |sum_t d_t|; the p-value is the share of sign patterns s in {-1, +1}^T with
    |sum_t s_t d_t| >= |sum_t d_t|.

    * T <= 12: all 2^T patterns are enumerated, p = hits / 2^T (exact). With T tasks the smallest
      possible p is 2 / 2^T, so three tasks can never give p < 0.25: no claim from too few tasks.
    * T > 12: B = `resamples` seeded random patterns, p = (1 + hits) / (1 + B) (never exactly 0).

    All-zero differences give p = 1.
    """
    values = [float(d) for d in differences]
    if not values:
        raise ValueError("a paired test needs at least one difference")
    total = math.fsum(values)
    observed = abs(total)
    if observed == 0.0:
        return 1.0
    # Floating-point sums of the same magnitudes can differ in the last bits; count near-ties as ties.
    threshold = observed * (1.0 - 1e-9)
    n = len(values)
    if n <= EXACT_SIGN_FLIP_MAX_TASKS:
        hits = sum(1 for pattern in range(2**n) if abs(_flipped_sum(values, total, pattern)) >= threshold)
        return hits / 2**n
    rng = random.Random(seed)
    hits = sum(1 for _ in range(resamples) if abs(_flipped_sum(values, total, rng.getrandbits(n))) >= threshold)
    return (1 + hits) / (1 + resamples)


# Maps the ASCII digits of a binary string to the bytes 0 and 1, usable as itertools.compress selectors.
_BITS = bytes.maketrans(b"01", b"\x00\x01")


def _flipped_sum(values: Sequence[float], total: float, pattern: int) -> float:
    """sum_i s_i v_i for the sign pattern whose n binary digits (most significant first) mark s_i = -1.

    Equals the total minus twice the sum of the flipped values; the flipped ones are picked with
    itertools.compress, so the loop runs in C.
    """
    selectors = format(pattern, f"0{len(values)}b").encode().translate(_BITS)
    return total - 2.0 * sum(itertools.compress(values, selectors))


@dataclass(frozen=True)
class PairedDifference:
    """Mean per-task difference a - b over the tasks both arms have, with what it can tell apart."""

    estimate: float | None  # mean over shared tasks of (mean_a(t) - mean_b(t))
    low: float | None
    high: float | None
    n_tasks: int
    standard_error: float | None  # sd(d) / sqrt(T); None below two tasks
    minimum_detectable_effect: float | None  # (z_{1-a/2} + z_power) * standard_error
    p_value: float | None  # sign-flip test, before any multiplicity adjustment
    tasks: tuple[str, ...]

    @property
    def spans_zero(self) -> bool:
        """True when the interval includes 0, or there is no interval at all."""
        if self.low is None or self.high is None:
            return True
        return self.low <= 0.0 <= self.high


def minimum_detectable_effect(
    standard_error: float, *, confidence: float = DEFAULT_CONFIDENCE, power: float = DEFAULT_POWER
) -> float:
    """Smallest true difference a two-sided test at this level detects with the given power.

    MDE = (z_{1 - a/2} + z_{power}) * SE, a = 1 - confidence. At 95% and 80% power that is
    (1.960 + 0.842) * SE = 2.80 * SE (normal approximation for the mean paired difference).
    """
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be between 0 and 1, got {power}")
    return (two_sided_z(confidence) + NormalDist().inv_cdf(power)) * standard_error


def paired_difference(
    per_task_a: Mapping[str, Sequence[float]],
    per_task_b: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int,
    confidence: float = DEFAULT_CONFIDENCE,
    power: float = DEFAULT_POWER,
) -> PairedDifference:
    """Compare two arms on the tasks both have values for (sorted by name).

    d_t = mean(a_t) - mean(b_t) for each shared task t; estimate = (1/T) sum_t d_t.
    Interval: percentile bootstrap of the mean of the d_t, resampling tasks (see
    bootstrap_mean_interval). SE = sd(d) / sqrt(T). MDE: see minimum_detectable_effect.
    p-value: sign_flip_p_value of the d_t. Pairing by task removes the task-difficulty variation
    that dominates unpaired comparisons. With no shared task every figure is None; with one, only
    the estimate is given (no spread can be estimated from one difference).
    """
    tasks = tuple(sorted(t for t in per_task_a if t in per_task_b and per_task_a[t] and per_task_b[t]))
    if not tasks:
        return PairedDifference(None, None, None, 0, None, None, None, ())
    diffs = [mean(per_task_a[t]) - mean(per_task_b[t]) for t in tasks]
    estimate = mean(diffs)
    if len(diffs) < 2:
        return PairedDifference(estimate, None, None, 1, None, None, None, tasks)
    low, high = bootstrap_mean_interval(diffs, resamples=resamples, seed=seed, confidence=confidence)
    standard_error = sample_sd(diffs) / math.sqrt(len(diffs))
    return PairedDifference(
        estimate=estimate,
        low=low,
        high=high,
        n_tasks=len(tasks),
        standard_error=standard_error,
        minimum_detectable_effect=minimum_detectable_effect(standard_error, confidence=confidence, power=power),
        p_value=sign_flip_p_value(diffs, resamples=max(resamples, 1), seed=derive_seed(seed, "sign-flip")),
        tasks=tasks,
    )


# -- multiplicity --------------------------------------------------------------------------------------
def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, returned in the input order.

    Sort ascending, p_(1) <= ... <= p_(m); adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
    Rejecting where the adjusted p < a controls the family-wise error rate at a for any dependence
    between the tests, and is uniformly more powerful than Bonferroni. Ties keep input order.
    """
    m = len(p_values)
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


# -- pass^k --------------------------------------------------------------------------------------------
def pass_hat_k_task(successes: int, trials: int, k: int) -> float:
    """Unbiased estimate that k fresh trials of one task all pass: C(c, k) / C(n, k).

    Computed as prod_{i=0}^{k-1} (c - i) / (n - i) to avoid huge binomials. Needs 1 <= k <= n.
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if not 1 <= k <= trials:
        raise ValueError(f"pass^k needs 1 <= k <= trials, got k={k} with {trials} trials")
    if successes < k:
        return 0.0
    product = 1.0
    for i in range(k):
        product *= (successes - i) / (trials - i)
    return product


def pass_hat_k_curve(cells: Sequence[tuple[int, int]], k_max: int) -> list[float]:
    """[pass^1, ..., pass^k_max] in one sweep.

    Each task's term for k is its term for k - 1 times (c - k + 1) / (n - k + 1), so the whole
    curve costs O(k_max * tasks) rather than O(k_max^2 * tasks); values equal pass_hat_k(cells, k).
    """
    if not cells:
        raise ValueError("pass^k of no tasks")
    for c, n in cells:
        if not 0 <= c <= n:
            raise ValueError(f"need 0 <= successes <= trials, got {c}/{n}")
        if k_max > n:
            raise ValueError(f"pass^k needs k <= trials, got k={k_max} with {n} trials")
    terms = [1.0] * len(cells)
    curve = []
    for k in range(1, k_max + 1):
        terms = [term * max(0, c - k + 1) / (n - k + 1) for term, (c, n) in zip(terms, cells)]
        curve.append(mean(terms))
    return curve


def pass_hat_k(cells: Iterable[tuple[int, int]], k: int) -> float:
    """pass^k (tau-bench): mean over tasks of C(c_t, k) / C(n_t, k), for (c_t, n_t) per task.

    pass^1 is the mean success rate; pass^k falls as k grows unless every task passes reliably,
    so it measures consistency, not just capability. k may not exceed any task's trial count.
    """
    values = [pass_hat_k_task(c, n, k) for c, n in cells]
    if not values:
        raise ValueError("pass^k of no tasks")
    return mean(values)
