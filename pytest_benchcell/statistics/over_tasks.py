"""Comparisons over tasks ("generalizes to tasks like these"): the task is the unit of replication.
The sign-flip test, the paired per-task difference with its t interval, and Holm's adjustment for a
family of such tests."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .descriptive import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, derive_seed, mean
from .intervals import MIN_TASKS_FOR_INTERVAL, t_interval


# Up to this many tasks the sign-flip test enumerates all 2^n sign patterns (4,096 at 12), so its
# p-value is exact; above it, a seeded Monte-Carlo sample of sign patterns is used.
EXACT_SIGN_FLIP_MAX_TASKS = 12


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
