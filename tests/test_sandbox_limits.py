"""The sandbox's file and disk limits stop a command near the declared figure, however fast it
creates files: a command runs through a trial's real prefix (bubblewrap in the trial's network
namespace) under the trial's LimitWatch, as a trial runs it, without the Claude CLI."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.limits import LimitWatch, Limits, usage

TOOL = sandbox.find_sandbox()
needs_sandbox = pytest.mark.skipif(not TOOL.available, reason=f"the sandbox cannot run here: {TOOL.reason}")
MARGIN = 0.10  # how far past a limit a command may get before it is stopped


def _plan(root: Path) -> sandbox.SandboxPlan:
    for name in ("cwd", "environment/service", "home"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return sandbox.SandboxPlan(
        writable=(str(root / "cwd"), str(root / "environment")),
        readable=(sys.prefix,),
        hidden=(),
        home=str(root / "home"),
        never=(str(root / "environment" / "service"),),
    )


def _run_watched(root: Path, limits: Limits, program: str, before: str = "") -> tuple[subprocess.CompletedProcess[str], LimitWatch, float]:
    """Run a Python program in the sandbox under the trial's watch; (the run, the watch, seconds)."""
    plan = _plan(root)
    if before:
        subprocess.run([sys.executable, "-c", before], cwd=root / "cwd", check=True)
    network = sandbox.TrialNetwork(TOOL, root / "network", []).start()
    try:
        prefix = sandbox.write_prefix(root / "prefix", TOOL, plan, network, limits=limits)
        watch = LimitWatch(limits, plan.writable, network.child_pid, skip=plan.never).start()
        started = time.monotonic()
        try:
            done = subprocess.run(
                [str(prefix), f"{sys.executable} -c {shlex.quote(program)}"], cwd=root / "cwd", capture_output=True, text=True, timeout=120
            )
        finally:
            watch.stop()
        return done, watch, time.monotonic() - started
    finally:
        network.stop()


MANY_FILES = "import os\nfor i in range(20001):\n    open(f'f{i}', 'w').close()\nprint('made them all')"
SMALL_FILES = "import os\nfor i in range(20001):\n    with open(f's{i}', 'wb') as out:\n        out.write(b'x' * 4096)\nprint('made them all')"


@needs_sandbox
def test_a_command_creating_files_fast_is_stopped_within_a_tenth_of_the_file_limit(tmp_path: Path) -> None:
    done, watch, _ = _run_watched(tmp_path, Limits(disk_mb=1024, files=10_000, processes=256), MANY_FILES)
    created = usage([str(tmp_path / "cwd")])[1]
    assert "made them all" not in done.stdout, (created, watch.report())
    assert 10_000 <= created <= 10_000 * (1 + MARGIN), watch.report()
    record = watch.report()
    assert record["commands_killed"] >= 1
    assert [line.split(":")[0] for line in record["reached"]] == ["files"]


@needs_sandbox
def test_many_small_files_are_stopped_within_a_tenth_of_the_disk_limit(tmp_path: Path) -> None:
    done, watch, _ = _run_watched(tmp_path, Limits(disk_mb=32, files=100_000, processes=256), SMALL_FILES)
    added_mb = usage([str(tmp_path / "cwd")])[0] / 2**20
    assert "made them all" not in done.stdout, (added_mb, watch.report())
    assert 32 <= added_mb <= 32 * (1 + MARGIN), watch.report()
    assert [line.split(":")[0] for line in watch.report()["reached"]] == ["disk_mb"]


@needs_sandbox
def test_rewriting_a_large_file_that_was_there_before_adds_nothing(tmp_path: Path) -> None:
    """What the writable folders held when the trial began is not the command's: rewriting it
    in place, or deleting it and writing as much again, stays within the limit."""
    before = "open('data', 'wb').write(b'x' * 24 * 2**20)"
    program = "import os\nopen('data', 'r+b').write(b'y' * 24 * 2**20)\nos.remove('data')\nopen('data', 'wb').write(b'z' * 24 * 2**20)\nprint('rewrote it')"
    done, watch, _ = _run_watched(tmp_path, Limits(disk_mb=32, files=100, processes=256), program, before=before)
    assert "rewrote it" in done.stdout, (done.stderr, watch.report())
    assert watch.report()["reached"] == [] and watch.report()["commands_killed"] == 0
