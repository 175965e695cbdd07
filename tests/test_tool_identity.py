"""What an arm's binaries are joins the cell's conditions (tool_identity.py), as does `readable`: a
new build of the CLI under test, or a declaration that fixed a bench, starts a new definition; the
same files give the same fingerprint in every load and every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_benchcell import tool_identity
from pytest_benchcell.config import load_bench
from pytest_benchcell.remote import cell_definitions, definition_mismatch
from pytest_benchcell.report.model import settings_for_bench

BENCH = """
[bench]
model = "claude-sonnet-4-5"
store = "results"

[arms.cli]
tools = ["Bash"]
binaries = ["invctl"]
path = ["tool/bin"]
{arm_extra}

[tasks.count]
tier = "read"
intent = "Count the parts."
required_facts = ["3"]
"""

PYTHON_WRAPPER = '#!/bin/sh\nexec python3 tool/cli.py "$@"\n'  # the script named relative to the bench folder
NODE_WRAPPER = '#!/bin/sh\nexec node "$(dirname "$0")/../lib/invctl.js" "$@"\n'
CLI_PY = 'import sys\nif sys.argv[1:] == ["--version"]:\n    sys.exit("invctl: no such command")\nprint("parts: {parts}")\n'
FOLDER_VARIABLE_WRAPPER = '#!/bin/bash\nHERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\nexec node "$HERE/../lib/invctl.js" "$@"\n'


def make_bench(root: Path, wrapper: str = PYTHON_WRAPPER, arm_extra: str = "") -> Path:
    (root / "tool" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "tool" / "lib").mkdir(exist_ok=True)
    script = root / "tool" / "bin" / "invctl"
    script.write_text(wrapper)
    script.chmod(0o755)
    (root / "tool" / "cli.py").write_text(CLI_PY.format(parts=3))
    (root / "tool" / "lib" / "invctl.js").write_text('console.log("parts: 3")\n')
    (root / "tool" / "config.toml").write_text("parts = 3\n")
    path = root / "bench.toml"
    path.write_text(BENCH.format(arm_extra=textwrap.dedent(arm_extra)))
    return path


def edit(path: Path, text: str) -> None:
    """Change a file as an editor would (its modification time moves on even within one clock tick)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def fingerprint(path: Path) -> str:
    return load_bench(path).fingerprint("cli", "count")


def fingerprint_in_a_new_process(path: Path, **env: str) -> str:
    code = f"from pytest_benchcell.config import load_bench; print(load_bench({str(path)!r}).fingerprint('cli', 'count'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **env})
    return done.stdout.strip()


# -- readable ---------------------------------------------------------------------------------------------
def test_a_readable_declaration_starts_a_new_definition_written_relative_to_the_bench(tmp_path: Path) -> None:
    before = load_bench(make_bench(tmp_path))
    assert "readable" not in before.conditions("cli", "count")["arm"]  # absent when unused
    after = load_bench(make_bench(tmp_path, arm_extra='readable = ["tool/config.toml", "tool/lib"]'))
    assert after.conditions("cli", "count")["arm"]["readable"] == ["tool/config.toml", "tool/lib"]  # no folder of this machine
    assert after.fingerprint("cli", "count") != before.fingerprint("cli", "count")


def test_readable_in_another_checkout_gives_the_same_conditions(tmp_path: Path) -> None:
    one = load_bench(make_bench(tmp_path / "one", arm_extra='readable = ["tool/config.toml"]'))
    two = load_bench(make_bench(tmp_path / "two", arm_extra='readable = ["tool/config.toml"]'))
    assert one.fingerprint("cli", "count") == two.fingerprint("cli", "count")


# -- the arm's binaries -----------------------------------------------------------------------------------
def test_a_python_cli_behind_a_wrapper_is_identified_by_its_own_file(tmp_path: Path) -> None:
    path = make_bench(tmp_path)
    before = load_bench(path).conditions("cli", "count")["arm"]["identity"]["invctl"]
    assert set(before) == {"sha256", "files"} and list(before["files"]) == ["tool/cli.py"]  # exits 1 on --version: no version
    edit(tmp_path / "tool" / "cli.py", CLI_PY.format(parts=4))
    after = load_bench(path).conditions("cli", "count")["arm"]["identity"]["invctl"]
    assert after["sha256"] == before["sha256"]  # the wrapper did not change, the CLI did
    assert after["files"]["tool/cli.py"] != before["files"]["tool/cli.py"]
    assert fingerprint(path) != load_bench(path).definition("cli", "count", turn_cap=1).conditions  # bounds still count
    (tmp_path / "tool" / "cli.py").write_text(CLI_PY.format(parts=3))
    assert load_bench(path).conditions("cli", "count")["arm"]["identity"]["invctl"] == before  # content, not time


