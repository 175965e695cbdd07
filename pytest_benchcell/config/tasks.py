"""One [tasks.ID] table read into a `Task`: its tier, intent, facts and intended changes, each
checked by the checker's own rules so no trial is reserved for a task that cannot be scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import CHANGE_OPS, Task
from .reader import _check_name, _Reader


def _parse_task(file: Path, task_id: str, task: _Reader, tiers: tuple[str, ...]) -> Task:
    _check_name(task, "task", task_id)
    task.only("tier", "intent", "bonus", "required_facts", "forbidden_facts", "check_state", "changes", "arms")
    tier = task.string("tier", required=True)
    if tier not in tiers:
        task.fail("tier", tier, f"{', '.join(tiers)} (declare your own in [bench] tiers)", choices=tiers)
    intent = task.string("intent", required=True)
    required = _facts(task, "required_facts")
    forbidden = _facts(task, "forbidden_facts")
    is_read = tier == "read"
    check_state = task.boolean("check_state", not is_read)
    if not required and not check_state:
        task.fail("required_facts", [], "at least one fact, or check_state = true (the task could never fail)")
    changes = task.table.get("changes", [])
    if not isinstance(changes, list):
        task.fail("changes", changes, "a list of change tables ({ op = ..., path = ..., value = ... })")
    from .. import checker  # pure; the checker's own rules decide what a well-formed change is

    for number, change in enumerate(changes, start=1):
        try:
            checker.validate_change(change)
        except ValueError as exc:
            task.fail(f"changes (change {number})", change, f"{exc}; changes are tables with op = one of "
                      f"{', '.join(CHANGE_OPS)}, a path and (but for delete) a value")
    if changes and not check_state:
        task.fail("changes", changes, "changes only with check_state = true (they describe the expected end state)")
    return Task(
        id=task_id,
        tier=tier,
        intent=intent,
        bonus=task.boolean("bonus", False),
        required_facts=required,
        forbidden_facts=forbidden,
        check_state=check_state,
        changes=tuple(changes),
        arms=task.strings("arms"),
    )


def _facts(task: _Reader, key: str) -> tuple[Any, ...]:
    """The facts as declared, each compiled by the checker now (a bad regex or an `any_of` string
    where a list belongs stops the load), so no trial is reserved for a task that cannot be scored."""
    from .. import checker

    value = task.table.get(key, [])
    if not isinstance(value, list):
        task.fail(key, value, "a list of facts (strings, or tables with any_of / pattern)")
    for number, fact in enumerate(value, start=1):
        try:
            checker.fact_from_config(fact)
        except ValueError as exc:
            task.fail(f"{key} (fact {number})", fact,
                      f"a non-empty string or a table with any_of = [...] and/or pattern = '...' ({exc})")
    return tuple(value)

