"""The defaults every figure shares, small descriptive statistics (fsum means, type-7 quantiles),
per-figure seeds and the normal quantile."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist  # the stdlib module: imports are absolute


Z_95 = 1.959964  # two-sided 95% normal quantile, z_{0.975}
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_POWER = 0.80


def check_confidence(confidence: float) -> None:
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
    check_confidence(confidence)
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2)
