"""A good pytest citizen: where the bench file is found, clear refusals before anything is spent,
the HTML extra, -p no:benchcell, and the cost of merely having the plugin installed. No trial runs here
(see test_citizenship_e2e.py for the pytester matrix with rerunfailures, timeout, randomly and xdist)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benches import BENCH_TOML, write_bench

SITTING = ("--bench-arm", "shell", "--bench-task", "say-hello", "--bench-scripted")


def no_traceback(result: pytest.RunResult) -> None:
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# --- finding the bench file -----------------------------------------------------------------------


@pytest.mark.parametrize("form", ["words", "equals"])
def test_an_existing_outside_path_as_option_value_works_twice(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, form: str
) -> None:
    """pytest takes existing paths among the arguments as rootdir candidates before it knows our
    options; the second run (the report file now exists) must still find bench.toml."""
    write_bench(pytester)
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "r.md"
    store = tmp_path_factory.mktemp("other-store")

    def args(option: str, value: Path) -> list[str]:
        return [option, str(value)] if form == "words" else [f"{option}={value}"]

    for _ in range(2):
        result = pytester.runpytest("--bench-report", "--bench-scripted", *args("--bench-report-md", target))
        assert result.ret == 0, result.stderr.str()
        assert target.read_text().startswith("#")
        preview = pytester.runpytest(*SITTING, "--collect-only", "-q", *args("--bench-store", store))
        assert preview.ret == 0, preview.stderr.str()
        preview.stdout.fnmatch_lines(["*bench.toml::shell-say-hello-t1", f"store: {store}*"])


def test_bench_toml_is_found_from_the_invocation_directory_upwards(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_bench(pytester)
    deeper = pytester.mkdir("docs") / "deeper"
    deeper.mkdir()
    monkeypatch.chdir(deeper)
    result = pytester.runpytest(*SITTING, "--collect-only", "-q", "--rootdir", str(deeper))
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["*shell-say-hello-t1"])
    # the store is relative to the bench file, not to where pytest was started
    result.stdout.fnmatch_lines([f"store: {pytester.path / 'results' / 'scripted'}"])


def test_ini_key_bench_config_names_the_bench_relative_to_the_ini_file(pytester: pytest.Pytester) -> None:
    sub = pytester.mkdir("benches")
    (sub / "mine.toml").write_text(BENCH_TOML)
    pytester.makeini("[pytest]\nbench_config = benches/mine.toml\n")
    result = pytester.runpytest(*SITTING, "--collect-only", "-q")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["benches/mine.toml::shell-say-hello-t1"])
    # --bench-config wins over the ini key
    result = pytester.runpytest(*SITTING, "--collect-only", "-q", "--bench-config", "nowhere.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{pytester.path / 'nowhere.toml'}: no such bench file*"])


def test_no_bench_file_anywhere_says_where_it_looked(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*SITTING)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no bench.toml in * or its parents, nor in the rootdir *--bench-config PATH*"])


# --- refused before the first token (broken bench files: test_plugin.py) ---------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bench-arm", "", "--bench-task", "say-hello"], "*--bench-arm '': names no arm; valid arms: shell, bare (or all)*"),
        (["--bench-arm", "shel", "--bench-task", "say-hello"], "*--bench-arm 'shel': no such arm (did you mean 'shell'?)*"),
        (["--bench-arm", "shell", "--bench-task", "say-helo"], "*no such task (did you mean 'say-hello'?)*"),
        (["--bench-arm", "shell", "--bench-task", "say-hello", "--bench-weights", "garbage"],
         "*--bench-weights 'garbage': weights apply to reports only*"),
        (["--bench-report", "--bench-weights", "garbage"], "*--bench-weights: 'garbage' is not NAME=NUMBER*"),
    ],
)
def test_bad_values_are_one_usage_error(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    write_bench(pytester)
    result = pytester.runpytest(*args, "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    no_traceback(result)


def test_a_store_that_is_a_file_names_where_the_value_came_from(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_TOML.replace('store = "results"', 'store = "results.txt"'))
    (pytester.path / "results.txt").write_text("not a folder")
    result = pytester.runpytest(*SITTING)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: [[]bench[]] store in {pytester.path / 'bench.toml'}: * is a file, not a folder; allowed: a folder*"]
    )
    result = pytester.runpytest(*SITTING, "--bench-store", "results.txt/deeper")
    result.stderr.fnmatch_lines(["ERROR: --bench-store results.txt/deeper: * cannot be created: *results.txt is a file*"])
    no_traceback(result)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: a read-only folder cannot be simulated")
def test_a_read_only_store_names_where_the_value_came_from(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    locked = pytester.mkdir("locked")
    locked.chmod(0o500)
    try:
        result = pytester.runpytest(*SITTING, "--bench-store", "locked/store")
    finally:
        locked.chmod(0o700)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-store locked/store: *read-only for this user; allowed: a folder*"])


def test_html_report_without_matplotlib_is_one_usage_error_and_writes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_bench(pytester)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on the base install: not importable
    result = pytester.runpytest("--bench-report-md", "r.md", "--bench-report-html", "r.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: HTML reports * optional extra [[]html[]]: pip install 'pytest-benchcell[[]html[]]'"])
    no_traceback(result)
    assert not (pytester.path / "r.md").exists()  # refused before any report file is written


# --- out of the way when not used -----------------------------------------------------------------


def test_p_no_benchcell_switches_the_plugin_off(pytester: pytest.Pytester) -> None:
    # Bench hooks marked optionalhook=True, as the README says, so pytest accepts them unplugged.
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_benchcell_provision(trial):\n"
        "    return None\n"
    )
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest("-p", "no:benchcell")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest("-p", "no:benchcell", "--bench-arm", "shell")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # the option is unknown without the plugin
    result.stderr.fnmatch_lines(["*unrecognized arguments: --bench-arm*"])


def test_importing_the_plugin_imports_none_of_the_cores() -> None:
    """What makes the plugin cheap when unused (the figure: benchmarks/import_cost.py)."""
    code = (
        "import sys, pytest_benchcell.plugin\n"
        "print([m for m in sys.modules if m.startswith(('pytest_benchcell.', 'filelock', 'claude_agent_sdk', 'tomllib', 'bashlex'))])"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.replace("'", '"'))
    assert sorted(loaded) == [
        "pytest_benchcell.environment", "pytest_benchcell.hookspecs", "pytest_benchcell.plugin",
        "pytest_benchcell.plugin.keys", "pytest_benchcell.plugin.options",  # the sitting's modules load with a sitting
    ]  # fmt: skip


def test_an_ordinary_run_with_the_plugin_installed_imports_no_core(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain=(
            "import sys\n"
            "def test_cores_not_loaded():\n"
            "    assert not [m for m in sys.modules if m.startswith(('pytest_benchcell.store', 'pytest_benchcell.sitting', "
            "'pytest_benchcell.config', 'filelock'))]\n"
        )
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_the_plan_order_survives_pytest_randomly(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest(
        "--bench-arm", "all", "--bench-task", "say-hello,make-file", "--bench-scripted", "--collect-only", "-q",
        "-p", "randomly", "--randomly-seed", "4242",
    )
    assert result.ret == 0, result.stderr.str()
    names = [line.split("::")[1] for line in result.stdout.lines if line.startswith("bench.toml::")]
    assert names == [
        "shell-say-hello-t1", "shell-make-file-t1", "bare-say-hello-t1", "bare-make-file-t1",
        "shell-say-hello-t2", "shell-make-file-t2", "bare-say-hello-t2", "bare-make-file-t2",
    ]


def test_the_pytest_report_points_at_the_other_model_kind_with_its_own_option(pytester: pytest.Pytester) -> None:
    from sample_factory import cell_samples, write_samples

    write_bench(pytester)
    write_samples(pytester.path / "results", cell_samples("shell", "say-hello", 3, tier="read", model_kind="scripted"))
    result = pytester.runpytest("--bench-report")
    assert result.ret == 0, result.stderr.str()
    text = " ".join(result.stdout.str().split())
    assert "(pytest --bench-report with --bench-scripted, or benchcell report --model-kind scripted)" in text
