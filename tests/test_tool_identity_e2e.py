"""End to end: a new build of the arm's CLI between two sittings starts a new definition, which the
sitting summary and the report count apart; a report where the CLI is absent loses no sample."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from benches import BENCH_HEADER, CONFTEST, TASKS, write_bench

pytestmark = pytest.mark.e2e

ARM = """
[arms.cli]
tools = ["Bash"]
binaries = ["invctl"]
path = ["tool/bin"]
readable = ["tool"]
bootstrap = "invctl counts the parts."
"""
WRAPPER = '#!/bin/sh\nexec python3 "$(dirname "$0")/../cli.py" "$@"\n'  # a Python CLI, the interpreter's argument
CLI_PY = 'import sys\nprint("invctl {version}" if sys.argv[1:] == ["--version"] else "parts: 3")\n'


def report(pytester: pytest.Pytester) -> dict:
    result = pytester.runpytest("--bench-report-json", "r.json", "--bench-scripted")
    assert result.ret == 0, result.stdout.str()
    (cell,) = [c for c in json.loads((pytester.path / "r.json").read_text())["cells"] if c["arm"] == "cli"]
    return cell


def test_a_new_build_of_the_cli_starts_a_new_definition(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_HEADER + ARM + TASKS["say-hello"], CONFTEST)
    wrapper = pytester.path / "tool" / "bin" / "invctl"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    cli = pytester.path / "tool" / "cli.py"
    cli.write_text(CLI_PY.format(version="1.0"))
    sitting = ("--bench-arm", "cli", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "2", "-p", "no:randomly")

    first = pytester.runpytest(*sitting)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["    scored samples of the current definition: 0 -> 2 *"])

    cli.write_text(CLI_PY.format(version="1.1"))
    second = pytester.runpytest(*sitting, "--bench-trials", "1")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["    scored samples of the current definition: 0 -> 1 *"])
    cell = report(pytester)
    assert (cell["scored"], cell["left_out_older"]) == (1, 2)

    definitions = sorted((pytester.path / "results" / "definitions").glob("*.toml"))
    texts = "\n".join(path.read_text() for path in definitions)
    assert 'version = "invctl 1.0"' in texts and 'version = "invctl 1.1"' in texts  # which build each was made with

    # Where the CLI is absent, the report reads the cell's newest definition rather than none.
    os.rename(wrapper, wrapper.with_name("invctl.moved"))
    cell = report(pytester)
    assert (cell["scored"], cell["left_out_older"]) == (1, 2)


def test_the_same_build_pools_across_sittings(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_HEADER + ARM + TASKS["say-hello"], CONFTEST)
    wrapper = Path(pytester.path, "tool", "bin", "invctl")
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    (pytester.path / "tool" / "cli.py").write_text(CLI_PY.format(version="1.0"))
    sitting = ("--bench-arm", "cli", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1", "-p", "no:randomly")
    pytester.runpytest(*sitting).assert_outcomes(passed=1)
    again = pytester.runpytest(*sitting)
    again.stdout.fnmatch_lines(["    scored samples of the current definition: 1 -> 2 *"])
