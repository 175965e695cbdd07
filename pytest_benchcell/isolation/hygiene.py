"""What the agent's process may see: a curated PATH and an environment built explicitly.

The guard is the authority on what runs; this is the second wall, so that a command the guard
missed still finds nothing foreign to run and no secret of the harness to read:

- PATH is one per-trial folder holding only the arm's binaries and the harmless utilities. Each
  arm binary is a small wrapper that restores the harness's PATH for that binary alone, because a
  real CLI is often a script (`#!/usr/bin/env python3`) that needs its interpreter. What an allowed
  binary starts internally is judged by the execution audit (exec_audit/): only what its own
  start-up was seen to run and the helpers the arm declares may run below it.
- The Claude CLI is started through a wrapper that removes every inherited variable that is not
  the SDK's own (ANTHROPIC_*, CLAUDE_*), a locale or terminal setting, or one the arm declares; the
  CLI passes its environment on to the agent's tools, so nothing else of the harness (tokens of
  other tools, proxies, cloud credentials) reaches the agent.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

# Inherited variables the CLI keeps: the SDK's and the CLI's own, and harmless process settings.
KEPT_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "LC_")
KEPT_NAMES = frozenset({"LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "DISABLE_TELEMETRY"})
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class HygieneError(Exception):
    """The arm cannot be set up (a declared binary is not found)."""


def curated_bin(folder: Path, binaries: Iterable[str], harmless: Iterable[str], search_path: str) -> Path:
    """Fill `folder` with the arm's binaries (as wrappers) and the harmless utilities (as links)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in binaries:
        target = shutil.which(name, path=search_path)
        if target is None:
            raise HygieneError(f"binary {name!r} of the arm was not found on {search_path!r}")
        wrapper = folder / name
        wrapper.write_text(
            "#!/bin/sh\n"
            "# The arm's binary, run with the harness's PATH so its own internals (its interpreter,\n"
            "# helpers it calls) work; the agent's shell itself only sees the curated folder.\n"
            f"PATH={shlex.quote(search_path)}; export PATH\n"
            f'exec {shlex.quote(os.path.realpath(target))} "$@"\n'
        )
        wrapper.chmod(0o755)
    for name in harmless:
        if (folder / name).exists():
            continue
        target = shutil.which(name)
        if target is not None:
            (folder / name).symlink_to(os.path.realpath(target))
    return folder


def removed_variables(inherited: Mapping[str, str], declared: Iterable[str]) -> list[str]:
    """The inherited variables the CLI (and so the agent) must not see."""
    keep = set(declared)
    return sorted(
        name
        for name in inherited
        if name not in keep and name not in KEPT_NAMES and not name.startswith(KEPT_PREFIXES)
    )


def cli_wrapper(path: Path, cli: str, remove: Iterable[str]) -> Path:
    """A launcher for the Claude CLI that drops the given inherited variables first."""
    unset = " ".join(f"-u {shlex.quote(name)}" for name in remove if _SHELL_NAME.match(name))
    path.write_text(f'#!/bin/sh\nexec /usr/bin/env {unset} {shlex.quote(cli)} "$@"\n')
    path.chmod(0o755)
    return path
