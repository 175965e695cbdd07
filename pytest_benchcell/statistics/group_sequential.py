"""Claims under a declared horizon: an error-spending group-sequential test of one paired comparison.

With `[bench] horizon_pairs = N` declared before the first pair, each comparison's claims come from a
group-sequential test over its paired trials in recorded order instead of the anytime e-processes. The
error is spent by the O'Brien-Fleming-type function of Lan and DeMets (1983),

    alpha(t) = 2 - 2 Phi(z_{1 - a/2} / sqrt(t)),    t = pairs read / N  (the information fraction),

for each direction's share a. This is the spending of a Brownian motion watched without pause against
the constant boundary z_{1 - a/2} on the B-scale (the reflection principle: P(sup_{s <= t} W(s) >= c) =
2 (1 - Phi(c / sqrt(t)))), so its boundary on the standardized statistic after n pairs is

    Z_n >= z_{1 - a/2} * sqrt(N / n),

whatever readings are taken: reading after every pair is watching the path at more points, never more
often than without pause, so the level holds however often the report is read (a reading taken at fewer
points is only more conservative). Past N pairs nothing new is read: the verdict at N pairs stands (the
verdicts freeze; no share of alpha is kept for later).

Each reading's test is exact where it can be: success is the exact sign test (the binomial tail of the
pairs that differ, ties carrying no evidence) at the boundary's nominal level for that reading,
1 - Phi(z sqrt(N / n)); tokens are Student's t on the clipped log-ratios at that level (a normal
approximation; its level is measured at 8 tasks by benchmarks/calibration.py, with drift, heavy tails,
and the plugin's own allocation). The token figure's interval is the running intersection of the
repeated confidence intervals (Jennison and Turnbull 1989) of the same statistic, so a token claim and
its interval always agree; equivalence for tokens is that interval inside the margin. Success
equivalence keeps the anytime confidence sequence (valid under any horizon).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .e_processes import TOKEN_LOG_RATIO_CLIP, TOKEN_PRIOR_VARIANCE, clip
from .intervals import confidence_sequence, t_tail

_NORMAL = NormalDist()
# A reading whose nominal level is below this claims nothing by the t test and its interval is the whole
# range: the first few pairs of an O'Brien-Fleming boundary (about 10 of 80), where it asks for z above 7.
SMALLEST_NOMINAL = 1e-12
# The variance of the token statistic is shrunk by one pseudo-pair of TOKEN_PRIOR_VARIANCE, so a few
# identical log-ratios (a scripted model) never read as a variance of 0.
PRIOR_PAIRS = 1.0


def spent(fraction: float, share: float) -> float:
    """alpha(t) of the O'Brien-Fleming-type spending function for one direction's ``share`` at information
    fraction ``fraction`` (0 at 0, ``share`` at 1 and beyond)."""
    if fraction <= 0.0:
        return 0.0
    return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - share / 2.0) / math.sqrt(min(1.0, fraction)))


def boundary(pairs: int, horizon: int, share: float) -> float:
    """The boundary on the standardized statistic after ``pairs`` of ``horizon`` pairs: z_{1-share/2} sqrt(N/n)."""
    if not 0 < pairs:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    return _NORMAL.inv_cdf(1.0 - share / 2.0) * math.sqrt(horizon / min(pairs, horizon))


def nominal(pairs: int, horizon: int, share: float) -> float:
    """The one-sided level a reading after ``pairs`` pairs tests at: 1 - Phi(boundary)."""
    return _NORMAL.cdf(-boundary(pairs, horizon, share))


def sign_tail(agreeing: int, nonzero: int) -> float:
    """P(K >= agreeing) for K ~ Binomial(nonzero, 1/2): the exact one-sided sign test."""
    if not 0 <= agreeing <= nonzero:
        raise ValueError(f"need 0 <= agreeing <= nonzero, got {agreeing}/{nonzero}")
    if nonzero <= 1000:
        return math.fsum(math.comb(nonzero, k) for k in range(agreeing, nonzero + 1)) / 2.0**nonzero
    z = (2 * agreeing - nonzero - 1) / math.sqrt(nonzero)  # continuity-corrected beyond exact sums
    return _NORMAL.cdf(-z)


@functools.lru_cache(maxsize=4096)
def t_critical(level: float, df: float) -> float:
    """The t with P(T >= t) = level (bisection on t_tail, to a relative 1e-10)."""
    low, high = 0.0, 1.0
    while t_tail(high, df) > level:
        low, high = high, 2.0 * high
    while high - low > 1e-10 * high:
        middle = (low + high) / 2.0
        if t_tail(middle, df) > level:
            low = middle
        else:
            high = middle
    return high


@dataclass(frozen=True)
class SequentialReading:
    """A comparison under a horizon, read after its pairs so far (at most the horizon)."""

    direction: int  # +1: claimed b higher; -1: lower; 0: no claim at any reading so far
    read: int  # pairs read (the horizon's worth at most)
    statistic: float  # the standardized statistic at the last reading (success: the sign z, tokens: t)
    boundary: float  # the boundary it is held to there
    evidence: float  # max over readings of nominal / observed tail: >= 1 exactly when a claim was made
    interval: tuple[float, float] | None  # tokens: the running intersection of repeated intervals; success: the anytime sequence


def sequential_success(values: Sequence[float], *, horizon: int, level: float) -> SequentialReading:
    """The exact sign test at each reading against the boundary, over the first ``horizon`` differences
    (b - a in {-1, 0, 1}); ``level`` is the comparison's two-sided share of alpha."""
    read = list(values[:horizon])
    share = level / 2.0
    positives = nonzero = 0
    direction, evidence, statistic = 0, 0.0, 0.0
    for n, value in enumerate(read, start=1):
        if value:
            nonzero += 1
            positives += value > 0
        if not nonzero:
            continue
        agreeing = max(positives, nonzero - positives)
        ratio = nominal(n, horizon, share) / max(sign_tail(agreeing, nonzero), 1e-300)
        evidence = max(evidence, ratio)
        if ratio >= 1.0 and not direction and 2 * positives != nonzero:
            direction = 1 if 2 * positives > nonzero else -1
        statistic = (2 * positives - nonzero) / math.sqrt(nonzero)
    interval = confidence_sequence(read, low=-1.0, high=1.0, alpha=level)[-1] if read else None
    last = boundary(max(1, len(read)), horizon, share)
    return SequentialReading(direction, len(read), statistic, last, evidence, interval)


