"""`benchcell init`: a new bench that runs at once, in a project that already has tests too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs_text import newcomers_environment

from pytest_benchcell.cli import main
from pytest_benchcell.config import load_bench
from pytest_benchcell.scaffold import ScaffoldError, planned_files, scaffold

ARMS = ["todoctl-skill", "todoctl", "mcp"]
TASKS = ["count-open", "finish-stamps", "add-plumber"]


def test_init_writes_a_bench_the_loader_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "agent-bench"), "--tool", "todoctl"]) == 0
    folder = tmp_path / "agent-bench"
    out = capsys.readouterr().out
    assert f"wrote {folder / 'bench.toml'}" in out and "--bench-scripted" in out
    bench = load_bench(folder / "bench.toml")
    assert list(bench.arms) == ARMS and list(bench.tasks) == TASKS
    assert bench.arms["todoctl-skill"].skill_body and not bench.arms["todoctl"].skill_body
    assert [server.name for server in bench.arms["mcp"].mcp_servers] == ["todoctl"]
    assert os.access(folder / "bench" / "bin" / "todoctl", os.X_OK)
    assert "@TOOL@" not in "".join(path.read_text() for path in planned_files(folder, "todoctl"))


def test_init_never_overwrites_and_writes_nothing_when_one_file_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "conftest.py").write_text("# the project's own\n")
    assert main(["init", str(tmp_path), "--tool", "todoctl"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'conftest.py'} already exists" in err and "never overwrites" in err and "agent-bench/" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conftest.py"]
    assert (tmp_path / "conftest.py").read_text() == "# the project's own\n"


@pytest.mark.parametrize("name", ["", "my tool", "../x", "a.b", "-x", "x" * 41])
def test_init_refuses_a_name_that_cannot_be_a_program_and_an_arm(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScaffoldError, match="allowed: the program name of your CLI"):
        scaffold(tmp_path, name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.e2e
def test_a_new_bench_runs_every_cell_scripted_beside_a_projects_own_tests(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (project / "tests" / "conftest.py").write_text("")
    (project / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
    benchcell = Path(sys.executable).parent / "benchcell"
    made = subprocess.run([str(benchcell), "init", "agent-bench", "--tool", "todoctl"], cwd=project, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    # The tutorial's command, from the bench's folder, with one trial per cell.
    command = [sys.executable, "-m", "pytest", "--bench-arm", "all", "--bench-task", "all", "--bench-scripted", "--bench-trials", "1"]
    sitting = subprocess.run(command, cwd=project / "agent-bench", capture_output=True, text=True, env=newcomers_environment(), timeout=600)
    assert sitting.returncode == 0, sitting.stdout + sitting.stderr
    assert "9 passed" in sitting.stdout
    store = project / "agent-bench" / "bench" / "results" / "scripted"
    outcomes = {
        (sample["arm"], sample["task"]): sample["outcome"]
        for path in store.glob("*/*.jsonl")
        for sample in map(json.loads, path.read_text().splitlines())
    }
    assert outcomes == {(arm, task): "pass" for arm in ARMS for task in TASKS}
    # The project's own tests are untouched by the bench beside them.
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"], cwd=project, capture_output=True, text=True,
                         env=newcomers_environment(), timeout=120)  # fmt: skip
    assert own.returncode == 0 and "1 passed" in own.stdout, own.stdout + own.stderr
