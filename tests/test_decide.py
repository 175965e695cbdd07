"""`--bench-fill decide` black-box: the plan and its reasons, a scripted run, xdist, nothing left, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import docs_text
import pytest
from benches import ARMS, CONFTEST, TASKS, write_bench
from sample_factory import cell_samples, of_bench, write_samples

DECIDE_HEADER = """
[bench]
name = "decide"
model = "claude-sonnet-4-5"
store = "results"
trials = 2
turn_cap = 4
wall_clock_ms = 30000
comparisons = [["shell", "bare"]]

[bench.smallest_effect]
success = 0.3
tokens = 0.5
"""
OTHER_ARM = """
[arms.other]
tools = ["Bash"]
bootstrap = "Not compared with anything."
"""
DECIDE_BENCH = DECIDE_HEADER + ARMS["shell"] + ARMS["bare"] + OTHER_ARM + TASKS["say-hello"]

SELECT = ["--bench-arm", "shell,bare", "--bench-task", "say-hello", "--bench-scripted", "--bench-fill", "decide"]


def store_cells(pytester: pytest.Pytester, cells: dict[str, dict]) -> None:
    """Scripted samples of the bench's current definitions: arm -> cell_samples keyword arguments."""
    samples = []
    for arm, fields in cells.items():
        samples += [of_bench(s, pytester.path / "bench.toml") for s in cell_samples(arm, "say-hello", model_kind="scripted", **fields)]
    write_samples(pytester.path / "results", samples)


def trial_numbers(pytester: pytest.Pytester, arm: str) -> list[int]:
    path = pytester.path / "results" / "scripted" / arm / "say-hello.jsonl"
    return sorted(json.loads(line)["trial"] for line in path.read_text().splitlines() if line.strip())


PLAN_LINES = [
    "comparisons (2 of 2 undecided):",
    "    shell vs bare on success: undecided (no paired trial yet: both arms need the floor on a shared task)",
    "    shell vs bare on tokens: undecided (no paired trial yet: both arms need the floor on a shared task)",
    "plan: 4 trials, ~15,600 cost-equivalent tokens expected (a sitting of at most 4 trials)",
    "    shell x say-hello: 2 trials, ~3,900 tokens each: advances shell vs bare (success, tokens undecided)",
    "    bare x say-hello: 2 trials, ~3,900 tokens each: 1 scored, the floor is 3; advances shell vs bare (success, tokens undecided)",
]


def seed_store(pytester: pytest.Pytester) -> None:
    write_bench(pytester, DECIDE_BENCH, CONFTEST)
    store_cells(pytester, {"shell": {"count": 3}, "bare": {"count": 1}})


def test_collect_only_shows_the_plan_and_the_reason_for_each_cell(pytester: pytest.Pytester) -> None:
    seed_store(pytester)
    result = pytester.runpytest(*SELECT, "--bench-trials", "4", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "bench.toml::shell-say-hello-t4", "bench.toml::bare-say-hello-t2", "bench.toml::shell-say-hello-t5",
        "bench.toml::bare-say-hello-t3", *PLAN_LINES, "*4 tests collected*",
    ])  # fmt: skip
    assert trial_numbers(pytester, "bare") == [1]  # a preview: nothing ran, nothing reserved


@pytest.mark.slow
@pytest.mark.e2e
def test_a_decide_sitting_runs_its_plan(pytester: pytest.Pytester) -> None:
    seed_store(pytester)
    result = pytester.runpytest(*SELECT, "--bench-trials", "4")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "benchcell: --bench-fill decide: 4 trials for 2 of 2 comparisons still undecided (the plan and its reasons follow the sitting)",
        *PLAN_LINES, "bare x say-hello: 2 recorded this sitting (2 passed, 0 failed, 0 invalid, 0 errors)",
        # the comparisons as the sitting leaves them, judged as the report judges them
        "comparisons after this sitting (2 of 2 undecided; the report reads the same):",
        "    shell vs bare on success: undecided (3 paired trials on 1 task, e 1 of the 40 a difference needs, *",
        "    shell vs bare on tokens: undecided (3 paired trials on 1 task, *",
        "store: *",
    ])  # fmt: skip
    assert (trial_numbers(pytester, "shell"), trial_numbers(pytester, "bare")) == ([1, 2, 3, 4, 5], [1, 2, 3])


