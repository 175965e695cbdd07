"""Where the bench file is for a command run outside pytest (`benchcell report`, `benchcell export`),
found the way a sitting finds it (plugin.bench_location): the ini key `bench_config` of the pytest
configuration file that pytest would read, relative to that file; else the first `bench.toml` from the
directory upwards (which reaches the rootdir, the configuration file's folder).

The configuration file is the first, from the directory upwards, of pytest's configuration files in
pytest's order (https://docs.pytest.org/en/stable/reference/customize.html): `pytest.toml`,
`.pytest.toml`, `pytest.ini`, `.pytest.ini` (always), `pyproject.toml` (with a `[tool.pytest]` or
`[tool.pytest.ini_options]` table), `tox.ini` (with `[pytest]`), `setup.cfg` (with `[tool:pytest]`).
Read with the parsers pytest itself uses (tomllib, iniconfig); pytest is not imported.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import iniconfig

BENCH_FILE = "bench.toml"
INI_KEY = "bench_config"


class BenchFileError(Exception):
    """A configuration file names a bench that is not there, or cannot be read."""


@dataclass(frozen=True)
class FoundBench:
    path: Path
    source: str  # how it was found, for messages: "ini key bench_config = '...' in /x/pytest.ini" or "found"


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BenchFileError(f"{path}: cannot be read as TOML ({exc})") from None


def _ini(path: Path) -> iniconfig.IniConfig:
    try:
        return iniconfig.IniConfig(str(path))
    except (OSError, iniconfig.ParseError) as exc:
        raise BenchFileError(f"{path}: cannot be read as an ini file ({exc})") from None


def _pytest_section(path: Path) -> dict[str, Any] | None:
    """The pytest settings a configuration file holds, or None when pytest would pass it over."""
    name = path.name
    if name in ("pytest.toml", ".pytest.toml"):
        return dict(_toml(path).get("pytest") or {})
    if name in ("pytest.ini", ".pytest.ini"):
        ini = _ini(path)
        return dict(ini["pytest"].items()) if "pytest" in ini else {}
    if name == "pyproject.toml":
        tool = _toml(path).get("tool", {}).get("pytest")
        if not isinstance(tool, dict):
            return None
        ini_options = tool.get("ini_options")
        return dict(ini_options) if isinstance(ini_options, dict) else {k: v for k, v in tool.items() if k != "ini_options"}
    section = {"tox.ini": "pytest", "setup.cfg": "tool:pytest"}[name]
    ini = _ini(path)
    return dict(ini[section].items()) if section in ini else None


CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def pytest_configuration(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    """The configuration file pytest reads for a run started in `directory`, with its pytest settings."""
    for folder in (directory, *directory.parents):
        for name in CONFIG_FILES:
            path = folder / name
            if path.is_file():
                settings = _pytest_section(path)
                if settings is not None:
                    return path, settings
    return None


def find_bench(directory: Path) -> FoundBench | None:
    """The bench a sitting started in `directory` would load (without --bench-config), or None when
    there is none. Raises BenchFileError when the ini key names a file that is not there."""
    directory = directory.resolve()
    configuration = pytest_configuration(directory)
    if configuration is not None:
        ini_path, settings = configuration
        named = str(settings.get(INI_KEY) or "").strip()
        if named:
            path = (ini_path.parent / named).resolve()
            source = f"ini key {INI_KEY} = {named!r} in {ini_path}"
            if not path.is_file():
                raise BenchFileError(f"{source}: {path}: no such bench file; allowed: the path of a {BENCH_FILE} file")
            return FoundBench(path, source)
    for folder in (directory, *directory.parents):
        if (folder / BENCH_FILE).is_file():
            return FoundBench(folder / BENCH_FILE, f"found in {folder}")
    return None
