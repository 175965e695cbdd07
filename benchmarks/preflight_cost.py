"""What does the pre-flight add to a sitting? Target: under 1 s for the example bench's four arms.

    .venv/bin/python benchmarks/preflight_cost.py [--runs 5]

Runs the pre-flight (pytest_benchcell/preflight.py) exactly as a sitting of the example bench does
(`pytest --bench-arm all --bench-task close-export --bench-scripted`): for each arm with a Bash
tool, the bench's own hooks provision and ready its tracker service, the arm is confined as a trial
is (PATH folder, shell prefix, sandbox, network namespace), its programs run in one command through
the prefix, then the service is torn down. The mcp arm has no shell: its environment is provisioned the
same way and its MCP server is started as a trial starts it and asked for its tools over MCP
(preflight_mcp.py). Prints the median over the runs, the spread, and where one run's time goes
(provision + ready, confinement, the commands in the sandbox, the MCP server, teardown), what the
same programs cost run bare, and what importing the MCP client costs a fresh process (paid once per
process; a sitting that runs trials imports it anyway with the agent SDK, before the first trial).

    .venv/bin/python benchmarks/preflight_cost.py --spellings [--runs 5]

What trying the usual spellings costs where an arm's `BINARY --help` and `--version` fail outside the
sandbox too: the cli-skill arm alone, once as it is and once with its binary replaced by `tracker-sub`,
a wrapper whose only help is a `help` subcommand (so `--help`, `--version` and `-h` fail outside,
each run there under the audit's strace, and `help` works, then runs inside again, traced).
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import tomllib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0
sys.path.insert(0, str(ROOT))

from pytest_benchcell import preflight, preflight_mcp  # noqa: E402
from pytest_benchcell.agent import bundled_cli  # noqa: E402
from pytest_benchcell.config import load_bench, parse_bench  # noqa: E402
from pytest_benchcell.isolation.sandbox import find_sandbox  # noqa: E402


def example_hooks() -> SimpleNamespace:
    spec = importlib.util.spec_from_file_location("example_bench_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return SimpleNamespace(
        pytest_benchcell_provision=module.pytest_benchcell_provision,
        pytest_benchcell_ready=module.pytest_benchcell_ready,
        pytest_benchcell_teardown=module.pytest_benchcell_teardown,
    )


class Phases:
    """Wall time per phase of one run, by wrapping the functions the pre-flight calls."""

    def __init__(self, hooks: SimpleNamespace) -> None:
        self.seconds: dict[str, float] = {}
        for name, phase in (("pytest_benchcell_provision", "provision + ready"), ("pytest_benchcell_ready", "provision + ready"),
                            ("pytest_benchcell_teardown", "teardown")):  # fmt: skip
            setattr(hooks, name, self.timed(phase, getattr(hooks, name)))
        preflight.confine = self.timed("confinement", preflight.confine)
        preflight.Runner.inside_all = self.timed("commands in the sandbox", preflight.Runner.inside_all)
        # In a thread of its own, while the next arms are checked: its time overlaps theirs.
        preflight_mcp.check_servers = self.timed("the MCP server started and asked (meanwhile)", preflight_mcp.check_servers)

    def timed(self, phase: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started

        return wrapper


def bare_commands(bench: Any, arms: list[str]) -> float:
    """The pre-flight's commands (the first of each check) run with plain bash on the harness's PATH
    and the bench's `path` folders: the programs' own cost, without the sandbox or an environment."""
    commands = [check.commands[0] for arm in arms for check in preflight.checks_for_binaries(bench.arms[arm])]
    path = os.pathsep.join([*(folder for arm in arms for folder in bench.arms[arm].path), os.environ.get("PATH", "")])
    started = time.perf_counter()
    for command in commands:
        subprocess.run(["bash", "-c", command], env={**os.environ, "PATH": path}, capture_output=True, check=False)
    return time.perf_counter() - started


TRACKER_SUB = """#!/bin/sh
# tracker with a `help` subcommand only: --help, --version and -h fail, outside the sandbox too
[ "$1" = help ] && exec tracker --help
echo "tracker-sub: unknown option $1" >&2
exit 1
"""


def spellings(runs: int) -> int:
    """The cli-skill arm's pre-flight as it is, then with a binary whose help is a subcommand."""
    document = tomllib.loads((ROOT / "bench.toml").read_text())
    hooks = example_hooks()
    cli = bundled_cli()
    with tempfile.TemporaryDirectory(prefix="preflight-spellings-") as folder:
        (Path(folder) / "tracker-sub").write_text(TRACKER_SUB)
        (Path(folder) / "tracker-sub").chmod(0o755)
        changed = {**document["arms"]["cli-skill"], "binaries": ["tracker-sub"], "path": ["bench/bin", folder],
                   "readable": ["bench/tracker", "bench/bin/tracker"], "deny_subcommands": {}}  # fmt: skip
        medians = {}
        for label, arm in (("as it is", document["arms"]["cli-skill"]), ("help subcommand only", changed)):
            bench = parse_bench(ROOT / "bench.toml", {**document, "arms": {**document["arms"], "cli-skill": arm}})
            preflight.run_preflight(bench, {"cli-skill": "close-export"}, hooks, "scripted", cli=cli)  # warm
            totals = []
            for _ in range(runs):
                started = time.perf_counter()
                found = preflight.run_preflight(bench, {"cli-skill": "close-export"}, hooks, "scripted", cli=cli)
                totals.append(time.perf_counter() - started)
                if found.refuses:
                    print(f"{label}: the arm did not pass its pre-flight:", found.refusal(bench), *found.notes, sep="\n")
                    return 1
            medians[label] = statistics.median(totals)
            print(f"cli-skill, {label}: median {medians[label]:.2f} s (runs {min(totals):.2f} to {max(totals):.2f} s)")
    print(*found.notes, sep="\n")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {runs} runs each")
    print(f"trying the usual spellings added {medians['help subcommand only'] - medians['as it is']:.2f} s")
    return 0


