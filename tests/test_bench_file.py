"""bench_file.find_bench: the bench a command outside pytest reads, found as a sitting finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_benchcell.bench_file import BenchFileError, find_bench


def test_the_first_bench_toml_from_the_directory_upwards(tmp_path: Path) -> None:
    (tmp_path / "bench.toml").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    found = find_bench(deep)
    assert found is not None and found.path == (tmp_path / "bench.toml").resolve()
    (tmp_path / "a" / "bench.toml").write_text("")
    assert find_bench(deep).path == (tmp_path / "a" / "bench.toml").resolve()  # the nearer one, as pytest


def test_no_bench_anywhere_is_none(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    assert find_bench(tmp_path) is None


@pytest.mark.parametrize(
    "name, text",
    [
        ("pytest.ini", "[pytest]\nbench_config = conf/my-bench.toml\n"),
        (".pytest.ini", "[pytest]\nbench_config = conf/my-bench.toml\n"),
        ("pytest.toml", '[pytest]\nbench_config = "conf/my-bench.toml"\n'),
        ("pyproject.toml", '[tool.pytest.ini_options]\nbench_config = "conf/my-bench.toml"\n'),
        ("pyproject.toml", '[tool.pytest]\nbench_config = "conf/my-bench.toml"\n'),
        ("tox.ini", "[pytest]\nbench_config = conf/my-bench.toml\n"),
        ("setup.cfg", "[tool:pytest]\nbench_config = conf/my-bench.toml\n"),
    ],
)
def test_the_ini_key_of_pytests_configuration_file_comes_first(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "my-bench.toml").write_text("")
    (tmp_path / "bench.toml").write_text("")  # a sitting would not load this one: the ini key names another
    below = tmp_path / "src"
    below.mkdir()
    found = find_bench(below)
    assert found is not None and found.path == (tmp_path / "conf" / "my-bench.toml").resolve()
    assert found.source == f"ini key bench_config = 'conf/my-bench.toml' in {tmp_path.resolve() / name}"


def test_files_pytest_passes_over_are_passed_over(tmp_path: Path) -> None:
    # pytest reads the first configuration file that has a pytest section: not this pyproject.toml,
    # tox.ini or setup.cfg, but the pytest.ini above them.
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (inner / "tox.ini").write_text("[tox]\n")
    (inner / "setup.cfg").write_text("[metadata]\nname = x\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nbench_config = b.toml\n")
    (tmp_path / "b.toml").write_text("")
    assert find_bench(inner).path == (tmp_path / "b.toml").resolve()


def test_an_ini_key_naming_no_file_is_an_error_naming_the_key_and_file(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nbench_config = missing.toml\n")
    (tmp_path / "bench.toml").write_text("")
    with pytest.raises(BenchFileError, match=r"ini key bench_config = 'missing.toml' in .*pytest.ini: .*missing.toml: no such bench file"):
        find_bench(tmp_path)


def test_an_unreadable_configuration_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    with pytest.raises(BenchFileError, match=r"pyproject.toml: cannot be read as TOML"):
        find_bench(tmp_path)
