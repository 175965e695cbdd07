"""How a comparison's verdict is written, the same wherever it is printed (the `--bench-fill decide`
listing, the sitting's summary, every report format, the forest plot): the short claim, the paired
estimate and its anytime interval, oriented a - b (tokens: the ratio a / b). Formats only: the
verdict itself is statistics.decide's."""

from __future__ import annotations

import math

from ..statistics import DIFFERS, EQUIVALENT, MIN_TASKS_FOR_INTERVAL, SUCCESS, Verdict

NOT_COMPARED = "not compared"


def a_minus_b(verdict: Verdict) -> tuple[float | None, tuple[float, float] | None]:
    """The verdict's estimate and interval turned to a - b (tokens: log(a / b)), exactly (negation)."""
    estimate = None if verdict.estimate is None else 0.0 - verdict.estimate  # 0.0 - 0.0 is 0.0, never -0.0
    interval = None if verdict.interval is None else (0.0 - verdict.interval[1], 0.0 - verdict.interval[0])
    return estimate, interval


def better_arm(verdict: Verdict, a: str, b: str) -> str | None:
    """The arm a difference claim favours: more successes, fewer tokens; None without a difference."""
    if verdict.decision != DIFFERS:
        return None
    b_higher = verdict.direction > 0
    return b if b_higher == (verdict.metric == SUCCESS) else a


def margin_text(metric: str, margin: float) -> str:
    """The smallest effect as a reader states it: "±15 pp", "±20%" (margin is a log-ratio for tokens)."""
    return f"\u00b1{100 * margin:.0f} pp" if metric == SUCCESS else f"\u00b1{100 * math.expm1(margin):.0f}%"


def claim(verdict: Verdict, a: str, b: str) -> str:
    """A few words: "mcp better", "equivalent (±20%)", "undecided" or "not compared"."""
    if verdict.pairs == 0:
        return NOT_COMPARED
    winner = better_arm(verdict, a, b)
    if winner is not None:
        return f"{winner} better"
    if verdict.decision == EQUIVALENT and verdict.margin is not None:
        return f"equivalent ({margin_text(verdict.metric, verdict.margin)})"
    return "undecided"


def value_text(metric: str, value: float) -> str:
    """One a - b value: "+12.5 pp" (success), "0.83x" (tokens, as a / b)."""
    return f"{100 * value:+.1f} pp" if metric == SUCCESS else f"{math.exp(value):.2f}x"


def sign_statement(verdict: Verdict, a: str, b: str) -> str | None:
    """What a success difference rests on, printed where an interval would be: the sign test that claims
    says which arm won the pairs that differ ("a passed where b failed in 14 of 16 paired trials that
    differ"), not how far apart the rates are. None for any other verdict."""
    if verdict.metric != SUCCESS or verdict.decision != DIFFERS:
        return None
    winner, loser = (b, a) if verdict.direction > 0 else (a, b)
    agreeing = verdict.positives if verdict.direction > 0 else verdict.nonzero - verdict.positives
    return f"{winner} passed where {loser} failed in {agreeing} of the {verdict.nonzero} paired trials that differ"


def estimate_text(verdict: Verdict, a: str = "a", b: str = "b") -> str:
    """ "+12.5 pp [-3.0, +28.0]" or "0.83x [0.70x, 0.98x]"; the interval left out where it is withheld,
    and beside a success difference the sign count that claimed it instead (sign_statement)."""
    estimate, interval = a_minus_b(verdict)
    if estimate is None:
        return "\u2014"
    text = value_text(verdict.metric, estimate)
    statement = sign_statement(verdict, a, b)
    if statement is not None:
        return f"{text} ({statement})"
    if interval is None:
        return text
    low, high = (value_text(verdict.metric, end) for end in interval)
    return f"{text} [{low.removesuffix(' pp')}, {high}]"


def scale_label(metric: str, a: str, b: str) -> str:
    """What the estimate is of: "a - b" (success) or "a/b" (tokens)."""
    return f"{a} - {b}" if metric == SUCCESS else f"{a}/{b}"


def reading(verdict: Verdict, a: str, b: str) -> str:
    """The figures behind a claim in one parenthesis-ready phrase, as the listing and the reports write them:
    "12 paired trials on 4 tasks, e 28.4 of the 120 a difference needs, a - b +16.7 pp [-10.0, +40.0]"."""
    detail = f"{verdict.pairs} paired trial{'' if verdict.pairs == 1 else 's'} on {verdict.tasks} task{'' if verdict.tasks == 1 else 's'}"
    reached = "past" if verdict.decision == DIFFERS else "of"
    if verdict.horizon is None:
        detail += f", e {verdict.e_value:.3g} {reached} the {verdict.claim_e:.0f} a difference needs"
    else:  # e_value is the bar times the best reading's nominal level over its observed tail
        frozen = "; frozen at its horizon" if verdict.pairs >= verdict.horizon else ""
        detail += (f", evidence {verdict.e_value:.3g} {reached} the {verdict.claim_e:.0f} a difference needs "
                   f"(group-sequential: {min(verdict.pairs, verdict.horizon)} of the {verdict.horizon} pairs of its horizon read{frozen})")
    detail += f", {scale_label(verdict.metric, a, b)} {estimate_text(verdict, a, b)}"
    if verdict.interval is None and verdict.pairs and sign_statement(verdict, a, b) is None:
        detail += f"; no interval below {MIN_TASKS_FOR_INTERVAL} shared tasks"
    return detail
