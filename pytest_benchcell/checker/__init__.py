"""Deterministic scoring: facts in a final answer, and a full end-state diff.

Pure functions over plain values; nothing here knows pytest or the agent SDK. Every check returns a
list of human-readable differences, and an empty list means the trial passes.

One module a kind of task, every public name re-exported here (`from . import checker`):

* ``answers``: facts in a final answer (read tasks): ``Fact``, ``check_answer``, ``fact_from_config``;
* ``state``: the full end-state diff (mutation tasks): ``StatePolicy``, ``diff_states``;
* ``changes``: the change language a task declares its intended change in: ``apply_changes``,
  ``validate_change``.

Each module's docstring states its rules in full.
"""

from __future__ import annotations

from .answers import Fact, check_answer, fact_from_config, fact_present, normalize_text
from .changes import apply_changes, validate_change
from .state import StatePolicy, diff_states

__all__ = [
    "Fact",
    "StatePolicy",
    "apply_changes",
    "check_answer",
    "diff_states",
    "fact_from_config",
    "fact_present",
    "normalize_text",
    "validate_change",
]
