"""What a far worker must have before any trial runs there (the plugin, its extra, the controller's
version and commit), where each sample ran, and the spools a sitting leaves on far machines.
Gateways in other Pythons and checkouts (popen//python=...//chdir=..., and ssh to an sshd of the
test's own on 127.0.0.1 where one is installed); real CLI, scripted model."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from benches import ARMS, BENCH_HEADER, TASKS, write_bench
from docs_text import logical_lines
from test_remote_gateways import clone, ssh_login, stored, trials_torn_down  # noqa: F401 - ssh_login: the sshd fixture

pytestmark = pytest.mark.e2e

SITTING = ["--bench-arm", "all", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1"]


def python_lacking(folder: Path, *left_out: str) -> Path:
    """A venv of this interpreter that sees this one's packages but those whose names start with one
    of `left_out` (a Python where they were never installed), without copying any of them."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    seen = folder / "seen"
    seen.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("__editable__", *left_out)):
            (seen / entry.name).symlink_to(entry)
    site = next((folder / "lib").glob("python3*/site-packages"))
    (site / "seen.pth").write_text(f"{seen}\n")
    return folder / "bin" / "python"


def a_version_of_the_plugin(folder: Path, version: str) -> Path:
    """A Python whose pytest-benchcell is this checkout's source, but reporting `version`."""
    python = python_lacking(folder, "pytest_benchcell")
    package = folder / "source" / "pytest_benchcell"
    import pytest_benchcell

    shutil.copytree(Path(pytest_benchcell.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    init = package / "__init__.py"
    init.write_text(init.read_text().replace(f'__version__ = "{pytest_benchcell.__version__}"', f'__version__ = "{version}"'))
    info = folder / "source" / f"pytest_benchcell-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pytest-benchcell\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[pytest11]\nbenchcell = pytest_benchcell.plugin\n")
    site = next((folder / "lib").glob("python3*/site-packages"))
    (site / "source.pth").write_text(f"{folder / 'source'}\n")
    return python


def test_a_python_without_the_plugin_is_named_with_the_command_that_installs_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    (far / "pytest_benchcell").mkdir()  # the far checkout holds the plugin's source, never installed
    (far / "pytest_benchcell" / "__init__.py").write_text("import filelock\n")
    python = python_lacking(tmp_path / "venv", "pytest_benchcell", "filelock")
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//python={python}//chdir={far}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"*benchcell: gateway gw0 (popen//python={python}//chdir={far}) cannot run trials: pytest-benchcell is not "
         f"installed in {python}: install it there with {python} -m pip install 'pytest-benchcell[[]xdist]==*'; the sitting stops*"]
    )  # fmt: skip
    assert "ModuleNotFoundError" not in result.stdout.str() + result.stderr.str()
    assert trials_torn_down(pytester) == []


def test_a_python_without_xdist_is_named_with_the_extra_that_brings_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    python = python_lacking(tmp_path / "venv", "xdist", "pytest_xdist", "execnet")
    (next((tmp_path / "venv" / "lib").glob("python3*/site-packages")) / "plugin.pth").write_text(
        f"{Path(__file__).resolve().parents[1]}\n"
    )  # the plugin's own source, as an editable install of it would give
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//python={python}//chdir={far}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*cannot run trials: pytest-xdist is not installed in {python} (a worker needs "
                                 f"pytest-benchcell's [[]xdist] extra): install it there with *pip install*"])  # fmt: skip


def test_a_worker_of_another_plugin_version_is_refused_before_any_trial(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    python = a_version_of_the_plugin(tmp_path / "venv", "0.1.0+far")
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//python={python}//chdir={far}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"*benchcell: gateway gw0 (popen//python={python}//chdir={far}) cannot run trials: this worker runs "
         f"pytest-benchcell 0.1.0+far with its bench's checkout at no git commit ({python} in {far}), the controller "
         f"pytest-benchcell 0.1.0 with its bench's checkout at no git commit: * run there: {python} -m pip install "
         f"'pytest-benchcell[[]xdist]==0.1.0'*"]
    )  # fmt: skip
    assert "replacing crashed worker" not in result.stdout.str()
    assert trials_torn_down(pytester) == []
    assert list((pytester.path / "results").rglob("*.jsonl")) == []


def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@example.org"]
    return subprocess.run(["git", *identity, "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_a_checkout_at_another_commit_is_refused_naming_both(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "bench.toml", "conftest.py")
    git(pytester.path, "commit", "-qm", "the bench")
    far = tmp_path / "far"
    git(tmp_path, "clone", "-q", str(pytester.path), str(far))
    (far / "NOTES").write_text("a later commit, same bench\n")
    git(far, "add", "NOTES")
    git(far, "commit", "-qm", "a later commit")
    controller, here = git(pytester.path, "rev-parse", "HEAD"), git(far, "rev-parse", "HEAD")
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//chdir={far}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"*cannot run trials: this worker runs pytest-benchcell 0.1.0 with its bench's checkout at commit {here[:12]} "
         f"(* in {far}), the controller pytest-benchcell 0.1.0 with its bench's checkout at commit {controller[:12]}: "
         f"* run there: git -C {far} checkout {controller}*"]
    )  # fmt: skip
    assert trials_torn_down(pytester) == []
    git(far, "checkout", "-q", controller)  # the fix the message names: the sitting runs
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//chdir={far}", timeout=120)
    result.assert_outcomes(passed=2)


