"""The interval printed beside a token claim: the confidence sequence of the test that made the claim.

A token claim comes from token_e_process (the sign e-process mixed with the variance-adaptive bet) at
no difference. The same test run on the log-ratios shifted by d, v - d, tests "the pairs' log-ratios
are symmetric about d" (two lognormal trials of one task, b's scaled by exp(d), give exactly that), and
the shifts it never rejects at the claim's bar form a confidence sequence for d, valid at every reading
(Ville's inequality at each d; Howard et al., "Time-uniform confidence sequences", 2021, invert tests
this way). At d = 0 it is the claim's own test, so a claim always sits beside an interval that excludes
no difference, and an interval that excludes it always comes with a claim: one statement, not two
procedures that may disagree (the empirical-Bernstein sequence of the mean, which equivalence uses, can
hold 0 while the sharper test claims).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .e_processes import TOKEN_LOG_RATIO_CLIP, clip, token_e_process

# The ends are found by bisection to this precision on the log scale (a ratio's third decimal).
_PRECISION = 1e-4
# Points tried, each side of no difference, to find a shift the test does not reject.
_PROBES = 48


def rejected(values: Sequence[float], shift: float, claim_e: float, *, bound: float = TOKEN_LOG_RATIO_CLIP) -> bool:
    """Whether the token test of "symmetric about ``shift``" ever reached ``claim_e`` over ``values`` (raw
    log-ratios, in recorded order; each shifted value is clipped as the test at 0 clips)."""
    evidence = token_e_process([clip(v - shift, bound) for v in values], bound=bound)
    return max(evidence.max_up, evidence.max_down) >= claim_e


def token_claim_interval(
    values: Sequence[float], *, claim_e: float, direction: int, bound: float = TOKEN_LOG_RATIO_CLIP
) -> tuple[float, float]:
    """The shifts d in [-bound, bound] the token test does not reject at ``claim_e``, for a claim made in
    ``direction`` (+1: b spends more, the log-ratios lie above 0; -1 below).

    The claim rejected d = 0, so the interval is searched on the claimed side only: an unrejected shift
    there (the median, else the first of _PROBES evenly spaced), then each end by bisection towards 0 and
    towards the bound (an end at the bound reads "that far or farther", as for the other intervals). If
    no shift on that side survives (the sequence is empty, which happens with probability at most
    1 / claim_e), the interval is the point nearest to it: the median, kept on the claimed side.
    """
    if direction not in (-1, 1):
        raise ValueError(f"direction must be +1 or -1, got {direction}")
    if not values:
        raise ValueError("a claim interval needs at least one pair")
    side = float(direction)
    ordered = sorted(clip(v, bound) for v in values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
    candidates = [median] if median * side > 0 else []
    candidates += [side * bound * (i + 1) / _PROBES for i in range(_PROBES)]
    inside = next((d for d in candidates if not rejected(values, d, claim_e, bound=bound)), None)
    if inside is None:
        point = side * max(abs(median) if median * side > 0 else 0.0, _PRECISION)
        return (point, point)
    near = _edge(values, claim_e, bound, rejected_at=0.0, kept_at=inside)
    far_end = side * bound
    far = far_end if not rejected(values, far_end, claim_e, bound=bound) else _edge(values, claim_e, bound, far_end, inside)
    return (min(near, far), max(near, far))


def _edge(values: Sequence[float], claim_e: float, bound: float, rejected_at: float, kept_at: float) -> float:
    """The boundary between a rejected and a kept shift, by bisection; the kept side is returned, so the
    end printed is one the test keeps."""
    for _ in range(int(math.ceil(math.log2(max(abs(kept_at - rejected_at), _PRECISION) / _PRECISION))) + 1):
        middle = (rejected_at + kept_at) / 2.0
        if rejected(values, middle, claim_e, bound=bound):
            rejected_at = middle
        else:
            kept_at = middle
    return kept_at
