"""The example bench at the repo root (bench.toml, conftest.py, bench/): its tracker, its two
interfaces, and that every scripted solution really solves its task against the real tools."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_benchcell.checker import check_answer, fact_from_config
from pytest_benchcell.config import fill_placeholders, load_bench
from pytest_benchcell.environment import TrialInfo
from pytest_benchcell.scripted import Answer, ToolUse

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bench" / "bin"


def _load_bench_hooks():
    # The root conftest.py, imported as a plain module (not through pytest's conftest loading).
    spec = importlib.util.spec_from_file_location("example_bench_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load_bench_hooks()
db = hooks.db  # bench/tracker/db.py
BENCH = load_bench(ROOT / "bench.toml")
OPEN = [1, 2, 4, 5, 8]


@pytest.fixture
def seeded(tmp_path):
    path = tmp_path / "tracker.db"
    db.seed(path)
    return path


def seed_state():
    return hooks.expected_state("no-change")


def trial_for(tmp_path, arm, task):
    workdir, cwd = tmp_path / "work", tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    return TrialInfo(arm, task, BENCH.tasks[task].tier, 1, "scripted", workdir, cwd)


# --- the database --------------------------------------------------------------------------------


def test_seed_is_deterministic(tmp_path):
    db.seed(tmp_path / "a.db")
    db.seed(tmp_path / "b.db")
    state = db.snapshot(tmp_path / "a.db")
    assert state == db.snapshot(tmp_path / "b.db")
    assert [issue["number"] for issue in state["issues"]] == list(range(1, 9))
    assert [issue["number"] for issue in state["issues"] if issue["state"] == "open"] == OPEN
    assert [label["name"] for label in state["labels"]] == ["bug", "docs", "enhancement", "performance"]
    assert json.loads(json.dumps(state)) == state  # JSON-like


def test_seed_overwrites_an_existing_database(seeded):
    db.close_issue(seeded, 2)
    db.seed(seeded)
    assert db.snapshot(seeded) == seed_state()


def _set(number, key, value):
    def change(state):
        hooks._issue(state, number)[key] = value

    return change


def _add_comment(state):
    hooks._issue(state, 5)["comments"].append({"author": "me", "body": "On it."})


def _add_issue(state):
    state["issues"].append(
        {"number": 9, "title": "New", "body": "Text", "state": "open", "labels": [], "assignees": [], "comments": []}
    )


OPERATIONS = {
    "close": (lambda p: db.close_issue(p, 2), _set(2, "state", "closed")),
    "reopen": (lambda p: db.reopen_issue(p, 3), _set(3, "state", "open")),
    "comment": (lambda p: db.add_comment(p, 5, "On it."), _add_comment),
    "add label": (lambda p: db.add_label(p, 4, "bug"), _set(4, "labels", ["bug"])),
    "add 2nd label": (lambda p: db.add_label(p, 2, "performance"), _set(2, "labels", ["bug", "performance"])),
    "remove label": (lambda p: db.remove_label(p, 1, "enhancement"), _set(1, "labels", [])),
    "assign": (lambda p: db.assign(p, 1, "me"), _set(1, "assignees", ["me"])),
    "reassign": (lambda p: db.assign(p, 2, "@lee"), _set(2, "assignees", ["lee"])),
    "create": (lambda p: db.create_issue(p, "New", "Text"), _add_issue),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_each_operation_changes_exactly_what_it_should(seeded, operation):
    run, change = OPERATIONS[operation]
    run(seeded)
    expected = seed_state()
    change(expected)
    assert hooks.diff_states(expected, db.snapshot(seeded)) == []


REFUSALS = {
    "unknown issue": (lambda p: db.show_issue(p, 99), "there is no issue #99"),
    "already closed": (lambda p: db.close_issue(p, 3), "already closed"),
    "already open": (lambda p: db.reopen_issue(p, 2), "already open"),
    "unknown label": (lambda p: db.add_label(p, 4, "crash"), "known labels: bug, docs, enhancement, performance"),
    "label present": (lambda p: db.add_label(p, 2, "bug"), "already has the label"),
    "label absent": (lambda p: db.remove_label(p, 4, "bug"), "has no label"),
    "same assignee": (lambda p: db.assign(p, 2, "dana"), "already assigned"),
    "empty comment": (lambda p: db.add_comment(p, 2, "  "), "non-empty body"),
    "empty title": (lambda p: db.create_issue(p, ""), "non-empty title"),
    "bad state": (lambda p: db.list_issues(p, "done"), "use open, closed or all"),
}


@pytest.mark.parametrize("refusal", REFUSALS)
def test_refused_operations_say_why_and_change_nothing(seeded, refusal):
    run, message = REFUSALS[refusal]
    with pytest.raises(db.TrackerError, match=message):
        run(seeded)
    assert db.snapshot(seeded) == seed_state()


def test_a_missing_database_is_an_error_not_a_new_file(tmp_path):
    with pytest.raises(db.TrackerError, match="no tracker database"):
        db.list_issues(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()


def test_list_filters_by_state_and_label(seeded):
    assert [i["number"] for i in db.list_issues(seeded)] == OPEN
    assert [i["number"] for i in db.list_issues(seeded, "closed")] == [3, 6, 7]
    assert [i["number"] for i in db.list_issues(seeded, "all", "bug")] == [2, 7]


# --- the CLI, run by name from PATH with the agent's cwd elsewhere ---------------------------------


def tracker(*args, db_path, cwd, bin_dir=BIN, stdin=None):
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TRACKER_DB": str(db_path)}
    return subprocess.run(["tracker", *args], env=env, cwd=cwd, capture_output=True, text=True, input=stdin)


def test_cli_help_lists_the_commands(seeded, tmp_path):
    result = tracker("--help", db_path=seeded, cwd=tmp_path)
    assert result.returncode == 0
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("    ")]
    assert listed == ["list", "show", "create", "close", "reopen", "comment", "label", "assign", "admin"]


def test_cli_reads(seeded, tmp_path):
    listed = tracker("list", db_path=seeded, cwd=tmp_path)
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [f"#{n}" for n in OPEN]
    assert "#2   open   CSV export drops the last row  [bug]  @dana" in listed.stdout
    as_json = json.loads(tracker("list", "--state", "closed", "--json", db_path=seeded, cwd=tmp_path).stdout)
    assert [issue["number"] for issue in as_json] == [3, 6, 7]
    shown = tracker("show", "2", db_path=seeded, cwd=tmp_path)
    assert "- dana: Reproduced: the last row is missing whatever the list size." in shown.stdout
    assert json.loads(tracker("show", "2", "--json", db_path=seeded, cwd=tmp_path).stdout) == db.show_issue(seeded, 2)


def test_cli_changes(seeded, tmp_path):
    assert tracker("close", "2", db_path=seeded, cwd=tmp_path).stdout == "closed issue #2\n"
    assert tracker("comment", "5", "--body", "On it.", db_path=seeded, cwd=tmp_path).returncode == 0
    assert tracker("label", "4", "--add", "bug", db_path=seeded, cwd=tmp_path).returncode == 0
    assert tracker("assign", "1", "--to", "me", db_path=seeded, cwd=tmp_path).returncode == 0
    created = tracker("create", "--title", "New", "--body-file", "-", db_path=seeded, cwd=tmp_path, stdin="Text")
    assert created.stdout == "created issue #9\n"
    expected = seed_state()
    for change in (_set(2, "state", "closed"), _add_comment, _set(4, "labels", ["bug"]), _set(1, "assignees", ["me"])):
        change(expected)
    hooks._issue(expected, 5)["comments"][-1]["body"] = "On it."
    _add_issue(expected)
    assert hooks.diff_states(expected, db.snapshot(seeded)) == []


def test_cli_admin_reset_exists_and_restores_the_seed(seeded, tmp_path):
    tracker("close", "2", db_path=seeded, cwd=tmp_path)
    result = tracker("admin", "reset", db_path=seeded, cwd=tmp_path)
    assert result.returncode == 0
    assert db.snapshot(seeded) == seed_state()


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "99"], "tracker: error: there is no issue #99"),
        (["close", "3"], "tracker: error: issue #3 is already closed"),
        (["label", "4", "--add", "crash"], "there is no label 'crash'"),
        (["label", "4"], "one of the arguments --add --remove is required"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["show", "two"], "invalid int value: 'two'"),
    ],
)
def test_cli_errors_go_to_stderr_with_exit_1(seeded, tmp_path, args, message):
    result = tracker(*args, db_path=seeded, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert message in result.stderr
    assert db.snapshot(seeded) == seed_state()


def test_cli_without_a_database(tmp_path):
    result = tracker("list", db_path="", cwd=tmp_path)
    assert result.returncode == 1
    assert "TRACKER_DB is not set" in result.stderr


def test_cli_found_through_a_symlink(seeded, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    (links / "tracker").symlink_to(BIN / "tracker")
    result = tracker("list", db_path=seeded, cwd=tmp_path, bin_dir=links)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(OPEN)


# --- the MCP server over stdio (raw JSON-RPC lines, as Claude Code speaks it) ----------------------


class McpStdio:
    """A minimal MCP client: one JSON-RPC message per line on the server's stdin/stdout."""

    def __init__(self, command, args, env, log):
        self.process = subprocess.Popen(
            [command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.last_id = 0

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)

    def _send(self, message):
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def request(self, method, params=None):
        self.last_id += 1
        self._send({"id": self.last_id, "method": method, **({} if params is None else {"params": params})})
        while True:
            message = json.loads(self.lines.get(timeout=30))
            if message.get("id") == self.last_id:
                return message

    def initialize(self):
        client = {"name": "test", "version": "0"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        result = self.request("initialize", params)["result"]
        self._send({"method": "notifications/initialized"})
        return result

    def call(self, tool, arguments):
        return self.request("tools/call", {"name": tool, "arguments": arguments})["result"]

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_mcp(server, values, log):
    """Start an arm's MCP server definition with its {placeholders} filled, and initialize it."""
    fill = lambda text: fill_placeholders(text, values, where=f"mcp server {server.name}")  # noqa: E731
    client = McpStdio(fill(server.command), [fill(a) for a in server.args],
                      {k: fill(v) for k, v in server.env.items()}, log)  # fmt: skip
    info = client.initialize()
    assert info["serverInfo"]["name"] == "tracker"
    return client


def builtin_values(environment):
    # What the harness supplies besides the bench's own values.
    return {**environment.values, "python": sys.executable, "bench_root": str(ROOT)}


def test_mcp_server_over_stdio(seeded, tmp_path):
    (server,) = BENCH.arms["mcp"].mcp_servers
    with open(tmp_path / "mcp.log", "w") as log:
        client = start_mcp(server, {"db": str(seeded), "python": sys.executable, "bench_root": str(ROOT)}, log)
        try:
            tools = client.request("tools/list")["result"]["tools"]
            assert sorted(tool["name"] for tool in tools) == sorted([
                "list_issues", "show_issue", "create_issue", "close_issue", "reopen_issue",
                "comment_issue", "add_label", "remove_label", "assign_issue",
            ])  # fmt: skip
            listed = client.call("list_issues", {})
            assert listed["content"][0]["text"] == db.render_list(db.list_issues(seeded))
            assert client.call("close_issue", {"number": 2})["content"][0]["text"] == "closed issue #2"
            refused = client.call("close_issue", {"number": 2})
            assert refused["isError"] is True
            assert "issue #2 is already closed" in refused["content"][0]["text"]
        finally:
            client.close()
    expected = seed_state()
    _set(2, "state", "closed")(expected)
    assert db.snapshot(seeded) == expected


# --- the bench's hooks, and every scripted solution replayed against the real tools ----------------


def test_provision_and_teardown(tmp_path):
    trial = trial_for(tmp_path, "cli-skill", "close-export")
    environment = hooks.pytest_benchcell_provision(trial=trial)
    assert environment.values == {"db": str(trial.workdir / "tracker.db")}
    assert hooks.pytest_benchcell_snapshot(trial=trial, environment=environment) == seed_state()
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)
    assert not environment.data.exists()
    hooks.pytest_benchcell_teardown(trial=trial, environment=None)  # provisioning failed: nothing to release


def test_check_state_reports_a_missing_change_and_a_collateral_one(tmp_path):
    trial = trial_for(tmp_path, "cli-skill", "close-export")
    environment = hooks.pytest_benchcell_provision(trial=trial)
    untouched = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert hooks.pytest_benchcell_check_state(trial=trial, environment=environment, snapshot=untouched) == [
        "issue #2 state: expected 'closed', found 'open'"
    ]
    db.close_issue(environment.data, 2)
    db.close_issue(environment.data, 1)
    db.create_issue(environment.data, "Oops")
    overdone = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert hooks.pytest_benchcell_check_state(trial=trial, environment=environment, snapshot=overdone) == [
        "issue #1 state: expected 'open', found 'closed'",
        "unexpected issue #9 'Oops'",
    ]


def test_the_bench_covers_every_tier_and_arm():
    assert sorted(task.tier for task in BENCH.tasks.values()) == sorted(BENCH.tiers)
    assert set(BENCH.arms) == {"cli-skill", "cli-bare", "mcp"}
    assert BENCH.arms["mcp"].tools == ()
    assert "tracker list" in BENCH.arms["cli-skill"].system_prompt_addition  # the skill's body


def test_the_skill_arm_needs_fewer_steps_than_the_bare_arm(tmp_path):
    for task in BENCH.tasks:
        skill = hooks.pytest_benchcell_script(trial=trial_for(tmp_path, "cli-skill", task), environment=None)
        bare = hooks.pytest_benchcell_script(trial=trial_for(tmp_path, "cli-bare", task), environment=None)
        assert len(skill) < len(bare), task


def test_unknown_cells_have_no_script(tmp_path):
    trial = TrialInfo("other-arm", "count-open", "read", 1, "scripted", tmp_path, tmp_path)
    assert hooks.pytest_benchcell_script(trial=trial, environment=None) is None


def replay_shell(arm, steps, values, cwd):
    env = {**os.environ, **{k: fill_placeholders(v, values, where=arm.name) for k, v in arm.env.items()}}
    env["PATH"] = os.pathsep.join([*arm.path, env["PATH"]])
    for step in steps:
        assert step.name == "Bash"
        command = step.input["command"]
        for part in command.split("&&"):  # only the arm's binary, never a denied subcommand
            program, *args = part.split()
            assert program in arm.binaries and args[:1] != ["admin"], command
        result = subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr)


