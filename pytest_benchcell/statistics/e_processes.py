"""E-processes over paired trials in recorded order ("for these tasks"), valid however often they are
read: the sign e-process (which arm of a pair was higher) and the betting e-process on clipped token
log-ratios, mixed with the sign one for the token comparison."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


# -- comparison within tasks ("for these tasks"), valid however often it is read ---------------------------
# Trials of two arms on the same task are paired in the order they ran (the k-th trial of a with the k-th
# of b); each pair gives one difference D = a - b. If the arms do not differ on these tasks, the two trials
# of a pair are exchangeable, so D is as likely positive as negative whatever happened before. The
# evidence against that is a test martingale over the pairs in the order they completed, so by Ville's
# inequality the chance that it EVER reaches 1/alpha is at most alpha: the report may be read after every
# sitting (or every trial) and a claim is still wrong at most alpha of the time.
def sign_e_value(positives: int, nonzero: int) -> float:
    """Evidence of `positives` positive signs among `nonzero` non-zero differences: 2^m / ((m + 1) C(m, k)).

    The likelihood of the signs under "P(D > 0 | D != 0) = theta", averaged over theta uniform on
    [0, 1] (the Laplace mixture), divided by their likelihood at theta = 1/2. Its expectation under the
    null is 1 at every m, and it grows as fast as the best fixed theta up to a (1/2) log m term. Both
    directions count (it is two-sided); 0 of 0 gives 1.
    """
    if not 0 <= positives <= nonzero:
        raise ValueError(f"need 0 <= positives <= nonzero, got {positives}/{nonzero}")
    log_e = (
        nonzero * math.log(2.0) - math.log(nonzero + 1.0)
        - (math.lgamma(nonzero + 1.0) - math.lgamma(positives + 1.0) - math.lgamma(nonzero - positives + 1.0))
    )  # fmt: skip
    return math.exp(min(log_e, 700.0))


class _PeakedEvidence:
    """What an e-process that keeps its largest value per direction (max_up, max_down) gives a reader:
    shared by the sign and the betting e-processes."""

    max_up: float
    max_down: float

    @property
    def anytime_p(self) -> float:
        """min(1, 1 / the largest e-value ever reached): P(ever <= alpha) <= alpha under the null."""
        return min(1.0, 1.0 / max(self.max_up, self.max_down))

    @property
    def direction(self) -> int:
        """+1 if the evidence peaked pointing up (most signs positive / a mean above 0), -1 down, 0 if neither."""
        if self.max_up == self.max_down:
            return 0
        return 1 if self.max_up > self.max_down else -1


@dataclass(frozen=True)
class SignEvidence(_PeakedEvidence):
    """The sign e-process of a sequence of paired differences, read at its end."""

    pairs: int
    nonzero: int
    positives: int
    e_value: float  # at the end of the sequence
    max_up: float  # the largest e-value reached while most non-zero signs were positive (1 if never)
    max_down: float  # the same while most were negative


def sign_e_process(differences: Iterable[float]) -> SignEvidence:
    """Run sign_e_value over the differences in the order given; zeros (ties) carry no evidence.

    The running maxima are kept per direction: a claim "a is higher" needs the half of the mixture
    over theta > 1/2, which exceeds the whole mixture whenever most signs are positive, so a peak of
    the whole mixture reached with a positive majority is also evidence for that direction at the
    same level (and the same for negative).
    """
    pairs = nonzero = positives = 0
    log_up = log_down = log_value = 0.0
    log2 = math.log(2.0)
    for difference in differences:
        pairs += 1
        if difference == 0:
            continue
        # e(k, m) from e at the previous pair: one more positive multiplies it by 2 (k + 1) / (m + 2),
        # one more negative by 2 (m + 1 - k) / (m + 2) (from C(m + 1, k + 1) = C(m, k) (m + 1) / (k + 1)).
        agreeing = positives + 1 if difference > 0 else nonzero + 1 - positives
        log_value += log2 + math.log(agreeing) - math.log(nonzero + 2)
        nonzero += 1
        positives += difference > 0
        if 2 * positives > nonzero:
            log_up = max(log_up, log_value)
        elif 2 * positives < nonzero:
            log_down = max(log_down, log_value)
    value, max_up, max_down = (math.exp(min(v, 700.0)) for v in (log_value, log_up, log_down))
    return SignEvidence(pairs, nonzero, positives, value, max_up, max_down)


# -- paired comparisons in recorded order, by betting (magnitude-aware; valid at every look) ------------
# The sign e-process above uses only which arm of a pair was higher. For tokens the size of the gap
# carries most of the evidence, so tokens are compared on the paired log-ratio log(tokens_b / tokens_a)
# with a betting e-process (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
# betting", JRSS-B 2024; Shafer, "Testing by betting", 2021). The log-ratio is clipped to
# [-TOKEN_LOG_RATIO_CLIP, +TOKEN_LOG_RATIO_CLIP] so that a bet can never lose more than it stakes.
#
# Identical arms make the two trials of a pair exchangeable, so a pair's clipped log-ratio is
# symmetric about 0 given everything recorded before it: its conditional mean is 0 and each wealth
# process below is a test martingale. Ville's inequality then bounds the chance that it EVER reaches
# 1/alpha by alpha, however often the report is read and whatever was done between readings.
TOKEN_LOG_RATIO_CLIP = math.log(2.5)  # a pair 2.5 times apart counts as 2.5 times apart
# The constant stakes the betting e-process mixes, as shares of wealth on x = clipped value / clip in
# [-1, 1]: each way, a cautious and a bold one. A mixture of constant bets was chosen over a plug-in
# (predictable, learned) bet because at the sizes benches have (80 pairs) learning the bet costs more
# than the mixture's log(4): power for tokens 20% dearer at 8 tasks x 10 trials (trial log-sd 0.3,
# claim at e >= 40) is about 86% for such a mixture alone and 79% for the aGRAPA plug-in (a simulation
# of the e-process alone; benchmarks/calibration.py measures the report's).
BETS = (0.7, 0.95)


def token_log_ratio(tokens_a: float, tokens_b: float) -> float:
    """log((tokens_b + 1) / (tokens_a + 1)): > 0 when b spent more. The +1 keeps a zero-token trial finite."""
    if tokens_a < 0 or tokens_b < 0:
        raise ValueError(f"token counts cannot be negative, got {tokens_a} and {tokens_b}")
    return math.log((tokens_b + 1.0) / (tokens_a + 1.0))


def clip(value: float, bound: float) -> float:
    """value cut to [-bound, bound]."""
    return max(-bound, min(bound, value))


@dataclass(frozen=True)
class BettingEvidence(_PeakedEvidence):
    """A two-sided e-process over paired values in recorded order, read at its end.

    For betting_e_process, e = (K_up + K_down) / 2 with K_up = mean over l in BETS of prod_i (1 + l x_i)
    (betting that the mean is above 0) and K_down = mean over l in BETS of prod_i (1 - l x_i), where
    x_i = the clipped value / the clip, in [-1, 1]. Every product is a test martingale when the mean is
    0, so any average of them is one too.
    """

    pairs: int
    e_value: float  # at the end of the sequence
    max_up: float  # the largest e reached while the evidence pointed above 0 (1 if never)
    max_down: float  # the same while it pointed below 0


class _Betting:
    """The running state of the betting e-process: log wealth of every constant bet, each way."""

    def __init__(self, bound: float) -> None:
        if not bound > 0:
            raise ValueError(f"the bound must be > 0, got {bound}")
        self.bound = bound
        self.log_up = [0.0] * len(BETS)
        self.log_down = [0.0] * len(BETS)

    def add(self, value: float) -> None:
        x = clip(float(value), self.bound) / self.bound
        for j, bet in enumerate(BETS):
            self.log_up[j] += math.log1p(bet * x)
            self.log_down[j] += math.log1p(-bet * x)

    def up(self) -> float:
        return _mean_of_exps(self.log_up)

    def down(self) -> float:
        return _mean_of_exps(self.log_down)


def _mean_of_exps(logs: Sequence[float]) -> float:
    return math.fsum(math.exp(min(v, 700.0)) for v in logs) / len(logs)


def betting_e_process(values: Iterable[float], *, bound: float) -> BettingEvidence:
    """Run the two-sided betting e-process of BettingEvidence over values clipped to [-bound, bound].

    A claim that the mean is above 0 needs K_up alone at 1/alpha; K_up >= e whenever K_up > K_down,
    so a peak of e reached then is evidence for that direction at the same level (and the same below),
    as for the sign e-process.
    """
    state = _Betting(bound)
    pairs = 0
    e_now, best_up, best_down = 1.0, 1.0, 1.0
    for value in values:
        state.add(value)
        pairs += 1
        up, down = state.up(), state.down()
        e_now = (up + down) / 2.0
        if up > down:
            best_up = max(best_up, e_now)
        elif down > up:
            best_down = max(best_down, e_now)
    return BettingEvidence(pairs, e_now, best_up, best_down)


# Share of the token e-process given to the sign e-process. Betting on magnitudes needs many pairs
# when a gap is small against the clip, however consistent it is (12 pairs all 1.3 times apart reach
# e ~ 7), where the sign e-process gives 2^12/13 = 315: with 0.3 of it a consistent gap is claimed
# about as soon as the signs alone would claim it (the example bench's, three arms, claim level 120,
# reaches e = 136). The price in the e-process-alone simulation above: power 82% instead of 86%.
TOKEN_SIGN_WEIGHT = 0.3


def token_e_process(values: Iterable[float], *, bound: float = TOKEN_LOG_RATIO_CLIP) -> BettingEvidence:
    """The e-process of the token comparison: TOKEN_SIGN_WEIGHT x sign e-process + the rest x betting e-process.

    A weighted average of two test martingales of the same pairs is one. A direction is credited only
    while both agree (most signs positive and K_up > K_down, or both the other way): then each part's
    half for that direction is at least the part itself, so the peak is evidence for that direction
    at the same level.
    """
    state = _Betting(bound)
    log2 = math.log(2.0)
    pairs = nonzero = positives = 0
    log_sign = 0.0
    e_now, best_up, best_down = 1.0, 1.0, 1.0
    for raw in values:
        value = clip(float(raw), bound)
        state.add(value)
        pairs += 1
        if value != 0:
            agreeing = positives + 1 if value > 0 else nonzero + 1 - positives
            log_sign += log2 + math.log(agreeing) - math.log(nonzero + 2)
            nonzero += 1
            positives += value > 0
        up, down = state.up(), state.down()
        e_now = TOKEN_SIGN_WEIGHT * math.exp(min(log_sign, 700.0)) + (1.0 - TOKEN_SIGN_WEIGHT) * (up + down) / 2.0
        if 2 * positives > nonzero and up > down:
            best_up = max(best_up, e_now)
        elif 2 * positives < nonzero and down > up:
            best_down = max(best_down, e_now)
    return BettingEvidence(pairs, e_now, best_up, best_down)
