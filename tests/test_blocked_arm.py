"""A trial the harness broke (harness_broke.py, arm_stops.py): never counted for or against the arm,
and an arm whose trials it breaks stops spending for the rest of the sitting.

End to end with a bench as a new user writes it: the arm's CLI (`invctl`, a script of the bench)
reads a config file beside it in the bench folder, which the sandbox hides until the arm declares
it in `readable`. Its `--help` never opens the config, so the pre-flight passes; its real
subcommand fails in every trial, while the scripted agent answers anyway, as the checker wants.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from sample_factory import make_sample, write_samples
from test_preflight import needs_audit, needs_sandbox

BENCH = """
[bench]
name = "inventory"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 4
wall_clock_ms = 60000
base_prompt = "Use the tools."
{bench}

# the CLI as first written: its config file is not declared
[arms.inv]
tools = ["Bash"]
binaries = ["invctl"]
path = ["bin"]

# the same CLI with its config declared
[arms.fixed]
tools = ["Bash"]
binaries = ["invctl"]
path = ["bin"]
readable = ["inv.toml"]

[tasks.drills]
tier = "read"
intent = "How many drills are in stock?"
required_facts = ["3 drills"]
"""

CONFTEST = '''
from pytest_benchcell.scripted import Answer, ToolUse


def pytest_benchcell_script(trial, environment):
    # The agent answers whatever the CLI said: with it blocked, the answer still passes the checker.
    return [ToolUse("Bash", {"command": "invctl count drills"}), Answer("There are 3 drills in stock.")]
'''

INVCTL = """#!/usr/bin/env python3
import sys, tomllib
from pathlib import Path
if sys.argv[1:] in (["--help"], ["--version"]):
    print("usage: invctl count ITEM")
    sys.exit(0)
config = Path(__file__).resolve().parent.parent / "inv.toml"
try:
    settings = tomllib.loads(config.read_text())
except OSError as exc:
    sys.exit(f"invctl: error: cannot read its config {config}: {exc}")
