"""The conditions a store keeps for each definition its samples ran under
(definitions/<conditions>-<scoring>.toml, written whole before a cell's first sample of them), read
back for the report's Definitions section: what an arm was each time, so the report can say what
changed between two definitions. Read only; a file that cannot be read is no definition here."""

from __future__ import annotations

import hashlib
import json
import tomllib
from typing import Any

from ..store import DEFINITIONS_DIR, Store, StoreSet

# The part of a cell's conditions that is the task's, not the arm's: left out of an arm's definition,
# so one definition of an arm spans its tasks.
TASK_PART = "task"


class StoredConditions:
    """The conditions of each conditions fingerprint, from the definitions files of one or several stores."""

    def __init__(self, store: Store | StoreSet) -> None:
        self._folders = [one.root / DEFINITIONS_DIR for one in (store.stores if isinstance(store, StoreSet) else [store])]
        self._read: dict[str, dict[str, Any] | None] = {}

    def conditions(self, fingerprint: str) -> dict[str, Any] | None:
        """The [conditions] table stored for this conditions fingerprint (any of its scorings); None: none readable."""
        if fingerprint not in self._read:
            self._read[fingerprint] = self._find(fingerprint)
        return self._read[fingerprint]

    def _find(self, fingerprint: str) -> dict[str, Any] | None:
        for folder in self._folders:
            for path in sorted(folder.glob(f"{_glob_safe(fingerprint)}-*.toml")):
                try:
                    table = tomllib.loads(path.read_text(encoding="utf-8")).get("conditions")
                except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                    continue
                if isinstance(table, dict):
                    return table
        return None


def arm_part(conditions: dict[str, Any]) -> dict[str, Any]:
    """A cell's conditions without the task's part: what the arm was."""
    return {key: value for key, value in conditions.items() if key != TASK_PART}


def arm_definition_id(conditions: dict[str, Any]) -> str:
    """The arm's definition as a short hash of its part of the conditions (the same for all its tasks)."""
    canonical = json.dumps(arm_part(conditions), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _glob_safe(text: str) -> str:
    # Fingerprints are hex; a pool key read from a damaged index could hold glob characters.
    return "".join(f"[{char}]" if char in "*?[]" else char for char in text)
