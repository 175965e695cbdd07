"""The statistics behind the report: Wilson and t intervals, lognormal means, sign and betting e-processes,
confidence sequences, paired decisions, Holm, pass^k.

Pure and stdlib-only (Student's t is computed here from the regularized incomplete beta, so the base
install needs no scipy). Every Monte-Carlo function takes an explicit integer ``seed`` and draws from
its own ``random.Random(seed)``, so the same inputs always give the same numbers (the report promises
byte-identical output for the same store). Inputs are used in the order given; callers that want
order independence sort first (the report sorts tasks by name).

Two scopes
----------
* **Tasks like these** (intervals over tasks, the sign-flip test over tasks): the task is the unit of
  replication. Trials of one task are correlated (same prompt, same environment), so these figures
  treat each task's mean as one observation and need several tasks whatever the trial count.
* **These tasks** (the sign e-process over paired trials): the tasks are fixed and the trials within
  them are the replicates, so twelve agreeing trials on four tasks are evidence about those four.

Deciding one paired comparison (the adaptive sitting's stopping rule and the report's token claim)
------------------------------------------------------------------------------------------------------
``compare_paired(differences, *, metric, alpha, margin) -> PairedDecision`` takes the per-pair
differences of arms a and b in the order they were recorded (success: b - a in {-1, 0, 1}; tokens:
``token_log_ratio(tokens_a, tokens_b)`` = log(tokens_b / tokens_a)) and returns a frozen
``PairedDecision`` with ``decision`` in {"differs", "equivalent", "undecided"}, ``direction`` (+1: b
higher), ``estimate``, ``interval`` (lo, hi) of an anytime-valid confidence sequence for the mean
difference, ``e_value`` (the largest value the test e-process reached) and ``n``. "differs": the test
e-process (success: the sign e-process; tokens: token_e_process, constant bets on the clipped
log-ratios mixed with the sign e-process) reached 1/alpha; "equivalent": ``margin`` is given and the whole confidence sequence lies inside (-margin,
margin). Both guarantees hold however often the call is repeated as pairs arrive, so a caller may stop
a comparison as soon as it is decided.

benchmarks/calibration.py measures coverage, error rates and power of each method at the sizes benches
have (4 to 8 tasks, 3 to 10 trials per cell); the README quotes its table.

Conventions: quantiles are type 7 (Hyndman & Fan, the default of numpy and R): for sorted
x_0..x_{m-1} and level q, h = (m-1)q, Q(q) = x_floor(h) + (h - floor(h)) (x_floor(h)+1 - x_floor(h)).
A central interval at confidence c takes Q(a/2) and Q(1 - a/2) with a = 1 - c.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom: 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


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
    _check_confidence(confidence)
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
    _check_confidence(confidence)
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

# -- comparison over tasks ("generalizes to tasks like these") -----------------------------------------
def sign_flip_p_value(differences: Sequence[float], *, resamples: int = 10_000, seed: int) -> float:
    """Two-sided paired sign-flip (randomisation) test of "the mean difference is zero".

    Under the null hypothesis each per-task difference d_t is as likely to be +d_t as -d_t. The
    statistic is |sum_t d_t|; the p-value is the share of sign patterns s in {-1, +1}^T with
    |sum_t s_t d_t| >= |sum_t d_t|.

    * T <= 12: all 2^T patterns are enumerated, p = hits / 2^T (exact). With T tasks the smallest
      possible p is 2 / 2^T, so three tasks can never give p < 0.25: no claim from too few tasks.
    * T > 12: B = `resamples` seeded random patterns, p = (1 + hits) / (1 + B) (never exactly 0).

    A sum of zero gives p = 1, also when float rounding leaves a residue (0.6 - 0.8 + 0.8 - 0.6 is not
    exactly 0): a sum below 1e-9 of sum |d_t| counts as zero.
    """
    values = [float(d) for d in differences]
    if not values:
        raise ValueError("a paired test needs at least one difference")
    total = math.fsum(values)
    observed = abs(total)
    if observed <= 1e-9 * math.fsum(abs(v) for v in values):
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


def sign_flip_tasks_needed(alpha: float) -> int:
    """Fewest tasks for which the exact sign-flip test can reach p < alpha (2 / 2^T < alpha)."""
    tasks = 1
    while 2 / 2**tasks >= alpha:
        tasks += 1
    return tasks


@dataclass(frozen=True)
class PairedDifference:
    """Mean per-task difference a - b over the tasks both arms have, as evidence about tasks like these."""

    estimate: float | None  # mean over shared tasks of (mean_a(t) - mean_b(t))
    low: float | None  # t interval over the per-task differences; None below MIN_TASKS_FOR_INTERVAL
    high: float | None
    n_tasks: int
    p_value: float | None  # sign-flip test over tasks, before any multiplicity adjustment
    tasks: tuple[str, ...]


def paired_difference(
    per_task_a: Mapping[str, Sequence[float]],
    per_task_b: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedDifference:
    """Compare two arms on the tasks both have values for (sorted by name), tasks being the unit.

    d_t = mean(a_t) - mean(b_t) for each shared task t; estimate = (1/T) sum_t d_t; interval:
    t_interval of the d_t (from MIN_TASKS_FOR_INTERVAL tasks on); p-value: sign_flip_p_value of the
    d_t. Pairing by task removes the task-difficulty variation that dominates unpaired comparisons.
    With no shared task every figure is None; with one, only the estimate is given.
    """
    tasks = tuple(sorted(t for t in per_task_a if t in per_task_b and per_task_a[t] and per_task_b[t]))
    if not tasks:
        return PairedDifference(None, None, None, 0, None, ())
    diffs = [mean(per_task_a[t]) - mean(per_task_b[t]) for t in tasks]
    estimate = mean(diffs)
    if len(diffs) < 2:
        return PairedDifference(estimate, None, None, 1, None, tasks)
    low, high = t_interval(diffs, confidence=confidence) if len(diffs) >= MIN_TASKS_FOR_INTERVAL else (None, None)
    return PairedDifference(
        estimate=estimate,
        low=low,
        high=high,
        n_tasks=len(tasks),
        p_value=sign_flip_p_value(diffs, resamples=max(resamples, 1), seed=derive_seed(seed, "sign-flip")),
        tasks=tasks,
    )


# -- comparison within tasks ("for these tasks"), valid however often it is read ---------------------------
# Trials of two arms on the same task are paired in the order they ran (the k-th trial of a with the k-th
# of b); each pair gives one difference D = a - b. If the arms do not differ on these tasks, the two trials
# of a pair are exchangeable, so D is as likely positive as negative whatever happened before. The
# evidence against that is a test martingale over the pairs in the order they completed, so by Ville's
# inequality the chance that it EVER reaches 1/alpha is at most alpha: the report may be read after every
# sitting (or every trial) and a claim is still wrong at most alpha of the time.
def sign_e_value(positives: int, nonzero: int) -> float:
    """Evidence of `positives` positive signs among `nonzero` non-zero differences: 2^m / ((m + 1) C(m, k)).

    The likelihood of the signs under "P(D > 0 | D != 0) = theta", averaged over theta uniform on
    [0, 1] (the Laplace mixture), divided by their likelihood at theta = 1/2. Its expectation under the
    null is 1 at every m, and it grows as fast as the best fixed theta up to a (1/2) log m term. Both
    directions count (it is two-sided); 0 of 0 gives 1.
    """
    if not 0 <= positives <= nonzero:
        raise ValueError(f"need 0 <= positives <= nonzero, got {positives}/{nonzero}")
    log_e = (
        nonzero * math.log(2.0) - math.log(nonzero + 1.0)
        - (math.lgamma(nonzero + 1.0) - math.lgamma(positives + 1.0) - math.lgamma(nonzero - positives + 1.0))
    )  # fmt: skip
    return math.exp(min(log_e, 700.0))


class _PeakedEvidence:
    """What an e-process that keeps its largest value per direction (max_up, max_down) gives a reader:
    shared by the sign and the betting e-processes."""

    max_up: float
    max_down: float

    @property
    def anytime_p(self) -> float:
        """min(1, 1 / the largest e-value ever reached): P(ever <= alpha) <= alpha under the null."""
        return min(1.0, 1.0 / max(self.max_up, self.max_down))

    @property
    def direction(self) -> int:
        """+1 if the evidence peaked pointing up (most signs positive / a mean above 0), -1 down, 0 if neither."""
        if self.max_up == self.max_down:
            return 0
        return 1 if self.max_up > self.max_down else -1


@dataclass(frozen=True)
class SignEvidence(_PeakedEvidence):
    """The sign e-process of a sequence of paired differences, read at its end."""

    pairs: int
    nonzero: int
    positives: int
    e_value: float  # at the end of the sequence
    max_up: float  # the largest e-value reached while most non-zero signs were positive (1 if never)
    max_down: float  # the same while most were negative


def sign_e_process(differences: Iterable[float]) -> SignEvidence:
    """Run sign_e_value over the differences in the order given; zeros (ties) carry no evidence.

    The running maxima are kept per direction: a claim "a is higher" needs the half of the mixture
    over theta > 1/2, which exceeds the whole mixture whenever most signs are positive, so a peak of
    the whole mixture reached with a positive majority is also evidence for that direction at the
    same level (and the same for negative).
    """
    pairs = nonzero = positives = 0
    log_up = log_down = log_value = 0.0
    log2 = math.log(2.0)
    for difference in differences:
        pairs += 1
        if difference == 0:
            continue
        # e(k, m) from e at the previous pair: one more positive multiplies it by 2 (k + 1) / (m + 2),
        # one more negative by 2 (m + 1 - k) / (m + 2) (from C(m + 1, k + 1) = C(m, k) (m + 1) / (k + 1)).
        agreeing = positives + 1 if difference > 0 else nonzero + 1 - positives
        log_value += log2 + math.log(agreeing) - math.log(nonzero + 2)
        nonzero += 1
        positives += difference > 0
        if 2 * positives > nonzero:
            log_up = max(log_up, log_value)
        elif 2 * positives < nonzero:
            log_down = max(log_down, log_value)
    value, max_up, max_down = (math.exp(min(v, 700.0)) for v in (log_value, log_up, log_down))
    return SignEvidence(pairs, nonzero, positives, value, max_up, max_down)


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
    for k in itertools.chain(range(0, k_low + 1), range(k_high, nonzero + 1)):
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


# -- paired comparisons in recorded order, by betting (magnitude-aware; valid at every look) ------------
# The sign e-process above uses only which arm of a pair was higher. For tokens the size of the gap
# carries most of the evidence, so tokens are compared on the paired log-ratio log(tokens_b / tokens_a)
# with a betting e-process (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
# betting", JRSS-B 2024; Shafer, "Testing by betting", 2021). The log-ratio is clipped to
# [-TOKEN_LOG_RATIO_CLIP, +TOKEN_LOG_RATIO_CLIP] so that a bet can never lose more than it stakes.
#
# Identical arms make the two trials of a pair exchangeable, so a pair's clipped log-ratio is
# symmetric about 0 given everything recorded before it: its conditional mean is 0 and each wealth
# process below is a test martingale. Ville's inequality then bounds the chance that it EVER reaches
# 1/alpha by alpha, however often the report is read and whatever was done between readings.
TOKEN_LOG_RATIO_CLIP = math.log(2.5)  # a pair 2.5 times apart counts as 2.5 times apart
# The constant stakes the betting e-process mixes, as shares of wealth on x = clipped value / clip in
# [-1, 1]: each way, a cautious and a bold one. A mixture of constant bets was chosen over a plug-in
# (predictable, learned) bet because at the sizes benches have (80 pairs) learning the bet costs more
# than the mixture's log(4): power for tokens 20% dearer at 8 tasks x 10 trials (trial log-sd 0.3,
# claim at e >= 40) is about 86% for such a mixture alone and 79% for the aGRAPA plug-in (a simulation
# of the e-process alone; benchmarks/calibration.py measures the report's).
BETS = (0.7, 0.95)


def token_log_ratio(tokens_a: float, tokens_b: float) -> float:
    """log((tokens_b + 1) / (tokens_a + 1)): > 0 when b spent more. The +1 keeps a zero-token trial finite."""
    if tokens_a < 0 or tokens_b < 0:
        raise ValueError(f"token counts cannot be negative, got {tokens_a} and {tokens_b}")
    return math.log((tokens_b + 1.0) / (tokens_a + 1.0))


def clip(value: float, bound: float) -> float:
    """value cut to [-bound, bound]."""
    return max(-bound, min(bound, value))


@dataclass(frozen=True)
class BettingEvidence(_PeakedEvidence):
    """A two-sided e-process over paired values in recorded order, read at its end.

    For betting_e_process, e = (K_up + K_down) / 2 with K_up = mean over l in BETS of prod_i (1 + l x_i)
    (betting that the mean is above 0) and K_down = mean over l in BETS of prod_i (1 - l x_i), where
    x_i = the clipped value / the clip, in [-1, 1]. Every product is a test martingale when the mean is
    0, so any average of them is one too.
    """

    pairs: int
    e_value: float  # at the end of the sequence
    max_up: float  # the largest e reached while the evidence pointed above 0 (1 if never)
    max_down: float  # the same while it pointed below 0


class _Betting:
    """The running state of the betting e-process: log wealth of every constant bet, each way."""

    def __init__(self, bound: float) -> None:
        if not bound > 0:
            raise ValueError(f"the bound must be > 0, got {bound}")
        self.bound = bound
        self.log_up = [0.0] * len(BETS)
        self.log_down = [0.0] * len(BETS)

    def add(self, value: float) -> None:
        x = clip(float(value), self.bound) / self.bound
        for j, bet in enumerate(BETS):
            self.log_up[j] += math.log1p(bet * x)
            self.log_down[j] += math.log1p(-bet * x)

    def up(self) -> float:
        return _mean_of_exps(self.log_up)

    def down(self) -> float:
        return _mean_of_exps(self.log_down)


def _mean_of_exps(logs: Sequence[float]) -> float:
    return math.fsum(math.exp(min(v, 700.0)) for v in logs) / len(logs)


def betting_e_process(values: Iterable[float], *, bound: float) -> BettingEvidence:
    """Run the two-sided betting e-process of BettingEvidence over values clipped to [-bound, bound].

    A claim that the mean is above 0 needs K_up alone at 1/alpha; K_up >= e whenever K_up > K_down,
    so a peak of e reached then is evidence for that direction at the same level (and the same below),
    as for the sign e-process.
    """
    state = _Betting(bound)
    pairs = 0
    e_now, best_up, best_down = 1.0, 1.0, 1.0
    for value in values:
        state.add(value)
        pairs += 1
        up, down = state.up(), state.down()
        e_now = (up + down) / 2.0
        if up > down:
            best_up = max(best_up, e_now)
        elif down > up:
            best_down = max(best_down, e_now)
    return BettingEvidence(pairs, e_now, best_up, best_down)


# Share of the token e-process given to the sign e-process. Betting on magnitudes needs many pairs
# when a gap is small against the clip, however consistent it is (12 pairs all 1.3 times apart reach
# e ~ 7), where the sign e-process gives 2^12/13 = 315: with 0.3 of it a consistent gap is claimed
# about as soon as the signs alone would claim it (the example bench's, three arms, claim level 120,
# reaches e = 136). The price in the e-process-alone simulation above: power 82% instead of 86%.
TOKEN_SIGN_WEIGHT = 0.3


def token_e_process(values: Iterable[float], *, bound: float = TOKEN_LOG_RATIO_CLIP) -> BettingEvidence:
    """The e-process of the token comparison: TOKEN_SIGN_WEIGHT x sign e-process + the rest x betting e-process.

    A weighted average of two test martingales of the same pairs is one. A direction is credited only
    while both agree (most signs positive and K_up > K_down, or both the other way): then each part's
    half for that direction is at least the part itself, so the peak is evidence for that direction
    at the same level.
    """
    state = _Betting(bound)
    log2 = math.log(2.0)
    pairs = nonzero = positives = 0
    log_sign = 0.0
    e_now, best_up, best_down = 1.0, 1.0, 1.0
    for raw in values:
        value = clip(float(raw), bound)
        state.add(value)
        pairs += 1
        if value != 0:
            agreeing = positives + 1 if value > 0 else nonzero + 1 - positives
            log_sign += log2 + math.log(agreeing) - math.log(nonzero + 2)
            nonzero += 1
            positives += value > 0
        up, down = state.up(), state.down()
        e_now = TOKEN_SIGN_WEIGHT * math.exp(min(log_sign, 700.0)) + (1.0 - TOKEN_SIGN_WEIGHT) * (up + down) / 2.0
        if 2 * positives > nonzero and up > down:
            best_up = max(best_up, e_now)
        elif 2 * positives < nonzero and down > up:
            best_down = max(best_down, e_now)
    return BettingEvidence(pairs, e_now, best_up, best_down)


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


# -- one decision for one paired comparison -------------------------------------------------------------
DIFFERS, EQUIVALENT, UNDECIDED = "differs", "equivalent", "undecided"
SUCCESS, TOKENS = "success", "tokens"


@dataclass(frozen=True)
class PairedDecision:
    """What the paired differences so far decide (see compare_paired).

    The test behind "differs" and the confidence sequence behind ``interval`` are separate procedures,
    each valid at every reading: the test is the sharper of the two, so "differs" can come while the
    interval still holds 0 (the interval says how large the difference may be, the test whether there
    is one).
    """

    decision: str  # "differs" | "equivalent" | "undecided"
    direction: int  # with "differs": +1 when b is higher (more successes, more tokens), -1 when lower; else 0
    estimate: float | None  # mean of the (clipped, for tokens) differences; None for no pair
    interval: tuple[float, float]  # the anytime-valid confidence sequence's current interval for the mean
    e_value: float  # the largest value the test e-process ever reached: min(1, 1/e_value) is the anytime p
    n: int  # pairs used


def compare_paired(
    differences: Sequence[float], *, metric: str, alpha: float = 0.05, margin: float | None = None
) -> PairedDecision:
    """Decide one paired comparison of arms a and b from its per-pair differences, in recorded order.

    ``differences``: success b - a in {-1, 0, 1}; tokens log(tokens_b / tokens_a) (token_log_ratio).
    Returns "differs" when the test e-process ever reached 1/alpha (success: the sign e-process;
    tokens: token_e_process on the clipped log-ratio), "equivalent" when ``margin`` (> 0, in
    the differences' units: a share of successes, or a log-ratio such as log(1.2)) is given and the
    whole confidence sequence lies inside (-margin, margin), else "undecided". Each claim keeps its
    own guarantee however often this is called as pairs arrive: a wrong "differs" (arms identical)
    at most alpha, a wrong "equivalent" (every pair's mean difference at least margin one way) at
    most alpha / 2.
    """
    if metric not in (SUCCESS, TOKENS):
        raise ValueError(f"metric must be {SUCCESS!r} or {TOKENS!r}, got {metric!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if margin is not None and not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    values = [float(d) for d in differences]
    if metric == SUCCESS:
        if any(v not in (-1.0, 0.0, 1.0) for v in values):
            raise ValueError("success differences must be -1, 0 or 1")
        bound = 1.0
        sign = sign_e_process(values)
        e_max, direction = max(sign.max_up, sign.max_down), sign.direction
    else:
        bound = TOKEN_LOG_RATIO_CLIP
        values = [clip(v, bound) for v in values]
        bet = token_e_process(values, bound=bound)
        e_max, direction = max(bet.max_up, bet.max_down), bet.direction
    if not values:
        return PairedDecision(UNDECIDED, 0, None, (-bound, bound), 1.0, 0)
    interval = confidence_sequence(values, low=-bound, high=bound, alpha=alpha)[-1]
    estimate = mean(values)
    if e_max >= 1.0 / alpha and direction != 0:
        decision = DIFFERS
    elif margin is not None and -margin < interval[0] and interval[1] < margin:
        decision, direction = EQUIVALENT, 0
    else:
        decision, direction = UNDECIDED, 0
    return PairedDecision(decision, direction, estimate, interval, e_max, len(values))


# -- cost per verified success ("with our CLI a task is solved for 31k tokens") ---------------------------
@dataclass(frozen=True)
class CostPerSuccess:
    """Tokens spent per verified success over a fixed set of tasks, with a Fieller interval.

    estimate = (sum_t m_t) / (sum_t p_t), m_t the mean tokens per trial of task t and p_t its pass
    rate: running every task once costs sum_t m_t tokens and verifies sum_t p_t successes on average,
    so each success costs their ratio (every task weighs the same; with equal trial counts it is the
    tokens of all trials divided by the passes). None when nothing passed.
    """

    estimate: float | None
    low: float | None
    high: float | None  # None: unbounded above (the passes could be zero at this confidence)
    tokens_per_trial: float  # (1/T) sum_t m_t
    success_rate: float  # (1/T) sum_t p_t
    log_variance: float | None  # delta-method variance of log(estimate), for ratios between arms


def cost_per_success(
    cells: Sequence[Sequence[tuple[float, bool]]], *, confidence: float = DEFAULT_CONFIDENCE
) -> CostPerSuccess:
    """Cost per verified success over the given tasks, each a list of (tokens, passed) per trial.

    The interval is about these tasks (the trials within each task are the replicates): Fieller's
    interval for the ratio R = M / P of M = sum_t m_t and P = sum_t p_t, the set of R with
    (M - R P)^2 <= z^2 Var(M - R P), Var(M - R P) = sum_t s_t^2(tokens - R passed) / n_t (sample
    variances within each task). It is not symmetric and becomes unbounded above when P is within
    z standard errors of 0. Every task needs at least two trials.
    """
    _check_confidence(confidence)
    if not cells or any(len(cell) < 2 for cell in cells):
        raise ValueError("cost per success needs at least one task and two trials per task")
    z = two_sided_z(confidence)
    tokens_sum = passes_sum = var_tokens = covariance = var_passes = 0.0
    for cell in cells:
        n = len(cell)
        tokens = [float(t) for t, _ in cell]
        passed = [1.0 if p else 0.0 for _, p in cell]
        m, p = mean(tokens), mean(passed)
        tokens_sum += m
        passes_sum += p
        var_tokens += math.fsum((t - m) ** 2 for t in tokens) / (n - 1) / n
        covariance += math.fsum((t - m) * (s - p) for t, s in zip(tokens, passed)) / (n - 1) / n
        var_passes += math.fsum((s - p) ** 2 for s in passed) / (n - 1) / n
    count = len(cells)
    per_trial, rate = tokens_sum / count, passes_sum / count
    if passes_sum == 0:
        return CostPerSuccess(None, None, None, per_trial, rate, None)
    ratio = tokens_sum / passes_sum
    z2 = z * z
    # (P^2 - z^2 C) R^2 - 2 (M P - z^2 B) R + (M^2 - z^2 A) <= 0
    quad = passes_sum**2 - z2 * var_passes
    half_b = tokens_sum * passes_sum - z2 * covariance
    const = tokens_sum**2 - z2 * var_tokens
    discriminant = half_b * half_b - quad * const
    if quad <= 0 or discriminant < 0:
        low, high = 0.0, None  # P is not clearly above 0: any cost per success is possible
    else:
        root = math.sqrt(discriminant)
        low, high = max(0.0, (half_b - root) / quad), (half_b + root) / quad
    spread = var_tokens - 2.0 * ratio * covariance + ratio * ratio * var_passes
    return CostPerSuccess(ratio, low, high, per_trial, rate, max(spread, 0.0) / tokens_sum**2 if tokens_sum > 0 else None)


def cost_per_success_ratio(
    a: CostPerSuccess, b: CostPerSuccess, *, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float, float] | None:
    """(ratio, low, high) of a's cost per success to b's, on the log scale by the delta method:
    exp(log R_a - log R_b +- z sqrt(Var log R_a + Var log R_b)) (the arms' trials are independent).
    None when either arm has no success."""
    if a.estimate is None or b.estimate is None or a.log_variance is None or b.log_variance is None:
        return None
    if a.estimate <= 0 or b.estimate <= 0:
        return None
    centre = math.log(a.estimate) - math.log(b.estimate)
    half = two_sided_z(confidence) * math.sqrt(a.log_variance + b.log_variance)
    return (math.exp(centre), math.exp(centre - half), math.exp(centre + half))


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
