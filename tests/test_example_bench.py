"""The example bench at the repo root (bench.toml, conftest.py, bench/): its tracker, its two
interfaces, and that every scripted solution really solves its task against the real tools, as
scored by the plugin's built-in checker (the ground truth with the task's declared `changes`
applied, compared in full with the end state)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_benchcell import Probe, checker, isolation
from pytest_benchcell.checker import check_answer, fact_from_config
from pytest_benchcell.config import fill_placeholders, load_bench
from pytest_benchcell.environment import TrialInfo
from pytest_benchcell.scripted import Answer, ToolUse
from pytest_benchcell.trial import arm_rules, differences_for

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
POLICY = checker.StatePolicy(**BENCH.state_policy)
OPEN = [1, 2, 4, 5, 8]
MUTATION_TASKS = [task_id for task_id, task in BENCH.tasks.items() if task.check_state]
CELLS = [(arm, task) for arm in BENCH.arms for task in BENCH.tasks]
APPLICABLE_CELLS = [(arm, task) for arm, task in CELLS if BENCH.tasks[task].applies_to(arm)]


def _no_hook(**kwargs):
    return None


# The bench's scoring hooks as the plugin sees them now that conftest.py implements none of them:
# every one answers None, so differences_for falls back to the built-in checker.
CHECKER_HOOKS = SimpleNamespace(
    pytest_benchcell_score=_no_hook,
    pytest_benchcell_expected_state=_no_hook,
    pytest_benchcell_check_state=_no_hook,
)


@pytest.fixture
def seeded(tmp_path):
    path = tmp_path / "tracker.db"
    db.seed(path)
    return path


def seed_state():
    """The snapshot of a freshly seeded tracker (a new copy on every call)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tracker.db"
        db.seed(path)
        return db.snapshot(path)


def changed(state, *changes):
    """`state` with changes in bench.toml's change language applied (a copy)."""
    return checker.apply_changes(state, list(changes))


def assert_state(expected, actual):
    assert checker.diff_states(expected, actual, POLICY) == []
    assert actual == expected  # the tracker's snapshot is deterministic: exact equality too


def trial_for(tmp_path, arm, task):
    workdir, cwd = tmp_path / "work", tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    return TrialInfo(arm, task, BENCH.tasks[task].tier, 1, "scripted", workdir, cwd)


def score(task_id, info, environment, answer, ground_truth, after):
    """The verdict a live trial reaches (trial._score): ground truth and end state only for check_state."""
    task = BENCH.tasks[task_id]
    if not task.check_state:
        ground_truth = after = None
    return differences_for(BENCH, task, CHECKER_HOOKS, info, environment, answer, ground_truth, after)


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
    return {"op": "set", "path": f"issues[number={number}].{key}", "value": value}


NEW_ISSUE = {"number": 9, "title": "New", "body": "Text", "state": "open", "labels": [], "assignees": [], "comments": []}

