"""Tests for pytest_benchcell.isolation: the corpora in tests/data plus focused checks."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pytest_benchcell.isolation import (
    HARMLESS_UTILITIES,
    LAUNCHERS,
    SHELL_BUILTINS_ALLOWED,
    ArgumentRule,
    ArmRules,
    Decision,
    GuardParseError,
    SubcommandRule,
    check_bash_command,
    check_tool_call,
    commands_in,
)

DATA = Path(__file__).parent / "data"

# The folders a trial lets command lines write into: the agent's working directory and the
# environment's workdir. The CLI's own config folder is a sibling of both, as in a real trial.
CWD, ENV_DIR, CONFIG_DIR = "/work/trial/cwd", "/work/trial/environment", "/work/trial/claude-config"
ROOTS = (CWD, ENV_DIR)

CLI = ArmRules(
    arm="cli",
    binaries=frozenset({"tracker"}),
    builtin_tools=frozenset({"Bash"}),
    mcp_servers=frozenset(),
    subcommand_rules=(SubcommandRule("tracker", ("admin",)),),
    write_roots=ROOTS,
)
GIT_RULE = ArgumentRule(
    "git",
    deny_subcommands=("config", "difftool", "mergetool", "submodule", "filter-branch", "bisect"),
    deny_options=("-c", "--config-env", "--exec-path", "--output", "-x", "--extcmd", "--ext-diff", "--upload-pack",
                  "--receive-pack", "--exec", "--tool", "-C", "--git-dir", "--work-tree"),
)  # fmt: skip
ARMS: dict[str, ArmRules] = {
    "cli": CLI,
    "launchers": ArmRules(
        arm="launchers",
        binaries=frozenset({"tracker"}) | LAUNCHERS,
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        subcommand_rules=(SubcommandRule("tracker", ("admin",)),),
        write_roots=ROOTS,
    ),
    "tea": ArmRules(
        arm="tea",
        binaries=frozenset({"tea"}),
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        subcommand_rules=(SubcommandRule("tea", ("api",)),),
        write_roots=ROOTS,
    ),
    "raw": ArmRules(
        arm="raw",
        binaries=frozenset({"curl"}),
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        argument_rules=(ArgumentRule("curl", allow_urls=("http://localhost:3000/", "http://127.0.0.1:3000/")),),
        write_roots=ROOTS,
    ),
    "git": ArmRules(
        arm="git",
        binaries=frozenset({"git", "tracker"}),
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        argument_rules=(GIT_RULE,),
        write_roots=ROOTS,
    ),
    "mcp": ArmRules(
        arm="mcp", binaries=frozenset(), builtin_tools=frozenset(), mcp_servers=frozenset({"tracker"})
    ),
    "build": ArmRules(
        arm="build",
        binaries=frozenset({"make", "tar", "npm"}),
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        argument_rules=(
            ArgumentRule("tar", deny_options=("-C", "--directory")),
            ArgumentRule("npm", deny_subcommands=("outdated", "exec", "install-test")),
        ),
        write_roots=ROOTS,
    ),
    "api": ArmRules(
        arm="api",
        binaries=frozenset({"curl"}),
        builtin_tools=frozenset({"Bash"}),
        mcp_servers=frozenset(),
        argument_rules=(ArgumentRule("curl", deny_options=("-K", "--config"), allow_urls=("http://127.0.0.1:3000/",)),),
        write_roots=ROOTS,
        variables={"SERVICE_URL": "http://127.0.0.1:3000", "TOKEN": "tok"},
    ),
}


def load_cases(name: str) -> list[Any]:
    with (DATA / name).open("rb") as handle:
        cases = tomllib.load(handle)["case"]
    params = []
    for case in cases:
        case_id = case.get("id") or f"{case.get('arm', 'cli')}: {case['command']}"
        params.append(pytest.param(case, id=case_id.replace("\n", "\\n")[:90]))
    return params


EVASIONS = load_cases("guard_evasions.toml")
LEGITIMATE = load_cases("guard_legitimate.toml")


def test_corpora_are_large_enough() -> None:
    assert len(EVASIONS) >= 60
    assert len(LEGITIMATE) >= 30
    for param in EVASIONS + LEGITIMATE:
        case = param.values[0]
        assert case["command"] and case["why"], case
        assert case.get("arm", "cli") in ARMS, case


@pytest.mark.parametrize("case", EVASIONS)
def test_evasion_is_refused(case: dict[str, Any]) -> None:
    rules = ARMS[case.get("arm", "cli")]
    decision = check_bash_command(case["command"], rules)
    assert not decision.allowed, f"allowed, but must be refused: {case['why']}"
    assert decision.reason.strip(), "a refusal needs a reason the agent can act on"
    for fragment in case.get("reason_has", []):
        assert fragment in decision.reason
    # The same decision through the tool-call entry point.
    via_tool = check_tool_call("Bash", {"command": case["command"]}, rules)
    assert via_tool == decision


@pytest.mark.parametrize("case", LEGITIMATE)
def test_legitimate_command_is_allowed(case: dict[str, Any]) -> None:
    rules = ARMS[case.get("arm", "cli")]
    decision = check_bash_command(case["command"], rules)
    assert decision == Decision(True, ""), f"refused ({decision.reason}) but legitimate: {case['why']}"


# --- check_tool_call ------------------------------------------------------------------------


def test_builtin_tools_need_declaring() -> None:
    assert not check_tool_call("Read", {"file_path": "/etc/passwd"}, CLI).allowed
    with_read = ArmRules("cli", CLI.binaries, frozenset({"Bash", "Read"}), frozenset())
    assert check_tool_call("Read", {"file_path": "x"}, with_read).allowed
    for tool in ("Write", "Edit", "Glob", "Grep", "WebFetch", "WebSearch", "Task", "Agent", "NotebookEdit",
                 "TodoWrite", "Skill"):  # fmt: skip
        decision = check_tool_call(tool, {}, with_read)
        assert not decision.allowed
        assert tool in decision.reason and "'cli'" in decision.reason
        assert "Read" in decision.reason  # it says what the arm may use instead


def test_bash_companions_come_with_bash() -> None:
    assert check_tool_call("BashOutput", {"bash_id": "1"}, CLI).allowed
    assert check_tool_call("KillShell", {"shell_id": "1"}, CLI).allowed
    assert not check_tool_call("BashOutput", {"bash_id": "1"}, ARMS["mcp"]).allowed


def test_mcp_tools_need_their_server() -> None:
    mcp = ARMS["mcp"]
    assert check_tool_call("mcp__tracker__list_issues", {}, mcp).allowed
    assert not check_tool_call("mcp__other__list_issues", {}, mcp).allowed
    assert not check_tool_call("mcp__tracker__list_issues", {}, CLI).allowed
    assert not check_tool_call("mcp__trackerx__list", {}, mcp).allowed  # prefix of a server name


def test_mcp_server_names_with_underscores() -> None:
    rules = ArmRules("m", frozenset(), frozenset(), frozenset({"my_server"}))
    assert check_tool_call("mcp__my_server__do_it", {}, rules).allowed
    assert not check_tool_call("mcp__my__server__do_it", {}, rules).allowed


def test_mcp_only_arm_has_no_shell() -> None:
    decision = check_tool_call("Bash", {"command": "echo hi"}, ARMS["mcp"])
    assert not decision.allowed
    assert "no shell" in decision.reason
    assert "mcp__tracker__*" in decision.reason


def test_bash_without_a_command_string_is_refused() -> None:
    assert not check_tool_call("Bash", {}, CLI).allowed
    assert not check_tool_call("Bash", {"command": 3}, CLI).allowed


# --- reasons --------------------------------------------------------------------------------


def test_reason_names_the_program_the_arm_and_the_alternatives() -> None:
    reason = check_bash_command("tracker list | curl -d @- http://x", CLI).reason
    expected = "curl is not available in arm 'cli': this arm may run tracker and common text utilities ("
    assert reason.startswith(expected)
    assert "jq" in reason and "grep" in reason


def test_reason_for_path_qualified_own_binary_says_call_it_by_name() -> None:
    decision = check_bash_command("/usr/local/bin/tracker list", CLI)
    assert not decision.allowed
    assert "call programs by name" in decision.reason and "`tracker ...`" in decision.reason
    assert not check_bash_command("./tracker list", CLI).allowed


def test_reason_for_a_variable_program_name() -> None:
    reason = check_bash_command('"$tool" list', CLI).reason
    assert "$tool" in reason and "literally" in reason


def test_reason_for_unparsable_input_is_actionable() -> None:
    reason = check_bash_command("case $x in a) tracker list;; esac", CLI).reason
    assert reason.startswith("could not parse this command")
    assert "if/elif" in reason
    assert "[ ... ]" in check_bash_command("[[ -n $x ]] && tracker list", CLI).reason


def test_reason_for_a_wrapped_command_names_its_launcher() -> None:
    reason = check_bash_command("timeout 5 curl http://x", ARMS["launchers"]).reason
    assert reason.startswith("curl (started by timeout) is not available in arm 'launchers'")


# --- subcommand rules -----------------------------------------------------------------------


def test_subcommand_rule() -> None:
    assert not check_bash_command("tracker admin reset", CLI).allowed
    assert check_bash_command("tracker list --query admin", CLI).allowed
    assert check_bash_command("tracker -- list admin", CLI).allowed
    assert not check_bash_command("tracker -- admin", CLI).allowed
    assert not check_bash_command("tracker --verbose=2 admin", CLI).allowed
    reason = check_bash_command("tracker admin", CLI).reason
    assert "`tracker admin`" in reason and "excluded" in reason


def test_subcommand_rule_applies_only_to_its_binary() -> None:
    rules = ArmRules("two", frozenset({"tracker", "tea"}), frozenset({"Bash"}), frozenset(),
                     (SubcommandRule("tea", ("api",)),))  # fmt: skip
    assert check_bash_command("tracker api", rules).allowed
    assert not check_bash_command("tea api /x", rules).allowed


# --- arm configuration ----------------------------------------------------------------------


def test_harmless_set_is_per_arm() -> None:
    strict = ArmRules(
        "strict", frozenset({"tracker"}), frozenset({"Bash"}), frozenset(), harmless=frozenset()
    )
    assert not check_bash_command("tracker list | jq .", strict).allowed
    assert check_bash_command("tracker list && echo done", strict).allowed  # echo is a builtin
    assert check_bash_command("tracker list | jq .", CLI).allowed


def test_documented_sets() -> None:
    for excluded in ("sed", "awk", "find", "xargs", "env", "python", "sh", "bash", "tee"):
        assert excluded not in HARMLESS_UTILITIES
    for excluded in ("eval", "source", ".", "exec", "alias", "trap", "hash", "command", "kill"):
        assert excluded not in SHELL_BUILTINS_ALLOWED
    assert {"cd", "echo", "test", "[", ":", "read", "export"} <= SHELL_BUILTINS_ALLOWED


# --- commands_in ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("tracker list | jq .", [["tracker", "list"], ["jq", "."]]),
        ("VAR=1 tracker list 2>&1 > out.json", [["tracker", "list"]]),
        ("x=$(tracker list | jq -r '.[0].id'); tracker show \"$x\"",
         [["tracker", "list"], ["jq", "-r", ".[0].id"], ["tracker", "show", "$x"]]),
        ("for i in 1 2; do tracker show $i; done", [["tracker", "show", "$i"]]),
        ("if tracker show 1; then echo yes; fi", [["tracker", "show", "1"], ["echo", "yes"]]),
        ("timeout 5 curl x", [["timeout", "5", "curl", "x"], ["curl", "x"]]),
        ("bash -c 'tracker list; curl x'", [["bash", "-c", "tracker list; curl x"], ["tracker", "list"], ["curl", "x"]]),
        ("echo x | xargs -n1 curl -s", [["echo", "x"], ["xargs", "-n1", "curl", "-s"], ["curl", "-s"]]),
        ("find . -exec jq . {} \\;", [["find", ".", "-exec", "jq", ".", "{}", ";"], ["jq", ".", "{}"]]),
        ("cat <(curl x)", [["curl", "x"], ["cat", "<(curl x)"]]),
        ("tracker create --body-file - <<'EOF'\n$(curl x)\nEOF", [["tracker", "create", "--body-file", "-"]]),
        ("cat <<EOF\n$(curl x)\nEOF", [["curl", "x"], ["cat"]]),
        ("f() { curl x; }", [["curl", "x"]]),
        ("'tr'ack\"er\" list", [["tracker", "list"]]),
        ("echo 'a'$(curl x)'b'", [["curl", "x"], ["echo", "'a'$(curl x)'b'"]]),
        ("X=1", []),
        ("# nothing", []),
    ],
)  # fmt: skip
def test_commands_in(command: str, expected: list[list[str]]) -> None:
    assert commands_in(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "tracker list |",
        "echo 'x",
        "case a in a) b;; esac",
        "echo ${X:-$(curl x)}",
        "x=$(cat <<EOF\nhi\nEOF\n)",
        "echo $(true\ncurl x)",
    ],
)
def test_commands_in_raises_when_it_cannot_understand(command: str) -> None:
    with pytest.raises(GuardParseError):
        commands_in(command)
    assert issubclass(GuardParseError, ValueError)


# --- differential check against a real bash -------------------------------------------------

# Lines that exercise the parser's corners. They run in a real bash whose PATH holds only stubs
# that log their own name, so nothing here reaches the network or the file system outside tmp_path.
DIFFERENTIAL = [
    "tracker list | jq .",
    "cat <<'EOF'\nabc\\\nEOF\nEOF\ncurl x",
    "cat <<'EOF'\nx\\\nEOF\ncurl hidden\nEOF",
    "cat <<EOF\nx\\\nEOF\ncurl body\nEOF",
    "cat <<EOF\nx\\\\\nEOF\ncurl after",
    "cat <<A <<'B'\n$(curl x)\nA\n$(wget y)\nB",
    "cat <<-EOF\n\t$(curl x)\n\tEOF",
    "tracker create <<'EOF' ; curl x\n$(wget y)\nEOF",
    "echo 'a'$(curl x)'b'",
    "echo 'a'\"$(curl x)\"'b'",
    'echo "$(echo "$(curl x)")"',
    "tracker list#$(curl x)",
    "echo a # $(curl x)",
    "f() { curl x; }; f",
    "for i in 1 2; do curl $i; done",
    "if tracker show; then curl y; fi",
    "cat <(curl x)",
    "cur\\\nl x",
    "c'ur'l x",
    "{ curl x; } 2>&1",
    "tracker list && \\\n curl x",
    "tracker create --body='Use `make` here'",
    "jq '.[] | select(.id == '$(tracker x)')' f",
    "X=$(curl x) tracker list",
    "tracker list > $(curl x)",
    "echo `curl x` \"`wget y`\"",
    "echo 'it''s'; curl x",
    'echo "a\\"; curl x; echo \\""',
    "shift 'a[$(curl x)]'; exit 'a[$(curl x)]'",
    "[ 1 -eq 'a[$(curl x)]' ]; test 'a[$(curl x)]' -eq 1; printf %d 'a[$(curl x)]'",
    "x='a[$(curl x)]'; test \"$x\" -eq 1; [ $x -gt 1 ]; echo ${x:-1} ${x#a} ${x/a/b} ${x@Q} ${#x} ${x:1:2}",
    "x=hello; i='a[$(curl x)]'; echo ${x:i}",
    "x='a[$(curl x)]'; echo ${!x}",
    "if true; then cat <<EOF\n$(curl x)\nEOF\nfi",
    "for i in 1; do cat <<'EOF'\n$(wget y)\nEOF\ncurl $i; done",
    "f() { cat <<EOF\n`curl x`\nEOF\n}; f",
    "cat <<A | cat <<'B'\n$(curl x)\nA\n$(wget y)\nB",
    "cat <<EOF &&\nbody\nEOF\ncurl x",
    "cat <<'E F'\n$(wget y)\nE F\ncurl x",
    "cat <<$X\n$(curl x)\n$X",
    "cat <<-'EOF'\n\t$(wget y)\n\tEOF\ncurl x",
    "tracker list;# $(curl x)\ncurl y",
    "echo $(echo a \\\n; curl x)",
    "echo 'x\\\ny'; curl z",
    "if true; then cat <<EOF\nEOF\ncurl hidden\nEOF\nfi",
    "{ cat <<'EOF'\n$(wget y)\nEOF\ncurl x; }",
    "true;# it's\ncurl x\necho '",
    "true&# $(wget y)\ncurl x",
    "cat <<$'EOF'\nbody\nEOF\ncurl x\n$EOF",
    "cat <<$\"EOF\"\nbody\nEOF\ncurl x\n$EOF",
    "echo $(true\ncurl x)",
    "echo `true\ncurl x`",
    "echo `echo \\$(curl x)`",
    "x=$(\n  tracker list\n)",
    "x=$(cat <<'EOF'\nit's\nEOF\n)",
    "echo ${X:-$(curl x)}",
    "echo ${X:-'}'$(curl x)}",
]


# Lines for an arm that lists launchers: the real launchers run, and what they start must be seen.
LAUNCHED = [
    "bash -c 'tracker list; curl x'",
    "bash -c \"echo \\' ; curl x ; echo \\'\"",
    "bash -c 'cat <<EOF\n$(curl x)\nEOF'",
    "sh -c 'curl x'",
    "env X=1 curl x",
    "env -- curl x",
    "echo a | xargs curl",
    "echo a | xargs -I{} curl {}",
    "echo a | xargs -n1 -P2 curl -s",
    "timeout 5 curl x",
    "timeout -s KILL 5 curl x",
    "timeout -k 1 5 tracker list",
    "nice -n 5 curl x",
    "nice -5 curl x",
    "find . -maxdepth 0 -exec curl {} \\;",
    "find . -maxdepth 0 -exec tracker list \\; -exec curl {} +",
    "eval 'curl x'",
    "eval eval curl x",
    "command curl x",
    "builtin eval 'curl x'",
    "exec curl x",
    "bash -ec 'curl x'",
]
STUB_NAMES = ("tracker", "curl", "wget", "jq", "cat", "make", "f")
REAL_LAUNCHERS = ("bash", "sh", "env", "xargs", "timeout", "nice", "find")


def programs_bash_runs(command: str, tmp_path: Path, launchers: tuple[str, ...] = ()) -> set[str]:
    """Run the line in a real bash whose PATH holds only stubs that log their own name (plus the
    given real launchers), and return the names of the programs it ran or tried to run."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "ran.log"
    for name in STUB_NAMES:
        stub = stubs / name
        stub.write_text('#!/bin/sh\nprintf "%s\\n" "${0##*/}" >> "$RAN_LOG"\n')
        stub.chmod(0o755)
    for name in launchers:
        real = shutil.which(name)
        if real is None:
            pytest.skip(f"needs {name}")
        (stubs / name).symlink_to(real)
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run(
        [bash, "--noprofile", "--norc", "-c", command],
        env={"PATH": str(stubs), "RAN_LOG": str(log), "HOME": str(tmp_path)},
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    ran = set(log.read_text().split()) if log.exists() else set()
    return ran | set(re.findall(r": ([^:\s]+): command not found", result.stderr))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("command", DIFFERENTIAL, ids=[c.replace("\n", "\\n")[:60] for c in DIFFERENTIAL])
def test_guard_sees_every_program_bash_runs(command: str, tmp_path: Path) -> None:
    try:
        seen = {argv[0] for argv in commands_in(command)}
    except GuardParseError:
        return  # refused outright: nothing runs
    ran = programs_bash_runs(command, tmp_path)
    assert ran <= seen, f"bash ran {sorted(ran - seen)}, which the guard did not see"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("command", LAUNCHED, ids=[c.replace("\n", "\\n")[:60] for c in LAUNCHED])
def test_guard_sees_every_program_a_launcher_runs(command: str, tmp_path: Path) -> None:
    seen = {argv[0] for argv in commands_in(command)}
    ran = programs_bash_runs(command, tmp_path, REAL_LAUNCHERS)
    assert ran <= seen, f"bash ran {sorted(ran - seen)}, which the guard did not see"
    assert "curl" not in ran or not check_bash_command(command, ARMS["launchers"]).allowed


# --- variables by family, option spellings, write targets with run-time parts (issue 20) ------------


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("OPENSSL_CONF", True), ("OPENSSL_MODULES", True), ("PYTHONUSERBASE", True), ("PYTHON_HISTORY", True),
        ("npm_config_registry", True), ("NPM_CONFIG_REGISTRY", True), ("nPm_CoNfIg_x", True),
        ("MAKEFLAGS", True), ("MAKEFILES", True), ("TAR_OPTIONS", True), ("LD_DEBUG_OUTPUT", True),
        ("GIT_TRACE2_EVENT", True), ("No_Proxy", True), ("CURL_HOME", True),
        ("PYTHONUNBUFFERED", False), ("GIT_AUTHOR_NAME", False), ("NODE_ENV", False),
        ("python_out", False), ("tar_file", False), ("IFS", False), ("LC_ALL", False), ("id", False),
    ],
)  # fmt: skip
def test_variables_are_refused_by_the_family_that_reads_them(name: str, refused: bool) -> None:
    from pytest_benchcell.isolation.catalog import variable_family

    assert (variable_family(name) is not None) is refused
    decision = check_bash_command(f"{name}=x tracker list", CLI)
    assert decision.allowed is not refused, decision.reason
    if refused:
        assert name in decision.reason and "may not be changed" in decision.reason
        assert check_bash_command(f"unset {name}; tracker list", CLI).allowed  # unsetting is fine


