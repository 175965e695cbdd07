"""The statistics behind the report: Wilson and t intervals, lognormal means, sign and betting e-processes,
confidence sequences, paired decisions and their family, Holm, pass^k; one module a subject, every public name
re-exported here (`from pytest_benchcell import statistics as stats`):

* ``descriptive``: the shared defaults, means, quantiles, per-figure seeds, the normal quantile;
* ``intervals``: Wilson, Student's t, t and lognormal-mean intervals over tasks, confidence sequences;
* ``over_tasks``: the sign-flip test, the paired per-task difference, Holm;
* ``e_processes``: the sign and the betting (token) e-processes;
* ``decisions``: ``compare_paired``, one decision for one paired comparison; ``Family`` (Bonferroni on
  e-values) and ``decide``, the one verdict every place that prints a comparison reads;
* ``claim_interval``: the interval beside a token claim, the shifts the claim's own e-process keeps;
* ``group_sequential``: the claims under a declared horizon (O'Brien-Fleming-type error spending);
* ``planning``: the power of a sign claim and the smallest detectable effects;
* ``cost``: cost per verified success; ``pass_k``: pass^k;
* ``unpaired``: two definitions of one arm compared unpaired (different sittings), anytime-valid.

Pure and stdlib-only (Student's t is computed here from the regularized incomplete beta, so the base
install needs no scipy). Every Monte-Carlo function takes an explicit integer ``seed`` and draws from
its own ``random.Random(seed)``, so the same inputs always give the same numbers (the report promises
byte-identical output for the same store). Inputs are used in the order given; callers that want
order independence sort first (the report sorts tasks by name).

Two scopes
----------
* **Tasks like these** (intervals over tasks, the sign-flip test over tasks): the task is the unit of
  replication. Trials of one task are correlated (same prompt, same environment), so these figures
  treat each task's mean as one observation and need several tasks whatever the trial count.
* **These tasks** (the sign e-process over paired trials): the tasks are fixed and the trials within
  them are the replicates, so twelve agreeing trials on four tasks are evidence about those four.

Deciding one paired comparison (the adaptive sitting's stopping rule and the report's token claim)
------------------------------------------------------------------------------------------------------
``compare_paired(differences, *, metric, alpha, margin) -> PairedDecision`` takes the per-pair
differences of arms a and b in the order they were recorded (success: b - a in {-1, 0, 1}; tokens:
``token_log_ratio(tokens_a, tokens_b)`` = log(tokens_b / tokens_a)) and returns a frozen
``PairedDecision`` with ``decision`` in {"differs", "equivalent", "undecided"}, ``direction`` (+1: b
higher), ``estimate``, ``interval`` (lo, hi) of an anytime-valid confidence sequence for the mean
difference, ``e_value`` (the largest value the test e-process reached) and ``n``. "differs": the test
e-process (success: the sign e-process; tokens: token_e_process, a variance-adaptive bet on the
clipped log-ratios mixed with the sign e-process) reached 1/alpha; "equivalent": ``margin`` is given and the whole confidence sequence lies inside (-margin,
margin). Both guarantees hold however often the call is repeated as pairs arrive, so a caller may stop
a comparison as soon as it is decided.

benchmarks/calibration.py measures coverage, error rates and power of each method at the sizes benches
have (4 to 8 tasks, 3 to 10 trials per cell); docs/statistics.md quotes its table.

Conventions: quantiles are type 7 (Hyndman & Fan, the default of numpy and R): for sorted
x_0..x_{m-1} and level q, h = (m-1)q, Q(q) = x_floor(h) + (h - floor(h)) (x_floor(h)+1 - x_floor(h)).
A central interval at confidence c takes Q(a/2) and Q(1 - a/2) with a = 1 - c.
"""

from __future__ import annotations