@pytest.mark.parametrize("wrapper", [NODE_WRAPPER, FOLDER_VARIABLE_WRAPPER], ids=["dirname", "folder-variable"])
def test_a_node_cli_named_from_the_wrappers_folder_is_identified_by_its_own_file(tmp_path: Path, wrapper: str) -> None:
    path = make_bench(tmp_path, wrapper)
    before = fingerprint(path)
    assert list(load_bench(path).conditions("cli", "count")["arm"]["identity"]["invctl"]["files"]) == ["tool/lib/invctl.js"]
    edit(tmp_path / "tool" / "lib" / "invctl.js", 'console.log("parts: 4")\n')
    assert fingerprint(path) != before


def test_the_binary_itself_changing_changes_the_fingerprint(tmp_path: Path) -> None:
    path = make_bench(tmp_path, "#!/bin/sh\necho parts: 3\n")
    before = fingerprint(path)
    edit(tmp_path / "tool" / "bin" / "invctl", "#!/bin/sh\necho parts: 4\n")
    assert fingerprint(path) != before


def test_a_changed_version_output_is_a_new_definition_and_nothing_changed_is_the_same_one(tmp_path: Path) -> None:
    # The version comes from a file the wrapper does not name literally (a package's metadata, say):
    # only the version output tells the two builds apart.
    path = make_bench(tmp_path, '#!/bin/sh\nname=$(printf VERSION)\n[ "$1" = --version ] && exec cat "$(dirname "$0")/../$name"\nexit 1\n')
    (tmp_path / "tool" / "VERSION").write_text("invctl 1.0\n")
    one = fingerprint_in_a_new_process(path)
    assert fingerprint_in_a_new_process(path, PYTEST_XDIST_WORKER="gw1") == one  # two processes, nothing changed
    assert load_bench(path).fingerprint("cli", "count") == load_bench(path).fingerprint("cli", "count") == one  # two loads
    (tmp_path / "tool" / "VERSION").write_text("invctl 1.1\n")
    assert fingerprint_in_a_new_process(path) != one
    assert "files" not in load_bench(path).tool_identities("cli")["invctl"]


def test_the_version_is_the_first_line_without_this_machines_folders(tmp_path: Path) -> None:
    path = make_bench(tmp_path, '#!/bin/sh\necho "invctl 2.0 in $(dirname "$0")"; echo more; touch written-here; exit 0\n')
    identity = load_bench(path).tool_identities("cli")["invctl"]
    assert identity["version"] == "invctl 2.0 in {bench}/tool/bin"
    assert not list(tmp_path.rglob("written-here"))  # it ran in a folder of its own, removed since


def test_a_python_cli_asked_its_version_leaves_no_bytecode_in_the_bench(tmp_path: Path) -> None:
    path = make_bench(tmp_path, '#!/usr/bin/env python3\nimport sys\nsys.path.insert(0, sys.argv[0].rsplit("/", 2)[0])\nimport helper\nprint("invctl 3.0")\n')
    (tmp_path / "tool" / "helper.py").write_text("")
    assert load_bench(path).tool_identities("cli")["invctl"]["version"] == "invctl 3.0"
    assert not list(tmp_path.rglob("__pycache__"))


def test_a_system_binary_is_hashed_through_its_links_and_gives_its_version(tmp_path: Path) -> None:
    (tmp_path / "tool" / "bin").mkdir(parents=True)
    (tmp_path / "tool" / "bin" / "invctl").symlink_to(os.path.realpath("/bin/true"))
    path = tmp_path / "bench.toml"
    path.write_text(BENCH.format(arm_extra=""))
    identity = load_bench(path).tool_identities("cli")["invctl"]
    assert identity["sha256"] == tool_identity.binary_identity("true", "/bin:/usr/bin", tmp_path)["sha256"]
    assert "true" in identity["version"]


