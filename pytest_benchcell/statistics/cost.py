"""Cost per verified success ("with our CLI a task is solved for 31k tokens"): Fieller's interval per
arm, and the ratio of two arms' on the log scale."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .descriptive import DEFAULT_CONFIDENCE, check_confidence, mean, two_sided_z


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
    check_confidence(confidence)
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
    if all(len(set(cell)) == 1 for cell in cells):
        # No spread within any task (every trial of a task cost the same and passed alike, as with a
        # scripted model): the interval is the point itself, whatever the rounding of the quadratic
        # (which could land just below 0 and read as "unbounded" for one arm and a point for another).
        return CostPerSuccess(ratio, ratio, ratio, per_trial, rate, 0.0)
    if discriminant < 0 and -discriminant <= 1e-9 * half_b * half_b:
        discriminant = 0.0  # no spread at all: the two products differ by rounding only, P is far from 0
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