print(f"{settings['drills']} drills")
"""


def write_bench(pytester: pytest.Pytester, bench: str = "") -> None:
    pytester.makefile(".toml", bench=textwrap.dedent(BENCH).format(bench=bench))
    pytester.makeconftest(CONFTEST)
    (pytester.path / "bin").mkdir()
    cli = pytester.path / "bin" / "invctl"
    cli.write_text(INVCTL)
    cli.chmod(0o755)
    (pytester.path / "inv.toml").write_text("drills = 3\n")


def sitting(pytester: pytest.Pytester, arms: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-arm", arms, "--bench-task", "drills", "--bench-scripted", "-p", "no:randomly", "-rs", *extra)


def samples(pytester: pytest.Pytester, arm: str) -> list[dict]:
    path = pytester.path / "results" / "scripted" / arm / "drills.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def is_the_stop_message(line: str, pytester: pytest.Pytester, left: int) -> bool:
    """The one message of the arm's stop: the arm, the program, the file and what the program said of
    it (a trial reads that from its output), the line to declare, the pre-flight."""
    head = (
        "arm inv stopped for this sitting: the harness broke 2 of its trials (inv-drills-t1, inv-drills-t2; [bench] "
        f"stop_after_blocked = 2): invctl could not find {pytester.path / 'inv.toml'} (the bench folder is hidden but "
        "for what the arm declares; it said: invctl: error: cannot read its config "
    )
    tail = (
        ') and exited with 1; declare [arms.inv] readable = ["inv.toml"]; the pre-flight catches this before any model '
        f'request with a command that needs it in [arms.inv] preflight = ["invctl count drills"]; {left} of its '
        "planned trial(s) did not run (their numbers stay unused)"
    )
    return line.startswith(head) and line.endswith(tail)


# --- the rule, end to end: a pass made while the arm's program could not run is an error ---------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_a_pass_made_while_the_arms_program_was_blocked_is_an_error_and_never_counts(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "inv")
    (sample,) = samples(pytester, "inv")
    assert (sample["status"], sample["outcome"]) == ("error", None)
    assert sample["sandbox_blocked"][0]["target"] == str(pytester.path / "inv.toml")
    assert sample["reason"].endswith(
        "; the trial would have been pass, which the harness caused, so it is not counted for or against the arm"
    )
    result.stdout.fnmatch_lines([
        "inv x drills: 1 recorded this sitting (0 passed, 0 failed, 0 invalid, 1 errors)",
        "    scored samples of the current definition: 0 -> 0 (below the reporting floor of 3: 3 more to deepen this cell)",
    ])  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # one blocked trial does not stop the arm (the default is 2)
    report = pytester.runpytest("--bench-report", "--bench-scripted", "--bench-report-json", "r.json")
    (cell,) = [cell for cell in json.loads((pytester.path / "r.json").read_text())["cells"] if cell["arm"] == "inv"]
    assert (cell["scored"], cell["error"], cell["success"]["n_samples"], cell["harness_broke"]) == (0, 1, 0, [1])
    report.stdout.fnmatch_lines(["*inv \u00d7 drills: the harness broke 1 trial (#1), counted as errors, never for or against the arm*"])


# --- an arm the harness breaks stops spending ---------------------------------------------------------


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_an_arm_the_harness_breaks_stops_after_two_trials_while_the_other_arm_runs_all(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = sitting(pytester, "inv,fixed", "--bench-trials", "5")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    broken, fixed = samples(pytester, "inv"), samples(pytester, "fixed")
    assert [(s["trial"], s["status"]) for s in broken] == [(1, "error"), (2, "error")]  # 3 numbers stay unused
    assert [(s["trial"], s["outcome"]) for s in fixed] == [(n, "pass") for n in range(1, 6)]
    result.assert_outcomes(passed=5, errors=2, skipped=3)
    lines = result.stdout.lines
    summary = lines.index(next(line for line in lines if "benchcell sitting" in line))
    assert is_the_stop_message(lines[summary + 1], pytester, 3)  # the summary says it first...
    assert f"! {lines[summary + 1]} !" in lines  # ...and the headline at the end says the same
    result.stdout.fnmatch_lines(["SKIPPED [[]3] *: benchcell stops arm inv for this sitting: the harness broke 2 *"])
    assert not list((pytester.path / ".benchcell-spool").glob("*.stop"))


@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_stop_after_blocked_sets_how_many_broken_trials_stop_the_arm(pytester: pytest.Pytester) -> None:
    write_bench(pytester, "stop_after_blocked = 3")
    result = sitting(pytester, "inv", "--bench-trials", "4")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert len(samples(pytester, "inv")) == 3
    result.stdout.fnmatch_lines(["arm inv stopped for this sitting: the harness broke 3 of its trials (*stop_after_blocked = 3)*"])


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
@needs_audit
def test_under_xdist_the_broken_arm_stops_up_to_the_trials_already_running(pytester: pytest.Pytester) -> None:
    """Two workers: the controller counts the broken trials of both as their reports arrive and tells
    its workers; a worker also stops the arm at its own second. Trials already running then finish
    and are recorded (each an error), so of 6 at least 2 and at most 4 run; the other arm runs all."""
    write_bench(pytester)
    result = sitting(pytester, "inv,fixed", "--bench-trials", "6", "-n", "2")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    broken = samples(pytester, "inv")
    assert 2 <= len(broken) <= 4 and all(s["status"] == "error" for s in broken)
    assert sorted(s["trial"] for s in samples(pytester, "fixed")) == list(range(1, 7))
    result.stdout.fnmatch_lines([
        f"arm inv stopped for this sitting: the harness broke {len(broken)} of its trials *; {6 - len(broken)} of its "
        "planned trial(s) did not run (their numbers stay unused)",
    ])  # fmt: skip
    assert not list((pytester.path / ".benchcell-spool").glob("*.stop"))


ARMS_NOTE = """