def test_a_binary_this_machine_lacks_leaves_its_cells_to_the_newest_fingerprint_in_reports(tmp_path: Path) -> None:
    path = make_bench(tmp_path)
    (tmp_path / "tool" / "bin" / "invctl").unlink()
    bench = load_bench(path)
    assert bench.tool_identities("cli") == {"invctl": {"found": False}}
    assert not bench.binaries_found("cli")
    assert settings_for_bench(bench).definitions == {}  # build_report then reads each cell's newest fingerprint


def test_the_definitions_file_shows_what_each_binary_was(tmp_path: Path) -> None:
    bench = load_bench(make_bench(tmp_path))
    conditions = bench.definitions("cli", "count")["conditions"]
    identity = conditions["arm"]["identity"]["invctl"]
    assert len(identity["sha256"]) == 16 and len(identity["files"]["tool/cli.py"]) == 16
    json.dumps(conditions)  # plain values only: the store writes them as TOML


def test_a_big_binary_is_hashed_once_per_process(tmp_path: Path) -> None:
    big = tmp_path / "tool" / "bin" / "invctl"
    big.parent.mkdir(parents=True)
    big.write_bytes(b"\x7fELF" + bytes(8 << 20))
    big.chmod(0o755)
    tool_identity._hashes.clear()
    tool_identity.binary_identity("invctl", str(big.parent), tmp_path)
    assert len(tool_identity._hashes) == 1
    tool_identity._hashes[next(iter(tool_identity._hashes))] = "remembered"
    assert tool_identity.binary_identity("invctl", str(big.parent), tmp_path)["sha256"] == "remembered"
    edit(big, "#!/bin/sh\n")  # a new build: read again
    assert tool_identity.binary_identity("invctl", str(big.parent), tmp_path)["sha256"] != "remembered"


# -- MCP servers ------------------------------------------------------------------------------------------
MCP_ARM = """
[arms.cli.mcp_servers.inventory]
command = "{python}"
args = ["{bench_root}/tool/server.py", "--port", "{port}"]
"""


def test_an_mcp_servers_own_script_is_identified_by_its_file(tmp_path: Path) -> None:
    path = make_bench(tmp_path, arm_extra=MCP_ARM)
    (tmp_path / "tool" / "server.py").write_text("print('serving')\n")
    (server,) = load_bench(path).conditions("cli", "count")["arm"]["mcp_servers"]
    assert server["args"] == ["{bench_root}/tool/server.py", "--port", "{port}"]  # as written
    assert list(server["files"]) == ["tool/server.py"]  # {python} and {port} are filled per trial: no file here
    before = fingerprint(path)
    edit(tmp_path / "tool" / "server.py", "print('serving v2')\n")
    assert fingerprint(path) != before


# -- another machine --------------------------------------------------------------------------------------
def test_a_worker_with_another_build_of_the_cli_refuses_naming_the_entry(tmp_path: Path) -> None:
    controller = load_bench(make_bench(tmp_path / "controller"))
    same = load_bench(make_bench(tmp_path / "same"))
    other_path = make_bench(tmp_path / "other")
    (tmp_path / "other" / "tool" / "cli.py").write_text(CLI_PY.format(parts=4))
    other = load_bench(other_path)
    plan = cell_definitions(controller, [("cli", "count")], turn_cap=controller.turn_cap, wall_clock_ms=controller.wall_clock_ms)
    bounds = {"turn_cap": controller.turn_cap, "wall_clock_ms": controller.wall_clock_ms}
    assert definition_mismatch(same, plan, **bounds) is None  # another checkout, the same build
    refusal = definition_mismatch(other, plan, **bounds)
    assert refusal is not None and "conditions.arm.identity.invctl.files.tool/cli.py is " in refusal


def test_a_version_that_hangs_is_absent_and_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_identity, "VERSION_TIMEOUT_S", 0.5)
    marker = f"benchcell-hang-{os.getpid()}"
    path = make_bench(tmp_path, f'#!/bin/bash\n(exec -a {marker} sleep 30) &\nexec sleep 30\n')  # a child holds the pipes too
    started = time.monotonic()
    identity = load_bench(path).tool_identities("cli")["invctl"]
    assert "version" not in identity and "sha256" in identity
    assert time.monotonic() - started < 5
    time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1  # none left
