"""bench.toml keys of the isolation layers: argument rules, helpers, exec_audit; and how a sitting
shows whether the execution audit runs (header, provenance, "required")."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import docs_text
import pytest

from pytest_benchcell.config import BenchConfigError, load_bench
from pytest_benchcell.isolation.exec_audit import INSTALL_HINT, find_tracer
from pytest_benchcell.trial import arm_rules

BENCH = """
[bench]
model = "claude-sonnet-4-5"
store = "results"
trials = 1
{bench_extra}

[arms.raw]
tools = ["Bash"]
binaries = ["curl", "git"]
{arm_extra}

[tasks.say]
tier = "read"
intent = "Say done."
required_facts = ["done"]
"""


def bench_file(tmp_path: Path, bench_extra: str = "", arm_extra: str = "") -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(BENCH.format(bench_extra=bench_extra, arm_extra=textwrap.dedent(arm_extra)))
    return path


def test_argument_rules_and_helpers_load_and_fill_placeholders(tmp_path: Path) -> None:
    bench = load_bench(bench_file(tmp_path, arm_extra="""
        helpers = { git = ["git", "git-remote-http"] }
        [arms.raw.arguments.curl]
        allow_urls = ["http://127.0.0.1:{port}/"]
        deny_options = ["-K", "--config"]
        [arms.raw.arguments.git]
        deny_subcommands = ["config"]
        deny_options = ["-c"]
    """))
    arm = bench.arms["raw"]
    assert arm.helpers == {"git": ("git", "git-remote-http")}
    assert arm.arguments["curl"] == {"allow_urls": ("http://127.0.0.1:{port}/",), "deny_options": ("-K", "--config")}
    rules = arm_rules(arm, values={"port": "8321"})
    curl = next(rule for rule in rules.argument_rules if rule.binary == "curl")
    assert curl.allow_urls == ("http://127.0.0.1:8321/",)
    assert ("git", ("config",)) in [(rule.binary, rule.deny) for rule in rules.all_subcommand_rules()]


def test_unused_isolation_keys_leave_the_fingerprint_alone(tmp_path: Path) -> None:
    plain = load_bench(bench_file(tmp_path))
    conditions = plain.conditions("raw", "say")
    assert "arguments" not in conditions["arm"] and "helpers" not in conditions["arm"]
    ruled = load_bench(bench_file(tmp_path, arm_extra='[arms.raw.arguments.git]\ndeny_options = ["-c"]'))
    assert ruled.fingerprint("raw", "say") != plain.fingerprint("raw", "say")


@pytest.mark.parametrize(
    ("arm_extra", "message"),
    [
        ('[arms.raw.arguments.tea]\ndeny_options = ["-c"]', "[arms.raw.arguments] tea has value 'tea'; allowed: one of this arm's binaries (curl, git)"),
        ('[arms.raw.arguments.git]\ndeny_option = ["-c"]', "[arms.raw.arguments.git] has unknown key 'deny_option' (did you mean 'deny_options'?); allowed keys: deny_subcommands, deny_options, allow_urls, value_options"),
        ('[arms.raw.arguments.git]\ndeny_options = ["c"]', "[arms.raw.arguments.git] deny_options has value 'c'; allowed: options written as -x or --name"),
        ('[arms.raw.arguments.curl]\nallow_urls = ["http://127.0.0.1:8080"]', "allow_urls has value 'http://127.0.0.1:8080'; allowed: URL prefixes written up to the / after the host and port"),
        ('[arms.raw.arguments.curl]\nallow_urls = ["http://me@127.0.0.1/"]', "allowed: URL prefixes"),
        ('[arms.raw.arguments.curl]\nallow_urls = "http://127.0.0.1/"', "allow_urls has value 'http://127.0.0.1/'; allowed: a list of non-empty strings"),
        ('[arms.raw.arguments.curl]\nallow_urls = []', "[arms.raw.arguments.curl] allow_urls has value []; allowed: at least one URL prefix (e.g. \"http://127.0.0.1:{port}/\"); to keep the arm from the network, leave curl out of its binaries"),
        ('helpers = { git = ["/usr/bin/sh"] }', "[arms.raw.helpers] git has value '/usr/bin/sh'; allowed: a bare program name"),
        ('helpers = { tea = ["sh"] }', "[arms.raw.helpers] tea has value 'tea'; allowed: one of this arm's binaries"),
        ('probe = { tea = "tea --help" }', "[arms.raw.probe] tea has value 'tea'; allowed: one of this arm's binaries"),
        ('probe = { git = "sh -c true" }', "[arms.raw.probe] git has value 'sh -c true'; allowed: a command line that runs git itself"),
        ("probe = { git = \"git 'x\" }", "[arms.raw.probe] git has value \"git 'x\"; allowed: a command line that runs git itself"),
        ('probe = { git = "" }', "[arms.raw.probe] git has value ''; allowed: a non-empty string"),
        ('probe = { git = ["git", "--help"] }', "[arms.raw.probe] git has value ['git', '--help']; allowed: a non-empty string"),
    ],
)  # fmt: skip
def test_bad_isolation_keys_name_file_key_value_and_what_is_allowed(tmp_path: Path, arm_extra: str, message: str) -> None:
    path = bench_file(tmp_path, arm_extra=arm_extra)
    with pytest.raises(BenchConfigError) as caught:
        load_bench(path)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_a_declared_probe_loads_and_enters_the_fingerprint_only_when_declared(tmp_path: Path) -> None:
    plain = load_bench(bench_file(tmp_path))
    assert plain.arms["raw"].probes == {} and "probe" not in plain.conditions("raw", "say")["arm"]
    probed = load_bench(bench_file(tmp_path, arm_extra='probe = { git = "git help -a" }'))
    assert probed.arms["raw"].probes == {"git": "git help -a"}
    assert probed.conditions("raw", "say")["arm"]["probe"] == {"git": "git help -a"}
    assert probed.fingerprint("raw", "say") != plain.fingerprint("raw", "say")


def test_exec_audit_mode_is_checked(tmp_path: Path) -> None:
    assert load_bench(bench_file(tmp_path)).exec_audit == "auto"
    assert load_bench(bench_file(tmp_path, bench_extra='exec_audit = "required"')).exec_audit == "required"
    with pytest.raises(BenchConfigError, match=r'\[bench\] exec_audit has value \'always\'; allowed: "auto", "required", "off"'):
        load_bench(bench_file(tmp_path, bench_extra='exec_audit = "always"'))


def test_exec_audit_cpus_is_checked(tmp_path: Path) -> None:
    assert load_bench(bench_file(tmp_path)).exec_audit_cpus == "one"
    assert load_bench(bench_file(tmp_path, bench_extra='exec_audit_cpus = "all"')).exec_audit_cpus == "all"
    with pytest.raises(BenchConfigError, match=r'\[bench\] exec_audit_cpus has value \'2\'; allowed: "one", "all"'):
        load_bench(bench_file(tmp_path, bench_extra='exec_audit_cpus = "2"'))


# --- what a sitting says about the execution audit --------------------------------------------

SITTING = """
[bench]
model = "claude-sonnet-4-5"
store = "results"
trials = 1
wall_clock_ms = 60000
{extra}

