"""The names the plugin's modules share: the sitting's stash key, the user properties a trial's
report carries (also from xdist workers to the controller), the worker plan's key, and mirrors of
sample.py's constants (importing it here would cost every unrelated pytest run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..sitting import SittingState

MODEL_REAL, MODEL_SCRIPTED = "real", "scripted"
STATUS_SCORED, STATUS_INVALID, STATUS_ERROR = "scored", "invalid", "error"

SITTING_KEY: pytest.StashKey[SittingState] = pytest.StashKey()
STATUS_PROPERTY = "benchcell_status"
PROGRESS_PROPERTY = "benchcell_progress"
COST_PROPERTY = "benchcell_cost"
DOLLARS_PROPERTY = "benchcell_dollars"  # the trial in dollars at the bench's prices; None: unknown
REASON_PROPERTY = "benchcell_reason"
BLOCKED_PROPERTY = "benchcell_sandbox_blocked"
API_ERROR_PROPERTY = "benchcell_api_error"  # the sample's api_error: the model API ended the trial
UNMETERED_PROPERTY = "benchcell_unmetered"  # replies came without usage
HARNESS_BROKE_PROPERTY = "benchcell_harness_broke"  # what the harness broke in the trial (harness_broke.causes)
WORKER_PLAN_KEY = "benchcell_plan"
