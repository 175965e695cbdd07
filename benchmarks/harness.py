"""What the benchmark scripts share: their command line, a sitting run with a time bound, and the
table of measurements against goals that the simulations print.

Not a benchmark itself. The scripts run as `.venv/bin/python benchmarks/NAME.py`, which puts this
folder first on sys.path, so they import it as `harness`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def parser(doc: str | None, **options: Any) -> argparse.ArgumentParser:
    """The script's command line, described by the first line of its docstring: one `--name` option
    per keyword (an underscore becomes a dash). The value is the default, and the option takes its
    type (False: a flag; a list: any number of values of its items' type; None: text); a pair
    (default, help) adds the help. Options of another shape are added to the parser returned."""
    made = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    for name, value in options.items():
        default, text = value if isinstance(value, tuple) else (value, None)
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            made.add_argument(flag, action="store_true", help=text)
        elif isinstance(default, list):
            made.add_argument(flag, type=type(default[0]), nargs="*", default=default, help=text)
        else:
            made.add_argument(flag, type=str if default is None else type(default), default=default, help=text)
    return made


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str  # empty when it went to stdout (merge_stderr)
    wall_s: float
    cpu_s: float  # the process tree's, as far as it was reaped (pytest, xdist workers, every Claude CLI)

    def summary(self) -> str:
        """pytest's closing line ("3 passed in 1.2s"), or "" when it printed none."""
        return next((line.strip("= ") for line in reversed(self.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", line)), "")


def run_sitting(
    command: Sequence[str], cwd: Path, *, timeout_s: float, merge_stderr: bool = False, env: Mapping[str, str] | None = None
) -> Finished:
    """Run a sitting (any command) and wait at most `timeout_s` for it. It runs in a session of its own,
    so one that overruns is stopped with its xdist workers and Claude CLIs, and the script ends
    saying so (SystemExit). `env`: its whole environment (default: this process's)."""
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        list(command), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True, start_new_session=True, env=None if env is None else dict(env),
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=30)
        raise SystemExit(f"a sitting took over {timeout_s:g} s; stopped it") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Finished(process.returncode, stdout, stderr or "", time.perf_counter() - started, cpu)


@dataclass
class Row:
    """One measurement of a simulation against its goal; met None: no goal (a heading or a figure)."""

    what: str
    measured: str
    goal: str
    met: bool | None


def share(hits: int, n: int) -> str:
    return f"{100 * hits / n:5.1f}% ({hits}/{n})"


def print_rows(rows: Sequence[Row], footer: str) -> int:
    """Print the table of rows and a footer line; 0 when no goal was missed, else 1 (the exit status)."""
    width = max(len(r.what) for r in rows)
    print(f"{'measurement'.ljust(width)}  {'measured':>18}  {'goal':>14}  met")
    for row in rows:
        met = "" if row.met is None else "yes" if row.met else "NO"
        print(f"{row.what.ljust(width)}  {row.measured:>18}  {row.goal:>14}  {met}".rstrip())
    print(footer)
    return 0 if all(row.met is not False for row in rows) else 1
