"""What a far Python must have before a worker runs there (pytest_benchcell.gateway_check): the pure part."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest_benchcell
from pytest_benchcell import __version__
from pytest_benchcell.gateway_check import checkout_commit, identity, identity_mismatch, install_command, probe_problem

CONTROLLER = {"version": "0.1.0", "commit": "c" * 40, "plugin_in_checkout": True}
FOUND = {"python": "/far/.venv/bin/python", "cwd": "/far", "pytest-benchcell": "0.1.0", "pytest-xdist": "3.8.0",
         "execnet": "2.1.2", "import_error": None, "editable_from": None}  # fmt: skip


def test_a_worker_matching_the_controller_runs() -> None:
    assert identity_mismatch(dict(CONTROLLER), CONTROLLER, python="/far/python", checkout=Path("/far")) is None


def test_another_version_or_commit_names_both_and_the_command_that_installs_the_controllers() -> None:
    mine = {**CONTROLLER, "version": "0.1.0+far", "commit": "f" * 40}
    message = identity_mismatch(mine, CONTROLLER, python="/far/python", checkout=Path("/far"))
    assert message == (
        f"this worker runs pytest-benchcell 0.1.0+far with its bench's checkout at commit {'f' * 12} (/far/python in "
        f"/far), the controller pytest-benchcell 0.1.0 with its bench's checkout at commit {'c' * 12}: samples of another "
        f"plugin or bench would be pooled as the controller's; run there: git -C /far checkout {'c' * 40} && "
        f"/far/python -m pip install -e '/far[xdist]'"
    )
    released = {"version": "0.2.0", "commit": None, "plugin_in_checkout": False}
    assert identity_mismatch({**released, "version": "0.1.0"}, released, python="py", checkout=None).endswith(
        "run there: py -m pip install 'pytest-benchcell[xdist]==0.2.0'"
    )
    # The same release, the bench's checkout elsewhere: only the checkout moves.
    moved = {**released, "commit": "a" * 40}
    assert identity_mismatch(released, moved, python="py", checkout=Path("/far")).endswith(f"run there: git -C /far checkout {'a' * 40}")


def test_install_command_follows_where_the_controller_runs_the_plugin_from() -> None:
    assert install_command("py", Path("/far"), CONTROLLER) == f"git -C /far checkout {'c' * 40} && py -m pip install -e '/far[xdist]'"
    assert install_command("py", Path("/far"), {**CONTROLLER, "plugin_in_checkout": False}) == "py -m pip install 'pytest-benchcell[xdist]==0.1.0'"


def test_what_a_far_python_lacks_is_named_with_its_fix() -> None:
    assert probe_problem(FOUND, CONTROLLER, checkout="/far") is None
    missing = probe_problem({**FOUND, "pytest-benchcell": None}, CONTROLLER, checkout="/far")
    assert missing == (
        "pytest-benchcell is not installed in /far/.venv/bin/python: install it there with git -C /far checkout "
        f"{'c' * 40} && /far/.venv/bin/python -m pip install -e '/far[xdist]'"
    )
    broken = probe_problem({**FOUND, "import_error": "ModuleNotFoundError: No module named 'filelock'", "editable_from": "/far"},
                           CONTROLLER, checkout="/far")  # fmt: skip
    assert broken == (
        "pytest-benchcell 0.1.0 is installed in /far/.venv/bin/python but does not import (ModuleNotFoundError: No "
        "module named 'filelock'): install it there with its dependencies, /far/.venv/bin/python -m pip install -e '/far[xdist]'"
    )
    # A checkout on that Python's path (a .pth, PYTHONPATH) with its build's metadata: the plugin "is
    # there" but its dependencies are not; a released controller's fix installs that very source.
    released = {**CONTROLLER, "plugin_in_checkout": False}
    bare = {**FOUND, "missing": ["filelock", "bashlex"], "metadata_at": "/src/benchcell", "source_at": "/src/benchcell",
            "import_error": "ModuleNotFoundError: No module named 'filelock'"}  # fmt: skip
    assert probe_problem(bare, released, checkout="/far") == (
        "pytest-benchcell is not installed in /far/.venv/bin/python: that Python finds the plugin (its metadata in "
        "/src/benchcell) but not its dependencies (filelock, bashlex); install it there with /far/.venv/bin/python -m "
        "pip install -e '/src/benchcell[xdist]'"
    )
    assert probe_problem(bare, CONTROLLER, checkout="/far").endswith(  # the bench's checkout carries the plugin
        f"install it there with git -C /far checkout {'c' * 40} && /far/.venv/bin/python -m pip install -e '/far[xdist]'"
    )
    source_only = {**FOUND, "pytest-benchcell": None, "source_at": "/src/benchcell"}
    assert probe_problem(source_only, released, checkout="/far") == (
        "pytest-benchcell is not installed in /far/.venv/bin/python (it finds only the plugin's source, in "
        "/src/benchcell): install it there with /far/.venv/bin/python -m pip install -e '/src/benchcell[xdist]'"
    )
    no_xdist = probe_problem({**FOUND, "pytest-xdist": None}, CONTROLLER, checkout="/far")
    assert no_xdist is not None and no_xdist.startswith("pytest-xdist is not installed in /far/.venv/bin/python (a worker needs")


def test_the_identity_is_the_release_and_the_benchs_commit(tmp_path: Path) -> None:
    assert identity(tmp_path) == {"version": __version__, "commit": None, "plugin_in_checkout": False}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert checkout_commit(tmp_path) is None  # no commit yet
    (tmp_path / "bench.toml").write_text("")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.org", "-C", str(tmp_path)]
    subprocess.run([*git, "add", "bench.toml"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert identity(tmp_path)["commit"] == head
    if Path(pytest_benchcell.__file__).resolve().parents[1] == Path(__file__).resolve().parents[1]:
        assert identity(Path(__file__).parent)["plugin_in_checkout"] is True  # an editable install of this checkout
