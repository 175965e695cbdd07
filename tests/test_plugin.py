"""The plugin seen from outside (pytester): options, items, numbering, errors. No trial runs here."""

from __future__ import annotations

import json

import pytest
from benches import write_bench


def test_without_bench_options_ordinary_runs_are_untouched(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "benchcell:" not in result.stdout.str()


def test_help_lists_one_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "benchcell: benchmark coding-agent tools one cell at a time:",
            "*--bench-arm=ARM*",
            "*--bench-task=TASK*",
            "*--bench-trials=N*",
            "*--bench-turn-cap=N*",
            "*--bench-wall-clock-ms=MS*",
            "*--bench-store=DIR*",
            "*--bench-config=PATH*",
            "*--bench-scripted*",
        ]
    )


def test_collect_only_shows_ids_ending_in_trial_numbers_and_spends_nothing(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say-hello,make-file", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "bench.toml::shell-say-hello-t1",
            "bench.toml::shell-make-file-t1",
            "bench.toml::shell-say-hello-t2",
            "bench.toml::shell-make-file-t2",
            "*collect-only: nothing ran or was reserved*",
        ]
    )
    assert "test_plain" not in result.stdout.str()  # a sitting collects trials only
    assert not (pytester.path / "results").exists()


def test_all_selects_every_arm_and_task(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "all", "--collect-only", "-q", "--bench-trials", "1")
    result.stdout.fnmatch_lines(["*10 tests collected*"])


