"""The execution audit: strace records of what Bash commands executed, checked against the arm.

Unit tests read crafted strace logs; the rest run the real strace (skipped where it cannot run) and,
end to end, the real CLI against the scripted model with git as the arm's binary: each launcher
found in issue 11 is refused by the guard, and with the guard's rule deliberately off it is caught
by the execution audit and stored invalid with its chain.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from benches import one_trial

from pytest_benchcell.isolation.exec_audit import (
    ExecAudit,
    ExecPolicy,
    ExecRecord,
    Tracer,
    check_records,
    find_tracer,
    is_program,
    learned_helpers,
    parse_strace_log,
)
from pytest_benchcell.isolation.exec_audit.notifier import find_notifier
from pytest_benchcell.isolation.hygiene import curated_bin
from pytest_benchcell.isolation.sandbox import find_sandbox
from pytest_benchcell.isolation.catalog import HARMLESS_UTILITIES

TRACER = find_tracer()
SANDBOX_TOOL = find_sandbox()
needs_strace = pytest.mark.skipif(not TRACER.available, reason=f"the execution audit cannot run here: {TRACER.reason}")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(params=["strace", "notifier"])
def watcher(request: pytest.FixtureRequest) -> str:
    """What watches the commands: strace, or the exec notifier that watches a trial's where it works."""
    if request.param == "notifier" and not TRACER.notifier:
        pytest.skip(f"the exec notifier cannot run here: {find_notifier()[1] or 'it does not watch programs here'}")
    return str(request.param)


def audit_for(folder: Path, watcher: str, **options: object) -> ExecAudit:
    """The audit as a trial's commands get it under this watcher (strace: as the pre-flight's, opens too)."""
    if watcher == "notifier":
        return ExecAudit(folder, TRACER, opens=False, **options)  # type: ignore[arg-type]
    return ExecAudit(folder, dataclasses.replace(TRACER, notifier=""), **options)  # type: ignore[arg-type]


def e2e_with_git(test):  # type: ignore[no-untyped-def]
    """The real CLI end to end, with strace and git."""
    return pytest.mark.e2e(needs_strace(needs_git(test)))


# --- parsing strace's output ----------------------------------------------------------------

LOG = r"""100 execve("/usr/bin/bash", ["bash", "-c", "git x | cat"], 0x7ffd /* 35 vars */) = 0
100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
101 execve("/usr/bin/git", ["git", "x"], 0x55 /* 35 vars */ <unfinished ...>
100 <... clone resumed>, child_tidptr=0x7f) = 101
101 <... execve resumed>)             = 0
101 vfork( <unfinished ...>
102 execve("/bin/sh", ["/bin/sh", "-c", "touch \"a b\"\n\303\251"], 0x56 /* 38 vars */) = 0
101 <... vfork resumed>)             = 102
102 execve("/usr/local/bin/touch", ["touch", "x"], 0x1 /* 1 var */) = -1 ENOENT (No such file or directory)
102 execve("/usr/bin/touch", ["touch", "a b"...], 0x1 /* 1 var */) = 0
100 clone3({flags=CLONE_VM|CLONE_VFORK, exit_signal=SIGCHLD, stack=0x7f, stack_size=0x9000}, 88) = 103
103 execve("/usr/bin/cat", ["cat"], 0x1 /* 1 var */) = 0
"""


def test_records_join_unfinished_calls_and_find_parents_wherever_lines_fall() -> None:
    records = parse_strace_log(LOG, log="x.log")
    assert [(r.path, r.argv) for r in records] == [
        ("/usr/bin/bash", ("bash", "-c", "git x | cat")),
        ("/usr/bin/git", ("git", "x")),
        ("/bin/sh", ("/bin/sh", "-c", 'touch "a b"\né')),  # C escapes and octal UTF-8 decoded
        ("/usr/bin/touch", ("touch", "a b")),  # the failed PATH attempt before it ran nothing
        ("/usr/bin/cat", ("cat",)),
    ]
    # git's line came before its parent's clone returned; cat was started through clone3
    assert [r.parent for r in records] == [None, 0, 1, 2, 0]
    assert records[3].truncated and not records[2].truncated  # strace's "..." after a cut string


def test_an_exec_replaces_the_image_so_the_old_program_is_the_parent() -> None:
    log = (
        '7 execve("/usr/bin/bash", ["bash", "-c", "tracker"], 0x1 /* 1 var */) = 0\n'
        '7 clone(child_stack=NULL, flags=SIGCHLD) = 8\n'
        '8 execve("/trial/bin/tracker", ["tracker"], 0x1 /* 1 var */) = 0\n'
        '8 execve("/usr/bin/python3", ["python3", "/bench/tracker"], 0x1 /* 1 var */) = 0\n'
    )
    records = parse_strace_log(log)
    assert [r.parent for r in records] == [None, 0, 1]