@pytest.mark.slow
@pytest.mark.e2e
def test_every_xdist_worker_runs_the_controllers_plan(pytester: pytest.Pytester) -> None:
    seed_store(pytester)
    preview = pytester.runpytest(*SELECT, "--bench-trials", "4", "--collect-only", "-q")
    previewed = sorted(line for line in preview.stdout.lines if line.startswith("bench.toml::"))
    result = pytester.runpytest_subprocess(*SELECT, "--bench-trials", "4", "-n", "2", "-v")
    result.assert_outcomes(passed=4)  # xdist refuses to run when its workers collect different items
    ran = sorted(line.split()[-1] for line in result.stdout.lines if " PASSED " in line and "bench.toml::" in line)
    assert ran == previewed
    assert result.stdout.str().count("plan: 4 trials") == 1  # decided once, on the controller
    assert (trial_numbers(pytester, "shell"), trial_numbers(pytester, "bare")) == ([1, 2, 3, 4, 5], [1, 2, 3])


def test_nothing_left_to_decide_runs_nothing_and_says_so(pytester: pytest.Pytester) -> None:
    write_bench(pytester, DECIDE_BENCH, CONFTEST)
    store_cells(pytester, {  # shell always passes for 1,000 tokens, bare always fails for 3,000: both decided
        "shell": {"count": 12, "tokens": (1000, 0, 0, 0)},
        "bare": {"count": 12, "tokens": (3000, 0, 0, 0), "outcome": "incorrect"},
    })  # fmt: skip
    result = pytester.runpytest(*SELECT)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "comparisons (0 of 2 undecided):",
        "    shell vs bare on success: shell better (12 paired trials on 1 task, e 315 past the 40 a difference needs, "
        "shell - bare +100.0 pp (shell passed where bare failed in 12 of the 12 paired trials that differ))",
        "    shell vs bare on tokens: shell better (12 paired trials on 1 task, e 907 past the 40 a difference needs, "
        "shell/bare 0.40x; no interval below 3 shared tasks)",
        "plan: 0 trials (a sitting of at most 4 trials)",
        "    shell x say-hello: 0 trials: every comparison it serves is decided: shell vs bare on success differs; shell vs bare on tokens differs",
        "nothing left to decide: every comparison is decided; no trial runs",
    ])  # fmt: skip
    assert trial_numbers(pytester, "bare") == list(range(1, 13))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench-arm", "shell,other"],
         "*--bench-fill decide --bench-arm shell,other: no comparison among the selected arms to decide ([[]bench[]] "
         "comparisons in *bench.toml: shell vs bare); select both arms of a comparison*"),
        (["--bench-arm", "shell,bare", "--bench-fill=sometimes"],
         "*--bench-fill: 'sometimes' is not a whole number; allowed: a whole number >= 1, or decide*"),
    ],
)  # fmt: skip
def test_decide_refuses_what_it_cannot_do(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    write_bench(pytester, DECIDE_BENCH, CONFTEST)
    result = pytester.runpytest(*args, "--bench-task", "say-hello", "--bench-scripted", "--bench-fill", "decide")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_old_fill_forms_keep_working(pytester: pytest.Pytester) -> None:
    seed_store(pytester)
    bare = ["--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "--collect-only", "-q"]
    pytester.runpytest(*bare, "--bench-fill").stdout.fnmatch_lines(["*2 tests collected*"])  # to the floor of 3
    pytester.runpytest(*bare, "--bench-fill=5").stdout.fnmatch_lines(["*4 tests collected*"])
    pytester.runpytest(*bare, "--bench-fill", "6").stdout.fnmatch_lines(["*5 tests collected*"])


def test_decide_with_a_budget_plans_within_it(pytester: pytest.Pytester) -> None:
    seed_store(pytester)
    # bare needs 2 trials for the floor, and shell 2 of the same sitting for them to pair with: 15,600
    result = pytester.runpytest(*SELECT, "--bench-budget", "16000", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "plan: 4 trials, ~15,600 cost-equivalent tokens expected (a budget of 16,000 cost-equivalent tokens)",
        "*4 tests collected*",
    ])  # fmt: skip
    short = pytester.runpytest(*SELECT, "--bench-budget", "13000", "--collect-only", "-q")
    short.stdout.fnmatch_lines(["plan: 0 trials (a budget of 13,000 cost-equivalent tokens)", "nothing fits: *"])
    assert not Path(pytester.path / "results" / "scripted" / "bare" / "say-hello.trials").exists()


# -- the README's section on --bench-fill decide ----------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent
SECTION = docs_text.section("Deciding where trials go")
FLAT = " ".join(SECTION.split())


def example_bench_with_history(pytester: pytest.Pytester) -> None:
    """The example bench, with the history the README's example plan starts from (current definitions)."""
    import shutil

    for name in ("bench.toml", "conftest.py"):
        shutil.copy(REPO / name, pytester.path / name)
    shutil.copytree(REPO / "bench", pytester.path / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    bench_toml = pytester.path / "bench.toml"
    history = {  # arm -> (outcomes per trial, fresh input tokens)
        "cli-skill": (["pass"] * 6, 20_000),
        "mcp": (["pass", "incorrect", "incorrect", "pass", "incorrect", "incorrect"], 52_000),
        "raw-api": (["pass", "pass", "incorrect"], 30_000),
    }
    samples = []
    for arm, (outcomes, fresh) in history.items():
        for n, task in enumerate(("count-open", "close-export")):
            samples += cell_samples(arm, task, len(outcomes), outcomes=outcomes, tokens=(fresh, 0, 0, 0), minutes=30 * n,
                                    tier="read" if task == "count-open" else "find-then-act")  # fmt: skip
    write_samples(pytester.path / "bench" / "results", [of_bench(s, bench_toml) for s in samples])


def readme_output_after(heading: str) -> list[str]:
    block = docs_text.first_block(SECTION.split(heading, 1)[1])
    return block.splitlines()


def test_the_readme_example_plan_is_what_the_plugin_prints(pytester: pytest.Pytester) -> None:
    example_bench_with_history(pytester)
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "count-open,close-export", "--bench-fill", "decide",
                                "--bench-trials", "12", "--collect-only", "-q", "-p", "no:randomly")  # fmt: skip
    assert result.ret == pytest.ExitCode.OK
    shown = readme_output_after("<!-- readme-test: output -->")
    assert shown and all(line in result.stdout.lines for line in shown), "\n".join(result.stdout.lines)


def test_the_readme_declaration_is_the_example_benchs() -> None:
    import tomllib

    from pytest_benchcell.config import load_bench

    block = SECTION.split("```toml\n", 1)[1].split("```", 1)[0]
    declared = tomllib.loads(block)
    bench = load_bench(REPO / "bench.toml")
    assert [list(pair) for pair in bench.comparisons] == declared["comparisons"]
    assert dict(bench.smallest_effect) == declared["smallest_effect"]
    assert "120 for the example's three pairs" in FLAT and len(bench.comparisons) * 2 / 0.05 == 120


def test_the_measured_figures_quoted_are_the_table_and_say_whether_they_meet_their_goals() -> None:
    # The docs quote benchmarks/allocation.py; a quoted figure that is not in its table, or a missed goal
    # the prose does not call missed (by how much), is a false promise.
    import re

    table = docs_text.first_block(SECTION.split("<summary>The table of that run</summary>", 1)[1])
    rows = [line for line in table.splitlines() if line.strip()]

    def measured(world: str, tasks: int, what: str) -> tuple[float, str]:
        """The figure of the world's row containing `what`, and its met column ("yes", "NO", "")."""
        for index, line in enumerate(rows):
            if line.startswith(f"{world}, {tasks} tasks, equal allocation"):
                found = next(row for row in rows[index : index + 5] if what in row)
                met = found.split()[-1]
                return float(re.findall(r"([\d.]+)% (?:\(\d|fewer)", found)[0]), met if met in ("yes", "NO") else ""
        raise AssertionError(f"no rows for {world} at {tasks} tasks")

    def quoted(sentence: str) -> tuple[list[float], str | None]:
        found = re.search(sentence, FLAT)
        assert found, f"the docs no longer say: {sentence}"
        *figures, missed = found.groups()
        return [float(f) for f in figures], missed

    def says_whether_met(figures: list[float], table: list[tuple[float, str]], goal: float, missed: str | None) -> None:
        assert figures == [figure for figure, _ in table]
        assert all(met in ("yes", "NO") for _, met in table)
        margins = [f"{abs(goal - figure):.1f} points" for figure, met in table if met == "NO"]
        assert (missed is not None) == bool(margins), "a missed goal must be called missed, and only then"
        assert all(margin in (missed or "") for margin in margins), f"{missed} must say by how much: {margins}"

    level = (r"in \*\*([\d.]+)%\*\* \(8 tasks\) and \*\*([\d.]+)%\*\* \(20 tasks\) of histories under decide "
             r"\(equal allocation: ([\d.]+)% and ([\d.]+)%\); goal ≤ 5%(: missed [^;]*?)?\.\s")  # fmt: skip
    wrong = (r"direction, in \*\*([\d.]+)%\*\* \(8 tasks\) and \*\*([\d.]+)%\*\* \(20 tasks\) of histories "
             r"under decide \(equal allocation: ([\d.]+)% and ([\d.]+)%\); goal ≤ 5%(: missed [^;]*?)?\.\s")  # fmt: skip
    for sentence, world in ((level, "identical arms"), (wrong, "arms that differ")):
        figures, missed = quoted(sentence)
        table = [measured(world, tasks, what) for what in ("--bench-fill decide", "equal allocation") for tasks in (8, 20)]
        says_whether_met(figures, table, 5.0, missed)
    saved = (r"decide spends \*\*([\d.]+)% fewer\*\* tokens at 8 tasks and \*\*([\d.]+)% fewer\*\* at 20 "
             r"\(SE [\d.]+ and [\d.]+; goal ≥ 30%(: missed [^)]*?)?\)")  # fmt: skip
    split = (r"one metric differs and the other is equivalent .*? decide spends \*\*([\d.]+)% fewer\*\* at 8 tasks and "
             r"\*\*([\d.]+)% fewer\*\* at 20 \(SE [\d.]+ and [\d.]+; goal ≥ 45%(: missed [^)]*?)?\)")  # fmt: skip
    for sentence, world, goal in ((saved, "arms that differ", 30.0), (split, "one metric differs, the other equivalent", 45.0)):
        figures, missed = quoted(sentence)
        says_whether_met(figures, [measured(world, tasks, "tokens until") for tasks in (8, 20)], goal, missed)
    # The wrong claims of the other two worlds, quoted together: every one meets its goal.
    elsewhere, _ = quoted(r"In the two worlds below: ([\d.]+)% and ([\d.]+)% under decide \(([\d.]+)% and ([\d.]+)% equal\) "
                          r"where one metric differs and the other is equivalent, ([\d.]+)% and ([\d.]+)% \(([\d.]+)% and "
                          r"([\d.]+)%\) with the in-between effect()")  # fmt: skip
    table = [measured(world, tasks, what) for world in ("one metric differs, the other equivalent", "an in-between effect")
             for what in ("--bench-fill decide", "equal allocation") for tasks in (8, 20)]  # fmt: skip
    says_whether_met(elsewhere, table, 5.0, None)
    # The drift the pairing within sittings absorbs, quoted where the docs explain why.
    drift, _ = quoted(r"decide claimed a difference in ([\d.]+)% of histories at 8 tasks()")
    assert drift == [measured("identical arms", 8, "--bench-fill decide")[0]]
    # The figures without a goal: the same decisions, and the savings of the other worlds.
    same, _ = quoted(r"reaching the same decisions as equal allocation in ([\d.]+)% and ([\d.]+)% of histories()")
    assert same == [measured("arms that differ", tasks, "same decisions")[0] for tasks in (8, 20)]
    others, _ = quoted(r"decide still spends ([\d.]+)% and ([\d.]+)% fewer, with identical arms \(every comparison an "
                       r"equivalence, decided about together\) ([\d.]+)% and ([\d.]+)% fewer()")  # fmt: skip
    assert others == [measured(world, tasks, "tokens until")[0] for world in ("an in-between effect", "identical arms") for tasks in (8, 20)]
