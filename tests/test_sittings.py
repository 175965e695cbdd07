"""Sittings at scale: xdist, concurrent sittings, budget, fill, interrupts. Real CLI, scripted model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benches import CONFTEST, write_bench
from interrupts import as_a_terminal_starts_it

pytestmark = pytest.mark.e2e


def stored(root: Path, arm: str, task: str) -> list[dict]:
    path = root / "results" / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [None, "2"], ids=["serial", "xdist-2"])
def test_a_matrix_runs_with_and_without_xdist(pytester: pytest.Pytester, workers: str | None) -> None:
    write_bench(pytester)
    args = ["--bench-arm", "all", "--bench-task", "say-hello,make-file", "--bench-scripted", "--bench-trials", "2"]
    if workers:
        args += ["-n", workers]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=6, failed=2)  # the bare arm may not run touch: its make-file fails
    for arm in ("shell", "bare"):
        for task in ("say-hello", "make-file"):
            assert sorted(s["trial"] for s in stored(pytester.path, arm, task)) == [1, 2]
    # the floor summary is complete on the controller, printed once
    assert result.stdout.str().count("benchcell sitting") == 1
    result.stdout.fnmatch_lines(["bare x make-file: 2 recorded this sitting (0 passed, 2 failed, 0 invalid, 0 errors)"])


@pytest.mark.slow
def test_concurrent_sittings_on_one_cell_never_share_a_trial_number(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-arm", "bare", "--bench-task", "say-hello",
            "--bench-scripted", "--bench-trials", "3"]  # fmt: skip
    runs = [base, base, base + ["-n", "2"]]
    processes = [subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for cmd in runs]
    outputs = [process.communicate(timeout=240)[0].decode() for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    trials = [s["trial"] for s in stored(pytester.path, "bare", "say-hello")]
    assert len(trials) == 9
    assert sorted(trials) == list(range(1, 10))
    assert len({s["id"] for s in stored(pytester.path, "bare", "say-hello")}) == 9


def test_a_keyword_reserves_only_the_trials_it_selects(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    args = ["--bench-arm", "all", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "3"]
    result = pytester.runpytest(*args, "-k", "bare and t2")
    result.assert_outcomes(passed=1)
    reservations = pytester.path / "results" / "scripted" / "bare" / "say-hello.trials"
    assert [json.loads(line)["trials"] for line in reservations.read_text().splitlines()] == [[2]]
    assert not (pytester.path / "results" / "scripted" / "shell").exists()  # deselected: nothing reserved
    assert [s["trial"] for s in stored(pytester.path, "bare", "say-hello")] == [2]
    after = pytester.runpytest(*args, "--collect-only", "-q")
    after.stdout.fnmatch_lines(["bench.toml::shell-say-hello-t1", "bench.toml::bare-say-hello-t3"])


def test_budget_stops_starting_trials_and_says_so(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest(
        "--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "3",
        "--bench-budget", "100", "-rs",
    )  # fmt: skip
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "spent: * cost-equivalent tokens this sitting of a budget of 100",
            "SKIPPED [[]2[]] *budget of 100 cost-equivalent tokens reached (* spent this sitting)",
        ]
    )
    assert len(stored(pytester.path, "bare", "say-hello")) == 1


@pytest.mark.slow
def test_fill_adds_exactly_the_missing_trials(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    common = ["--bench-arm", "shell", "--bench-task", "say-hello,make-file", "--bench-scripted"]
    pytester.runpytest(*common, "--bench-trials", "1", "-k", "say").assert_outcomes(passed=1, deselected=1)
    collected = pytester.runpytest(*common, "--bench-fill", "--collect-only", "-q")
    collected.stdout.fnmatch_lines(["*5 tests collected*"])  # 2 for say-hello (has 1 of 3), 3 for make-file
    pytester.runpytest(*common, "--bench-fill").assert_outcomes(passed=5)
    assert len(stored(pytester.path, "shell", "say-hello")) == 3
    deeper = pytester.runpytest(*common, "--bench-fill=4")
    deeper.assert_outcomes(passed=2)
    done = pytester.runpytest(*common, "--bench-fill=4")
    assert done.ret == pytest.ExitCode.OK
    done.stdout.fnmatch_lines(["*every selected cell already has 4 scored samples*"])


def test_fill_and_trials_exclude_each_other(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted",
                                "--bench-fill", "--bench-trials", "2")  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-fill and --bench-trials exclude each other*"])


def _claude_processes_under(folder: Path) -> list[int]:
    """Live Claude CLI processes whose environment points into the given folder's trials."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        # The sitting runs with TMPDIR inside the folder, so its per-trial folders (and so the CLI's
        # CLAUDE_CONFIG_DIR) are there: CLIs of other runs on the machine never match.
        if b"claude" in cmdline and b"CLAUDE_CONFIG_DIR=" + str(folder).encode() in environ:
            found.append(int(proc.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_mid_trial_records_an_error_tears_down_and_leaves_no_cli(
    pytester: pytest.Pytester, signum: int
) -> None:
    started_marker = pytester.path / "started"
    conftest = CONFTEST.replace(
        "def pytest_benchcell_script(trial, environment):\n",
        f"def pytest_benchcell_script(trial, environment):\n    open({str(started_marker)!r}, 'w').close()\n",
    )
    write_bench(pytester, conftest=conftest)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-arm", "bare", "--bench-task", "stall",
           "--bench-scripted", "--bench-trials", "2"]  # fmt: skip
    (pytester.path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(pytester.path / "tmp")}
    process = subprocess.Popen(
        cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=as_a_terminal_starts_it
    )
    deadline = time.monotonic() + 60
    while not started_marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # the CLI is now waiting on the scripted model's Delay
    assert _claude_processes_under(pytester.path), "the check below must be able to see this sitting's CLI"
    process.send_signal(signum)
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    (sample,) = stored(pytester.path, "bare", "stall")
    assert (sample["status"], sample["trial"]) == ("error", 1)
    assert sample["reason"].startswith("interrupted")
    assert (pytester.path / "teardown.log").read_text() == "bare-stall-t1\n"
    time.sleep(0.5)
    assert _claude_processes_under(pytester.path) == []
    # the next sitting reads the store and continues numbering past both reserved trials
    nxt = pytester.runpytest("--bench-arm", "bare", "--bench-task", "stall", "--bench-scripted", "--collect-only", "-q")
    nxt.stdout.fnmatch_lines(["bench.toml::bare-stall-t3"])


def test_kill_9_mid_append_leaves_a_store_the_next_sitting_extends(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1")
    path = pytester.path / "results" / "scripted" / "bare" / "say-hello.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"schema":1,"id":"half-written","arm":"bare","ta')  # what kill -9 mid-write leaves
    result = pytester.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1")
    result.assert_outcomes(passed=1)
    lines = path.read_bytes().split(b"\n")
    assert lines[1].endswith(b'"ta') and json.loads(lines[2])["trial"] == 2
    result.stdout.fnmatch_lines(["    scored samples of the current definition: 1 -> 2 *"])


def test_verbose_prints_a_progress_line_per_trial(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted",
                                "--bench-trials", "1", "-v")  # fmt: skip
    result.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t1 PASSED*", "    bare-say-hello-t1: pass, * turns, * cost-eq tokens, * s"])


def test_trials_of_different_arms_are_interleaved(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "say-hello", "--bench-scripted",
                                "--bench-trials", "2", "--collect-only", "-q")  # fmt: skip
    result.stdout.fnmatch_lines(
        ["bench.toml::shell-say-hello-t1", "bench.toml::bare-say-hello-t1", "bench.toml::shell-say-hello-t2", "bench.toml::bare-say-hello-t2"]
    )


RESERVES_MEANWHILE = '''

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    from pytest_benchcell.store import Cell, Store

    for item in items:
        item.add_marker(pytest.mark.added_by_another_plugin)
    # another sitting reserves trial 1 of the cell between this sitting's preview and its reservation
    Store(config.rootpath / "results").reserve_previewed(Cell("scripted", "bare", "say-hello"), [1], sitting="other")


def pytest_runtest_setup(item):
    print(f"MARKED {item.name} {item.get_closest_marker('added_by_another_plugin') is not None}")
'''


def test_a_trial_moved_to_a_fresh_number_keeps_the_markers_other_plugins_added(pytester: pytest.Pytester) -> None:
    write_bench(pytester, conftest=CONFTEST + "\nimport pytest\n" + RESERVES_MEANWHILE)
    result = pytester.runpytest(
        "--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1", "-s",
        "-W", "ignore::pytest.PytestUnknownMarkWarning",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*MARKED bare-say-hello-t2 True*"])
    assert [s["trial"] for s in stored(pytester.path, "bare", "say-hello")] == [2]