def python_seeing_only_there(tmp_path: Path, far: Path) -> tuple[Path, Path]:
    """A Python that sees `far` at a folder that is empty for everyone else (its own mount namespace),
    as a far machine's checkout is out of the controller's sight; and that folder."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to give the worker a checkout the controller cannot see")
    view = tmp_path / "far-view"
    view.mkdir()
    python = tmp_path / "python-far"
    python.write_text(
        f"#!/bin/sh\nexport PYTHONPATH={os.environ.get('PYTHONPATH', '')}\n"
        f"exec unshare -m --propagation private sh -c 'mount --bind {far} {view} && exec {sys.executable} \"$@\"' sh \"$@\"\n"
    )
    python.chmod(0o755)
    return python, view


@pytest.mark.slow
def test_a_far_spool_goes_once_its_samples_are_stored_and_each_sample_says_where_it_ran(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    python, view = python_seeing_only_there(tmp_path, far)
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//python={python}//chdir={view}", timeout=180)
    result.assert_outcomes(passed=2)
    assert list(view.iterdir()) == []  # the controller never saw the checkout
    assert not (far / ".benchcell-spool").exists()  # the worker removed its spool: everything in it is home
    samples = stored(pytester.path / "results", "shell", "say-hello") + stored(pytester.path / "results", "bare", "say-hello")
    assert [(s["provenance"]["host"], s["provenance"]["gateway"]) for s in samples] == [(socket.gethostname(), "gw0")] * 2
    assert "stays on its machine" not in result.stdout.str()


REPO = Path(__file__).resolve().parents[1]
RECIPE = re.compile(r"<!-- readme-test: no-run: the far machine's recipe[^>]*-->\n```[\w-]*\n(.*?)```", re.S)
# What a far Python is given before the recipe runs, so that the test need not unpack the SDK's
# 385 MB again: every package of this one but the plugin's own and those its install must bring.
BROUGHT_BY_THE_RECIPE = ("pytest", "_pytest", "py.", "pluggy", "xdist", "execnet", "filelock", "bashlex", "tomli_w", "pyseccomp")


@pytest.mark.slow
def test_the_far_machines_recipe_as_written_runs_a_sitting_over_ssh(
    pytester: pytest.Pytester, tmp_path: Path, ssh_login: tuple[str, Path]
) -> None:
    user, config = ssh_login
    machines = (REPO / "docs" / "machines.md").read_text()
    far = tmp_path / "home" / "project"
    swap = {"https://github.com/me/project": str(pytester.path), "/home/me/project": str(far)}

    def as_here(line: str) -> str:
        for written, here in swap.items():
            line = line.replace(written, here)
        return line

    def over_ssh(command: str) -> str:
        done = subprocess.run(["ssh", "-F", str(config), f"{user}@127.0.0.1", command], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"`{command}` failed on the far side:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done.stdout
    # The controller's project: this repository (its committed state) with the test's bench, committed.
    git(tmp_path, "clone", "-q", str(REPO), str(pytester.path))
    write_bench(pytester, BENCH_HEADER + "".join(ARMS.values()) + TASKS["say-hello"] + TASKS["make-file"])  # quick tasks
    git(pytester.path, "add", "bench.toml", "conftest.py")
    git(pytester.path, "commit", "-qm", "the test's bench")
    far_version = over_ssh("python3 -c 'import sys; print(*sys.version_info[:2])'").split()
    if far_version != [str(sys.version_info[0]), str(sys.version_info[1])]:
        pytest.skip(f"the far python3 is {'.'.join(far_version)}, this one {sys.version_info[0]}.{sys.version_info[1]}")
    clone_line, install_line = [as_here(line) for line in RECIPE.search(machines).group(1).splitlines() if line.strip()]
    over_ssh(clone_line)
    make_venv, install = install_line.split(" && ")  # run one by one, in the checkout the first line went to
    over_ssh(f"cd {far} && {make_venv}")
    seen = far / "seen"
    seen.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("__editable__", *BROUGHT_BY_THE_RECIPE)):
            (seen / entry.name).symlink_to(entry)
    (next((far / ".venv" / "lib").glob("python3*/site-packages")) / "seen.pth").write_text(f"{seen}\n")
    over_ssh(f"cd {far} && {install}")
    assert over_ssh(f"{far}/.venv/bin/python -c 'import execnet, xdist, pytest_benchcell; print(pytest_benchcell.__file__)'").strip() == (
        f"{far}/pytest_benchcell/__init__.py"
    )  # fmt: skip
    command = next(line for line in logical_lines(machines) if line.startswith("pytest ") and "ssh=me@box" in line)
    command = as_here(command).replace("ssh=me@box", f"ssh={user}@127.0.0.1//ssh_config={config}")
    result = pytester.runpytest_subprocess(*shlex.split(command)[1:], "--bench-scripted", "--bench-trials", "1", timeout=600)
    assert "cannot run trials" not in result.stdout.str(), result.stdout.str()[-3000:]
    samples = [s for arm in ("shell", "bare") for task in ("say-hello", "make-file") for s in stored(pytester.path / "results", arm, task)]
    assert len(samples) == len({s["id"] for s in samples}) == 4
    assert {s["provenance"]["gateway"] for s in samples} <= {"gw0", "gw1", "gw2", "gw3"}
    assert not (far / ".benchcell-spool").exists()
