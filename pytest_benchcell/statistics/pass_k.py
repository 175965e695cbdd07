"""pass^k (tau-bench): the chance that k fresh trials of a task all pass, averaged over tasks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .descriptive import mean


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
