"""One decision for one paired comparison: "differs" (the test e-process reached 1/alpha),
"equivalent" (the confidence sequence lies inside the margin) or "undecided", each valid at every
reading; and the family they are judged in (Family: Bonferroni on e-values) with ``decide``, the one
verdict the plan, the sitting and every report format print."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .claim_interval import token_claim_interval
from .descriptive import mean
from .e_processes import TOKEN_LOG_RATIO_CLIP, BettingEvidence, SignEvidence, clip, sign_e_process, token_e_process, token_log_ratio
from .group_sequential import sequential_success, sequential_tokens
from .intervals import MIN_TASKS_FOR_INTERVAL, confidence_sequence


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
    e_now: float = 1.0  # the test e-process at the last pair


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
        evidence: SignEvidence | BettingEvidence = sign_e_process(values)
    else:
        bound = TOKEN_LOG_RATIO_CLIP
        values = [clip(v, bound) for v in values]
        evidence = token_e_process(values, bound=bound)
    e_max, direction = max(evidence.max_up, evidence.max_down), evidence.direction
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
    return PairedDecision(decision, direction, estimate, interval, e_max, len(values), evidence.e_value)


# -- the one verdict of a comparison, for the plan, the sitting and every report format ------------------
METRICS = (SUCCESS, TOKENS)
BONFERRONI = "Bonferroni over the family's e-processes"
Outcome = tuple[bool, "float | None"]  # one trial: passed, cost-equivalent tokens (None: usage unknown)


@dataclass(frozen=True)
class Family:
    """The comparisons judged together and the correction over them: Bonferroni on e-values.

    Each of the ``size`` comparisons (pairs of arms x METRICS) claims a difference when its e-process
    ever reaches size / alpha, and equivalence when its confidence sequence at alpha / size lies
    inside the margin. By Ville's inequality a null comparison's e-process ever reaches size / alpha
    with probability at most alpha / size, so the chance of any wrong claim in the family, at any
    reading and under any stopping rule, is at most alpha. The bar is the same at every reading, so a
    claim once made stays made: no step-down lowers it as other comparisons are claimed (a Holm-type
    step-down on running maxima loses its guarantee under optional stopping, and one on current
    e-values can withdraw a claim at a later reading).
    """

    size: int  # comparisons in the family: declared pairs x metrics
    alpha: float = 0.05
    # [bench] horizon_pairs: the claims come from the group-sequential test (group_sequential.py) over
    # the first `horizon` pairs of each comparison; None: the anytime e-processes, without end.
    horizon: int | None = None

    @classmethod
    def of(cls, pairs: int, alpha: float = 0.05, horizon: int | None = None) -> Family:
        return cls(max(1, pairs * len(METRICS)), alpha, horizon)

    @property
    def level(self) -> float:
        """Each comparison's share of alpha."""
        return self.alpha / self.size

    @property
    def claim_e(self) -> float:
        """The e-value a difference claim needs."""
        return self.size / self.alpha


@dataclass(frozen=True)
class Verdict:
    """One comparison of arms a and b on one metric, read from its paired trials (see decide).

    Oriented b - a: success the mean difference in passes, tokens the mean clipped log(tokens_b / tokens_a).
    """

    metric: str
    decision: str  # differs | equivalent | undecided
    direction: int  # with "differs": +1 when b is higher (passes, tokens), -1 when lower; else 0
    estimate: float | None  # None: no pair (with known usage, for tokens)
    # The interval of the test behind the decision, at the family's level (see _shown_interval); None below
    # MIN_TASKS, with no pair, or beside a success difference (its sign count is the statement instead).
    interval: tuple[float, float] | None
    e_value: float  # the largest value the e-process reached
    e_now: float  # its value at the last pair
    claim_e: float  # the e-value a difference needs (Family.claim_e)
    pairs: int  # pairs that carry this metric (tokens: both usages known)
    nonzero: int  # pairs with a difference
    positives: int  # pairs with b - a > 0
    clipped: int  # token pairs more than the clip apart (counted at the clip)
    tasks: int  # shared tasks the pairs come from
    margin: float | None  # the smallest effect on this scale (tokens: a log-ratio); None: not declared
    horizon: int | None = None  # the family's horizon in pairs (the group-sequential test); None: anytime e-processes


