"""E-processes over paired trials in recorded order ("for these tasks"), valid however often they are
read: the sign e-process (which arm of a pair was higher), betting e-processes on clipped token
log-ratios (constant bets, and the variance-adaptive bet of the token comparison), and the token
comparison's e-process: the adaptive bet mixed with the sign e-process."""

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
# The constant stakes betting_e_process mixes, as shares of wealth on x = clipped value / clip in
# [-1, 1]: each way, a cautious and a bold one. They suit one noise level (trial cv 0.3) and lose where
# the noise differs, so the token comparison bets adaptively instead (token_e_process, below).
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
    return _followed(_Betting(bound), values)


def _followed(state: _Betting | _AdaptiveBetting, values: Iterable[float]) -> BettingEvidence:
    """Feed ``values`` to a two-sided bet (``state``: add, up, down) and keep its mixture's value and the
    peaks it reached while each direction led."""
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


# -- the token comparison's bet: a variance-adaptive plug-in of the likelihood ratio ----------------------
# Under the null the two trials of a pair are exchangeable given the past, so given its size |v| the sign
# of a pair's clipped log-ratio v is a fair coin. Any bet 1 + g(v) with g odd in v, |g| < 1, and chosen
# from the past (and |v|) therefore has conditional mean 1: the wealth is a test martingale, whatever g.
# The best such g against "the log-ratios are normal with mean d and variance s^2" is the likelihood ratio
# of that alternative to its mirror image, 2 phi(v - d) / (phi(v - d) + phi(v + d)) = 1 + tanh(d v / s^2)
# (Shekhar & Ramdas, "Nonparametric two-sample testing by betting", 2023, bet on symmetry; the plug-in
# as in Waudby-Smith & Ramdas 2024). d and s^2 are unknown, so they are plugged in from the pairs before
# this one (predictable): s^2 is the running variance shrunk towards TOKEN_PRIOR_VARIANCE, and d is the
# smallest effect worth betting on, TOKEN_BET_EFFECT, or the running mean when that is larger (shrunk by
# TOKEN_MEAN_SHRINK pseudo-pairs of 0). One wealth bets that b spends more (d > 0), one that it spends
# less, and the e-process is their average. Learning the variance is what pays: at 80 pairs it matches the
# constant bets it replaced where they were tuned (trial cv 0.3, power 80% at e >= 40 in a simulation of
# the e-process alone, where a bet that knew d and s^2 exactly reached 83%) and beats them where the
# noise differs (cv 0.5: 29% against 23%; cv 0.5 and tokens 30% dearer: claimed at e >= 120 after 84
# pairs on average instead of 94). Learning the mean as well (the aGRAPA plug-in, or online Newton step
# betting) costs more than it gains at these sizes (70% and 50% at cv 0.3).
TOKEN_BET_EFFECT = math.log(1.2)  # the smallest gap bet on: 20% more or fewer tokens
TOKEN_PRIOR_VARIANCE = 0.17  # of a pair's log-ratio: two trials of cv 0.3 (2 log(1 + 0.3^2))
TOKEN_PRIOR_PAIRS = 5.0  # the weight of that prior, in pairs
TOKEN_MEAN_SHRINK = 10.0  # pseudo-pairs of 0 that the running mean is shrunk with before it can exceed the effect
TOKEN_MAX_BET = 0.9  # no bet stakes more than this share of the wealth: one reversed pair costs at most 90%


class _AdaptiveBetting:
    """The running state of the token comparison's bet (see above): the log wealth of each side, and the
    running mean and variance of the clipped log-ratios seen so far (Welford)."""

    def __init__(self, bound: float) -> None:
        if not bound > 0:
            raise ValueError(f"the bound must be > 0, got {bound}")
        self.bound = bound
        self.log_up = self.log_down = 0.0
        self.count, self.mean, self.squares = 0, 0.0, 0.0

    def stakes(self, value: float) -> tuple[float, float]:
        """The shares bet on this clipped value, by each side, from the values before it (and its size)."""
        variance = (TOKEN_PRIOR_VARIANCE * TOKEN_PRIOR_PAIRS + self.squares) / (self.count + TOKEN_PRIOR_PAIRS)
        shrunk = self.mean * self.count / (self.count + TOKEN_MEAN_SHRINK)
        up = math.tanh(max(TOKEN_BET_EFFECT, shrunk) * value / variance)
        down = math.tanh(max(TOKEN_BET_EFFECT, -shrunk) * value / variance)
        return clip(up, TOKEN_MAX_BET), clip(down, TOKEN_MAX_BET)

    def add(self, value: float) -> None:
        value = clip(float(value), self.bound)
        up, down = self.stakes(value)
        self.log_up += math.log1p(up)
        self.log_down += math.log1p(-down)
        self.count += 1
        step = value - self.mean
        self.mean += step / self.count
        self.squares += step * (value - self.mean)

    def up(self) -> float:
        return math.exp(min(self.log_up, 700.0))

    def down(self) -> float:
        return math.exp(min(self.log_down, 700.0))


def adaptive_e_process(values: Iterable[float], *, bound: float = TOKEN_LOG_RATIO_CLIP) -> BettingEvidence:
    """The variance-adaptive betting e-process alone: e = (wealth betting up + wealth betting down) / 2.

    Each wealth is a test martingale under the null (see above), so their average is one. The wealth
    betting up only ever stakes on positive values (d > 0), so it is a supermartingale whenever b is no
    higher (a positive sign no likelier than a negative one of the same size): a peak of e reached while
    it leads is evidence for that direction at the same level, as for the other e-processes.
    """
    return _followed(_AdaptiveBetting(bound), values)


# Share of the token e-process given to the sign e-process. The adaptive bet stakes up to 90% on a
# consistent gap once the variance it sees is small, so it needs little help there (the example bench's
# 12 pairs about 1.7 times apart reach e ~ 515 alone, 12 pairs all 1.3 times apart 70); the sign share stays as insurance against a bet misled by a few clipped
# pairs, at a cost of at most log(1 / 0.9) in log e (about one point of power in the simulation above).
TOKEN_SIGN_WEIGHT = 0.1


def token_e_process(values: Iterable[float], *, bound: float = TOKEN_LOG_RATIO_CLIP) -> BettingEvidence:
    """The e-process of the token comparison: TOKEN_SIGN_WEIGHT x sign e-process + the rest x adaptive_e_process.

    A weighted average of two test martingales of the same pairs is one. A direction is credited only
    while both agree (most signs positive and the up wealth ahead, or both the other way): then each
    part's half for that direction is at least the part itself, so the peak is evidence for that
    direction at the same level.
    """
    state = _AdaptiveBetting(bound)
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
