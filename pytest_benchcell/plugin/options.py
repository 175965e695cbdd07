"""The command-line options and ini key, and what they name: the bench file, the store, the report
files; each refused with a pytest.UsageError naming the option, its value and what is allowed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..config import Bench
    from ..store import Store

HTML_EXTRA_HINT = (
    "HTML reports draw their plots with matplotlib, part of the optional extra [html]: "
    "pip install 'pytest-benchcell[html]'"
)


def _positive_int(text: str) -> int:
    from ..config import positive_int  # imported when the option is used, not by every pytest run

    return positive_int(text)


def _trials_per_cell(text: str) -> int:
    import argparse

    from ..sitting import MAX_TRIALS_PER_CELL

    value = _positive_int(text)
    if value > MAX_TRIALS_PER_CELL:
        raise argparse.ArgumentTypeError(f"{value} is too large; allowed: a whole number from 1 to {MAX_TRIALS_PER_CELL:,}")
    return value


def _dollars(text: str) -> float:
    import argparse

    from ..dollar_budget import parse_usd

    try:
        return parse_usd(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


FILL_DECIDE = "decide"


def _fill_target(text: str) -> int | str:
    """--bench-fill's value: a number of scored samples per cell, or `decide` (allocation.py)."""
    import argparse

    if text == FILL_DECIDE:
        return text
    try:
        return _trials_per_cell(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or {FILL_DECIDE}") from None


PREFLIGHT_REMEMBERED, PREFLIGHT_ALWAYS = "remembered", "always"  # --bench-preflight's values


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("bench_config", "pytest-benchcell: the bench definition (relative to this ini file)", default="")
    group = parser.getgroup("benchcell", "benchcell: benchmark coding-agent tools one cell at a time")
    group.addoption("--bench-arm", action="append", default=[], dest="bench_arm", metavar="ARM",
                    help="arm(s) to run; repeatable or comma-separated; 'all' selects every arm")
    group.addoption("--bench-task", action="append", default=[], dest="bench_task", metavar="TASK",
                    help="task(s) to run; repeatable or comma-separated; 'all' selects every task")
    group.addoption("--bench-trials", type=_trials_per_cell, default=None, dest="bench_trials", metavar="N",
                    help="new trials per selected cell this sitting (default: [bench] trials, 5)")
    group.addoption("--bench-turn-cap", type=_positive_int, default=None, dest="bench_turn_cap", metavar="N",
                    help="agent turns before a trial counts as confused (default: [bench] turn_cap, 40); with --bench-report: "
                         "report the samples made under this cap")
    group.addoption("--bench-wall-clock-ms", type=_positive_int, default=None, dest="bench_wall_clock_ms",
                    metavar="MS", help="wall-clock backstop per trial; past it the trial is hung (default 300000); with "
                         "--bench-report: report the samples made under this backstop")
    group.addoption("--bench-store", default=None, dest="bench_store", metavar="DIR",
                    help="sample store folder, relative to the current directory (default: [bench] store, relative to "
                         "bench.toml)")
    group.addoption("--bench-config", default=None, dest="bench_config", metavar="PATH",
                    help="the bench definition, relative to the current directory (default: ini bench_config, else the "
                         "first bench.toml from the current directory upwards, else in the rootdir)")
    group.addoption("--bench-fill", type=_fill_target, nargs="?", const=0, default=None, dest="bench_fill",
                    metavar="N|decide", help="run only the trials each cell needs to reach N scored samples (default N: "
                    "the floor); 'decide': only trials that advance a comparison still undecided (docs/statistics.md)")
    group.addoption("--bench-budget", type=_positive_int, default=None, dest="bench_budget", metavar="TOKENS",
                    help="stop starting trials once this sitting spent this many cost-equivalent tokens")
    group.addoption("--bench-budget-usd", type=_dollars, default=None, dest="bench_budget_usd", metavar="USD",
                    help="start no trial that would take this sitting's spend past this many US dollars, at the prices of "
                         "the bench's model (the package's price table and [prices] in bench.toml)")
    group.addoption("--bench-rescore", action="store_true", default=False, dest="bench_rescore",
                    help="score the stored samples of the selected cells again with the current checker (no trials, "
                         "no model calls); changed verdicts are appended as rescore records")
    group.addoption("--bench-report", action="store_true", default=False, dest="bench_report",
                    help="render the store as report tables (no trials run); narrow it with --bench-arm/--bench-task")
    group.addoption("--bench-report-md", default=None, dest="bench_report_md", metavar="PATH",
                    help="also write the report as Markdown (implies --bench-report)")
    group.addoption("--bench-report-json", default=None, dest="bench_report_json", metavar="PATH",
                    help="also write the report as JSON (implies --bench-report)")
    group.addoption("--bench-report-html", default=None, dest="bench_report_html", metavar="PATH",
                    help="also write a self-contained HTML report with plots (implies --bench-report)")
    group.addoption("--bench-report-store", action="append", default=[], dest="bench_report_store", metavar="DIR",
                    help="also read this store into the report, as one with the bench's store (repeatable; each "
                         "sample id counted once)")
    group.addoption("--bench-weights", default=None, dest="bench_weights", metavar="SPEC",
                    help="cost-equivalent weights for the report, e.g. cache_read=0.1,output=5 (default: [pricing])")
    group.addoption("--bench-preflight", choices=(PREFLIGHT_REMEMBERED, PREFLIGHT_ALWAYS), default=PREFLIGHT_REMEMBERED,
                    dest="bench_preflight", help="'always': run the pre-flight for every selected arm; default "
                    "'remembered': not for an arm whose same pre-flight passed on this machine within a day, with "
                    "the bench, its hooks, the arm's programs and the plugin as now")
    group.addoption("--bench-scripted", action="store_true", default=False, dest="bench_scripted",
                    help="play the bench's scripted model on 127.0.0.1 instead of a real model (no tokens spent)")  # fmt: skip


def _bench_requested(config: pytest.Config) -> bool:
    return bool(config.option.bench_arm or config.option.bench_task)


BENCH_CONFIG_ALLOWED = "a bench.toml file"


def bench_location(config: pytest.Config) -> tuple[Path, str | None]:
    """Where the bench file is, whatever pytest guessed as its rootdir (pytest picks it from argument
    values that are existing paths before it knows our options), and where that was said:
    --bench-config, then the ini key bench_config, then the first bench.toml from the invocation
    directory upwards, then the rootdir (these last two: None, the file was found, not named)."""
    invocation = config.invocation_params.dir
    option = config.option.bench_config
    if option is not None:
        if not option.strip():
            raise pytest.UsageError(f"--bench-config {option!r} is empty; allowed: the path of {BENCH_CONFIG_ALLOWED}")
        return (invocation / option).resolve(), f"--bench-config {option}"
    configured = str(config.getini("bench_config"))
    if configured:
        base = config.inipath.parent if config.inipath else config.rootpath
        where = f" in {config.inipath}" if config.inipath else ""
        return (base / configured).resolve(), f"ini key bench_config = {configured!r}{where}"
    for folder in (invocation, *invocation.parents):
        if (folder / "bench.toml").is_file():
            return folder / "bench.toml", None
    return config.rootpath / "bench.toml", None


def _load(config: pytest.Config) -> Bench:
    from ..config import BenchConfigError, load_bench

    path, source = bench_location(config)
    if source is not None and not path.is_file():
        what = "is a folder" if path.is_dir() else "no such bench file" if not path.exists() else "not a regular file"
        raise pytest.UsageError(f"{source}: {path}: {what}; allowed: the path of {BENCH_CONFIG_ALLOWED} (see docs/writing-a-bench.md)")
    try:
        return load_bench(path)
    except BenchConfigError as exc:
        if source is not None or path.exists():
            raise pytest.UsageError(str(exc)) from None
        raise pytest.UsageError(
            f"no bench.toml in {config.invocation_params.dir} or its parents, nor in the rootdir "
            f"{config.rootpath}; create one (see docs/writing-a-bench.md), or name it with --bench-config PATH or the "
            f"ini key bench_config"
        ) from None


STORE_ALLOWED = "a folder this user can write (created if missing)"


def _store_source(config: pytest.Config, bench: Bench) -> str:
    option = config.option.bench_store
    return f"--bench-store {option}" if option else f"[bench] store in {bench.path}"


def _store(config: pytest.Config, bench: Bench, *, write: bool) -> Store:
    """The sample store: --bench-store relative to the invocation directory, [bench] store relative
    to bench.toml. An unusable one is refused with where the value came from and what is allowed."""
    from ..store import Store

    option = config.option.bench_store
    root = (config.invocation_params.dir / option).resolve() if option else bench.store
    source = _store_source(config, bench)
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"{source}: {root} is a file, not a folder; allowed: {STORE_ALLOWED}")
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), None)
    if existing is not None and not existing.is_dir():
        raise pytest.UsageError(f"{source}: {root} cannot be created: {existing} is a file; allowed: {STORE_ALLOWED}")
    if write and existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        what = "the store" if existing == root else f"its parent {existing}"
        raise pytest.UsageError(f"{source}: {root}: {what} is read-only for this user; allowed: {STORE_ALLOWED}")
    return Store(root)


REPORT_OUTPUTS = ("--bench-report-md", "--bench-report-json", "--bench-report-html")


def _report_target(config: pytest.Config, path: str) -> Path:
    return config.invocation_params.dir / path  # relative to where pytest was started


def _refuse_unusable_outputs(config: pytest.Config) -> None:
    """Every report file can be written, checked before the store is read."""
    from ..cli import unusable_output

    for name in REPORT_OUTPUTS:
        value = getattr(config.option, name[2:].replace("-", "_"))
        problem = unusable_output(_report_target(config, value)) if value else None
        if problem:
            raise pytest.UsageError(f"{name} {value}: {problem}")


def _require_extra(module: str, hint: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise pytest.UsageError(hint)


def _refuse_weights_outside_reports(config: pytest.Config) -> None:
    if config.option.bench_weights is not None:
        raise pytest.UsageError(
            f"--bench-weights {config.option.bench_weights!r}: weights apply to reports only (--bench-report, "
            f"--bench-report-md/-json/-html); a sitting stores raw token counts and reports weigh them"
        )