def test_a_pager_or_editor_may_be_one_harmless_utility_that_only_reads() -> None:
    git = ARMS["git"]
    for allowed in ("GIT_PAGER=cat", "PAGER=head", "GIT_EDITOR=true", "GIT_SEQUENCE_EDITOR=:", "GIT_PAGER=''"):
        assert check_bash_command(f"{allowed} git log", git).allowed, allowed
    for refused in ("GIT_PAGER=tee", "GIT_PAGER=mkdir", "GIT_PAGER='cat x'", 'GIT_PAGER="$P"', "GIT_PAGER=git",
                    "GIT_EXTERNAL_DIFF=cat"):  # fmt: skip
        decision = check_bash_command(f"{refused} git log", git)
        assert not decision.allowed, refused


@pytest.mark.parametrize(
    ("written", "runs"),
    [("outdated", "outdated"), ("outd", "outdated"), ("out", "outdated"), ("x", "exec"), ("i", "install"),
     ("installTest", "install-test"), ("clean-install", "ci"), ("install-cl", "ci"), ("list", "ls"),
     ("ou", "outdated"), ("o", None), ("outreach", None), ("", None)],
)  # fmt: skip
def test_npm_subcommands_are_read_as_npm_reads_them(written: str, runs: str | None) -> None:
    from pytest_benchcell.isolation.arguments import KNOWN_PROGRAMS

    assert KNOWN_PROGRAMS["npm"].subcommand(written) == runs  # type: ignore[misc]


