"""The execution audit: strace records of what Bash commands executed, checked against the arm.

Unit tests read crafted strace logs; the rest run the real strace (skipped where it cannot run) and,
end to end, the real CLI against the scripted model with git as the arm's binary: each launcher
found in issue 11 is refused by the guard, and with the guard's rule deliberately off it is caught
by the execution audit and stored invalid with its chain.
"""

from __future__ import annotations

import dataclasses

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
    interpreter_helpers,
    parse_strace_log,
    script_interpreter,
)

TRACER = find_tracer()
needs_strace = pytest.mark.skipif(not TRACER.available, reason=f"the execution audit cannot run here: {TRACER.reason}")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


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


def test_script_interpreters_are_read_from_the_shebang(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env -S python3 -u\nprint(1)\n")
    assert script_interpreter(str(script)) == ("/usr/bin/env", "-S", "python3", "-u")
    off = Tracer(False, reason="off")
    assert interpreter_helpers(str(script), os.environ["PATH"], off) == {"env", "python3"}
    assert script_interpreter("/nonexistent") == ()


def test_commands_that_ran_without_a_log_are_reported_missing(tmp_path: Path) -> None:
    audit = ExecAudit(tmp_path, Tracer(True, "/usr/bin/strace", "6.1"))
    (audit.logs / "1-1.log").write_text('1 execve("/usr/bin/bash", ["bash", "-c", "x"], 0x1 /* 1 var */) = 0\n')
    report = audit.report(ExecPolicy("a", audit.shell, {}, {}), commands_ran=3)
    assert (report.commands, report.missing, report.damaged) == (1, 2, int(audit.shell != "/usr/bin/bash"))
    assert any(line.startswith("exec records missing: 2") for line in report.lines())


# --- the real strace --------------------------------------------------------------------------


@needs_strace
def test_the_tracer_is_described_for_the_header() -> None:
    assert TRACER.describe().startswith(f"on (strace {TRACER.version}")
    assert Tracer(False, reason="strace is not installed").describe() == "off (strace is not installed)"


@needs_strace
@needs_git
def test_the_prefix_records_a_program_started_by_a_git_alias(tmp_path: Path) -> None:
    audit = ExecAudit(tmp_path / "audit", TRACER)
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
def test_a_pyenv_or_plain_python_interpreter_is_learned_for_a_script_binary(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    learned = interpreter_helpers(str(script), os.environ["PATH"], TRACER)
    assert {"env", "python3"} <= learned  # plus whatever a version manager's shim starts first


# --- end to end: the real CLI, scripted model, git as the arm's binary --------------------------

BENCH = """
[bench]
name = "exec-audit"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 30
wall_clock_ms = 60000

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

[arms.legit]
tools = ["Bash"]
binaries = ["greet", "git"]
path = ["bin"]
helpers = { git = ["git"] }

[tasks.work]
tier = "read"
intent = "Do the work."
required_facts = ["done"]
"""

SNAPSHOT = '"$(ls $CLAUDE_CONFIG_DIR/shell-snapshots/*)"'  # the CLI's shell snapshot, sourced before every command
GIT_RULE_CASES = {  # refused by the arm's argument rule for git
    "alias": "git -c alias.z='!touch pwned-alias' z",
    "config": "git config alias.x '!touch pwned-config'",
    "difftool": "git difftool -y -x 'touch pwned-difftool' HEAD",
    "ssh": "git -c core.sshCommand='touch pwned-ssh' fetch ssh://127.0.0.1/x",
    "output": f"git diff --output {SNAPSHOT}",
}
BUILT_IN_CASES = {  # refused by the guard's own rules (variables naming programs, write targets)
    "extdiff": "GIT_EXTERNAL_DIFF='touch pwned-extdiff' git diff",
    "uniq": f"printf '/usr/bin/touch pwned-uniq\\n' > payload.txt && uniq payload.txt {SNAPSHOT}",
}
# Truncate every log of the execution audit (the prefix's path is in the environment).
TAMPER = 'for f in $(dirname $CLAUDE_CODE_SHELL_PREFIX)/logs/*.log; do : > "$f"; done'
LEGIT = [
    "greet world | tr a-z A-Z | wc -c",
    "for name in a b; do greet \"$name\"; done | sort | uniq -c",
    "greet --stdin <<'EOF'\nfrom a here-document\nEOF",
    "git status --short && git log --oneline | head -1",
    "git add -A && git commit -q -m 'second' && git diff HEAD~1 --stat",
    "git log --oneline | grep -c second",  # grep runs as the CLI's own ugrep (snapshot function)
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
    return pytester


def run(pytester: pytest.Pytester, arm: str) -> tuple[pytest.RunResult, dict]:
    return one_trial(pytester, arm, "work")


def command_of(leak: dict) -> str:
    """The agent's Bash command at the root of a leak's chain."""
    return leak["chain"][-1]["argv"][-1]



@e2e_with_git
def test_git_launchers_are_refused_by_the_guard_and_nothing_foreign_runs(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "git")
    result.stdout.fnmatch_lines([f"benchcell: execution audit on (strace {TRACER.version}*"])
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


@e2e_with_git
def test_legitimate_commands_stay_valid_under_the_execution_audit(bench: pytest.Pytester) -> None:
    result, sample = run(bench, "legit")
    result.assert_outcomes(passed=1)
    audit = sample["exec_audit"]
    assert audit["leaks"] == [] and audit["commands"] == len(LEGIT)
    assert (audit["missing"], audit["damaged"]) == (0, 0)
    assert audit["programs"] > 3 * len(LEGIT)  # interpreters, utilities, git's own helpers were seen
    outputs = [call["output"] for call in sample["tool_calls"]]
    assert outputs[0].strip() == "12" and "hello from a here-document" in outputs[2]