def mcp_client_import() -> float:
    """A fresh Python's import of the MCP client the pre-flight uses (what a first check pays)."""
    code = "import time; t = time.perf_counter(); import mcp.client.stdio, mcp; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spellings", action="store_true", help="what trying the usual spellings costs")
    args = parser.parse_args()
    tool = find_sandbox()
    if not tool.available:
        print(f"the sandbox cannot run here ({tool.reason}): the pre-flight has nothing to run")
        return 1
    if args.spellings:
        return spellings(args.runs)
    bench = load_bench(ROOT / "bench.toml")
    hooks = example_hooks()
    phases = Phases(hooks)
    arms = dict.fromkeys(bench.arms, "close-export")
    cli = bundled_cli()
    preflight.run_preflight(bench, arms, hooks, "scripted", cli=cli)  # warms caches (imports, the tracer check)
    totals = []
    breakdown: dict[str, float] = {}
    for _ in range(args.runs):
        phases.seconds = {}
        started = time.perf_counter()
        found = preflight.run_preflight(bench, arms, hooks, "scripted", cli=cli)
        totals.append(time.perf_counter() - started)
        if found.refuses or found.notes:
            print("the example bench did not pass its pre-flight:", found.refusal(bench), *found.notes, sep="\n")
            return 1
        breakdown = dict(phases.seconds)
    bare = bare_commands(bench, found.arms)
    median = statistics.median(totals)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.runs} runs")
    print(f"arms checked: {', '.join(found.arms)} ({found.checks} checks); MCP servers of {', '.join(found.mcp_arms)}: {found.mcp_servers}")
    print(f"pre-flight per sitting: median {median:.2f} s (runs {min(totals):.2f} to {max(totals):.2f} s)")
    print("where the last run's time went: " + ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in breakdown.items()))
    print(f"the same programs run bare, outside any sandbox: {bare:.2f} s (what the arms' programs cost by themselves)")
    print(f"importing the MCP client in a fresh process: {mcp_client_import():.2f} s (once; a sitting imports it with the SDK)")
    verdict = "met" if median < TARGET_S else "missed"
    print(f"target < {TARGET_S:.0f} s per sitting for four arms: {verdict}")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
