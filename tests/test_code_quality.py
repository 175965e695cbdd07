"""The contributors' checks are part of the suite: ruff and mypy, configured in pyproject.toml, pass on
the package, and the pre-commit configuration runs the same two."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing_in_the_repository() -> None:
    done = _run(str(BIN / "ruff"), "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package_with_check_untyped_defs() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert settings["check_untyped_defs"] is True and settings["files"] == ["pytest_benchcell"]
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_pre_commit_runs_the_same_ruff_and_mypy() -> None:
    done = _run(str(BIN / "pre-commit"), "validate-config", ".pre-commit-config.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "entry: ruff check" in config and "entry: mypy\n" in config