OPERATIONS = {
    "close": (lambda p: db.close_issue(p, 2), [_set(2, "state", "closed")]),
    "reopen": (lambda p: db.reopen_issue(p, 3), [_set(3, "state", "open")]),
    "comment": (
        lambda p: db.add_comment(p, 5, "On it."),
        [{"op": "append", "path": "issues[number=5].comments", "value": {"author": "me", "body": "On it."}}],
    ),
    "add label": (lambda p: db.add_label(p, 4, "bug"), [{"op": "add", "path": "issues[number=4].labels", "value": "bug"}]),
    "add 2nd label": (
        lambda p: db.add_label(p, 2, "performance"),
        [{"op": "add", "path": "issues[number=2].labels", "value": "performance"}],
    ),
    "remove label": (
        lambda p: db.remove_label(p, 1, "enhancement"),
        [{"op": "remove", "path": "issues[number=1].labels", "value": "enhancement"}],
    ),
    "assign": (lambda p: db.assign(p, 1, "me"), [_set(1, "assignees", ["me"])]),
    "reassign": (lambda p: db.assign(p, 2, "@lee"), [_set(2, "assignees", ["lee"])]),
    "create": (lambda p: db.create_issue(p, "New", "Text"), [{"op": "append", "path": "issues", "value": NEW_ISSUE}]),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_each_operation_changes_exactly_what_it_should(seeded, operation):
    run, changes = OPERATIONS[operation]
    run(seeded)
    assert_state(changed(seed_state(), *changes), db.snapshot(seeded))


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
    assert listed == ["list", "show", "create", "close", "reopen", "comment", "label", "assign", "export", "admin"]


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
    expected = changed(
        seed_state(),
        _set(2, "state", "closed"),
        {"op": "append", "path": "issues[number=5].comments", "value": {"author": "me", "body": "On it."}},
        {"op": "add", "path": "issues[number=4].labels", "value": "bug"},
        _set(1, "assignees", ["me"]),
        {"op": "append", "path": "issues", "value": NEW_ISSUE},
    )
    assert_state(expected, db.snapshot(seeded))


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


# --- `tracker export`: CSV of the issues (a CLI-only command; the MCP server has no such tool) -----

CSV_HEADER = ["number", "title", "state", "labels"]


def export_rows(*args, db_path, cwd):
    result = tracker("export", *args, db_path=db_path, cwd=cwd)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n")  # one newline, no blank line
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == CSV_HEADER
    assert all(len(row) == len(CSV_HEADER) for row in rows)
    return rows[1:]


@pytest.mark.parametrize("state, numbers", [(None, OPEN), ("open", OPEN), ("closed", [3, 6, 7]), ("all", list(range(1, 9)))])
def test_cli_export_prints_a_header_and_one_row_per_issue(seeded, tmp_path, state, numbers):
    rows = export_rows(*([] if state is None else ["--state", state]), db_path=seeded, cwd=tmp_path)
    assert [int(row[0]) for row in rows] == numbers
    listed = db.list_issues(seeded, state or "open")
    assert rows == [[str(i["number"]), i["title"], i["state"], " ".join(i["labels"])] for i in listed]
    assert db.snapshot(seeded) == seed_state()  # exporting is a read


def test_cli_export_row_count_is_what_the_export_task_asks(seeded, tmp_path):
    # The export-open-csv task's expected answer: 5 data rows (header not counted).
    assert len(export_rows("--state", "open", db_path=seeded, cwd=tmp_path)) == 5
    shown = tracker("export", db_path=seeded, cwd=tmp_path).stdout.splitlines()
    assert shown[0] == "number,title,state,labels"
    assert shown[1:3] == ["1,Add a dark mode,open,enhancement", "2,CSV export drops the last row,open,bug"]
    assert shown[3] == "4,App quits when I open Preferences,open,"  # no labels: an empty last field
    assert len(shown) == 1 + len(OPEN)


def test_cli_export_quotes_commas_and_quotes_and_labels_are_space_separated(seeded, tmp_path):
    db.create_issue(seeded, 'Export, then "import"', "x")
    db.add_label(seeded, 9, "bug")
    db.add_label(seeded, 9, "performance")
    rows = export_rows(db_path=seeded, cwd=tmp_path)
    assert rows[-1] == ["9", 'Export, then "import"', "open", "bug performance"]
    assert len(rows) == len(OPEN) + 1


def test_cli_export_with_no_matching_issue_prints_only_the_header(seeded, tmp_path):
    for number in OPEN:
        db.close_issue(seeded, number)
    assert export_rows(db_path=seeded, cwd=tmp_path) == []


def test_cli_export_rejects_an_unknown_state(seeded, tmp_path):
    result = tracker("export", "--state", "done", db_path=seeded, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert "invalid choice: 'done'" in result.stderr


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
    assert_state(changed(seed_state(), _set(2, "state", "closed")), db.snapshot(seeded))


# --- the bench's hooks ---------------------------------------------------------------------------


def test_provision_and_teardown(tmp_path):
    trial = trial_for(tmp_path, "cli-skill", "close-export")
    environment = hooks.pytest_benchcell_provision(trial=trial)
    assert environment.values == {"db": str(trial.workdir / "tracker.db")}
    assert hooks.pytest_benchcell_snapshot(trial=trial, environment=environment) == seed_state()
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)
    assert not environment.data.exists()
    hooks.pytest_benchcell_teardown(trial=trial, environment=None)  # provisioning failed: nothing to release


def test_scoring_is_left_to_the_built_in_checker():
    # conftest.py no longer computes expected states or diffs: bench.toml's `changes` do.
    for name in ("expected_state", "diff_states", "pytest_benchcell_check_state",
                 "pytest_benchcell_expected_state", "pytest_benchcell_score"):  # fmt: skip
        assert not hasattr(hooks, name), name
    for task_id in MUTATION_TASKS:
        assert BENCH.tasks[task_id].changes, task_id
        checker.apply_changes(seed_state(), BENCH.tasks[task_id].changes)  # every path resolves on the seed
    for task_id, task in BENCH.tasks.items():
        if not task.check_state:
            assert task.changes == () and task.required_facts, task_id


def test_the_probe_finds_self_assignment_possible_and_swaps_nothing(tmp_path):
    probe = hooks.pytest_benchcell_probe(bench=BENCH)
    assert isinstance(probe, Probe)
    assert dict(probe.verdict) == {"self_assign": True}
    assert dict(probe.swap) == {}


def test_the_probe_swaps_in_the_variant_when_self_assignment_is_refused(monkeypatch):
    def refuse(path, number, user):
        raise db.TrackerError("you cannot assign an issue to yourself")

    monkeypatch.setattr(db, "assign", refuse)
    probe = hooks.pytest_benchcell_probe(bench=BENCH)
    assert dict(probe.verdict) == {"self_assign": False}
    assert dict(probe.swap) == {"triage-perf": "triage-perf-no-assign"}
    for original, variant in probe.swap.items():  # both ends are tasks of the bench, of the same tier
        assert BENCH.tasks[original].tier == BENCH.tasks[variant].tier


def test_the_bench_covers_every_tier_and_arm():
    assert {task.tier for task in BENCH.tasks.values()} == set(BENCH.tiers)
    assert set(BENCH.arms) == {"cli-skill", "cli-bare", "mcp"}
    assert BENCH.arms["mcp"].tools == ()
    assert "tracker list" in BENCH.arms["cli-skill"].system_prompt_addition  # the skill's body
    assert [task_id for task_id, task in BENCH.tasks.items() if task.bonus] == ["export-open-csv"]
    assert [(arm, task) for arm, task in CELLS if (arm, task) not in APPLICABLE_CELLS] == [("mcp", "export-open-csv")]


# --- the built-in checker on this tracker: ground truth + bench.toml `changes` vs the end state -----

UNTOUCHED = {  # what the checker reports when the agent changed nothing
    "close-export": ['issues[number=2].state: expected "closed", got "open"'],
    "label-crash-dialog": ['issues[number=4].labels: missing "bug"'],
    "triage-perf": [
        'issues[number=5].assignees: missing "me"',
        'issues[number=5].comments: missing {"author":"me","body":"Profiling this week."}',
        'issues[number=5].labels: missing "performance"',
    ],
    "triage-perf-no-assign": [
        'issues[number=5].comments: missing {"author":"me","body":"Profiling this week."}',
        'issues[number=5].labels: missing "performance"',
    ],
}


def test_every_mutation_task_has_its_untouched_verdict():
    assert sorted(UNTOUCHED) == sorted(MUTATION_TASKS)


def scripted(tmp_path, arm, task):
    trial = trial_for(tmp_path, arm, task)
    environment = hooks.pytest_benchcell_provision(trial=trial)
    steps = hooks.pytest_benchcell_script(trial=trial, environment=environment)
    assert steps is not None, (arm, task)
    *actions, answer = steps
    return trial, environment, actions, answer


@pytest.mark.parametrize("task", MUTATION_TASKS)
def test_the_checker_passes_the_solution_and_fails_a_missing_or_a_collateral_change(tmp_path, task):
    trial, environment, actions, answer = scripted(tmp_path, "cli-skill", task)
    ground_truth = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert ground_truth == seed_state()

    # Nothing done: every declared change is reported missing, and nothing else.
    assert score(task, trial, environment, answer.text, ground_truth, ground_truth) == UNTOUCHED[task]

    # The scripted solution: exactly the declared changes.
    replay_shell(BENCH.arms["cli-skill"], actions, builtin_values(environment), trial.agent_cwd)
    solved = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert score(task, trial, environment, answer.text, ground_truth, solved) == []
    assert_state(checker.apply_changes(ground_truth, BENCH.tasks[task].changes), solved)

    # The solution plus changes nobody asked for: collateral differences, and only those.
    db.close_issue(environment.data, 1)
    db.create_issue(environment.data, "Oops")
    db.add_comment(environment.data, 2, "Looking.")
    overdone = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert score(task, trial, environment, answer.text, ground_truth, overdone) == [
        'issues[number=1].state: expected "open", got "closed"',
        'issues[number=2].comments: unexpected {"author":"me","body":"Looking."}',
        "unexpected issues[number=9] (collateral change)",
    ]
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)


