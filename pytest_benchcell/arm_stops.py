"""Arms stopped for the rest of a sitting: an arm whose trials the harness broke (harness_broke.py) in
`[bench] stop_after_blocked` of its trials runs no more of them, while the other arms go on.

A trial the harness broke is an error, never counted: every further trial of that arm would spend
tokens on nothing until the bench declares what it lacks. So once `after_blocked` trials of an arm
show it, the arm's remaining trials of the sitting are skipped (no sample, their numbers unused), and
the sitting ends with exit status 2 and one message: the arm, the program, the file or endpoint it
could not reach, the line to declare, and `preflight = [...]` as the way to catch it before spending.

Judged in the order trials are recorded: on the xdist controller from every worker's reports (it
then tells its workers on this machine, plugin/xdist_bridge.py), and on each worker from its own.
Pure: no pytest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config.model import DEFAULT_STOP_AFTER_BLOCKED

ARM_STOP_PREFIX = "benchcell stops arm "


@dataclass
class ArmStops:
    """Trials the harness broke, per arm, and the arms stopped for the rest of the sitting."""

    after_blocked: int = DEFAULT_STOP_AFTER_BLOCKED
    broken: dict[str, list[str]] = field(default_factory=dict)  # arm -> its trials the harness broke, in order
    causes: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)  # arm -> what broke them (harness_broke.causes)
    stopped: dict[str, str] = field(default_factory=dict)  # arm -> the headline of its stop

    def record(self, arm: str, trial: str, causes: Sequence[Mapping[str, Any]]) -> str | None:
        """Take one recorded trial of `arm` and what the harness broke in it (nothing: a trial it did
        not break); the headline when this trial stops the arm, once."""
        if not causes:
            return None
        self.broken.setdefault(arm, []).append(trial)  # also one already running when the arm stopped
        self.causes.setdefault(arm, []).extend(causes)
        if arm in self.stopped or len(self.broken[arm]) < self.after_blocked:
            return None
        self.stopped[arm] = f"{ARM_STOP_PREFIX}{arm} for this sitting: {self._what(arm)}"
        return self.stopped[arm]

    def reason(self, arm: str) -> str | None:
        """Why the arm's trials no longer run (its headline), or None while it runs."""
        return self.stopped.get(arm)

    def message(self, arm: str, left: int) -> str:
        """The one message of an arm's stop, for the sitting summary: `left` of its planned trials did not run."""
        unused = f"; {left} of its planned trial(s) did not run (their numbers stay unused)" if left else ""
        return f"arm {arm} stopped for this sitting: {self._what(arm)}{unused}"

    def _what(self, arm: str) -> str:
        trials = self.broken[arm]
        first = self.causes[arm][0]
        command = str(first.get("command") or "")
        example = json.dumps(command) if command else "..."
        return (
            f"the harness broke {len(trials)} of its trials ({', '.join(trials)}; [bench] stop_after_blocked = "
            f"{self.after_blocked}): {first.get('line')}; the pre-flight catches this before any model request "
            f"with a command that needs it in [arms.{arm}] preflight = [{example}]"
        )


def arm_stops_text(stopped: Mapping[str, str]) -> str:
    """The arms stopped so far as the file the xdist controller leaves for its workers (JSON)."""
    return json.dumps(dict(stopped), ensure_ascii=False)


def arm_stops_read(text: str) -> dict[str, str]:
    """The arms stopped, from that file's text ({} for anything unreadable: a half-written file)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(arm): str(why) for arm, why in value.items()} if isinstance(value, dict) else {}
