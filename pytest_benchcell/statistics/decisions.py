"""One decision for one paired comparison: "differs" (the test e-process reached 1/alpha),
"equivalent" (the confidence sequence lies inside the margin) or "undecided", each valid at every
reading (the adaptive sitting's stopping rule and the report's claims)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .descriptive import mean
from .e_processes import TOKEN_LOG_RATIO_CLIP, clip, sign_e_process, token_e_process
from .intervals import confidence_sequence


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