def pytest_benchcell_update_sample(trial, sample):
    # As the controller does when it stops an arm (remote.arm_stop_file), after the arm's first trial.
    import json, pathlib
    if trial.arm == "inv":
        note = pathlib.Path(__file__).parent / ".benchcell-spool" / (sample["sitting"] + ".arms.stop")
        note.parent.mkdir(exist_ok=True)
        note.write_text(json.dumps({"inv": "benchcell stops arm inv for this sitting: a note of the controller"}))
"""


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
def test_under_xdist_a_worker_runs_no_trial_of_an_arm_the_controller_noted_as_stopped(pytester: pytest.Pytester) -> None:
    """The workers read the controller's note before each trial: with stop_after_blocked far away, no
    worker's own count stops the arm, and still only the arm's trials already running when the note
    appeared run; the other arm runs all its trials."""
    write_bench(pytester, "stop_after_blocked = 50")
    (pytester.path / "conftest.py").write_text(CONFTEST + ARMS_NOTE)
    result = sitting(pytester, "inv,fixed", "--bench-trials", "6", "-n", "2")
    assert 1 <= len(samples(pytester, "inv")) <= 2
    assert sorted(s["trial"] for s in samples(pytester, "fixed")) == list(range(1, 7))
    result.stdout.fnmatch_lines(["SKIPPED [[]*] *benchcell stops arm inv for this sitting: a note of the controller"])
    assert not list((pytester.path / ".benchcell-spool").glob("*.stop"))


# --- samples an older plugin stored -------------------------------------------------------------------

BLOCKED = {"program": "invctl", "call": "openat", "target": "/b/inv.toml", "error": "ENOENT", "ended": "exited with 1",
           "command": "invctl count drills", "why": "the bench folder is hidden but for what the arm declares",
           "remedy": 'declare [arms.cli] readable = ["inv.toml"]'}  # fmt: skip


def stored_with_a_blocked_pass(root: Path):  # type: ignore[no-untyped-def]
    """Three passes of one cell, the second one a pass an older plugin stored although its program was blocked."""
    return write_samples(root, [
        make_sample(trial=1, minutes=0), {**make_sample(trial=2, minutes=1), "sandbox_blocked": [BLOCKED]},
        make_sample(trial=3, minutes=2),
    ])  # fmt: skip


@pytest.mark.parametrize("index", [True, False], ids=["index", "parsed"])
def test_a_stored_blocked_pass_counts_as_an_error_in_counts_and_reports(tmp_path: Path, index: bool) -> None:
    from pytest_benchcell.report import ReportSettings, build_report, render_html, render_json, render_markdown
    from pytest_benchcell.sample import Definition
    from pytest_benchcell.store import Cell

    store = stored_with_a_blocked_pass(tmp_path)
    cell = Cell("real", "cli", "close-bug")
    if not index:
        store.index_path(cell).unlink()
    assert store.count_current(cell, Definition("fp-current", "fp-current")).current == 2  # the floor and fill
    report = build_report(store, ReportSettings(floor=1))
    (summary,) = report.cells
    assert (summary.scored, summary.error, summary.outcomes["pass"], summary.harness_broke) == (2, 1, 2, [2])
    (failure,) = summary.failures
    assert (failure.trial, failure.verdict) == (2, "error")
    assert failure.reason.startswith("sandbox: invctl could not open /b/inv.toml (the bench folder is hidden")
    assert failure.reason.endswith("the trial would have been pass, which the harness caused, so it is not counted for or against the arm")
    assert (
        "cli \u00d7 close-bug: the harness broke 1 trial (#2), counted as errors, never for or against the arm: the "
        "sandbox kept the arm's own program from what it needs (invctl could not open /b/inv.toml"
    ) in " ".join(report.notices)
    assert json.loads(render_json(report))["cells"][0]["harness_broke"] == [2]
    note = "the harness broke 1 trial (#2), counted as errors, never for or against the arm"
    assert note in render_markdown(report) and note in render_html(report)
    assert [line for line in store.samples_path(cell).read_text().splitlines() if '"sandbox_blocked"' in line][0].count('"pass"')  # never rewritten


def test_fill_rescore_and_report_count_a_stored_blocked_pass_as_an_error(pytester: pytest.Pytester) -> None:
    from sample_factory import of_bench

    write_bench(pytester)
    bench = pytester.path / "bench.toml"
    stored = [
        {**make_sample("fixed", "drills", trial=n, tier="read", model_kind="scripted", minutes=n),
         "final_answer": "There are 3 drills in stock."} for n in (1, 2, 3)
    ]  # fmt: skip
    stored[1]["sandbox_blocked"] = [BLOCKED]  # stored `pass` by an older plugin
    write_samples(pytester.path / "results", [of_bench(sample, bench) for sample in stored])
    samples_file = pytester.path / "results" / "scripted" / "fixed" / "drills.jsonl"
    before = samples_file.read_bytes()

    fill = sitting(pytester, "fixed", "--bench-fill", "3", "--collect-only", "-q")
    fill.stdout.fnmatch_lines(["bench.toml::fixed-drills-t4", "    scored samples of the current definition: 2 -> 2 (*"])
    assert "fixed-drills-t5" not in fill.stdout.str()

    rescore = pytester.runpytest("--bench-rescore", "--bench-scripted")
    rescore.stdout.fnmatch_lines([
        "    skipped fixed-drills-t2: the harness broke it (invctl could not open /b/inv.toml *), so it counts as an "
        "error whatever its verdict",
    ])  # fmt: skip
    assert samples_file.read_bytes() == before  # nothing appended, nothing rewritten

    report = pytester.runpytest("--bench-report", "--bench-scripted", "--bench-arm", "fixed")
    report.stdout.fnmatch_lines(["*fixed \u00d7 drills: the harness broke 1 trial (#2), counted as errors, never for or against the arm*"])


def test_an_index_of_the_row_format_before_the_flag_is_read_around_then_rebuilt(tmp_path: Path) -> None:
    from pytest_benchcell.sample import Definition
    from pytest_benchcell.store import Cell

    store = stored_with_a_blocked_pass(tmp_path)
    cell = Cell("real", "cli", "close-bug")
    index = store.index_path(cell)
    # The rows the previous plugin wrote: tag b4, no `broke` field, the blocked pass a plain pass row.
    older = ["\t".join(["b4", *row.split("\t")[1:10], *row.split("\t")[11:]]) for row in index.read_text().splitlines()]
    index.write_text("\n".join(older) + "\n")
    assert store.count_current(cell, Definition("fp-current", "fp-current")).current == 2
    store.append(make_sample(trial=4, minutes=3))
    assert [row.split("\t")[0] for row in index.read_text().splitlines()] == ["b7"] * 4
    assert [row.split("\t")[10] for row in index.read_text().splitlines()] == ["", "1", "", ""]
    assert store.count_current(cell, Definition("fp-current", "fp-current")).current == 3


def test_an_older_rescore_of_a_blocked_pass_does_not_make_it_count(tmp_path: Path) -> None:
    from pytest_benchcell.sample import Definition
    from pytest_benchcell.store import Cell

    store = stored_with_a_blocked_pass(tmp_path)
    cell = Cell("real", "cli", "close-bug")
    blocked_id = [s for s in store.read_cell(cell).samples if s.get("sandbox_blocked")][0]["id"]
    store.append({**make_sample(trial=2), "id": "r" * 32, "status": "rescore", "record": "rescore", "rescore_of": blocked_id,
                  "outcome": "pass", "reason": ""})  # fmt: skip
    assert store.count_current(cell, Definition("fp-current", "fp-current")).current == 2


# --- bench.toml ---------------------------------------------------------------------------------------


def test_stop_after_blocked_is_a_whole_number_of_trials_and_two_by_default(tmp_path: Path) -> None:
    from pytest_benchcell.config import BenchConfigError, load_bench

    text = '[bench]\nmodel = "m"\n{}\n[arms.a]\ntools = ["Bash"]\n[tasks.t]\ntier = "read"\nintent = "x"\nrequired_facts = ["y"]\n'
    path = tmp_path / "bench.toml"
    path.write_text(text.format(""))
    assert load_bench(path).stop_after_blocked == 2
    path.write_text(text.format("stop_after_blocked = 5"))
    five = load_bench(path)
    assert five.stop_after_blocked == 5
    for value in ("0", "'2'", "true"):
        path.write_text(text.format(f"stop_after_blocked = {value}"))
        with pytest.raises(BenchConfigError) as raised:
            load_bench(path)
        assert f"{path}: [bench] stop_after_blocked" in str(raised.value) and "a whole number >= 1" in str(raised.value)


# --- the count behind an arm's stop -----------------------------------------------------------------


def test_an_arm_stops_at_its_nth_broken_trial_whatever_came_between_and_other_arms_do_not() -> None:
    from pytest_benchcell.arm_stops import ArmStops
    from pytest_benchcell.harness_broke import causes

    broken = causes({"status": "error", "sandbox_blocked": [BLOCKED]})
    stops = ArmStops(after_blocked=2)
    assert stops.record("cli", "cli-t-t1", broken) is None
    assert stops.record("cli", "cli-t-t2", []) is None  # a trial it did not break: no count, no reset
    assert stops.record("api", "api-t-t1", broken) is None  # another arm's count is its own
    headline = stops.record("cli", "cli-t-t3", broken)
    assert headline == (
        "benchcell stops arm cli for this sitting: the harness broke 2 of its trials (cli-t-t1, cli-t-t3; [bench] "
        "stop_after_blocked = 2): invctl could not open /b/inv.toml (the bench folder is hidden but for what the arm "
        'declares) and exited with 1; declare [arms.cli] readable = ["inv.toml"]; the pre-flight catches this before '
        'any model request with a command that needs it in [arms.cli] preflight = ["invctl count drills"]'
    )
    assert stops.reason("cli") == headline and stops.reason("api") is None
    assert stops.record("cli", "cli-t-t4", broken) is None  # stopped once; a trial already running still counts
    assert stops.message("cli", 2).startswith("arm cli stopped for this sitting: the harness broke 3 of its trials")
    assert stops.message("cli", 2).endswith("; 2 of its planned trial(s) did not run (their numbers stay unused)")


def test_a_failed_mcp_server_stops_its_arm_too() -> None:
    from pytest_benchcell.arm_stops import ArmStops
    from pytest_benchcell.harness_broke import causes

    listed = {"status": "invalid", "reason": "", "mcp_failed": [{"server": "inventory", "error": "FileNotFoundError: mcp.toml"}]}
    not_offered = {"status": "invalid", "reason": "MCP server 'inventory' was failed at the agent's first model request "
                   "(the CLI waited up to 60000 ms, [bench] mcp_timeout_ms): its tools were not offered, so the trial "
                   "does not measure the arm"}  # fmt: skip
    assert [c["line"] for c in causes(listed)] == ["MCP server 'inventory' failed: FileNotFoundError: mcp.toml"]
    assert [c["line"] for c in causes(not_offered)] == [not_offered["reason"]]
    assert causes({"status": "invalid", "reason": "foreign tool call ran: curl"}) == []  # the agent's doing
    stops = ArmStops()
    stops.record("mcp", "mcp-t-t1", causes(listed))
    assert "MCP server 'inventory' failed: FileNotFoundError" in (stops.record("mcp", "mcp-t-t2", causes(not_offered)) or "")
    assert stops.reason("mcp").endswith("in [arms.mcp] preflight = [...]")
