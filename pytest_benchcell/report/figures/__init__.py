"""The figures: from per-cell summaries to every table of the report (statistics/ has the formulas).

How the figures are made (docs/statistics.md repeats this):

* Only ``scored`` samples enter success, tokens, turns and duration. ``invalid`` and ``error`` samples
  are counted apart per arm. A ``hung`` trial counts with whatever usage it had (it is not zeroed, so
  an arm that hangs never looks cheaper for it).
* Per-task means first, then the mean over tasks: every task weighs the same, however deep its cell.
  The "median" beside a mean is the mean over the same tasks of the per-task medians, so the gap
  between the two shows skew within tasks and nothing else.
* The headline and the per-tier, per-component and pass^k tables use only the tasks where every
  reported arm has at least ``floor`` scored trials, and say which; an arm with no scored sample at
  all takes no part in that choice (a notice names it), so one broken arm does not empty the table.
  Pairwise comparisons use the tasks where both arms of the pair meet the floor.
* Per-arm intervals are about tasks like these and need MIN_TASKS tasks: success is the t interval over
  task rates widened to the pooled Wilson interval; positive figures (tokens, turns, times, cost) the
  lognormal generalized interval over task means, seeded per arm and table from ``settings.seed`` so
  the same store always gives byte-identical output. Success per cell: Wilson.
* A comparison (the declared [bench] comparisons, default every pair, on both metrics: one family) is
  judged by statistics.decide, the function `--bench-fill decide` judges it by: a difference for these
  tasks when the e-process over paired trials (in the order the report could first see them;
  success: the sign e-process; tokens: statistics.token_e_process on the paired log-ratios) reaches
  comparisons / alpha (Bonferroni on e-values, the same bar at every reading), equivalence when the
  anytime interval lies inside [bench.smallest_effect] (from 3 shared tasks). A difference also
  generalizes to tasks like these when the sign-flip test over per-task differences (Bonferroni-
  adjusted) and their t interval exclude zero on its side. Otherwise the verdict says "not
  distinguishable at this sample size" with, for success, the minimum detectable effect of the claim
  rule and, for tokens, the ratio a/b with its anytime-valid interval (withheld below 3 tasks).
* Cost per verified success (these tasks): mean tokens per trial / mean pass rate over the headline
  tasks, with Fieller's interval (statistics.cost_per_success), per arm and as a ratio per pair.
* Provenance: within a cell, samples of different fingerprints (model, arm/task definition, skill
  text, tool version) are never pooled. With the bench known (its current definitions in the
  settings) every figure uses each cell's current conditions and scoring only, whatever else a merge
  brought in; without it (or for an arm whose binaries this machine lacks, whose tools cannot be
  identified here), each cell's newest fingerprint (the one most recently seen). ``newest``
  states how many samples were left out and why, ``group`` additionally shows every fingerprint group
  of every cell with its own figures.
  Real and scripted samples live in separate folders and are reported one kind at a time.

One module a responsibility, every public name re-exported here:

* ``build``: ``build_report``, the store read one cell at a time and every table computed;
* ``context``: the shared state of one report's figures, and which arms and tasks the headline is over;
* ``headline``: the per-arm figures over a set of tasks and the tables made of them (headline, per
  component, per tier, coverage, outcomes, pass^k);
* ``cost``: cost per verified success;
* ``hosts``: where trials ran, per host and arm (only when the samples used ran on more than one host);
* ``comparisons``: the pairwise comparisons, the paired trials in time order, each verdict's sentence;
* ``notices``: provenance and the notices;
* ``definitions`` (with ``definition_changes``): an arm's definitions side by side, what changed, and
  the current one against an earlier one, unpaired.
"""

from .build import build_report
from .comparisons import BETTING_METHOD, SIGN_METHOD, paired_in_time_order, paired_within_task
from .cost import COST_PER_SUCCESS_METHOD
from .definition_changes import changes_between
from .definitions import arm_definitions, in_counting_order
from .headline import LOGNORMAL_METHOD, MIN_TASKS, NO_INTERVAL, SUCCESS_METHOD, T_METHOD
from .hosts import where_trials_ran

__all__ = [
    "BETTING_METHOD",
    "COST_PER_SUCCESS_METHOD",
    "LOGNORMAL_METHOD",
    "MIN_TASKS",
    "NO_INTERVAL",
    "SIGN_METHOD",
    "SUCCESS_METHOD",
    "T_METHOD",
    "arm_definitions",
    "build_report",
    "changes_between",
    "in_counting_order",
    "paired_in_time_order",
    "paired_within_task",
    "where_trials_ran",
]