def test_the_checker_compares_labels_and_comments_as_multisets_and_collapses_whitespace(seeded):
    # Label order is the tracker's (sorted), not the change list's; a comment differing only in
    # whitespace is the same comment under the default policy.
    task = BENCH.tasks["triage-perf"]
    ground_truth = db.snapshot(seeded)
    db.add_comment(seeded, 5, "  Profiling   this week. ")
    db.assign(seeded, 5, "me")
    db.add_label(seeded, 5, "bug")
    db.add_label(seeded, 5, "performance")
    expected = checker.apply_changes(ground_truth, task.changes)
    assert checker.diff_states(expected, db.snapshot(seeded), POLICY) == ['issues[number=5].labels: unexpected "bug"']
    db.remove_label(seeded, 5, "bug")
    assert checker.diff_states(expected, db.snapshot(seeded), POLICY) == []


def test_a_wrong_assignee_is_a_difference(seeded):
    task = BENCH.tasks["triage-perf"]
    ground_truth = db.snapshot(seeded)
    db.add_label(seeded, 5, "performance")
    db.assign(seeded, 5, "lee")
    db.add_comment(seeded, 5, "Profiling this week.")
    expected = checker.apply_changes(ground_truth, task.changes)
    assert checker.diff_states(expected, db.snapshot(seeded), POLICY) == [
        'issues[number=5].assignees: missing "me"; unexpected "lee"'
    ]