from .claim_interval import token_claim_interval
from .cost import (
    CostPerSuccess,
    cost_per_success,
    cost_per_success_ratio,
)
from .decisions import (
    BONFERRONI,
    DIFFERS,
    EQUIVALENT,
    METRICS,
    SUCCESS,
    TOKENS,
    UNDECIDED,
    Family,
    Outcome,
    PairedDecision,
    Verdict,
    compare_paired,
    decide,
    margin_of,
)
from .descriptive import (
    DEFAULT_CONFIDENCE,
    DEFAULT_POWER,
    DEFAULT_RESAMPLES,
    Z_95,
    check_confidence,
    derive_seed,
    mean,
    median,
    quantile,
    sample_sd,
    two_sided_z,
)
from .e_processes import (
    BETS,
    TOKEN_BET_EFFECT,
    TOKEN_LOG_RATIO_CLIP,
    TOKEN_MAX_BET,
    TOKEN_SIGN_WEIGHT,
    BettingEvidence,
    SignEvidence,
    adaptive_e_process,
    betting_e_process,
    clip,
    sign_e_process,
    sign_e_value,
    token_e_process,
    token_log_ratio,
)
from .group_sequential import SequentialReading, sequential_success, sequential_tokens
from .intervals import (
    EB_MAX_BET,
    MIN_TASKS_FOR_INTERVAL,
    confidence_sequence,
    lognormal_mean_interval,
    regularized_incomplete_beta,
    t_cdf,
    t_interval,
    t_quantile,
    wilson_interval,
)
from .over_tasks import (
    EXACT_SIGN_FLIP_MAX_TASKS,
    PairedDifference,
    holm_adjust,
    paired_difference,
    sign_flip_p_value,
    sign_flip_tasks_needed,
)
from .pass_k import (
    pass_hat_k,
    pass_hat_k_curve,
    pass_hat_k_task,
)
from .planning import (
    EXACT_POWER_MAX_PAIRS,
    RESIDUALS_PER_TASK,
    shift_mde,
    sign_claim_power,
    smallest_detectable,
    success_mde,
)
from .unpaired import (
    DOLLAR_OFFSET,
    UnpairedDifference,
    anchored_log_tokens,
    dollar_ratio,
    success_difference,
    token_ratio,
    unpaired_difference,
)

__all__ = [
    "BETS",
    "BONFERRONI",
    "BettingEvidence",
    "CostPerSuccess",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_POWER",
    "DEFAULT_RESAMPLES",
    "DIFFERS",
    "EB_MAX_BET",
    "EQUIVALENT",
    "EXACT_POWER_MAX_PAIRS",
    "EXACT_SIGN_FLIP_MAX_TASKS",
    "Family",
    "METRICS",
    "MIN_TASKS_FOR_INTERVAL",
    "Outcome",
    "PairedDecision",
    "PairedDifference",
    "RESIDUALS_PER_TASK",
    "SUCCESS",
    "SequentialReading",
    "SignEvidence",
    "TOKENS",
    "TOKEN_BET_EFFECT",
    "TOKEN_LOG_RATIO_CLIP",
    "TOKEN_MAX_BET",
    "TOKEN_SIGN_WEIGHT",
    "UNDECIDED",
    "Verdict",
    "Z_95",
    "adaptive_e_process",
    "betting_e_process",
    "check_confidence",
    "clip",
    "compare_paired",
    "confidence_sequence",
    "cost_per_success",
    "cost_per_success_ratio",
    "decide",
    "derive_seed",
    "holm_adjust",
    "lognormal_mean_interval",
    "margin_of",
    "mean",
    "median",
    "paired_difference",
    "pass_hat_k",
    "pass_hat_k_curve",
    "pass_hat_k_task",
    "quantile",
    "regularized_incomplete_beta",
    "sample_sd",
    "sequential_success",
    "sequential_tokens",
    "shift_mde",
    "sign_claim_power",
    "sign_e_process",
    "sign_e_value",
    "sign_flip_p_value",
    "sign_flip_tasks_needed",
    "smallest_detectable",
    "success_mde",
    "t_cdf",
    "t_interval",
    "t_quantile",
    "token_claim_interval",
    "token_e_process",
    "token_log_ratio",
    "two_sided_z",
    "UnpairedDifference",
    "DOLLAR_OFFSET",
    "anchored_log_tokens",
    "dollar_ratio",
    "success_difference",
    "token_ratio",
    "unpaired_difference",
    "wilson_interval",
]