def policy(**helpers: frozenset[str]) -> ExecPolicy:
    return ExecPolicy(
        arm="git",
        shell="/usr/bin/bash",
        binaries={"git": frozenset({"/usr/bin/git"})},
        harmless={"cat": frozenset({"/usr/bin/cat"})},
        helpers=helpers,
    )


def test_foreign_programs_are_leaks_with_their_chain_and_descendants_fold_into_them() -> None:
    leaks = check_records(parse_strace_log(LOG), policy())
    (leak,) = leaks  # touch ran below sh: one leak, sh's
    assert leak.program == "/bin/sh" and leak.argv[2].startswith("touch")
    assert [program for program, _ in leak.chain] == ["/usr/bin/git", "/usr/bin/bash"]
    assert "sh is not a program of arm 'git'" in leak.describe() and "git x" in leak.describe()
    assert leak.as_dict()["chain"][0] == {"program": "/usr/bin/git", "argv": ["git", "x"]}


def test_helpers_are_allowed_only_below_their_binary() -> None:
    assert check_records(parse_strace_log(LOG), policy(git=frozenset({"sh", "touch"}))) == []
    straight = parse_strace_log(
        '1 execve("/usr/bin/bash", ["bash", "-c", "sh"], 0x1 /* 1 var */) = 0\n'
        '1 clone(child_stack=NULL, flags=SIGCHLD) = 2\n'
        '2 execve("/bin/sh", ["sh"], 0x1 /* 1 var */) = 0\n'
    )
    (leak,) = check_records(straight, policy(git=frozenset({"sh"})))  # sh straight from the shell
    assert leak.program == "/bin/sh"


def test_a_copy_with_an_allowed_name_is_not_the_allowed_program() -> None:
    records = [
        ExecRecord(0, 1, "/usr/bin/bash", ("bash", "-c", "./cat"), None),
        ExecRecord(1, 2, "/tmp/cwd/cat", ("./cat",), 0),
    ]
    (leak,) = check_records(records, policy())
    assert "is not the cat the harness put on PATH" in leak.reason


def test_the_clis_own_grep_is_the_grep_utility_where_the_arm_allows_grep() -> None:
    # The CLI's shell snapshot runs `grep` as the CLI's own executable named ugrep (measured, see
    # CLI_EMBEDDED_TOOLS); the same executable under any other name, or where grep is not allowed, leaks.
    cli = "/venv/claude_agent_sdk/_bundled/claude"
    records = [
        ExecRecord(0, 1, "/usr/bin/bash", ("bash", "-c", "git log | grep -c x"), None),
        ExecRecord(1, 2, cli, ("ugrep", "-G", "-c", "x"), 0),
    ]
    with_grep = ExecPolicy("git", "/usr/bin/bash", {"git": frozenset({"/usr/bin/git"})},
                           {"grep": frozenset({"/usr/bin/grep"})}, cli=frozenset({cli}))  # fmt: skip
    assert check_records(records, with_grep) == []
    (leak,) = check_records(records, dataclasses.replace(with_grep, harmless={}))
    assert "claude is not a program of arm 'git'" in leak.reason
    (leak,) = check_records(records, dataclasses.replace(with_grep, cli=frozenset()))  # another claude
    as_itself = [records[0], ExecRecord(1, 2, cli, ("claude", "-p", "x"), 0)]
    (leak,) = check_records(as_itself, with_grep)
    assert leak.program == cli


def test_the_root_must_be_the_audits_shell() -> None:
    records = [ExecRecord(0, 1, "/usr/bin/zsh", ("zsh", "-c", "x"), None)]
    (leak,) = check_records(records, policy())
    assert "did not start in the audit's shell" in leak.reason


def test_the_shell_shows_the_agents_command_not_the_cli_wrapper() -> None:
    wrapped = (
        "source /cfg/shell-snapshots/snapshot-bash-1.sh 2>/dev/null || true && eval 'git x '\"'\"'y'\"'\"'' "
        "< /dev/null && pwd -P >| /tmp/claude-1-cwd"
    )
    records = [
        ExecRecord(0, 1, "/usr/bin/bash", ("/usr/bin/bash", "-c", wrapped), None),
        ExecRecord(1, 2, "/usr/bin/touch", ("touch", "p"), 0),
    ]
    (leak,) = check_records(records, policy())
    assert leak.chain == (("/usr/bin/bash", ("/usr/bin/bash", "-c", "git x 'y'")),)