[arms.shell]
tools = ["Bash"]

[tasks.say]
tier = "read"
intent = "Say done."
required_facts = ["done"]
"""
CONFTEST = """
from pytest_benchcell.scripted import Answer, ToolUse

def pytest_benchcell_script(trial, environment):
    return [ToolUse("Bash", {"command": "echo hi"}), Answer("done")]
"""


def test_the_header_says_whether_the_execution_audit_runs(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench=SITTING.format(extra=""))
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say", "--bench-scripted", "--collect-only")
    result.stdout.fnmatch_lines([f"benchcell: execution audit {find_tracer().describe()}"])
    pytester.makefile(".toml", bench=SITTING.format(extra='exec_audit = "off"'))
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say", "--bench-scripted", "--collect-only")
    result.stdout.fnmatch_lines(['benchcell: execution audit off ([[]bench] exec_audit = "off")'])


@pytest.fixture()
def no_strace(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A PATH without strace (a machine where the audit cannot run); the sitting runs in a subprocess."""
    empty = pytester.path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    pytester.makeconftest(CONFTEST)
    return pytester


def test_required_refuses_a_sitting_without_the_audit_with_one_message(no_strace: pytest.Pytester) -> None:
    no_strace.makefile(".toml", bench=SITTING.format(extra='exec_audit = "required"'))
    result = no_strace.runpytest_subprocess("--bench-arm", "shell", "--bench-task", "say", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.lines
    assert '[bench] exec_audit = "required", but the execution audit cannot run here' in errors[0]
    assert "strace is not installed" in errors[0] and INSTALL_HINT in errors[0]
    assert not (no_strace.path / "results").exists() or not list((no_strace.path / "results").rglob("*.jsonl"))


@pytest.mark.slow
@pytest.mark.e2e
def test_required_does_not_refuse_a_sitting_with_no_bash_to_watch(no_strace: pytest.Pytester) -> None:
    # What "required" asks for is that every Bash command is watched; an arm without Bash has none,
    # so its sitting runs (as its trials always did) and the header says why the audit is off.
    bench = SITTING.format(extra='exec_audit = "required"') + '\n[arms.talk]\ntools = ["Read"]\n'
    no_strace.makefile(".toml", bench=bench)
    no_strace.makeconftest(
        "from pytest_benchcell.scripted import Answer\n\n"
        "def pytest_benchcell_script(trial, environment):\n    return [Answer('done')]\n"
    )
    result = no_strace.runpytest_subprocess("--bench-arm", "talk", "--bench-task", "say", "--bench-scripted")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["benchcell: execution audit off (no selected arm has a Bash tool)"])