@pytest.mark.parametrize("task", [task_id for task_id in BENCH.tasks if task_id not in MUTATION_TASKS])
def test_read_tasks_are_scored_on_the_answer_alone(tmp_path, task):
    trial, environment, _, answer = scripted(tmp_path, "cli-skill", task)
    assert score(task, trial, environment, answer.text, None, None) == []
    wrong = score(task, trial, environment, "There are 6 of them.", None, None)
    assert len(wrong) == 1 and wrong[0].startswith("missing fact: ")


# --- every scripted solution replayed against the real tools, then scored ----------------------------


def test_the_skill_arm_needs_fewer_steps_than_the_bare_arm(tmp_path):
    for task in BENCH.tasks:
        skill = hooks.pytest_benchcell_script(trial=trial_for(tmp_path, "cli-skill", task), environment=None)
        bare = hooks.pytest_benchcell_script(trial=trial_for(tmp_path, "cli-bare", task), environment=None)
        assert len(skill) < len(bare), task


def test_exactly_the_non_applicable_cells_lack_a_script(tmp_path):
    without = [
        (arm, task) for arm, task in CELLS
        if hooks.pytest_benchcell_script(trial=trial_for(tmp_path, arm, task), environment=None) is None
    ]  # fmt: skip
    assert without == [(arm, task) for arm, task in CELLS if not BENCH.tasks[task].applies_to(arm)]
    assert without == [("mcp", "export-open-csv")]


def test_unknown_cells_have_no_script(tmp_path):
    trial = TrialInfo("other-arm", "count-open", "read", 1, "scripted", tmp_path, tmp_path)
    assert hooks.pytest_benchcell_script(trial=trial, environment=None) is None