def test_learned_helpers_count_by_real_path_and_only_below_their_binary() -> None:
    learned = ExecPolicy(
        "tracker", "/usr/bin/bash", {"tracker": frozenset({"/bench/bin/tracker"})}, {},
        learned={"tracker": frozenset({"/usr/bin/readlink", "/opt/python/bin/python3.11"})},
    )  # fmt: skip
    below = [
        ExecRecord(0, 1, "/usr/bin/bash", ("bash", "-c", "tracker x"), None),
        ExecRecord(1, 2, "/bench/bin/tracker", ("tracker", "x"), 0),
        ExecRecord(2, 3, "/usr/bin/readlink", ("readlink", "-f", "x"), 1),
        ExecRecord(3, 2, "/opt/python/bin/python3.11", ("python3", "-c", "print()"), 1),
    ]
    assert check_records(below, learned) == []
    renamed = [*below[:2], ExecRecord(2, 3, "/tmp/cwd/readlink", ("readlink",), 1)]  # same name, another file
    (leak,) = check_records(renamed, learned)
    assert leak.program == "/tmp/cwd/readlink"
    straight = [below[0], ExecRecord(1, 2, "/usr/bin/readlink", ("readlink", "x"), 0)]  # not below tracker
    (leak,) = check_records(straight, learned)
    assert "readlink is not a program of arm 'tracker'" in leak.reason


def test_a_program_is_its_file_under_one_of_its_names(tmp_path: Path) -> None:
    real = tmp_path / "usr" / "mawk"
    real.parent.mkdir()
    real.write_bytes(b"\x7fELF mawk")
    (tmp_path / "awk").symlink_to(real)  # the alternatives link
    os.link(real, tmp_path / "usr" / "awk-hard")
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "awk").write_bytes(real.read_bytes())  # the installation's own copy
    (tmp_path / "core" / "other").write_bytes(b"\x7fELF othr")  # same size, other bytes
    paths = frozenset({str(real)})

    def record(path: Path | str, argv0: str = "awk") -> ExecRecord:
        return ExecRecord(1, 2, str(path), (argv0, "{print}"), 0)

    assert is_program(record(tmp_path / "awk"), "awk", paths)
    assert is_program(record(real, str(real)), "awk", paths)  # the name of its own file
    assert is_program(record(tmp_path / "core" / "awk"), "awk", paths)
    assert not is_program(record(tmp_path / "usr" / "awk-hard"), "awk", paths)  # a name it does not have
    assert is_program(record(tmp_path / "usr" / "awk-hard"), "awk", frozenset({*paths, "/x/awk-hard"}))
    assert not is_program(record(tmp_path / "core" / "other", "other"), "other", paths)
    assert not is_program(record(tmp_path / "awk", "sh"), "awk", paths)  # a multi-call binary's other program
    assert not is_program(record(tmp_path / "nothing"), "awk", paths)


def test_records_above_the_shell_are_the_sandboxs_launchers_only_from_the_top() -> None:
    sandboxed = dataclasses.replace(policy(), wrappers=frozenset({"/usr/bin/nsenter", "/usr/bin/bwrap"}))
    records = [
        ExecRecord(0, 1, "/usr/bin/nsenter", ("nsenter", "--", "bwrap", "bash", "-c", "git x"), None),
        ExecRecord(1, 1, "/usr/bin/bwrap", ("bwrap", "bash", "-c", "git x"), 0),
        ExecRecord(2, 3, "/usr/bin/bash", ("bash", "-c", "git x; bwrap true"), 1),
        ExecRecord(3, 4, "/usr/bin/git", ("git", "x"), 2),
        ExecRecord(4, 5, "/usr/bin/bwrap", ("bwrap", "true"), 2),
    ]
    (leak,) = check_records(records, sandboxed)  # the agent's own bwrap, below the shell
    assert leak.program == "/usr/bin/bwrap" and leak.argv == ("bwrap", "true")
    assert [program for program, _ in leak.chain] == ["/usr/bin/bash"]  # the launchers above are the harness's
    (first, *_) = check_records(records, policy())  # without wrappers: the command did not start in the shell
    assert first.program == "/usr/bin/nsenter" and "did not start in the audit's shell" in first.reason
    not_the_shell = [*records[:2], ExecRecord(2, 3, "/usr/bin/zsh", ("zsh", "-c", "x"), 1)]
    (leak,) = check_records(not_the_shell, sandboxed)
    assert leak.program == "/usr/bin/zsh" and "did not start in the audit's shell" in leak.reason


def test_a_fork_inside_another_pid_namespace_finds_its_parent_through_the_translated_pid() -> None:
    log = (
        '10 execve("/usr/bin/bwrap", ["bwrap", "bash"], 0x1 /* 1 var */) = 0\n'
        "10 clone(child_stack=NULL, flags=CLONE_NEWNS|CLONE_NEWPID|SIGCHLD) = 11\n"
        "11 clone(child_stack=NULL, flags=SIGCHLD) = 2 /* 12 in strace's PID NS */\n"
        '12 execve("/usr/bin/bash", ["bash", "-c", "git x; cat"], 0x1 /* 1 var */) = 0\n'
        "12 clone(child_stack=NULL, flags=SIGCHLD) = 3 /* 13 in strace's PID NS */\n"
        '13 execve("/usr/bin/git", ["git", "x"], 0x1 /* 1 var */) = 0\n'
    )
    assert [record.parent for record in parse_strace_log(log)] == [None, 0, 1]