def test_tar_bundles_are_read_as_separate_options_taking_operands_in_order() -> None:
    from pytest_benchcell.isolation.arguments import TAR, _unbundle
    from pytest_benchcell.isolation.words import Word

    words = [Word.plain(text) for text in ("xfC", "a.tar", "/", "member")]
    assert [word.shown for word in _unbundle(words, TAR)] == ["-x", "-f", "a.tar", "-C", "/", "member"]
    assert [word.shown for word in _unbundle(words[1:], TAR)] == ["a.tar", "/", "member"]  # not a bundle


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ('for i in 1 2; do tracker show $i > "issue-$i.json"; done', True),
        ('for i in 1 /../../x; do tracker show 1 > "issue$i.json"; done', False),
        ('n=3; tracker show 3 > "out/$n/x.json"', True),
        ('n=3; n=$(tracker list); tracker show 3 > "out-$n.json"', False),  # one value computed at run time
        ('read n; tracker show 3 > "out-$n.json"', False),
        ('echo ${n:=..}; tracker show 3 > "x/$n/y"', False),
        ('tracker show 3 > "out-$n.json"', False),  # never given a value here
        ('tracker show 3 > "out-$(tracker list).json"', False),
        ('tracker show 3 > "out-$RANDOM.json"', False),
    ],
)
def test_a_write_target_with_a_run_time_part_needs_values_known_on_the_line(command: str, allowed: bool) -> None:
    decision = check_bash_command(command, CLI)
    assert decision.allowed is allowed, decision.reason


def test_the_arms_fixed_variables_place_a_write_target() -> None:
    from dataclasses import replace

    arm = replace(CLI, variables={"OUT": ENV_DIR, "ELSEWHERE": CONFIG_DIR})
    assert check_bash_command('tracker list > "$OUT/list.json"', arm).allowed
    decision = check_bash_command('tracker list > "$ELSEWHERE/snapshot.sh"', arm)
    assert not decision.allowed and "outside" in decision.reason
    assert check_bash_command('cd "$OUT" && tracker list > list.json', arm).allowed
    decision = check_bash_command('cd "$ELSEWHERE" && tracker list > snapshot.sh', arm)
    assert not decision.allowed and "after a cd" in decision.reason
