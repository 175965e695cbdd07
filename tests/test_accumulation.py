"""Accumulation through the plugin (pytester): samples keep counting across checkouts and rescores,
the sitting summary and fill agree with a full parse under index damage, failing writes are
recorded or stop the sitting cleanly, unknown usage stays unknown, turns are model replies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from benches import BENCH_TOML, write_bench
from sample_factory import make_sample
from test_store_damage import DAMAGE, IDS

from pytest_benchcell.config import load_bench
from pytest_benchcell.sample import Definition, conditions_of, effective_samples, scoring_of
from pytest_benchcell.store import Cell, Store


def sitting(pytester: pytest.Pytester, arm: str, task: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arm, "--bench-task", task, "--bench-scripted", "-p", "no:randomly", "-ra", *args)


def samples(root: Path, arm: str, task: str) -> list[dict]:
    path = root / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- turns and unknown usage ------------------------------------------------------------------------------
@pytest.mark.slow
def test_turns_are_model_replies_at_the_cap_and_hung_without_reply_has_unknown_usage(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    sitting(pytester, "shell", "loop-forever", "--bench-trials", "1", "--bench-turn-cap", "4").assert_outcomes(failed=1)
    (confused,) = samples(pytester.path / "results", "shell", "loop-forever")
    assert (confused["outcome"], confused["turns"]) == ("confused", 4)  # the CLI's own count says 5
    assert len(confused["tool_calls"]) == 4 and confused["usage"]["total"]["output"] > 0

    sitting(pytester, "shell", "stall", "--bench-trials", "1", "--bench-wall-clock-ms", "3000").assert_outcomes(failed=1)
    (hung,) = samples(pytester.path / "results", "shell", "stall")
    assert (hung["outcome"], hung["turns"]) == ("hung", 0)  # no reply ever came (the CLI says 2)
    assert hung["usage"] == {"total": None, "by_model": {}}  # unknown, not zero

    store = Store(pytester.path / "results")
    for trial in (2, 3):  # two answered trials beside the silent one
        store.append({**make_sample("shell", "stall", trial=trial, tier="read", outcome="hung", model_kind="scripted",
                                    tokens=(1000, 0, 0, 100)), "provenance": hung["provenance"]})  # fmt: skip
    # the bounds the samples were made under are part of their conditions: the report selects them the same way
    result = pytester.runpytest("--bench-report-json", "r.json", "--bench-scripted", "--bench-wall-clock-ms", "3000")
    assert result.ret == 0
    report = json.loads((pytester.path / "r.json").read_text())
    cell = next(c for c in report["cells"] if (c["arm"], c["task"]) == ("shell", "stall"))
    assert cell["outcomes"]["hung"] == 3 and cell["scored"] == 3  # the outcome still counts
    assert cell["cost_equivalent"]["n"] == 2 and cell["cost_equivalent"]["mean"] == 1500  # 1000 + 5 * 100
    assert report["store"]["usage_unknown"] == 1
    result.stdout.fnmatch_lines(["*Left out of token figures: 1 scored sample with unknown usage*"])


# -- portable definitions -------------------------------------------------------------------------------
def test_a_moved_checkout_keeps_counting_the_same_samples(pytester: pytest.Pytester, tmp_path: Path) -> None:
    with_path = BENCH_TOML.replace('binaries = ["touch"]', 'binaries = ["touch"]\npath = ["tools"]')
    write_bench(pytester, with_path)
    (pytester.path / "tools").mkdir()
    store = tmp_path / "shared-store"
    sitting(pytester, "shell", "say-hello", "--bench-trials", "1", f"--bench-store={store}").assert_outcomes(passed=1)

    clone = tmp_path / "colleague" / "clone"
    clone.mkdir(parents=True)
    shutil.copy(pytester.path / "bench.toml", clone / "bench.toml")
    shutil.copy(pytester.path / "conftest.py", clone / "conftest.py")
    (clone / "tools").mkdir()
    result = sitting(pytester, "shell", "say-hello", f"--bench-config={clone / 'bench.toml'}",
                     f"--bench-store={store}", "--bench-fill", "2")  # fmt: skip
    result.assert_outcomes(passed=1)  # fill needed one more: the first sample still counts
    result.stdout.fnmatch_lines(["    scored samples of the current definition: 1 -> 2 (*"])
    first, second = samples(store, "shell", "say-hello")
    assert first["provenance"]["conditions"] == second["provenance"]["conditions"]
    assert str(pytester.path) not in (store / "definitions").joinpath(
        f"{first['provenance']['conditions']}-{first['provenance']['scoring']}.toml").read_text()  # fmt: skip


def test_conditions_and_scoring_hold_what_the_readme_says(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "bench.toml").write_text(
        textwrap.dedent(BENCH_TOML).replace('binaries = ["touch"]', 'binaries = ["touch"]\npath = ["tools"]')
    )
    bench = load_bench(tmp_path / "bench.toml")
    base = bench.definition("shell", "say-hello")
    conditions = json.dumps(bench.conditions("shell", "say-hello"))
    assert str(tmp_path) not in conditions and '"path"' not in conditions  # no folder of this machine
    assert bench.definition("shell", "say-hello", turn_cap=9).conditions != base.conditions  # bounds are conditions
    edited = (tmp_path / "bench.toml").read_text().replace('required_facts = ["hello"]', 'required_facts = ["hi"]')
    (tmp_path / "bench.toml").write_text(edited)
    refact = load_bench(tmp_path / "bench.toml").definition("shell", "say-hello")
    assert refact.conditions == base.conditions and refact.scoring != base.scoring  # facts are scoring
    edited = edited.replace('intent = "Say hello."', 'intent = "Say hello, please."')
    (tmp_path / "bench.toml").write_text(edited)
    assert load_bench(tmp_path / "bench.toml").definition("shell", "say-hello").conditions != base.conditions
    with_env = edited.replace('bootstrap = "The shell is available."', 'bootstrap = "The shell is available."\nenv = { DATA = "/home/a" }')
    (tmp_path / "bench.toml").write_text(with_env)
    named = load_bench(tmp_path / "bench.toml").definition("shell", "say-hello").conditions
    (tmp_path / "bench.toml").write_text(with_env.replace("/home/a", "/Users/b"))
    assert load_bench(tmp_path / "bench.toml").definition("shell", "say-hello").conditions == named  # values: no
    (tmp_path / "bench.toml").write_text(with_env.replace("DATA", "DATA_DIR"))
    assert load_bench(tmp_path / "bench.toml").definition("shell", "say-hello").conditions != named  # names: yes
    ruled = with_env + '\n[arms.shell.arguments.touch]\ndeny_options = ["-r"]\n'
    (tmp_path / "bench.toml").write_text(ruled)
    assert load_bench(tmp_path / "bench.toml").definition("shell", "say-hello").conditions != named  # argument rules: yes


def test_a_corrected_fact_then_rescore_then_fill_needs_no_new_trial(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    sitting(pytester, "bare", "say-hello", "--bench-trials", "3").assert_outcomes(passed=3)
    bench = pytester.path / "bench.toml"
    bench.write_text(bench.read_text().replace('required_facts = ["hello"]', 'required_facts = ["hello from"]'))

    before = sitting(pytester, "bare", "say-hello", "--bench-fill", "3", "--collect-only", "-q")
    before.stdout.fnmatch_lines([
        "bench.toml::bare-say-hello-t4", "bench.toml::bare-say-hello-t5", "bench.toml::bare-say-hello-t6",
        "    scored samples of the current definition: 0 -> 0 (*",
        "    3 more scored under an older scoring definition*--bench-rescore*",
    ])  # fmt: skip

    stale = pytester.runpytest("--bench-report-json", "stale.json", "--bench-scripted")
    assert stale.ret == 0
    cell = next(c for c in json.loads((pytester.path / "stale.json").read_text())["cells"]
                if (c["arm"], c["task"]) == ("bare", "say-hello"))  # fmt: skip
    assert (cell["scored"], cell["left_out_older"], cell["coverage"]) == (0, 3, "missing")  # verdicts of old facts

    rescore = pytester.runpytest("--bench-rescore", "--bench-scripted")
    rescore.stdout.fnmatch_lines(["re-scored 3 stored samples in * 0 verdicts changed, 3 kept their verdict*"])
    assert "->" not in rescore.stdout.str()

    fill = sitting(pytester, "bare", "say-hello", "--bench-fill", "3")
    assert fill.ret == 0
    fill.stdout.fnmatch_lines(["nothing to do: every selected cell already has 3 scored samples",
                               "    scored samples of the current definition: 3 -> 3 (meets the reporting floor of 3)"])
    report = pytester.runpytest("--bench-report-json", "r.json", "--bench-scripted")
    assert report.ret == 0
    cell = next(c for c in json.loads((pytester.path / "r.json").read_text())["cells"]
                if (c["arm"], c["task"]) == ("bare", "say-hello"))  # fmt: skip
    assert (cell["scored"], cell["left_out_older"], cell["outcomes"]["pass"]) == (3, 0, 3)

    bench.write_text(bench.read_text().replace('required_facts = ["hello from"]', 'required_facts = ["goodbye"]'))
    flipped = pytester.runpytest("--bench-rescore", "--bench-scripted")
    flipped.stdout.fnmatch_lines(["* 3 verdicts changed, 0 kept their verdict*", "    bare-say-hello-t1: pass -> incorrect*"])
    again = pytester.runpytest("--bench-rescore", "--bench-scripted")
    again.stdout.fnmatch_lines(["re-scored 3 stored samples in * 0 verdicts changed, 0 kept their verdict*"])
    assert "incorrect -> incorrect" not in again.stdout.str()


# -- the sitting summary and fill under index damage ------------------------------------------------------
@pytest.mark.parametrize("damage", DAMAGE, ids=IDS)
def test_sitting_summary_and_fill_equal_a_full_parse_under_damage(pytester: pytest.Pytester, damage) -> None:
    write_bench(pytester)
    bench = load_bench(pytester.path / "bench.toml")
    current = bench.definition("bare", "say-hello")
    store = Store(pytester.path / "results")
    cell = Cell("scripted", "bare", "say-hello")

    def record(trial: int, **fields) -> dict:
        conditions, scoring = fields.pop("conditions", current.conditions), fields.pop("scoring", current.scoring)
        made = make_sample("bare", "say-hello", trial=trial, tier="read", model_kind="scripted", minutes=trial, **fields)
        made["provenance"] = {"fingerprint": conditions, "conditions": conditions, "scoring": scoring}
        return made

    for one in (record(1), record(2, outcome="incorrect"), record(3, scoring="older"), record(4, conditions="other"),
                record(5, status="invalid"), record(6), record(7)):  # fmt: skip
        store.append(one)
    import test_store_damage

    test_store_damage.CELL, saved = cell, test_store_damage.CELL  # the damage functions name the cell they damage
    test_store_damage.sample, saved_sample = (lambda trial, **kw: record(trial)), test_store_damage.sample
    try:
        damage(store)
    finally:
        test_store_damage.CELL, test_store_damage.sample = saved, saved_sample

    definition = Definition(current.conditions, current.scoring, current.legacy)
    truth = sum(
        definition.is_current(s["status"], s["outcome"], conditions_of(s), scoring_of(s))
        for s in effective_samples(store.read_cell(cell).samples)
    )
    result = sitting(pytester, "bare", "say-hello", "--bench-fill", "8", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"    scored samples of the current definition: {truth} -> {truth} (*"])
    items = [line for line in result.stdout.lines if line.startswith("bench.toml::bare-say-hello-t")]
    assert len(items) == 8 - truth
    stale = sum(
        s["status"] == "scored" and definition.pools(conditions_of(s))
        and not definition.is_current(s["status"], s["outcome"], conditions_of(s), scoring_of(s))
        for s in effective_samples(store.read_cell(cell).samples)
    )  # fmt: skip
    if stale:
        result.stdout.fnmatch_lines([f"    {stale} more scored under an older scoring definition*"])
    else:
        assert "older scoring definition" not in result.stdout.str()
    if damage.__name__ == "samples_line_duplicated":
        first = store.read_cell(cell).samples[0]["id"]
        result.stdout.fnmatch_lines([f"    1 duplicate sample line(s) counted once: {first}"])


# -- failing writes ---------------------------------------------------------------------------------------
FILL_DISK = '''
import os, subprocess
def pytest_benchcell_update_sample(trial, sample):
    mode = os.environ["BENCHCELL_TEST_DISK"]
    store = os.environ["BENCHCELL_TEST_STORE"]
    if trial.trial == 1:
        return
    if mode == "gone":
        import shutil
        shutil.rmtree(store)
        return
    if mode == "readonly":
        subprocess.run(["mount", "-o", "remount,ro", store], check=True)
        return
    sample["padding"] = "x" * 60000  # the full sample no longer fits; a small error sample does
    free = os.statvfs(store).f_bavail * os.statvfs(store).f_frsize
    keep = 8192
    if free > keep:
        with open(os.path.join(store, "filler-" + str(trial.trial)), "wb") as filler:
            try:
                filler.write(b"\\0" * (free - keep))
            except OSError:
                pass
'''


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "store"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], capture_output=True)
    except OSError:
        pytest.skip("mount is not available here; test_injected_write_failure_is_recorded_as_error covers it")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); the injected-failure test covers it")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _run_with_disk(pytester: pytest.Pytester, mount: Path, mode: str, trials: int) -> pytest.RunResult:
    from benches import CONFTEST

    write_bench(pytester, conftest=CONFTEST + FILL_DISK)
    os.environ["BENCHCELL_TEST_DISK"], os.environ["BENCHCELL_TEST_STORE"] = mode, str(mount)
    try:
        return sitting(pytester, "bare", "say-hello", "--bench-trials", str(trials), f"--bench-store={mount}")
    finally:
        del os.environ["BENCHCELL_TEST_DISK"], os.environ["BENCHCELL_TEST_STORE"]


def _no_temporary_files(root: Path) -> None:
    assert [p.name for p in root.rglob("*.tmp-*")] == []


def test_disk_full_records_the_trial_as_error_with_its_spend(pytester: pytest.Pytester, small_disk: Path) -> None:
    result = _run_with_disk(pytester, small_disk, "room-for-error", 2)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["ERROR bench.toml::bare-say-hello-t2 - error: the trial ended pass, but its fu*"])
    result.stdout.fnmatch_lines([f"the trial ended pass, but its full sample could not be stored: could not write to "
                                 f"the store {small_disk}: No space left on device"])  # fmt: skip
    assert "Traceback" not in result.stdout.str()
    first, second = Store(small_disk).read_cell(Cell("scripted", "bare", "say-hello")).samples
    assert (first["status"], second["status"], second["trial"]) == ("scored", "error", 2)
    assert second["usage"]["total"]["output"] > 0 and second["turns"] == 1  # the spend is kept
    _no_temporary_files(small_disk)
    for filler in small_disk.glob("filler-*"):
        filler.unlink()
    sitting(pytester, "bare", "say-hello", "--bench-trials", "1", f"--bench-store={small_disk}",
            "--collect-only", "-q").stdout.fnmatch_lines(["bench.toml::bare-say-hello-t3"])  # fmt: skip


def test_a_read_only_store_mid_sitting_stops_it_and_stays_readable(pytester: pytest.Pytester, small_disk: Path) -> None:
    result = _run_with_disk(pytester, small_disk, "readonly", 2)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["*benchcell: could not * the store *Read-only file system*the sitting stops*"])
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert [s["trial"] for s in Store(small_disk).read_cell(Cell("scripted", "bare", "say-hello")).samples] == [1]
    sitting(pytester, "bare", "say-hello", "--bench-trials", "1", f"--bench-store={small_disk}",
            "--collect-only", "-q").stdout.fnmatch_lines(["bench.toml::bare-say-hello-t3"])  # fmt: skip


def test_a_store_folder_gone_mid_sitting_stops_it_and_is_not_recreated(pytester: pytest.Pytester, tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = _run_with_disk(pytester, store, "gone", 2)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines([f"*benchcell: could not write to the store {store}: the store folder is gone*"])
    assert not store.exists()


def failing_disk(fails: str, on_trial_2: str) -> str:
    """A conftest that makes the store's appends fail with ENOSPC when `fails` (an expression of
    path, payload and FULL) holds, and runs `on_trial_2` in the update hook of trial 2."""
    return f'''
import errno
import pytest_benchcell.store.appending as store_module

_real_append = store_module.append_bytes
FULL = []

def _failing_append(path, payload, *, sync=True):
    if path.suffix == ".jsonl" and ({fails}):
        raise OSError(errno.ENOSPC, "No space left on device")
    return _real_append(path, payload, sync=sync)

store_module.append_bytes = _failing_append

def pytest_unconfigure(config):  # the run is in-process: leave the module as it was
    store_module.append_bytes = _real_append

def pytest_benchcell_update_sample(trial, sample):
    if trial.trial == 2:
        {on_trial_2}
'''


INJECTED = failing_disk("len(payload) > 20000", 'sample["padding"] = "x" * 60000  # too big for what is left')
NO_ROOM = failing_disk("FULL", "FULL.append(True)  # from here on no room at all, not even for an error sample")


def test_a_full_disk_with_no_room_stops_the_sitting_with_one_message(pytester: pytest.Pytester) -> None:
    from benches import CONFTEST

    write_bench(pytester, conftest=CONFTEST + NO_ROOM)
    result = sitting(pytester, "bare", "say-hello", "--bench-trials", "3")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines([f"*benchcell: could not write to the store {pytester.path / 'results'}: No space left "
                                 "on device; the sitting stops (trial 2 of bare x say-hello is not recorded)*"])  # fmt: skip
    assert "bare-say-hello-t3" not in result.stdout.str()  # no trial starts after it
    assert "Traceback" not in result.stdout.str()
    _no_temporary_files(pytester.path / "results")
    assert [s["trial"] for s in samples(pytester.path / "results", "bare", "say-hello")] == [1]
    again = sitting(pytester, "bare", "say-hello", "--bench-trials", "1", "--collect-only", "-q")
    again.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t4"])  # numbering continues past the reserved ones


def test_injected_write_failure_is_recorded_as_error(pytester: pytest.Pytester) -> None:
    from benches import CONFTEST

    write_bench(pytester, conftest=CONFTEST + INJECTED)
    result = sitting(pytester, "bare", "say-hello", "--bench-trials", "3")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["the trial ended pass, but its full sample could not be stored: *No space left*"])
    statuses = [(s["trial"], s["status"]) for s in samples(pytester.path / "results", "bare", "say-hello")]
    assert statuses == [(1, "scored"), (2, "error"), (3, "scored")]
