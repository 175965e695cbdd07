"""What a process that runs trials pays once (an xdist worker pays it once per worker), and the
benchmark of many workers at once: its bench runs every guard, and it checks the store it leaves.
Real CLI, scripted model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docs_text
import pytest


def test_the_sdk_import_freezes_the_start_once_and_leaves_collection_on() -> None:
    # In a process of its own: freezing is once per process, and this one may have frozen already.
    probe = (
        "import gc\n"
        "from pytest_benchcell.agent import import_sdk\n"
        "assert gc.get_freeze_count() == 0\n"
        "import_sdk()\n"
        "frozen = gc.get_freeze_count()\n"
        "import_sdk()  # a second sitting in the same process\n"
        "print(gc.isenabled(), frozen > 10_000, gc.get_freeze_count() == frozen)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_a_collector_switched_off_by_the_host_stays_off() -> None:
    probe = "import gc\ngc.disable()\nfrom pytest_benchcell.agent import import_sdk\nimport_sdk()\nprint(gc.isenabled())\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


@pytest.mark.e2e
@pytest.mark.slow
def test_the_xdist_benchmark_runs_every_guard_and_refuses_a_store_unlike_a_serial_one(tmp_path: Path) -> None:
    script = docs_text.benchmark_script("xdist_speedup")
    script.write_bench(tmp_path, arms=2, delay=0.0, requests=3)
    result = script.sitting(tmp_path, trials=2, workers=2, arms=2, commands=2, timeout_s=240)
    assert "4 passed" in result.summary
    assert len(result.spans) == 4
    # Both guards ran on every command, as the store says (not as the bench file says).
    assert "sandbox 'on (bubblewrap" in result.guards and "exec_audit 'on (" in result.guards and "strace" in result.guards
    assert "2 commands and " in result.guards

    cell = tmp_path / "results" / "scripted" / "arm1" / "say-hello.jsonl"
    lines = cell.read_text().splitlines()
    second = json.loads(lines[1])
    first = json.loads(lines[0])["trial"]  # the workers may have stored trial 2 first
    second["trial"] = first  # two samples with one number: what a store must never hold
    cell.write_text("\n".join([lines[0], json.dumps(second)]) + "\n")
    with pytest.raises(SystemExit, match=rf"arm1: trial numbers \[{first}, {first}\], expected 1..2 once each"):
        script.check_store(tmp_path, 2, 2, 2)
    unaudited = json.loads(lines[1])
    unaudited["provenance"]["exec_audit"] = "off (strace is not installed)"
    cell.write_text("\n".join([lines[0], json.dumps(unaudited)]) + "\n")
    with pytest.raises(SystemExit, match=rf"arm1 trial {unaudited['trial']}: exec_audit 'off \(strace is not installed\)'"):
        script.check_store(tmp_path, 2, 2, 2)
