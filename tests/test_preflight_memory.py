"""A pre-flight that passed is not run again while nothing it depends on has changed
(preflight_memory.py): the record and its hash as a pure core, then sittings as a user runs them,
including the case that matters most: a program changed after its pass is checked again and refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_preflight import needs_sandbox, samples, sitting, write_bench

from pytest_benchcell.config import load_bench
from pytest_benchcell.preflight_memory import MEMORY_S, PreflightMemory, arm_keys, remembered_line

TOOLS = {"sandbox": "bwrap 0.8", "audit": "strace 6.1"}

BENCH = """
[bench]
name = "memo"
model = "claude-sonnet-4-5"

[arms.cli]
tools = ["Bash"]
binaries = ["tool"]
path = ["bin"]

[tasks.count]
tier = "read"
intent = "How many?"
required_facts = ["3"]
"""


def test_a_pass_is_recalled_for_a_day_and_not_after_nor_from_a_clock_set_back(tmp_path: Path) -> None:
    PreflightMemory(tmp_path, now=10_000.0).remember("k", {"arm": "cli"})
    assert PreflightMemory(tmp_path, now=10_000.0 + MEMORY_S - 1).recall("k") == {"arm": "cli", "kept_at": 10_000.0}
    assert PreflightMemory(tmp_path, now=10_000.0 + MEMORY_S + 1).recall("k") is None
    assert PreflightMemory(tmp_path, now=9_000.0).recall("k") is None  # a pass "from the future" is not trusted
    assert PreflightMemory(tmp_path, now=10_000.0).recall("other") is None


@pytest.mark.parametrize("text", ["", '{"arm": "cli", "kept_at": 10', '{"arm": "cli"}', '{"kept_at": "soon"}', "[1]"])
def test_a_torn_or_strange_record_is_no_pass(tmp_path: Path, text: str) -> None:
    (tmp_path / "k.json").write_text(text)
    assert PreflightMemory(tmp_path, now=10_000.0).recall("k") is None


def test_without_a_cache_folder_nothing_is_remembered() -> None:
    memory = PreflightMemory(None)
    memory.remember("k", {"arm": "cli"})
    assert memory.recall("k") is None


def test_a_record_is_written_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    PreflightMemory(tmp_path / "preflight", now=5.0).remember("k", {"arm": "cli"})
    assert [path.name for path in (tmp_path / "preflight").iterdir()] == ["k.json"]
    assert json.loads((tmp_path / "preflight" / "k.json").read_text()) == {"arm": "cli", "kept_at": 5.0}


def _bench(folder: Path, tool: str = "#!/bin/sh\necho 3\n") -> Path:
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    (folder / "bin" / "tool").write_text(tool)
    (folder / "bin" / "tool").chmod(0o755)
    (folder / "bench.toml").write_text(BENCH)
    (folder / "conftest.py").write_text("def pytest_benchcell_provision(trial):\n    return None\n")
    return folder / "bench.toml"


def _key(bench_toml: Path, tools: dict[str, str] = TOOLS) -> str:
    return arm_keys(load_bench(bench_toml), {"cli": "count"}, {"cli": tools})["cli"]


def test_the_key_changes_with_whatever_the_preflight_depends_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench_toml = _bench(tmp_path)
    before = _key(bench_toml)
    assert _key(bench_toml) == before
    monkeypatch.setenv("PWD", "/elsewhere")  # what differs between runs and reaches no program
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    assert _key(bench_toml) == before

    def changes(change: str) -> None:
        nonlocal before
        after = _key(bench_toml)
        assert after != before, change
        before = after

    _bench(tmp_path, tool="#!/bin/sh\necho three\n")
    changes("the arm's program (its identity)")
    (tmp_path / "bench.toml").write_text(BENCH + "\n# a comment\n")
    changes("the bench file, byte for byte")
    (tmp_path / "conftest.py").write_text("def pytest_benchcell_provision(trial):\n    return 1\n")
    changes("the hooks")
    assert _key(bench_toml, {**TOOLS, "sandbox": "bwrap 0.9"}) != before  # the sandbox's program
    monkeypatch.setenv("SOME_SETTING", "1")
    changes("the harness's environment")
    monkeypatch.delenv("SOME_SETTING")
    changes("the harness's environment, again")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("x = 1\n")
    changes("a module the program imports, named nowhere")
    (tmp_path / "lib" / "helper.py").write_text("x = 22\n")
    changes("the same module, edited")
    assert _key(_bench(tmp_path.parent / f"{tmp_path.name}-copy")) != before  # another folder: other paths in its sandbox
    for written in ("bench/results/scripted/cli/count.jsonl", "__pycache__/conftest.pyc", ".pytest_cache/v/x",
                    ".venv/lib/site.py", "node_modules/x/index.js", ".git/index", "elsewhere-store/x.jsonl"):  # fmt: skip
        (tmp_path / written).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / written).write_text("what a sitting, a cache or an install writes")
    assert arm_keys(load_bench(bench_toml), {"cli": "count"}, {"cli": TOOLS}, store=tmp_path / "elsewhere-store")["cli"] == before


def test_the_summary_line_names_each_arm_and_how_long_ago_it_passed() -> None:
    now = 100_000.0
    line = remembered_line({"b": {"kept_at": now - 30}, "a": {"kept_at": now - 3 * 3600 - 120}}, now)
    assert line == (
        "pre-flight: not run again for arms a (passed 3 h 02 min ago), b (passed less than a minute ago): nothing it "
        "depends on has changed since (--bench-preflight always runs it)"
    )
    assert remembered_line({}, now) == ""


# --- sittings -------------------------------------------------------------------------------------

RAN = "pre-flight: 1 check of 1 arm ran in the sandbox as in a trial and work there (*s)"
NOT_AGAIN = "pre-flight: not run again for arm wrapper (passed * ago): nothing it depends on has changed since*"


@pytest.mark.e2e
@needs_sandbox
def test_a_later_sitting_of_the_same_arm_does_not_run_its_pre_flight_again(pytester: pytest.Pytester) -> None:
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    first = sitting(pytester, "wrapper")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines([RAN])
    second = sitting(pytester, "wrapper")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines([NOT_AGAIN])
    assert "ran in the sandbox" not in second.stdout.str()
    again = sitting(pytester, "wrapper", "--bench-preflight", "always")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines([RAN])
    sitting(pytester, "wrapper").stdout.fnmatch_lines([NOT_AGAIN.replace("passed * ago", "passed less than a minute ago")])
    assert [sample["trial"] for sample in samples(pytester, "wrapper")] == [1, 2, 3, 4]


@pytest.mark.e2e
@needs_sandbox
def test_a_program_changed_after_its_pass_is_checked_again_and_refused_if_the_sandbox_breaks_it(pytester: pytest.Pytester) -> None:
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    sitting(pytester, "wrapper").assert_outcomes(passed=1)
    sitting(pytester, "wrapper").stdout.fnmatch_lines([NOT_AGAIN])
    # The wrapper's script now reads a file of the bench the arm does not declare: the sandbox hides it.
    (pytester.path / "tracker.py").write_text(
        "import sys\nfrom pathlib import Path\nPath(__file__).with_name('data').joinpath('summary.txt').read_text()\n"
        "print('usage: tracker list' if sys.argv[1:] == ['--help'] else '3 open issues')\n"
    )
    refused = sitting(pytester, "wrapper")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    refused.stderr.fnmatch_lines(["*works outside the sandbox*and fails inside it*"])
    assert len(samples(pytester, "wrapper")) == 2  # nothing reserved, nothing recorded


@pytest.mark.e2e
@needs_sandbox
def test_a_module_the_program_imports_from_the_bench_changed_after_its_pass_is_checked_again(pytester: pytest.Pytester) -> None:
    write_bench(pytester, package='readable = ["pkgtool"]')
    sitting(pytester, "package").assert_outcomes(passed=1)
    sitting(pytester, "package").stdout.fnmatch_lines([NOT_AGAIN.replace("wrapper", "package")])
    # pkgcli names no file of its package: the bench folder's files are what changed.
    (pytester.path / "pkgtool" / "__init__.py").write_text(
        "import sys\nfrom pathlib import Path\n"
        "def main():\n    (Path(__file__).resolve().parent.parent / 'data' / 'summary.txt').read_text()\n"
        "    print('usage: pkgcli list' if sys.argv[1:] == ['--help'] else '3 open issues')\n"
    )
    refused = sitting(pytester, "package")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    refused.stderr.fnmatch_lines(["*works outside the sandbox*and fails inside it*"])


@pytest.mark.e2e
@needs_sandbox
def test_a_pre_flight_that_had_something_to_say_is_not_remembered(pytester: pytest.Pytester) -> None:
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    # --help and --version fail outside the sandbox too; -h works in and out: a note, every sitting.
    (pytester.path / "tracker.py").write_text(
        "import sys\nif sys.argv[1:] in (['--help'], ['--version']):\n    sys.exit(2)\nprint('3 open issues')\n"
    )
    for _ in range(2):
        result = sitting(pytester, "wrapper")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["pre-flight: arm wrapper: `tracker --help` and `tracker --version` fail outside*"])
        assert "not run again" not in result.stdout.str()


def test_the_option_takes_only_its_two_values(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--bench-preflight", "never")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-preflight: invalid choice: 'never' (choose from 'remembered', 'always')"])


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
def test_under_xdist_the_controller_remembers_and_recalls_the_pass(pytester: pytest.Pytester) -> None:
    write_bench(pytester, wrapper='readable = ["tracker.py"]')
    first = sitting(pytester, "wrapper", "-n", "2", "--bench-trials", "2")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([RAN])
    second = sitting(pytester, "wrapper", "-n", "2", "--bench-trials", "2")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines([NOT_AGAIN])
    assert sorted(sample["trial"] for sample in samples(pytester, "wrapper")) == [1, 2, 3, 4]