def test_commands_that_ran_without_a_log_are_reported_missing(tmp_path: Path) -> None:
    audit = ExecAudit(tmp_path, Tracer(True, "/usr/bin/strace", "6.1"))
    (audit.logs / "1-1.log").write_text('1 execve("/usr/bin/bash", ["bash", "-c", "x"], 0x1 /* 1 var */) = 0\n')
    report = audit.report(ExecPolicy("a", audit.shell, {}, {}), commands_ran=3)
    assert (report.commands, report.missing, report.damaged) == (1, 2, int(audit.shell != "/usr/bin/bash"))
    assert any(line.startswith("exec records missing: 2") for line in report.lines())


# --- the real strace --------------------------------------------------------------------------


@needs_strace
def test_the_tracer_is_described_for_the_header() -> None:
    watched = "exec notifier and " if TRACER.notifier else ""
    assert TRACER.describe().startswith(f"on ({watched}strace {TRACER.version}")
    assert Tracer(False, reason="strace is not installed").describe() == "off (strace is not installed)"


@needs_strace
@needs_git
def test_the_prefix_records_a_program_started_by_a_git_alias(tmp_path: Path, watcher: str) -> None:
    audit = audit_for(tmp_path / "audit", watcher)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    command = "git -c alias.z='!touch pwned' z"
    subprocess.run([str(audit.prefix), command], cwd=tmp_path / "repo", check=True)
    (records,) = audit.records()
    names = [Path(record.path).name for record in records]
    assert names[:2] == ["bash", "git"] and "touch" in names
    touch = records[names.index("touch")]
    chain = [Path(records[i].path).name for i in _ancestors(records, touch)]
    assert chain[-2:] == ["git", "bash"]  # git started it (through sh when git used a shell)
    assert (tmp_path / "repo" / "pwned").exists()


def _ancestors(records: list[ExecRecord], record: ExecRecord) -> list[int]:
    found = []
    while record.parent is not None:
        found.append(record.parent)
        record = records[record.parent]
    return found


