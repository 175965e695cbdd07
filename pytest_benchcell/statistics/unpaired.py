"""Two definitions of one arm compared unpaired: their trials ran in different sittings, so no trial of
one has a partner in the other, and whatever drifted between the sittings (the model behind the API,
the machine, the service) is part of the difference measured.

Each side gets its own anytime-valid confidence sequence for its mean (the empirical-Bernstein
sequence of intervals.confidence_sequence) at alpha / 2, in the order its trials count; with
probability >= 1 - alpha both hold at every reading at once (a union bound), so the difference of the
two means lies between (current low - earlier high) and (current high - earlier low) at every reading,
however often it is read. Wider than a paired interval of the same trials would be: the price of
comparing sittings that shared nothing.

Tokens are compared as a ratio on the log scale. A confidence sequence needs values with fixed bounds,
so each task's trials are measured against an anchor fixed before them: the log tokens of the
earlier definition's first trial of the task, which is then used for nothing else. Each other trial's
log(tokens / anchor), clipped to +-TOKEN_LOG_RATIO_CLIP (the paired comparison's clip), is the
value; the anchor takes out the task's own level, so a task mix that differs between the sides moves
the figure little. The ratio current / earlier is exp of the difference of the two sides' means.
Dollars are compared the same way (dollar_ratio), each trial priced at the report's prices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .descriptive import mean
from .e_processes import TOKEN_LOG_RATIO_CLIP, clip
from .intervals import confidence_sequence


@dataclass(frozen=True)
class UnpairedDifference:
    """current - earlier (success: a difference of shares; tokens: a ratio current / earlier), with the
    interval valid at every reading. All None when a side has no value."""

    estimate: float | None
    low: float | None
    high: float | None
    n_earlier: int  # values of each side used (tokens: anchors not counted)
    n_current: int


def unpaired_difference(
    earlier: Sequence[float], current: Sequence[float], *, low: float, high: float, alpha: float
) -> UnpairedDifference:
    """mean(current) - mean(earlier) of values in [low, high], each side in the order its values count.

    The interval joins each side's confidence sequence at alpha / 2 (see the module's docstring): it
    holds at every reading with probability >= 1 - alpha, for the difference of the sides' (weighted,
    as confidence_sequence says) means of their conditional means.
    """
    if not earlier or not current:
        return UnpairedDifference(None, None, None, len(earlier), len(current))
    earlier_low, earlier_high = confidence_sequence(earlier, low=low, high=high, alpha=alpha / 2.0)[-1]
    current_low, current_high = confidence_sequence(current, low=low, high=high, alpha=alpha / 2.0)[-1]
    return UnpairedDifference(
        mean(current) - mean(earlier), current_low - earlier_high, current_high - earlier_low, len(earlier), len(current)
    )


def success_difference(earlier: Sequence[bool], current: Sequence[bool], *, alpha: float) -> UnpairedDifference:
    """The success rate of the current definition minus the earlier one's, each trial a pass or not."""
    return unpaired_difference(
        [float(passed) for passed in earlier], [float(passed) for passed in current], low=0.0, high=1.0, alpha=alpha
    )


# One trial's tokens with the task it ran: (task, tokens).
TaskTokens = tuple[str, float]


# Dollars are compared as tokens are, a millionth of a dollar (about one token's price) standing for
# the one token added to each count: it keeps the log of a trial that cost nothing finite.
DOLLAR_OFFSET = 1e-6


def anchored_log_tokens(
    earlier: Sequence[TaskTokens], current: Sequence[TaskTokens], *, bound: float = TOKEN_LOG_RATIO_CLIP,
    offset: float = 1.0,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Each side's values for the token ratio, in the order given: log((tokens + 1) / (anchor + 1)) clipped
    to [-bound, bound], where a task's anchor is its first trial in `earlier` (left out of the values).
    Trials of a task `earlier` has no trial of are left out of both sides. `offset` stands for the 1
    (dollars: DOLLAR_OFFSET)."""
    anchors: dict[str, float] = {}
    earlier_values: list[float] = []
    for task, tokens in earlier:
        if task not in anchors:
            anchors[task] = math.log(tokens + offset)
            continue
        earlier_values.append(clip(math.log(tokens + offset) - anchors[task], bound))
    current_values = [clip(math.log(tokens + offset) - anchors[task], bound) for task, tokens in current if task in anchors]
    return earlier_values, current_values


def dollar_ratio(
    earlier: Sequence[TaskTokens], current: Sequence[TaskTokens], *, alpha: float, bound: float = TOKEN_LOG_RATIO_CLIP
) -> UnpairedDifference:
    """Dollars of the current definition / the earlier one's, each trial (task, dollars): as token_ratio."""
    return token_ratio(earlier, current, alpha=alpha, bound=bound, offset=DOLLAR_OFFSET)


def token_ratio(
    earlier: Sequence[TaskTokens], current: Sequence[TaskTokens], *, alpha: float, bound: float = TOKEN_LOG_RATIO_CLIP,
    offset: float = 1.0,
) -> UnpairedDifference:  # fmt: skip
    """Tokens of the current definition / the earlier one's (geometric, per task against its anchor),
    with its interval valid at every reading; see anchored_log_tokens for the values."""
    earlier_values, current_values = anchored_log_tokens(earlier, current, bound=bound, offset=offset)
    found = unpaired_difference(earlier_values, current_values, low=-bound, high=bound, alpha=alpha)
    if found.estimate is None or found.low is None or found.high is None:
        return found
    return UnpairedDifference(
        math.exp(found.estimate), math.exp(found.low), math.exp(found.high), found.n_earlier, found.n_current
    )