def assert_guard_allows(arm, step):
    # The same decision the live guard makes before each tool call (allowed binaries and
    # utilities, no denied subcommand such as `tracker admin`, only the arm's own MCP server).
    decision = isolation.check_tool_call(step.name, step.input, arm_rules(arm))
    assert decision.allowed, (step, decision.reason)


def replay_shell(arm, steps, values, cwd):
    """Run each Bash step as the agent's shell would; return each step's stdout."""
    env = {**os.environ, **{k: fill_placeholders(v, values, where=arm.name) for k, v in arm.env.items()}}
    env["PATH"] = os.pathsep.join([*arm.path, env["PATH"]])
    outputs = []
    for step in steps:
        assert step.name == "Bash"
        assert_guard_allows(arm, step)
        command = step.input["command"]
        result = subprocess.run(["bash", "-o", "pipefail", "-c", command], env=env, cwd=cwd, capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr)
        outputs.append(result.stdout)
    return outputs


def replay_mcp(arm, steps, values, log):
    """Call each MCP step on the arm's server; return each call's text."""
    (server,) = arm.mcp_servers
    client = start_mcp(server, values, log)
    outputs = []
    try:
        for step in steps:
            assert_guard_allows(arm, step)
            prefix = f"mcp__{server.name}__"
            assert step.name.startswith(prefix)
            result = client.call(step.name.removeprefix(prefix), step.input)
            assert result["isError"] is False, (step, result)
            outputs.append(result["content"][0]["text"])
    finally:
        client.close()
    return outputs


@pytest.mark.parametrize("arm, task", APPLICABLE_CELLS, ids=[f"{arm}-{task}" for arm, task in APPLICABLE_CELLS])
def test_scripted_solution_solves_the_task(tmp_path, arm, task):
    trial, environment, actions, answer = scripted(tmp_path, arm, task)
    assert isinstance(answer, Answer) and all(isinstance(step, ToolUse) for step in actions)
    assert len(actions) + 1 <= BENCH.turn_cap
    ground_truth = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)

    values = builtin_values(environment)
    if BENCH.arms[arm].mcp_servers:
        with open(tmp_path / "mcp.log", "w") as log:
            outputs = replay_mcp(BENCH.arms[arm], actions, values, log)
    else:
        outputs = replay_shell(BENCH.arms[arm], actions, values, trial.agent_cwd)

    after = hooks.pytest_benchcell_snapshot(trial=trial, environment=environment)
    assert score(task, trial, environment, answer.text, ground_truth, after) == []
    if BENCH.tasks[task].check_state:
        assert after != ground_truth
    else:
        assert checker.diff_states(ground_truth, after, POLICY) == []  # reading changed nothing
    if task == "export-open-csv":  # the answer's count is what the last command printed
        assert outputs[-1].strip() == "5"
    if task == "count-open":
        assert len(outputs[-1].strip().splitlines()) == len(OPEN)
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)


# --- the answer facts of the read tasks --------------------------------------------------------------


def test_count_open_facts_reject_wrong_counts():
    task = BENCH.tasks["count-open"]
    required = [fact_from_config(fact) for fact in task.required_facts]
    forbidden = [fact_from_config(fact) for fact in task.forbidden_facts]
    for good in ("There are 5 open issues.", "Five open issues.", "5 issues are open: #1, #2, #4, #5 and #8."):
        assert check_answer(good, required, forbidden) == [], good
    for bad in ("There are 8 open issues.", "3 open issues", "15 open issues"):
        assert check_answer(bad, required, forbidden) != [], bad


def test_export_open_csv_facts_reject_wrong_counts():
    task = BENCH.tasks["export-open-csv"]
    required = [fact_from_config(fact) for fact in task.required_facts]
    forbidden = [fact_from_config(fact) for fact in task.forbidden_facts]
    for good in ("The CSV has 5 data rows.", "Five rows, not counting the header.", "It has **5** rows."):
        assert check_answer(good, required, forbidden) == [], good
    for bad in ("The CSV has 6 rows.", "9 data rows", "4 rows", "It has 15 rows."):
        assert check_answer(bad, required, forbidden) != [], bad