@pytest.mark.slow
@pytest.mark.e2e
def test_auto_runs_without_the_audit_and_says_so_in_header_and_provenance(no_strace: pytest.Pytester) -> None:
    no_strace.makefile(".toml", bench=SITTING.format(extra=""))
    result = no_strace.runpytest_subprocess("--bench-arm", "shell", "--bench-task", "say", "--bench-scripted")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["benchcell: execution audit off (strace is not installed)"])
    (line,) = (no_strace.path / "results" / "scripted" / "shell" / "say.jsonl").read_text().splitlines()
    sample = json.loads(line)
    assert sample["provenance"]["exec_audit"] == "off (strace is not installed)"
    assert sample["exec_audit"] is None and sample["status"] == "scored"


def test_the_install_hint_says_what_to_install() -> None:
    assert "apt-get install strace" in INSTALL_HINT and "Linux" in INSTALL_HINT


# --- the README's argument rules do what the README says ---------------------------------------


def readme_block(marker: str) -> str:
    blocks = [block.split("```", 1)[0] for block in docs_text.text().split("```toml\n")[1:]]
    (block,) = [textwrap.dedent(block) for block in blocks if marker in block]
    return "\n".join(line.removeprefix("  ") for line in block.splitlines())


def test_the_readme_argument_rules_refuse_and_allow_what_it_says(tmp_path: Path) -> None:
    rules = readme_block("[arms.git.arguments.git]")
    path = tmp_path / "bench.toml"
    path.write_text(
        '[bench]\nmodel = "m"\n[arms.git]\nbinaries = ["git"]\n[arms.raw-api]\nbinaries = ["curl"]\n'
        '[tasks.t]\ntier = "read"\nintent = "i"\nrequired_facts = ["x"]\n' + rules
    )
    bench = load_bench(path)
    from pytest_benchcell.isolation import check_bash_command

    git = arm_rules(bench.arms["git"], values={}, write_roots=("/w",))
    for refused in ("git -c alias.x='!sh' x", "git config alias.x '!sh'", "git difftool -x sh", "git diff --ou=f",
                    "git -C /elsewhere status", "git diff --ext-diff"):  # fmt: skip
        assert not check_bash_command(refused, git).allowed, refused
    assert check_bash_command("git status && git diff --stat && git log --oneline -3", git).allowed
    raw = arm_rules(bench.arms["raw-api"], values={"port": "8321"}, write_roots=("/w",))
    assert check_bash_command('curl -s "http://127.0.0.1:8321/issues/$id"', raw).allowed
    assert check_bash_command("curl -s 127.0.0.1:8321/issues", raw).allowed
    for refused in ("curl http://127.0.0.1:8322/", "curl http://example.com/", "curl --connect-to a:1:b:2 http://127.0.0.1:8321/",
                    "curl -K f http://127.0.0.1:8321/", 'curl "$U"'):  # fmt: skip
        assert not check_bash_command(refused, raw).allowed, refused