def replay_mcp(arm, steps, values, log):
    (server,) = arm.mcp_servers
    client = start_mcp(server, values, log)
    try:
        for step in steps:
            prefix = f"mcp__{server.name}__"
            assert step.name.startswith(prefix)
            result = client.call(step.name.removeprefix(prefix), step.input)
            assert result["isError"] is False, (step, result)
    finally:
        client.close()


@pytest.mark.parametrize("task", list(BENCH.tasks))
@pytest.mark.parametrize("arm", list(BENCH.arms))
def test_scripted_solution_solves_the_task(tmp_path, arm, task):
    trial = trial_for(tmp_path, arm, task)
    environment = hooks.pytest_benchcell_provision(trial=trial)
    steps = hooks.pytest_benchcell_script(trial=trial, environment=environment)
    *actions, answer = steps
    assert isinstance(answer, Answer) and all(isinstance(step, ToolUse) for step in actions)
    assert len(steps) <= BENCH.turn_cap

    values = builtin_values(environment)
    if BENCH.arms[arm].mcp_servers:
        with open(tmp_path / "mcp.log", "w") as log:
            replay_mcp(BENCH.arms[arm], actions, values, log)
    else:
        replay_shell(BENCH.arms[arm], actions, values, trial.agent_cwd)

    spec = BENCH.tasks[task]
    snapshot = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    differences = hooks.pytest_benchcell_check_state(trial=trial, environment=environment, snapshot=snapshot)
    assert differences == []  # read tasks too: reading changed nothing
    if spec.check_state:
        assert snapshot != seed_state()
    required = [fact_from_config(fact) for fact in spec.required_facts]
    forbidden = [fact_from_config(fact) for fact in spec.forbidden_facts]
    assert check_answer(answer.text, required, forbidden) == []
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)


def test_count_open_facts_reject_wrong_counts():
    task = BENCH.tasks["count-open"]
    required = [fact_from_config(fact) for fact in task.required_facts]
    forbidden = [fact_from_config(fact) for fact in task.forbidden_facts]
    for good in ("There are 5 open issues.", "Five open issues.", "5 issues are open: #1, #2, #4, #5 and #8."):
        assert check_answer(good, required, forbidden) == [], good
    for bad in ("There are 8 open issues.", "3 open issues", "15 open issues"):
        assert check_answer(bad, required, forbidden) != [], bad