def sequential_tokens(values: Sequence[float], *, horizon: int, level: float, bound: float = TOKEN_LOG_RATIO_CLIP) -> SequentialReading:
    """Student's t on the clipped log-ratios at each reading against the boundary, over the first
    ``horizon`` pairs, with the running intersection of the repeated confidence intervals."""
    read = [clip(float(v), bound) for v in values[:horizon]]
    share = level / 2.0
    squares = mean = 0.0
    direction, evidence, statistic = 0, 0.0, 0.0
    low, high = -bound, bound
    for n, value in enumerate(read, start=1):
        step = value - mean
        mean += step / n
        squares += step * (value - mean)
        if n < 2:
            continue
        level_here = nominal(n, horizon, share)
        variance = (squares + PRIOR_PAIRS * TOKEN_PRIOR_VARIANCE) / (n - 1 + PRIOR_PAIRS)
        error = math.sqrt(variance / n)
        statistic = mean / error
        tail = t_tail(abs(statistic), n - 1)
        if level_here >= SMALLEST_NOMINAL:
            ratio = level_here / max(tail, 1e-300)
            evidence = max(evidence, ratio)
            if ratio >= 1.0 and not direction and statistic != 0:
                direction = 1 if statistic > 0 else -1
            half = t_critical(level_here, n - 1) * error
            low, high = max(low, mean - half), min(high, mean + half)
    if low > high:  # an empty intersection (probability below the level): the point where the ends met
        low = high = (low + high) / 2.0
    if direction and (low <= 0.0 <= high):  # the claim and the interval are one test; rounding only
        low, high = (max(low, 1e-12), max(high, 1e-12)) if direction > 0 else (min(low, -1e-12), min(high, -1e-12))
    last = boundary(max(1, len(read)), horizon, share)
    return SequentialReading(direction, len(read), statistic, last, evidence, (low, high) if read else None)
