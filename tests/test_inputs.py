"""Bad inputs are refused before any folder, lock or token: names, program names, URLs, enum keys,
secrets names and the bench lookup, each with one message naming where the value came from and
what is allowed. And the friction of a first bench: the README's MCP server, checker defaults,
patterns with marks, the coverage legend at a floor of 1."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import sys
from pathlib import Path

import docs_text
import pytest
from benches import BENCH_TOML, write_bench

from pytest_benchcell.checker import check_answer, diff_states, fact_from_config

SITTING = ("--bench-arm", "all", "--bench-task", "all", "--bench-scripted")
LONG_ARM = "a" * 300
LONG_TASK = "t" * 250
NAMES_ALLOWED = "allowed: 1 to 64 characters: ASCII letters, digits, '.', '_' and '-'"


def refused(pytester: pytest.Pytester, *args: str) -> str:
    """Run a sitting that must be refused as a usage error before anything is created; its message."""
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    message = result.stderr.str()
    assert "Traceback" not in message + result.stdout.str()
    assert not (pytester.path / "results").exists()  # no store folder, no lock, no reservation
    return message


def one_line(message: str) -> str:
    return " ".join(message.split())


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("[arms.bare]", '[arms."bare\\n"]', "[arms] has the arm name 'bare\\n', refused because it has a character outside"),
        ("[arms.bare]", f"[arms.{LONG_ARM}]", "[arms] has the arm name 'aaaa"),
        ("[tasks.stall]", f"[tasks.{LONG_TASK}]", "[tasks] has the task name 'tttt"),
        ("[tasks.stall]", "[tasks.nul]", "[tasks] has the task name 'nul', refused because it is a Windows device name"),
        ("[tasks.stall]", "[tasks.Say-Hello]", "[tasks.Say-Hello] differs from [tasks.say-hello] only in case; allowed: task names"),
        ("[arms.bare]", "[arms.Shell]", "[arms.Shell] differs from [arms.shell] only in case; allowed: arm names"),
    ],
)
def test_names_every_filesystem_cannot_take_are_refused_at_load(pytester: pytest.Pytester, old: str, new: str, expected: str) -> None:
    write_bench(pytester, BENCH_TOML.replace(old, new))
    message = one_line(refused(pytester, *SITTING))
    assert f"{pytester.path / 'bench.toml'}: {expected}" in message
    assert "allowed:" in message
    if "has the" in expected:
        assert NAMES_ALLOWED in message and ("has 300 characters" in message or "has 250 characters" in message
                                             or "outside" in message or "device" in message)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--bench-arm", LONG_ARM, f"--bench-arm '{'a' * 80}': not a valid arm name (it has 300 characters); {NAMES_ALLOWED}"),
        ("--bench-task", "say hello", f"--bench-task 'say hello': not a valid task name (it has a character outside the allowed ones); {NAMES_ALLOWED}"),
    ],
)
def test_names_on_the_command_line_follow_the_same_rule(pytester: pytest.Pytester, option: str, value: str, expected: str) -> None:
    write_bench(pytester)
    other = "--bench-task" if option == "--bench-arm" else "--bench-arm"
    message = one_line(refused(pytester, option, value, other, "all", "--bench-scripted"))
    assert expected in message


@pytest.mark.parametrize(
    ("old", "new", "key", "value"),
    [
        ('binaries = ["touch"]', 'binaries = ["touch", ".."]', "binaries", "'..'"),
        ('binaries = ["touch"]', 'binaries = ["touch"]\nhelpers = { touch = ["../sh"] }', "touch", "'../sh'"),
        ('binaries = ["touch"]', 'binaries = ["touch"]\nguard_exempt = ["../../victim"]', "guard_exempt", "'../../victim'"),
    ],
)
def test_path_shaped_program_names_are_refused_at_load(
    pytester: pytest.Pytester, old: str, new: str, key: str, value: str
) -> None:
    victim = pytester.path.parent / "victim"
    victim.write_text("#!/bin/sh\necho original\n")
    victim.chmod(victim.stat().st_mode | stat.S_IXUSR)
    write_bench(pytester, BENCH_TOML.replace(old, new, 1))
    message = one_line(refused(pytester, *SITTING))
    assert f"{key} has value {value}; allowed: a bare program name" in message
    assert victim.read_text() == "#!/bin/sh\necho original\n"  # the wrapper never replaced it


@pytest.mark.parametrize("url", ["http://*:8080/", "http://*.example.com/", "file:///etc/", "file://localhost/etc/"])
def test_allow_urls_with_a_wildcard_host_or_a_file_scheme_are_refused_at_load(pytester: pytest.Pytester, url: str) -> None:
    text = BENCH_TOML.replace('binaries = ["touch"]', 'binaries = ["curl"]', 1)
    text += f'\n[arms.shell.arguments.curl]\nallow_urls = ["{url}"]\n'

    write_bench(pytester, text)
    message = one_line(refused(pytester, *SITTING))
    assert f"[arms.shell.arguments.curl] allow_urls has value '{url}'; allowed: URL prefixes" in message
    assert "not file://; a literal host name or address, no wildcard" in message


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("[bench]\nexec_audit = true", '[bench] exec_audit has value True; allowed: "auto", "required", "off"'),
        ("[bench]\nexec_audit = \"requierd\"", "[bench] exec_audit has value 'requierd' (did you mean 'required'?); allowed: \"auto\""),
        ("[checker]\nwhitespace = 1", '[checker] whitespace has value 1; allowed: "exact", "strip", "collapse"'),
    ],
)
def test_a_key_with_a_fixed_set_of_words_names_them_whatever_the_wrong_type(
    pytester: pytest.Pytester, setting: str, expected: str
) -> None:
    table, line = setting.split("\n")
    text = BENCH_TOML.replace("[bench]", f"[bench]\n{line}") if table == "[bench]" else BENCH_TOML + f"\n{setting}\n"
    write_bench(pytester, text)
    assert expected in one_line(refused(pytester, *SITTING))


def test_a_misspelled_secret_name_is_refused_at_load(pytester: pytest.Pytester) -> None:
    text = BENCH_TOML.replace("[bench]", '[bench]\nsecrets = ["markr"]').replace(
        'bootstrap = "The shell is available."', 'bootstrap = "The shell is available."\nenv = { MARK = "{marker}" }', 1
    )
    write_bench(pytester, text)
    message = one_line(refused(pytester, *SITTING))
    assert ("[bench] secrets has value 'markr' (did you mean 'marker'?); allowed: a placeholder the bench uses "
            "(marker) or a variable an arm declares (MARK)") in message
    # the right names load: the placeholder, and the variable
    for name in ("marker", "MARK"):
        write_bench(pytester, text.replace('"markr"', f'"{name}"'))
        result = pytester.runpytest(*SITTING, "--collect-only", "-q")
        assert result.ret == pytest.ExitCode.OK, result.stderr.str()


def test_bench_config_naming_a_folder_or_nothing_is_refused_naming_the_option(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    pytester.mkdir("benches")
    message = one_line(refused(pytester, *SITTING, "--bench-config", "benches"))
    assert f"--bench-config benches: {pytester.path / 'benches'}: is a folder; allowed: the path of a bench.toml file" in message
    message = one_line(refused(pytester, *SITTING, "--bench-config="))
    assert "--bench-config '' is empty; allowed: the path of a bench.toml file" in message


def test_ini_bench_config_naming_a_missing_file_names_the_ini_key(pytester: pytest.Pytester) -> None:
    write_bench(pytester)  # a bench.toml that would be discovered: the ini key must win, and say so
    pytester.makeini("[pytest]\nbench_config = benches/typo.toml\n")
    message = one_line(refused(pytester, *SITTING))
    assert (f"ini key bench_config = 'benches/typo.toml' in {pytester.path / 'tox.ini'}: "
            f"{pytester.path / 'benches' / 'typo.toml'}: no such bench file") in message


def test_the_readmes_mcp_server_starts_and_lists_its_tool_through_the_mcp_client(tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    (server_code,) = re.findall(r"```python\n(# shop_mcp\.py\n.*?)```", docs_text.text(), re.DOTALL)
    (tmp_path / "shop_mcp.py").write_text(server_code)
    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER, status TEXT)")
        db.executemany("INSERT INTO orders VALUES (?, ?)", [(1001, "open"), (1002, "open"), (1003, "shipped")])

    async def session() -> tuple[list[str], str]:
        params = StdioServerParameters(
            command=sys.executable, args=[str(tmp_path / "shop_mcp.py")], cwd=str(tmp_path),
            env={"SHOP_DB": str(tmp_path / "shop.db"), "PATH": os.environ.get("PATH", "")},
        )  # fmt: skip
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                tools = await client.list_tools()
                answer = await client.call_tool("count_orders", {"status": "open"})
                return [tool.name for tool in tools.tools], answer.content[0].text

    names, text = anyio.run(session)
    assert names == ["count_orders"]
    assert text == "2 open orders"


def test_checker_defaults_match_entities_by_an_ignored_id() -> None:
    before = {"orders": [{"id": 1001, "status": "open", "updated_at": "t1"}, {"id": 1002, "status": "open"}]}
    after = {"orders": [{"id": 1001, "status": "open", "updated_at": "t2"}, {"id": 1002, "status": "shipped"}]}
    assert diff_states(before, after) == ['orders[id=1002].status: expected "open", got "shipped"']
    # a collateral new order reads as an entity, and a `number` still wins where every item has one
    after["orders"].append({"id": 1004, "status": "open"})
    assert 'unexpected orders[id=1004] (collateral change)' in diff_states(before, after)
    issues = {"issues": [{"id": 7, "number": 1, "state": "open"}]}
    closed = {"issues": [{"id": 9, "number": 1, "state": "closed"}]}
    assert diff_states(issues, closed) == ['issues[number=1].state: expected "open", got "closed"']


def test_a_pattern_with_an_underscore_matches_what_the_agent_wrote() -> None:
    fact = fact_from_config({"description": "the key column", "pattern": r"order_id\b"})
    assert check_answer("The key is `order_id`.", [fact]) == []
    assert check_answer("The key is order id.", [fact]) != []
    assert check_answer("**5** open", [fact_from_config({"pattern": "5 open"})]) == []  # normalized, as before


def test_the_coverage_legend_at_a_floor_of_one_names_no_partial_range(pytester: pytest.Pytester) -> None:
    write_bench(pytester, BENCH_TOML.replace("trials = 2", "trials = 2\nfloor = 1"))
    result = pytester.runpytest("--bench-report", "--bench-arm", "shell", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(["*Cells with >= 1 scored trial (covered), none (missing).*"])
    assert "1 to 0" not in result.stdout.str()


def test_redaction_replaces_secrets_in_string_values_only_whatever_their_length() -> None:
    from pytest_benchcell.secrets import REDACTED, is_credential_name, redact

    sample = {"arm": "a", "final_answer": "a 1-character secret: a; spaced: t o k e n - 9 9", "trial": 1,
              "tool_calls": [{"input": {"command": "echo token-99"}, "output": "T-O-K-E-N-99 is not it"}]}
    clean = redact(sample, ["token-99", "a"])
    assert clean["arm"] == REDACTED and clean["trial"] == 1 and set(clean) == set(sample)  # keys untouched
    # a declared one-letter secret is honoured (the bench asked for it), and the spaced-out one is caught
    r = REDACTED
    assert clean["final_answer"] == f"{r} 1-ch{r}r{r}cter secret: {r}; sp{r}ced: {r}"
    assert clean["tool_calls"][0]["input"]["command"] == f"echo {r}"
    assert clean["tool_calls"][0]["output"] == f"{r} is not it"  # in any case too (secrets.py, rule 2)
    assert all(is_credential_name(name) for name in ("SERVICE_KEY", "db_password", "GITHUB_TOKEN", "X_AUTH"))
    assert not any(is_credential_name(name) for name in ("TRACKER_URL", "PLAIN", "SHOP_DB"))


def test_guessed_secrets_have_a_floor_of_six_characters_and_declared_ones_none(tmp_path: Path) -> None:
    from pytest_benchcell import Environment
    from pytest_benchcell.config import load_bench
    from pytest_benchcell.secrets import secret_values

    (tmp_path / "bench.toml").write_text(BENCH_TOML.replace("[bench]", '[bench]\nsecrets = ["pin"]').replace(
        'bootstrap = "The shell is available."',
        'bootstrap = "The shell is available."\nenv = { DB_PASSWORD = "{pw}", SERVICE_KEY = "{key}", PIN = "{pin}", URL = "{url}" }', 1)
        + '\n[arms.shell.mcp_servers.files]\ncommand = "{python}"\nenv = { API_TOKEN = "{api}" }\n')
    bench = load_bench(tmp_path / "bench.toml")
    environment = Environment(values={"pw": "short", "key": "longer-key", "pin": "1234", "url": "http://x/",
                                      "api": "server-token-1"}, secrets=("q7Zx9",))  # fmt: skip
    values = secret_values(bench, bench.arms["shell"], environment)
    assert "longer-key" in values and "1234" in values and "q7Zx9" in values  # guessed >= 6, declared any length
    assert "server-token-1" in values  # an MCP server's variables count as the arm's
    assert "short" not in values and "http://x/" not in values  # guessed but 5 characters; not a credential name


def test_a_secret_placeholder_the_provision_hook_does_not_supply_stops_the_trial_before_the_model(
    pytester: pytest.Pytester,
) -> None:
    text = BENCH_TOML.replace("[bench]", '[bench]\nsecrets = ["token"]').replace(
        'bootstrap = "The shell is available."', 'bootstrap = "The shell is available."\nenv = { TOKEN = "{token}" }', 1)
    write_bench(pytester, text)  # the conftest's provision hook supplies only {marker}
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "say-hello", "--bench-scripted", "--bench-trials", "1")
    result.assert_outcomes(errors=1)
    path = pytester.path / "results" / "scripted" / "shell" / "say-hello.jsonl"
    (line,) = path.read_text().splitlines()
    sample = json.loads(line)
    assert sample["status"] == "error" and "uses the placeholder {token}" in sample["reason"]
    assert not sample.get("tool_calls") and not sample.get("turns")  # no model request was made


def test_benchcell_report_config_naming_a_folder_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_benchcell.cli import main

    assert main(["report", "--config", str(tmp_path)]) == 2
    assert f"--config {tmp_path}: {tmp_path}: is a folder; allowed: the path of a bench.toml file" in capsys.readouterr().err


def test_the_harness_api_key_spelled_out_with_spaces_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_benchcell import Environment
    from pytest_benchcell.config import load_bench
    from pytest_benchcell.secrets import REDACTED, redact, secret_values

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    (tmp_path / "bench.toml").write_text(BENCH_TOML)
    bench = load_bench(tmp_path / "bench.toml")
    values = secret_values(bench, bench.arms["shell"], Environment())
    printed = "the key is " + " ".join("sk-ant-test-0123456789") + " (spelled out)"
    assert redact({"output": printed}, values) == {"output": f"the key is {REDACTED} (spelled out)"}
