"""The pre-flights that passed, remembered so that a sitting of the same arm on the same machine
does not run the same pre-flight again.

The pre-flight (preflight.py) asks whether the sandbox breaks an arm's programs. Its answer depends
on what it runs and where: the bench (bench.toml, the hooks in the conftest.py beside it, and the
files of the bench folder by name, size and modification time), the arm's programs as the cell's
conditions identify them (each binary's content, the files a script
names, its version line; an MCP server's files), the plugin itself, the sandbox's and the audit's
programs, the machine (host, kernel, boot), the user, and the harness's environment. A pass is kept
under a hash of all of these for the arm and the task its environment is provisioned for; a later
sitting within MEMORY_S of it whose hash is the same skips that arm's pre-flight and says so. A
change to any of them, a reboot or a day passing runs it again, and so does a pre-flight that found
anything to say (a refusal or a note): only clean passes are kept.

What the hash cannot see is named in isolation.md: a library the program imports from outside the
bench folder (or from a virtual environment in it), changed in place. `--bench-preflight always` runs the pre-flight whatever
is remembered.

Each pass is one small JSON file in the user's cache (user_cache.py), written whole and renamed into
place, so concurrent sittings and a torn write leave either a complete record or none. Knows nothing
of pytest.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import Bench
from .user_cache import KEPT_S, Records, cache_folder, files_digest, machine, plugin_digest

__all__ = ["MEMORY_S", "PreflightMemory", "arm_keys", "remembered_line"]

MEMORY_S = KEPT_S  # how long a pass is trusted without a change the hash sees
FORMAT = 1
# Folders of the bench folder whose files are not part of the hash: version control, caches,
# virtual environments and node_modules (thousands of files a sitting need not stat).
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                             ".tox", ".nox", ".venv", "venv", "node_modules", ".cache"})  # fmt: skip
MAX_BENCH_FILES = 20_000  # files of the bench folder hashed, at most
# Variables that differ between runs of the same sitting and reach no program the pre-flight runs.
VOLATILE_VARIABLES = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
VOLATILE_PREFIXES = ("PYTEST_",)


def arm_keys(bench: Bench, arms: Mapping[str, str], tools: Mapping[str, Mapping[str, str]], *,
             store: Path | None = None) -> dict[str, str]:
    """Per arm (-> the task its environment is provisioned for), the hash of everything its
    pre-flight depends on; `tools[arm]` names the sandbox's and the audit's programs as this process
    found them (their descriptions); `store`: the sitting's store, when not the bench's own (its files
    are not the bench's). What all arms share is read once."""
    base = cache_folder()
    skipped = {bench.store, *([store] if store is not None else []), *([base] if base is not None else [])}
    shared = {
        "format": FORMAT,
        "plugin": plugin_digest(),
        "bench_file": str(bench.path),
        "bench_toml": _file_digest(bench.path),
        "hooks": _file_digest(bench.root / "conftest.py"),
        "bench_files": files_digest(bench.root, skip_names=SKIPPED_FOLDERS,
                                    skip_paths=frozenset(os.path.realpath(path) for path in skipped), limit=MAX_BENCH_FILES),
        "machine": machine(),
        "user": [os.geteuid(), os.getegid(), sorted(os.getgroups())],
        "environment": sorted(
            (name, value)
            for name, value in os.environ.items()
            if name not in VOLATILE_VARIABLES and not name.startswith(VOLATILE_PREFIXES)
        ),
    }  # fmt: skip
    return {
        arm: hashlib.sha256(
            json.dumps(
                {**shared, "arm": arm, "task": task, "conditions": bench.conditions(arm, task), "tools": dict(sorted(tools[arm].items()))},
                sort_keys=True, default=str,
            ).encode()
        ).hexdigest()
        for arm, task in arms.items()
    }  # fmt: skip


class PreflightMemory(Records):
    """The passes kept in `folder` (None: nothing is remembered, e.g. no cache folder of our own)."""

    @classmethod
    def in_user_cache(cls) -> PreflightMemory:
        return cls.in_cache("preflight")


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def remembered_line(remembered: Mapping[str, Mapping[str, Any]], now: float) -> str:
    """The summary's line for the arms whose pre-flight was remembered ("" for none)."""
    if not remembered:
        return ""
    ages = ", ".join(f"{arm} (passed {_age(now - float(record['kept_at']))} ago)" for arm, record in sorted(remembered.items()))
    word = "arm" if len(remembered) == 1 else "arms"
    return (
        f"pre-flight: not run again for {word} {ages}: nothing it depends on has changed since "
        f"(--bench-preflight always runs it)"
    )


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "less than a minute"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