@needs_strace
def test_a_script_binarys_interpreter_is_learned_by_its_real_path(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    script.chmod(0o755)
    search_path = f"{tmp_path}{os.pathsep}{os.environ['PATH']}"
    learned = learned_helpers("tool", ["tool", "--version"], search_path, TRACER)
    python = subprocess.run(["python3", "-c", "import sys; print(sys.executable)"], env={"PATH": search_path},
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert os.path.realpath(python) in learned  # behind a version manager's shim: and what that ran first
    assert str(script) not in learned
    assert learned_helpers("tool", ["tool"], search_path, Tracer(False, reason="off")) == frozenset()


# --- the real strace, real programs: legitimate work stays valid, launchers are still caught ---------


def audited(
    tmp_path: Path,
    binaries: list[str],
    commands: list[str],
    *,
    cwd: Path | None = None,
    path: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    stdout: int | None = None,
    launcher: tuple[str, ...] = (),
    wrappers: tuple[str, ...] = (),
    watcher: str = "strace",
) -> tuple[ExecAudit, ExecPolicy]:
    """Run commands as a trial would (the audit's prefix, only the curated PATH folder, an empty HOME)
    and build the arm's policy, with no helpers declared."""
    search_path = os.pathsep.join([*path, os.environ["PATH"]])
    bin_dir = curated_bin(tmp_path / "bin", binaries, HARMLESS_UTILITIES, search_path)
    audit = audit_for(tmp_path / "audit", watcher, launcher=launcher, wrappers=wrappers)
    (tmp_path / "home").mkdir(exist_ok=True)
    trial_env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8", **(env or {})}
    for command in commands:
        subprocess.run([str(audit.prefix), command], cwd=cwd or tmp_path, env=trial_env, stdout=stdout,
                       stderr=stdout, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    policy = audit.policy("arm", binaries, {}, bin_dir, search_path, HARMLESS_UTILITIES)
    return audit, policy


def ran(audit: ExecAudit) -> list[str]:
    return [record.path for records in audit.records() for record in records]


def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for key, value in (("user.name", "agent"), ("user.email", "agent@example.com")):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True)
    (repo / "f").write_text("one\n")
    subprocess.run(["git", "add", "f"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=repo, check=True)
    return repo


@needs_strace
@needs_git
def test_git_commit_runs_gits_own_copy_and_stays_valid_with_no_helpers(tmp_path: Path, watcher: str) -> None:
    repo = git_repo(tmp_path)
    audit, policy = audited(tmp_path, ["git"], ["git commit -q --allow-empty -m x", "git log --oneline | wc -l"], cwd=repo, watcher=watcher)
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    assert f"{exec_path}/git" in ran(audit)  # `git maintenance run --auto` through git's own copy
    report = audit.report(policy, commands_ran=2)
    assert (report.leaks, report.missing, report.damaged) == ([], 0, 0)
    assert subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip() == "2"


TRACKER = """#!/bin/sh
# A CLI as many are shipped: a shell wrapper that finds its own folder and starts python3.
here=$(dirname "$(readlink -f "$0")")
exec python3 -c 'import sys; print("tracker", *sys.argv[1:])' "$@"
"""


@needs_strace
def test_a_sh_wrapper_cli_over_a_version_manager_python_stays_valid_with_no_helpers(tmp_path: Path, watcher: str) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tracker").write_text(TRACKER)
    (tools / "tracker").chmod(0o755)
    audit, policy = audited(tmp_path, ["tracker"], ["tracker list", "tracker show 1 | wc -l"], path=(str(tools),), watcher=watcher)
    report = audit.report(policy, commands_ran=2)
    assert (report.leaks, report.damaged) == ([], 0)
    names = {Path(path).name for path in ran(audit)}
    assert {"tracker", "readlink", "dirname"} <= names and any(name.startswith("python3") for name in names)
    shim = shutil.which("python3")
    if shim is not None and open(shim, "rb").read(2) == b"#!":  # a version manager's shim (pyenv here)
        assert shim in ran(audit) and len(ran(audit)) > 10
    # What made it valid is what the binary's own start-up was seen to run:
    assert check_records(audit.records()[0], dataclasses.replace(policy, learned={})) != []


QUIET_ON_VERSION = """#!/bin/sh
# Prints its version without starting anything; its real work starts readlink.
if [ "$1" = --version ]; then echo 1.0; else readlink -f "$0"; fi
"""


@needs_strace
def test_a_declared_probe_teaches_what_version_does_not_show(tmp_path: Path, watcher: str) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "quiet").write_text(QUIET_ON_VERSION)
    (tools / "quiet").chmod(0o755)
    audit, by_version = audited(tmp_path, ["quiet"], ["quiet run"], path=(str(tools),), watcher=watcher)
    (leak,) = audit.report(by_version, commands_ran=1).leaks
    assert Path(leak.program).name == "readlink"
    probed = audit.policy("arm", ["quiet"], {}, tmp_path / "bin", f"{tools}{os.pathsep}{os.environ['PATH']}",
                          HARMLESS_UTILITIES, probes={"quiet": "quiet --help"})  # fmt: skip
    assert audit.report(probed, commands_ran=1).leaks == []


@needs_strace
@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_awk_through_the_alternatives_link_stays_valid(tmp_path: Path, watcher: str) -> None:
    audit, policy = audited(tmp_path, ["awk"], ["printf 'a b\\n' | awk '{print $2}'", "awk 'BEGIN {print 1}'"], watcher=watcher)
    assert os.path.realpath(shutil.which("awk") or "") in ran(audit)  # mawk or gawk, by its own name
    report = audit.report(policy, commands_ran=2)
    assert (report.leaks, report.damaged) == ([], 0)


@needs_strace
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
def test_npm_a_node_script_stays_valid(tmp_path: Path, watcher: str) -> None:
    (tmp_path / "work").mkdir()
    audit, policy = audited(tmp_path, ["npm"], ["npm --version", "npm ls"], cwd=tmp_path / "work", watcher=watcher)
    assert any(Path(path).name == "node" for path in ran(audit))
    report = audit.report(policy, commands_ran=2)
    assert (report.leaks, report.damaged) == ([], 0)


LAUNCHER_CASES = {
    "alias": "git -c alias.z='!touch pwned-alias' z",
    "extdiff": "GIT_EXTERNAL_DIFF='touch pwned-extdiff' git --no-pager diff",
    "pager": "GIT_PAGER='touch pwned-pager' git -p log",
    "core.pager": "git -c core.pager='sh -c \"touch pwned-core\"' -p log",
}


@needs_strace
@needs_git
def test_a_git_alias_pager_or_external_diff_running_sh_or_touch_is_still_caught(tmp_path: Path, watcher: str) -> None:
    repo = git_repo(tmp_path)
    (repo / "f").write_text("two\n")  # a change for the external diff
    primary, secondary = os.openpty()  # git starts a pager only on a terminal
    try:
        audit, policy = audited(tmp_path, ["git"], list(LAUNCHER_CASES.values()), cwd=repo, stdout=secondary, watcher=watcher)
    finally:
        os.close(primary)
        os.close(secondary)
    report = audit.report(policy, commands_ran=len(LAUNCHER_CASES))
    by_command = {leak.chain[-1][1][-1]: leak for leak in report.leaks}
    assert set(by_command) == set(LAUNCHER_CASES.values())
    for case, command in LAUNCHER_CASES.items():
        leak = by_command[command]
        assert Path(leak.program).name in {"sh", "dash", "bash", "touch"}, case
        assert any(Path(program).name == "git" for program, _ in leak.chain), case
        assert (repo / f"pwned-{case.replace('core.', 'core')}").exists() or case == "core.pager"


SANDBOX = (shutil.which("nsenter") or "nsenter", "--net=/proc/self/ns/net", "--", shutil.which("bwrap") or "bwrap",
           "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--die-with-parent")  # fmt: skip
needs_sandbox = pytest.mark.skipif(
    not (shutil.which("bwrap") and shutil.which("nsenter")), reason="needs bwrap and nsenter (the sandbox launcher)"
)


@needs_strace
@needs_git
@needs_sandbox
def test_a_sandbox_launcher_between_strace_and_the_shell_is_the_harnesss_own(tmp_path: Path, watcher: str) -> None:
    audit, policy = audited(tmp_path, ["git"], ["git --version", "git --version | wc -l; git --version"],
                            launcher=SANDBOX, wrappers=("nsenter", "bwrap"), watcher=watcher)  # fmt: skip
    if not TRACER.pidns_translation:
        pytest.skip("this strace cannot translate pids across namespaces (--pidns-translation)")
    first, second = audit.records()
    assert [Path(record.path).name for record in first] == ["nsenter", "bwrap", "bash", "git", "git"]  # wrapper, git
    assert [Path(record.path).name for record in second[:3]] == ["nsenter", "bwrap", "bash"]
    # bash's forks in bwrap's own pid namespace are tied to it: git's wrappers and wc are its children
    assert sorted(Path(record.path).name for record in second if record.parent == 2) == ["git", "git", "wc"]
    report = audit.report(policy, commands_ran=2)
    assert (report.leaks, report.missing, report.damaged) == ([], 0, 0)
    bare = audit.report(dataclasses.replace(policy, wrappers=frozenset()), commands_ran=2)
    assert bare.damaged == 2 and all("did not start in the audit's shell" in leak.reason for leak in bare.leaks)


@needs_strace
@needs_sandbox
def test_a_program_run_below_the_sandboxed_shell_is_judged_even_when_it_is_a_launcher(tmp_path: Path, watcher: str) -> None:
    audit, policy = audited(tmp_path, [], [f"{SANDBOX[0]} --version"], launcher=SANDBOX, wrappers=("nsenter", "bwrap"), watcher=watcher)
    (leak,) = audit.report(policy, commands_ran=1).leaks
    assert Path(leak.program).name == "nsenter"
    assert [Path(p).name for p, _ in leak.chain] == ["bash"]  # the chain ends at the command's shell


# --- end to end: the real CLI, scripted model, git as the arm's binary --------------------------

BENCH = """
[bench]
name = "exec-audit"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 30
wall_clock_ms = 60000
sandbox = "off"               # the audit alone: what it must catch where the sandbox does not run

[arms.git]                    # the guard knows git's launchers
tools = ["Bash"]
binaries = ["git"]
helpers = { git = ["git"] }   # git runs its own git-core copy (git commit -> git maintenance)
[arms.git.arguments.git]
deny_subcommands = ["config", "difftool"]
deny_options = ["-c", "--config-env", "--exec-path", "--output", "-x", "--extcmd", "--ext-diff"]

[arms.git-open]               # the guard's git rule deliberately off
tools = ["Bash"]
binaries = ["git"]
helpers = { git = ["git"] }

[arms.guard-off]              # the whole in-band guard deliberately off (testing only)
tools = ["Bash"]
binaries = ["git"]
helpers = { git = ["git"] }
guard_exempt = ["*"]

[arms.tamper]                 # the guard off, to let a command truncate the audit's logs
tools = ["Bash"]
binaries = ["git"]
guard_exempt = ["*"]

[arms.legit]                  # no helpers declared: what the binaries start is learned or is theirs
tools = ["Bash"]
binaries = ["greet", "git", "tracker"]
path = ["bin"]

[arms.tallied]                # a script that counts the probes of its start-up
tools = ["Bash"]
binaries = ["tally"]
path = ["bin"]

[tasks.work]
tier = "read"
intent = "Do the work."
required_facts = ["done"]
"""

# The CLI's shell snapshot, sourced before every command (the prefix unsets CLAUDE_CONFIG_DIR, but
# the trial's folder holds the agent's working directory, the CLI's config and the audit's logs).
SNAPSHOT = '"$(ls ../claude-config/shell-snapshots/*)"'
GIT_RULE_CASES = {  # refused by the arm's argument rule for git
    "alias": "git -c alias.z='!touch pwned-alias' z",
    "config": "git config alias.x '!touch pwned-config'",
    "difftool": "git difftool -y -x 'touch pwned-difftool' HEAD",
    "ssh": "git -c core.sshCommand='touch pwned-ssh' fetch ssh://127.0.0.1/x",
    "output": f"git diff --output {SNAPSHOT}",
}
BUILT_IN_CASES = {  # refused by the guard's own rules (variables naming programs, write targets)
    "extdiff": "GIT_EXTERNAL_DIFF='touch pwned-extdiff' git --no-pager diff",
    "uniq": f"printf '/usr/bin/touch pwned-uniq\\n' > payload.txt && uniq payload.txt {SNAPSHOT}",
}
# Truncate every log of the execution audit (next to the agent's working directory).
TAMPER = 'for f in ../exec-audit/logs/*.log; do : > "$f"; done'
LEGIT = [
    "greet world | tr a-z A-Z | wc -c",
    "for name in a b; do greet \"$name\"; done | sort | uniq -c",
    "greet --stdin <<'EOF'\nfrom a here-document\nEOF",
    "git status --short && git log --oneline | head -1",
    "git add -A && git commit -q -m 'second' && git diff HEAD~1 --stat",
    "git log --oneline | grep -c second",  # grep runs as the CLI's own ugrep (snapshot function)
    "tracker list --open | wc -l",  # a #!/bin/sh CLI running readlink and python3 (a pyenv shim here)
]

CONFTEST = f"""
import subprocess
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

GIT_RULE_CASES = {GIT_RULE_CASES!r}
BUILT_IN_CASES = {BUILT_IN_CASES!r}
LEGIT = {LEGIT!r}
TAMPER = {TAMPER!r}

def pytest_benchcell_provision(trial):
    cwd = trial.agent_cwd
    def git(*args):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)
    git("init", "-q")
    git("config", "user.email", "agent@example.com")
    git("config", "user.name", "agent")
    (cwd / "f").write_text("one\\n")
    git("add", "f")
    git("commit", "-q", "-m", "init")
    # A change whose diff line, sourced as shell, runs a program: the snapshot payload of issue 11.
    (cwd / "f").write_text("x;/usr/bin/touch pwned-output\\n")
    return Environment(data=cwd)

def pytest_benchcell_script(trial, environment):
    def sh(command):
        return ToolUse("Bash", {{"command": command}})
    if trial.arm == "legit":
        steps = [sh(command) for command in LEGIT]
    elif trial.arm == "guard-off":
        steps = [sh(command) for command in BUILT_IN_CASES.values()] + [sh("git status --short")]
    elif trial.arm == "tamper":
        steps = [sh("git status --short"), sh(TAMPER)]
    elif trial.arm == "tallied":
        steps = [sh("tally one")]
    else:
        cases = dict(GIT_RULE_CASES, **(BUILT_IN_CASES if trial.arm == "git" else {{}}))
        steps = [sh(command) for command in cases.values()] + [sh("git x"), sh("git status --short")]
    return steps + [Answer("done")]
"""

GREET = '''#!/usr/bin/env python3
import sys
text = sys.stdin.read().strip() if "--stdin" in sys.argv else " ".join(sys.argv[1:])
print("hello " + text)
'''


@pytest.fixture()
def bench(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", bench=textwrap.dedent(BENCH))
    pytester.makeconftest(CONFTEST)
    greet = pytester.path / "bin" / "greet"
    greet.parent.mkdir()
    greet.write_text(GREET)
    greet.chmod(0o755)
    (greet.parent / "tracker").write_text(TRACKER)
    (greet.parent / "tracker").chmod(0o755)
    (greet.parent / "tally").write_text(TALLY.replace("MARKER", str(probe_marker(pytester))))
    (greet.parent / "tally").chmod(0o755)
    return pytester


TALLY = """#!/bin/sh
# Writes a line each time the audit's probe (in a benchcell-probe- folder) starts it; python3 does the work.
case "$PWD" in */benchcell-probe-*) echo probe >> MARKER ;; esac
exec python3 -c 'import sys; print("tally", *sys.argv[1:])' "$@"
"""


def probe_marker(pytester: pytest.Pytester) -> Path:
    """Where `tally` counts its probes: beside the bench folder (a file in it would change the bench)."""
    return pytester.path.parent / f"{pytester.path.name}-probes.txt"


def run(pytester: pytest.Pytester, arm: str) -> tuple[pytest.RunResult, dict]:
    return one_trial(pytester, arm, "work")


def command_of(leak: dict) -> str:
    """The agent's Bash command at the root of a leak's chain."""
    return leak["chain"][-1]["argv"][-1]



@e2e_with_git
def test_git_launchers_are_refused_by_the_guard_and_nothing_foreign_runs(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "git")
    result.stdout.fnmatch_lines([f"benchcell: execution audit on (*strace {TRACER.version}*"])
    calls = {call["input"]["command"]: call for call in sample["tool_calls"]}
    for command in {**GIT_RULE_CASES, **BUILT_IN_CASES}.values():
        assert calls[command]["allowed"] is False and calls[command]["reason"], command
    assert "GIT_EXTERNAL_DIFF may not be changed" in calls[BUILT_IN_CASES["extdiff"]]["reason"]
    assert "uniq's output operand" in calls[BUILT_IN_CASES["uniq"]]["reason"]
    assert calls["git status --short"]["allowed"] is True
    assert sample["exec_audit"]["leaks"] == [] and sample["exec_audit"]["commands"] == 2
    assert (sample["status"], sample["outcome"]) == ("scored", "pass")
    assert sample["provenance"]["exec_audit"] == TRACER.describe()


@e2e_with_git
def test_with_the_git_rule_off_the_execution_audit_catches_every_launcher(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "git-open")
    result.assert_outcomes()  # invalid: neither passed nor failed
    assert sample["status"] == "invalid" and sample["outcome"] is None
    assert all(call["allowed"] for call in sample["tool_calls"])  # the guard let everything through
    leaks = sample["exec_audit"]["leaks"]
    by_command = {command_of(leak): leak for leak in leaks}
    for case in ("alias", "difftool", "ssh"):
        leak = by_command[GIT_RULE_CASES[case]]
        assert any(Path(above["program"]).name == "git" for above in leak["chain"]), leak
    assert "pwned-alias" in " ".join(by_command[GIT_RULE_CASES["alias"]]["argv"])  # sh -c 'touch pwned-alias'
    assert "pwned-ssh" in " ".join(by_command[GIT_RULE_CASES["ssh"]]["argv"])
    # difftool's own helper script is not declared for this arm: caught before it reaches -x's program
    assert Path(by_command[GIT_RULE_CASES["difftool"]]["program"]).name == "git-difftool--helper"
    # `git config` only wrote the alias; the next git call ran it
    assert "pwned-config" in " ".join(by_command["git x"]["argv"])
    # `git diff --output` overwrote the shell snapshot; the CLI sourced it before the next command
    snapshot = by_command["git status --short"]
    assert snapshot["program"] == "/usr/bin/touch" and snapshot["argv"] == ["/usr/bin/touch", "pwned-output"]
    assert [Path(above["program"]).name for above in snapshot["chain"]] == ["bash"]
    assert len(sample["leaks"]) == len(leaks) and all(line.startswith("exec ") for line in sample["leaks"])


@e2e_with_git
def test_with_the_guard_off_variables_and_writes_are_caught_by_the_execution_audit(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "guard-off")
    assert sample["status"] == "invalid"
    by_command = {command_of(leak): leak for leak in sample["exec_audit"]["leaks"]}
    extdiff = by_command[BUILT_IN_CASES["extdiff"]]
    assert "pwned-extdiff" in " ".join(extdiff["argv"])
    assert [Path(above["program"]).name for above in extdiff["chain"]][-1] == "bash"
    assert any(Path(above["program"]).name == "git" for above in extdiff["chain"])
    uniq = by_command["git status --short"]  # the overwritten snapshot ran on the next command
    assert uniq["argv"] == ["/usr/bin/touch", "pwned-uniq"]
    # The tool audit, re-reading the commands, flags them too: two independent layers.
    assert any(line.startswith("Bash ") for line in sample["leaks"])


@e2e_with_git
def test_truncated_logs_make_the_trial_invalid(bench: pytest.Pytester) -> None:
    _, sample = run(bench, "tamper")
    assert sample["status"] == "invalid"
    # The last command truncated every log, its own included: each is reported as damaged.
    assert sample["exec_audit"]["damaged"] == sample["exec_audit"]["commands"] == 2
    assert any(line.startswith("exec records damaged: 2") for line in sample["leaks"])


@pytest.mark.slow
@e2e_with_git
@pytest.mark.parametrize("sandbox", ["off", "required"])
def test_legitimate_commands_stay_valid_under_the_execution_audit(bench: pytest.Pytester, sandbox: str) -> None:
    if sandbox == "required" and not SANDBOX_TOOL.available:
        pytest.skip(f"the sandbox cannot run here: {SANDBOX_TOOL.reason}")
    bench.makefile(".toml", bench=textwrap.dedent(BENCH).replace('sandbox = "off"', f'sandbox = "{sandbox}"'))
    result, sample = run(bench, "legit")
    # In the sandbox, strace's log starts with its launchers (nsenter, bwrap), the harness's own.
    assert sample["provenance"]["sandbox"].startswith("on" if sandbox == "required" else "off")
    result.assert_outcomes(passed=1)
    audit = sample["exec_audit"]
    assert audit["leaks"] == [] and audit["commands"] == len(LEGIT)
    assert (audit["missing"], audit["damaged"]) == (0, 0)
    assert audit["programs"] > 3 * len(LEGIT)  # interpreters, utilities, git's own helpers were seen
    outputs = [call["output"] for call in sample["tool_calls"]]
    assert outputs[0].strip() == "12" and "hello from a here-document" in outputs[2]
    assert "1 file changed" in outputs[4]  # the commit ran (and with it `git maintenance run --auto`)
    assert outputs[-1].strip() == "1"  # tracker's one line


@pytest.mark.e2e
@needs_strace
def test_xdist_workers_take_what_the_controllers_probe_learned(bench: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = bench.runpytest("--bench-arm", "tallied", "--bench-task", "work", "--bench-scripted", "--bench-trials", "4",
                             "-n", "2", "-p", "no:randomly")  # fmt: skip
    result.assert_outcomes(passed=4)
    samples = [json.loads(line) for line in (bench.path / "results" / "scripted" / "tallied" / "work.jsonl").read_text().splitlines()]
    assert [(sample["status"], sample["leaks"]) for sample in samples] == [("scored", [])] * 4  # python3: learned
    assert probe_marker(bench).read_text().splitlines() == ["probe"]  # once, by the controller, for both workers