def decide(
    outcomes: Sequence[tuple[Outcome, Outcome]], *, metric: str, family: Family, margin: float | None, tasks: int,
    compare: Callable[..., PairedDecision] = compare_paired,
) -> Verdict:  # fmt: skip
    """The one decision of a comparison: every place that prints a comparison (the plan of `--bench-fill
    decide`, the sitting's summary, every report format, the forest plot) calls this with the same
    paired trials, in the order the report could first see them.

    ``outcomes``: per pair, (trial of a, trial of b) as (passed, tokens). compare_paired decides at the
    family's level; a token pair with an unknown usage carries no token evidence and is left out.
    Equivalence, a claim about how large the difference can be, needs the interval, which is withheld
    below MIN_TASKS_FOR_INTERVAL shared tasks like every interval of the report; ``compare`` is
    compare_paired (a benchmark may pass a remembering wrapper of it).
    """
    if metric == SUCCESS:
        values = [float(b[0]) - float(a[0]) for a, b in outcomes]
    elif metric == TOKENS:
        values = [token_log_ratio(a[1], b[1]) for a, b in outcomes if a[1] is not None and b[1] is not None]
    else:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if family.horizon is not None:
        found = compare_within_horizon(values, metric=metric, family=family, margin=margin)
    else:
        found = compare(values, metric=metric, alpha=family.level, margin=margin)
    bound = 1.0 if metric == SUCCESS else TOKEN_LOG_RATIO_CLIP
    shown = tasks >= MIN_TASKS_FOR_INTERVAL and bool(values)
    decision = found.decision
    if decision == EQUIVALENT and not shown:
        decision = UNDECIDED
    if family.horizon is not None:  # past the horizon nothing is read: the verdict at N pairs stands
        values = values[: family.horizon]
    return Verdict(
        metric, decision, found.direction if decision == DIFFERS else 0, found.estimate,
        _shown_interval(found, values, metric, family) if shown else None, found.e_value, found.e_now, family.claim_e, len(values),
        sum(v != 0 for v in values), sum(v > 0 for v in values), sum(abs(v) > bound for v in values), tasks, margin,
        family.horizon,
    )  # fmt: skip


def compare_within_horizon(values: Sequence[float], *, metric: str, family: Family, margin: float | None) -> PairedDecision:
    """compare_paired under a horizon: the group-sequential test (group_sequential.py) decides a difference;
    equivalence is the interval inside the margin (tokens: the running intersection of the test's repeated
    intervals; success: the anytime confidence sequence). ``e_value`` is the claim's bar times the largest
    ratio of a reading's nominal level to its observed tail, so it reaches the bar exactly when a claim is
    made, as the e-value does without a horizon (the plan's pace and the report's fields read it alike)."""
    assert family.horizon is not None
    if metric == SUCCESS:
        reading = sequential_success(values, horizon=family.horizon, level=family.level)
        read = [float(v) for v in values[: family.horizon]]
    else:
        reading = sequential_tokens(values, horizon=family.horizon, level=family.level)
        read = [clip(float(v), TOKEN_LOG_RATIO_CLIP) for v in values[: family.horizon]]
    bound = 1.0 if metric == SUCCESS else TOKEN_LOG_RATIO_CLIP
    if reading.interval is None:
        return PairedDecision(UNDECIDED, 0, None, (-bound, bound), 1.0, 0)
    e_value = family.claim_e * reading.evidence if reading.direction else min(family.claim_e * reading.evidence, family.claim_e * 0.999)
    if reading.direction:
        decision = DIFFERS
    elif margin is not None and -margin < reading.interval[0] and reading.interval[1] < margin:
        decision = EQUIVALENT
    else:
        decision = UNDECIDED
    return PairedDecision(decision, reading.direction, mean(read), reading.interval, max(1.0, e_value), len(read), max(1.0, e_value))


def _shown_interval(found: PairedDecision, values: Sequence[float], metric: str, family: Family) -> tuple[float, float] | None:
    """The interval printed beside the decision, from the test that made it: beside a token difference the
    confidence sequence of the claim's own test (claim_interval), beside a success difference none (the sign
    test that claimed speaks of which arm won the pairs that differ, not of how far apart the rates are: the
    report prints that count instead), else the confidence sequence equivalence is judged by."""
    if found.decision != DIFFERS:
        return (found.interval[0], found.interval[1])
    if metric == SUCCESS:
        return None
    if family.horizon is not None:  # the running intersection of the claim's own repeated intervals
        return (found.interval[0], found.interval[1])
    return token_claim_interval(values, claim_e=family.claim_e, direction=found.direction)


def margin_of(metric: str, smallest_effect: Mapping[str, float]) -> float | None:
    """[bench.smallest_effect] of a metric on the scale decide works in (tokens: log(1 + share)); None: not declared."""
    if metric not in smallest_effect:
        return None
    value = smallest_effect[metric]
    return math.log1p(value) if metric == TOKENS else value