def test_keyword_selects_among_trials(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest(
        "--bench-arm", "all", "--bench-task", "say-hello", "--bench-trials", "3", "--collect-only", "-q", "-k", "bare and t2"
    )
    result.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t2", "*1/6 tests collected (5 deselected)*"])


def test_numbering_continues_past_the_highest_stored_trial(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    cell = pytester.path / "results" / "scripted" / "shell"
    cell.mkdir(parents=True)
    sample = {"schema": 1, "id": "x", "arm": "shell", "task": "say-hello", "trial": 7, "status": "invalid",
              "outcome": None, "model_kind": "scripted"}
    (cell / "say-hello.jsonl").write_text(json.dumps(sample) + "\n")
    result = pytester.runpytest(
        "--bench-arm", "shell", "--bench-task", "say-hello", "--bench-scripted", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(["bench.toml::shell-say-hello-t8", "bench.toml::shell-say-hello-t9"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bench-arm", "nope", "--bench-task", "all"], "*--bench-arm 'nope': no such arm; valid arms: shell, bare (or all)*"),
        (["--bench-arm", "all", "--bench-task", "nope"], "*--bench-task 'nope': no such task; valid tasks: say-hello, make-file*"),
        (["--bench-arm", "all"], "*--bench-task is missing*"),
        (["--bench-arm", "all", "--bench-task", "all", "--bench-trials", "0"], "*--bench-trials: 0 is too small; allowed: a whole number >= 1*"),
        (["--bench-arm", "all", "--bench-task", "all", "--bench-turn-cap", "x"], "*--bench-turn-cap: 'x' is not a whole number*"),
        (["--bench-arm", "all", "--bench-task", "all", "--bench-config", "missing.toml"], "*missing.toml: no such bench file*"),
        (["--bench-arm", "all", "--bench-task", "all", "--bench-trials", "1000000000"],
         "*--bench-trials: 1000000000 is too large; allowed: a whole number from 1 to 10,000*"),
        (["--bench-arm", "all", "--bench-task", "all", "--bench-fill=1000000000"],
         "*--bench-fill: 1000000000 is too large; allowed: a whole number from 1 to 10,000*"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_clear_message(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    write_bench(pytester)
    result = pytester.runpytest(*args, "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "results").exists()


def test_bench_trials_above_the_bound_in_bench_toml_are_refused_before_any_store_folder(pytester: pytest.Pytester) -> None:
    from benches import BENCH_TOML

    write_bench(pytester, BENCH_TOML.replace("trials = 2", "trials = 1000000000"))
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bench.toml: [[]bench[]] trials = 1000000000 is too large; allowed: a whole number from 1 to 10,000*"])
    assert not (pytester.path / "results").exists()


def test_a_keyword_selecting_no_trial_reserves_nothing(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "all", "--bench-scripted", "-k", "no-such-trial")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert not (pytester.path / "results").exists()  # no folder, no reservation, no lock


ONLY_FOR_SHELL = '''
[tasks.shell-only]
tier = "read"
arms = ["shell"]
intent = "Only the shell arm can do this."
required_facts = ["hello"]
'''


def test_a_cell_whose_task_excludes_the_arm_is_not_collected(pytester: pytest.Pytester) -> None:
    from benches import BENCH_TOML

    write_bench(pytester, BENCH_TOML + ONLY_FOR_SHELL)
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "shell-only", "--bench-scripted", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["bench.toml::shell-shell-only-t1", "bench.toml::shell-shell-only-t2", "*2 tests collected*"])
    assert "bare-shell-only" not in result.stdout.str()
    assert "bare x shell-only" not in result.stdout.str()  # the summary asks nobody to deepen it


def test_a_selection_of_only_excluded_cells_is_refused(pytester: pytest.Pytester) -> None:
    from benches import BENCH_TOML

    write_bench(pytester, BENCH_TOML + ONLY_FOR_SHELL)
    result = pytester.runpytest("--bench-arm", "bare", "--bench-task", "shell-only", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--bench-arm bare --bench-task shell-only: no selected task applies to a selected arm (task shell-only is only "
         "for arms shell; *select an arm the task is for*"]
    )  # fmt: skip
    assert not (pytester.path / "results").exists()


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("turn_cap = 4", "turn_cap = 0", "*bench.toml: [[]bench[]] turn_cap has value 0; allowed: a whole number >= 1*"),
        ("turn_cap = 4", "turncap = 4", "*[[]bench[]] has unknown key 'turncap' (did you mean 'turn_cap'?); allowed keys: name, model*"),
        ('tier = "read"', 'tier = "reading"', "*[[]tasks.say-hello[]] tier has value 'reading' (did you mean 'read'?); allowed: read, single-mutation*"),
        ('tools = ["Bash"]\nbinaries = ["touch"]', 'tools = ["Bsh"]', "*[[]arms.shell[]] tools has value 'Bsh' (did you mean 'Bash'?); allowed: built-in tools Bash*"),
        ('model = "claude-sonnet-4-5"', "model = [", "*bench.toml: is not valid TOML*"),
        # facts compile and changes parse at load, so a broken task spends nothing (issue 10)
        ('required_facts = ["hello"]', 'required_facts = [{ any_of = ["hello"], pattern = "hel(lo" }]',
         "*bench.toml: [[]tasks.say-hello[]] required_facts (fact 1) has value {*'hel(lo'}; allowed: *invalid pattern*"),
        ('required_facts = ["hello"]', 'required_facts = [{ any_of = "5 open" }]',
         "*bench.toml: [[]tasks.say-hello[]] required_facts (fact 1) has value {'any_of': '5 open'}; allowed: *any_of must be a list*"),
        ('required_facts = ["never"]\n\n[tasks.stall]', 'required_facts = ["never"]\nforbidden_facts = [{ pattern = "[" }]\n\n[tasks.stall]',
         "*[[]tasks.loop-forever[]] forbidden_facts (fact 1) has value {'pattern': '['}*"),
        ('intent = "Fetch a page."', 'intent = "Fetch a page."\nchanges = [{ op = "set", path = "issues[number=2.state", value = 1 }]',
         "*[[]tasks.try-foreign[]] changes (change 1) has value {*}; allowed: unclosed '[' at position 6*"),
        ("[tasks.say-hello]", "[bnech]\n[tasks.say-hello]", "*unknown top-level table [[]bnech[]] (did you mean 'bench'?)*"),
        ('tools = ["Bash"]\nbinaries = ["touch"]', 'tool = ["Bash"]\nbinaries = ["touch"]',
         "*[[]arms.shell[]] has unknown key 'tool' (did you mean 'tools'?)*"),
        ('tools = ["Bash"]\nbinaries = ["touch"]', 'tools = ["Bassh"]', "*tools has value 'Bassh' (did you mean 'Bash'?)*"),
    ],
)
def test_broken_bench_toml_is_rejected_with_file_key_value_and_allowed(
    pytester: pytest.Pytester, replace: str, by: str, expected: str
) -> None:
    from benches import BENCH_TOML

    assert replace in BENCH_TOML
    write_bench(pytester, BENCH_TOML.replace(replace, by, 1))
    result = pytester.runpytest("--bench-arm", "all", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / "results").exists()  # not even a trial number was reserved


def test_real_model_without_credentials_is_refused_before_spending(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs credentials*claude setup-token*--bench-scripted*"])
    assert not (pytester.path / "results").exists()


def test_header_names_bench_model_and_store(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say-hello", "--bench-scripted", "--collect-only")
    result.stdout.fnmatch_lines(
        ["benchcell: bench mini (*bench.toml), claude-sonnet-4-5 (scripted model)", "benchcell: store *results*scripted, sitting *"]
    )


ANOTHER_SITTING_RESERVES_MEANWHILE = '''
import pytest
from pytest_benchcell.store import Cell, Store

def pytest_collection_modifyitems(config, items):
    Store(config.rootpath / "results").reserve_trials(Cell("scripted", "bare", "say-hello"), 1, sitting="other")

def pytest_runtest_setup(item):
    pytest.skip("reservation only")
'''


def test_trials_another_sitting_overtook_between_planning_and_reservation_get_fresh_numbers(pytester: pytest.Pytester) -> None:
    from benches import CONFTEST

    write_bench(pytester, conftest=CONFTEST + ANOTHER_SITTING_RESERVES_MEANWHILE)
    result = pytester.runpytest("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted", "-v")
    result.stdout.fnmatch_lines(["bench.toml::bare-say-hello-t2 SKIPPED*", "bench.toml::bare-say-hello-t3 SKIPPED*"])
    reservations = pytester.path / "results" / "scripted" / "bare" / "say-hello.trials"
    assert [json.loads(line)["trials"] for line in reservations.read_text().splitlines()] == [[1], [2, 3]]
