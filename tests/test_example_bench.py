"""The example bench at the repo root (bench.toml, conftest.py, bench/): its tracker service, its four
interfaces, and that every scripted solution reaches its intended verdict against the real service
and the real tools, scored by the plugin's built-in checker (the ground truth with the task's
declared `changes` applied, compared in full with the end state)."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_benchcell import Probe, checker, isolation
from pytest_benchcell.checker import check_answer, fact_from_config
from pytest_benchcell.config import fill_placeholders, load_bench
from pytest_benchcell.environment import TrialInfo
from pytest_benchcell.scripted import Answer, Repeat
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
db, service = hooks.db, hooks.service  # bench/tracker/
import bench_scripts  # noqa: E402  (bench/ is on sys.path through conftest.py)

BENCH = load_bench(ROOT / "bench.toml")
POLICY = checker.StatePolicy(**BENCH.state_policy)
OPEN = [1, 2, 4, 5, 8, 9, 10, 11, 12]
SCORED = [task for task, spec in BENCH.tasks.items() if not spec.bonus]
BONUS = [task for task, spec in BENCH.tasks.items() if spec.bonus]
CELLS = [(arm, task) for arm in BENCH.arms for task in BENCH.tasks]
APPLICABLE_CELLS = [(arm, task) for arm, task in CELLS if BENCH.tasks[task].applies_to(arm)]


def _no_hook(**kwargs):
    return None


# The bench's scoring hooks as the plugin sees them: conftest.py implements none, so
# differences_for falls back to the built-in checker.
CHECKER_HOOKS = SimpleNamespace(
    pytest_benchcell_score=_no_hook, pytest_benchcell_expected_state=_no_hook, pytest_benchcell_check_state=_no_hook
)


def seed_state():
    return json.loads(json.dumps(db.seed_document()))


def port_is_listening(port):
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


# --- the suite's shape ------------------------------------------------------------------------------


def test_twenty_scored_tasks_five_per_tier_and_three_bonus():
    assert len(SCORED) == 20
    for tier in BENCH.tiers:
        assert len([t for t in SCORED if BENCH.tasks[t].tier == tier]) == 5, tier
    assert len(BONUS) == 3
    assert set(BENCH.arms) == {"cli-skill", "cli-skill-native", "native", "mcp", "raw-api"}
    for task in BONUS:  # capability-asymmetric: some arms, not all
        assert 0 < len(BENCH.tasks[task].arms) < len(BENCH.arms), task


def test_intents_name_issues_by_title_or_property_never_by_number_or_command():
    commands = ("`tracker", "tracker list", "tracker close", "issuectl", "curl", "mcp__", "list_issues", "/api")
    for task_id, task in BENCH.tasks.items():
        assert "#" not in task.intent and not any(c in task.intent for c in commands), task_id
        numbers = [word for word in task.intent.replace("`", " ").split() if word.strip(".,").isdigit()]
        assert numbers in ([], ["4"]), (task_id, numbers)  # "about 4 seconds" is a property


def test_read_tasks_have_required_and_forbidden_facts_and_mutations_check_the_whole_state():
    for task_id, task in BENCH.tasks.items():
        if task.check_state:
            assert task.changes and not task.required_facts, task_id
            checker.apply_changes(seed_state(), task.changes)  # every path resolves on the seed
        else:
            assert task.required_facts and task.forbidden_facts, task_id


# --- the service ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    """One service for the module's tests; `fresh` reseeds it (cheaper than a process per test)."""
    started = service.start(tmp_path_factory.mktemp("service") / "tracker.db")
    yield started
    started.stop()


@pytest.fixture
def fresh(tracker):
    tracker.seed()
    return tracker


def test_the_service_serves_the_seed_to_the_agents_token_only(fresh):
    assert fresh.snapshot() == seed_state()
    assert service.seed_visible(fresh)
    assert [issue["number"] for issue in fresh.client().list_issues()] == OPEN
    stranger = service.Client(fresh.url, "not-the-token-at-all")
    with pytest.raises(service.ApiError, match="not valid"):
        stranger.list_issues()
    with pytest.raises(service.ApiError, match="admin token"):
        fresh.client().request("GET", "/admin/snapshot")  # the agent cannot read or reseed behind the API


def test_the_service_pages_and_explains_its_errors(fresh):
    page, total = fresh.client().list_page("open", 2, 5)
    assert [issue["number"] for issue in page] == [9, 10, 11, 12] and total == 9
    api = fresh.client()
    for call, message in [
        (lambda: api.show_issue(99), "there is no issue #99"),
        (lambda: api.patch_issue(3, state="closed"), "already closed"),
        (lambda: api.add_label(4, "crash"), "known labels: bug, docs, enhancement, performance, question"),
        (lambda: api.request("GET", "/nowhere"), "GET /api lists the routes"),
        (lambda: api.request("POST", "/issues/2/labels", {"labels": ["bug"]}), "needs 'label'"),
    ]:
        with pytest.raises(service.ApiError, match=message):
            call()
    assert fresh.snapshot() == seed_state()


def test_provision_ready_snapshot_teardown_leave_no_process_and_no_socket(tmp_path):
    trial = TrialInfo("raw-api", "close-export", "single-mutation", 1, "scripted", tmp_path, tmp_path)
    environment = hooks.pytest_benchcell_provision(trial=trial)
    tracker = environment.data
    assert environment.values == {"url": tracker.url, "token": tracker.token, "port": str(tracker.port)}
    assert set(environment.secrets) == {tracker.token, tracker.admin_token}
    assert tracker.url.startswith("http://127.0.0.1:") and port_is_listening(tracker.port)
    assert hooks.pytest_benchcell_ready(trial=trial, environment=environment) is True
    assert hooks.pytest_benchcell_snapshot(trial=trial, environment=environment) == seed_state()
    hooks.pytest_benchcell_teardown(trial=trial, environment=environment)
    assert tracker.process.poll() is not None and not port_is_listening(tracker.port)
    hooks.pytest_benchcell_teardown(trial=trial, environment=None)  # provisioning failed: nothing to stop


def test_a_failing_seed_stops_the_service_inside_provisioning(tmp_path, monkeypatch):
    started = []
    real_start = service.start

    def start(path):
        started.append(real_start(path))
        return started[-1]

    def broken_seed(self):
        raise service.ServiceError("seeding failed")

    monkeypatch.setattr(service, "start", start)
    monkeypatch.setattr(service.Service, "seed", broken_seed)
    trial = TrialInfo("raw-api", "close-export", "single-mutation", 1, "scripted", tmp_path, tmp_path)
    with pytest.raises(service.ServiceError):
        hooks.pytest_benchcell_provision(trial=trial)
    (tracker,) = started
    assert tracker.process.poll() is not None and not port_is_listening(tracker.port)


def test_the_service_exits_when_its_parent_goes_away(tmp_path):
    tracker = service.start(tmp_path / "tracker.db")
    tracker.process.stdin.close()  # what the kernel does when the harness is killed
    assert tracker.process.wait(5) == 0
    assert not port_is_listening(tracker.port)


def test_the_probe_finds_self_assignment_possible_and_drops_nothing():
    probe = hooks.pytest_benchcell_probe(bench=BENCH)
    assert isinstance(probe, Probe)
    assert dict(probe.verdict) == {"self_assign": True} and probe.drop == () and dict(probe.swap) == {}


def test_the_probe_drops_the_self_assignment_tasks_where_it_is_refused(monkeypatch):
    def refuse(self, number, **changes):
        raise service.ApiError("you cannot assign an issue to yourself")

    monkeypatch.setattr(service.Client, "patch_issue", refuse)
    probe = hooks.pytest_benchcell_probe(bench=BENCH)
    assert dict(probe.verdict) == {"self_assign": False}
    assert set(probe.drop) == {"take-question", "triage-perf", "file-crash-report"}
    for task in probe.drop:  # exactly the tasks whose end state assigns an issue to "me"
        assert "me" in json.dumps([c["value"] for c in BENCH.tasks[task].changes]), task


# --- the interfaces ---------------------------------------------------------------------------------


def run_cli(tracker, *argv, stdin=None):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TRACKER_URL": tracker.url, "TRACKER_TOKEN": tracker.token}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, input=stdin)


def test_tracker_cli_reads_changes_and_exports(fresh):
    listed = run_cli(fresh, "tracker", "list")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [f"#{n}" for n in OPEN]
    assert "#2   open   CSV export drops the last row  [bug]  @dana" in listed.stdout
    assert run_cli(fresh, "tracker", "close", "2").stdout == "closed issue #2\n"
    assert run_cli(fresh, "tracker", "create", "--title", "New", "--body-file", "-", stdin="Text").stdout == "created issue #13\n"
    exported = run_cli(fresh, "tracker", "export", "--state", "all").stdout.splitlines()
    assert exported[0] == "number,title,state,labels" and len(exported) == 1 + 13
    refused = run_cli(fresh, "tracker", "close", "3")
    assert (refused.returncode, refused.stderr) == (1, "tracker: error: issue #3 is already closed\n")
    assert run_cli(fresh, "tracker", "admin", "reset").returncode == 1  # the admin token is the harness's


def test_issuectl_is_plainer_and_pages_by_five(fresh):
    first = run_cli(fresh, "issuectl", "issues").stdout.splitlines()
    assert first[0] == "NUMBER\tSTATE\tTITLE\tLABELS\tASSIGNEE" and len(first) == 1 + 5 + 1
    assert first[-1] == "page 1/2, 9 open issues; next: issuectl issues open page 2"
    assert run_cli(fresh, "issuectl", "set", "8", "assignee", "lee").stdout.startswith("8\topen\tKeyboard shortcut")
    assert run_cli(fresh, "issuectl", "frobnicate").returncode == 2
    assert fresh.snapshot()["issues"][7]["assignees"] == ["lee"]


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


def start_mcp(tracker, log):
    (server,) = BENCH.arms["mcp"].mcp_servers
    values = {"url": tracker.url, "token": tracker.token, "python": sys.executable, "bench_root": str(ROOT)}
    fill = lambda text: fill_placeholders(text, values, where="mcp")  # noqa: E731
    client = McpStdio(fill(server.command), [fill(a) for a in server.args], {k: fill(v) for k, v in server.env.items()}, log)
    assert client.initialize()["serverInfo"]["name"] == "tracker"
    return client


@pytest.fixture(scope="module")
def mcp_client(tracker, tmp_path_factory):
    with open(tmp_path_factory.mktemp("mcp") / "mcp.log", "w") as log:
        client = start_mcp(tracker, log)
        yield client
        client.close()


def test_mcp_server_speaks_to_the_service(fresh, mcp_client):
    tools = sorted(tool["name"] for tool in mcp_client.request("tools/list")["result"]["tools"])
    assert tools == sorted(["list_issues", "show_issue", "create_issue", "close_issue", "reopen_issue", "comment_issue",
                            "add_label", "remove_label", "assign_issue", "list_labels", "create_label"])  # fmt: skip
    assert mcp_client.call("close_issue", {"number": 2})["content"][0]["text"] == "closed issue #2"
    refused = mcp_client.call("close_issue", {"number": 2})
    assert refused["isError"] is True and "issue #2 is already closed" in refused["content"][0]["text"]


# --- the raw-api arm's confinement ---------------------------------------------------------------------


def raw_api_decision(command, url="http://127.0.0.1:41234/api"):
    rules = arm_rules(BENCH.arms["raw-api"], values={"url": url, "token": "t" * 32, "port": url.split(":")[2].split("/")[0]})
    return isolation.check_tool_call("Bash", {"command": command}, rules)


@pytest.mark.parametrize("command", [
    'curl -s -H "Authorization: Bearer $TRACKER_TOKEN" "$TRACKER_URL/issues?state=open" | jq length',
    "curl -s http://127.0.0.1:41234/api/issues/2",
    'curl -sX PATCH -d \'{"state":"closed"}\' "${TRACKER_URL}/issues/2"',
])  # fmt: skip
def test_raw_api_may_reach_the_service(command):
    assert raw_api_decision(command).allowed, raw_api_decision(command).reason


@pytest.mark.parametrize("command, reason", [
    ("curl -s https://example.com/", "may only reach http://127.0.0.1:41234/api"),
    ("curl -s http://127.0.0.1:8080/api/issues", "may only reach"),
    ("curl -s http://127.0.0.1:41234@evil.example/api", "may only reach"),
    ('curl -s -x http://proxy:3128 "$TRACKER_URL/issues"', "through another host"),
    ('curl -s --resolve 127.0.0.1:41234:10.0.0.1 "$TRACKER_URL"', "which address"),
    ('curl -s "$OTHER/x"', "only known when it runs"),
    ('TRACKER_URL=http://evil.example curl -s "$TRACKER_URL"', "may not be changed"),
    ("export https_proxy=http://proxy:3128", "may not be changed"),
    ('curl -s -o /tmp/x "$TRACKER_URL"', "writes a file"),
    ("wget http://127.0.0.1:41234/api", "not available"),
])  # fmt: skip
def test_raw_api_is_refused_elsewhere_with_a_reason(command, reason):
    decision = raw_api_decision(command)
    assert not decision.allowed and reason in decision.reason, decision.reason


# --- every arm x task: the scripted solution reaches its intended verdict ------------------------------


def test_exactly_the_non_applicable_cells_lack_a_script():
    without = [(arm, task) for arm, task in CELLS if bench_scripts.script_for(arm, task) is None]
    assert without == [(arm, task) for arm, task in CELLS if not BENCH.tasks[task].applies_to(arm)]
    assert bench_scripts.script_for("other-arm", "count-open") is None


def test_the_failures_are_few_and_of_three_kinds():
    outcomes = [bench_scripts.intended_outcome(arm, task) for arm, task in APPLICABLE_CELLS]
    assert sorted(set(outcomes)) == ["confused", "incorrect", "pass"]
    assert outcomes.count("pass") == len(APPLICABLE_CELLS) - 3


def replay(tracker, mcp_client, arm, steps, cwd):
    """Play each tool call as the CLI would: the guard first, then the real tool. Returns the outputs
    and whether the script ends in a loop (played a few times: each time refused by the service)."""
    rules = arm_rules(BENCH.arms[arm], values={"url": tracker.url, "token": tracker.token, "port": str(tracker.port)})
    env = {**os.environ, "TRACKER_URL": tracker.url, "TRACKER_TOKEN": tracker.token,
           "PATH": os.pathsep.join([*BENCH.arms[arm].path, os.environ["PATH"]])}  # fmt: skip
    outputs, looped = [], False
    for step in steps:
        if isinstance(step, Repeat):
            looped, step = True, step.step
        if isinstance(step, Answer):
            continue
        decision = isolation.check_tool_call(step.name, step.input, rules)
        if not decision.allowed:
            outputs.append(f"refused: {decision.reason}")
            continue
        for _ in range(3 if looped else 1):
            if step.name == "Skill":  # the CLI loads the skill's body into the conversation: no tool runs
                outputs.append(f"Launching skill: {step.input['skill']}")
            elif step.name == "Bash":
                result = subprocess.run(["bash", "-o", "pipefail", "-c", step.input["command"]], env=env, cwd=cwd,
                                        capture_output=True, text=True)  # fmt: skip
                assert result.returncode == 0, (step, result.stderr)
                outputs.append(result.stdout + result.stderr)
            else:
                result = mcp_client.call(step.name.removeprefix("mcp__tracker__"), step.input)
                assert result["isError"] is False, (step, result)
                outputs.append(result["content"][0]["text"])
    return outputs, looped


@pytest.mark.parametrize("arm, task", APPLICABLE_CELLS, ids=[f"{arm}-{task}" for arm, task in APPLICABLE_CELLS])
def test_every_scripted_solution_reaches_its_intended_verdict(fresh, mcp_client, tmp_path, arm, task):
    steps = bench_scripts.script_for(arm, task)
    spec = BENCH.tasks[task]
    ground_truth = fresh.snapshot()
    outputs, looped = replay(fresh, mcp_client, arm, steps, tmp_path)
    if looped:
        verdict = "confused"  # it never answers: the turn cap ends it
        assert len(steps) < BENCH.turn_cap
        assert all('"error"' in output for output in outputs[-3:])  # the loop makes no progress
    else:
        answer = steps[-1]
        assert isinstance(answer, Answer) and len(steps) <= BENCH.turn_cap
        after = fresh.snapshot()
        info = TrialInfo(arm, task, spec.tier, 1, "scripted", tmp_path, tmp_path)
        differences = differences_for(BENCH, spec, CHECKER_HOOKS, info, None, answer.text,
                                      ground_truth if spec.check_state else None, after if spec.check_state else None)  # fmt: skip
        verdict = "incorrect" if differences else "pass"
        if not spec.check_state:
            assert after == ground_truth  # reading changed nothing
    assert verdict == bench_scripts.intended_outcome(arm, task), (arm, task, outputs)


def test_the_native_arm_miscounts_from_one_page(fresh, mcp_client, tmp_path):
    outputs, _ = replay(fresh, mcp_client, "native", bench_scripts.script_for("native", "count-open"), tmp_path)
    assert outputs[-1].strip() == "7"  # header + 5 rows + footer: the answer's wrong count is what it saw


def test_the_tracker_arm_needs_the_fewest_steps():
    for task in SCORED:
        skill = len(bench_scripts.script_for("cli-skill", task))
        assert skill <= min(len(bench_scripts.script_for(arm, task)) for arm in ("native", "raw-api")), task


# --- the answer facts of the read tasks --------------------------------------------------------------


@pytest.mark.parametrize("task, good, bad", [
    ("count-open", ["There are 9 open issues.", "Nine open issues.", "**9** issues are open"], ["There are 7 open issues.", "5 open", "19 open issues"]),
    ("open-bugs", ['"CSV export drops the last row" and "Sync fails behind a proxy"'],
     ["CSV export drops the last row, Sync fails behind a proxy, Crash on startup with an empty config"]),
    ("csv-assignee", ["It is assigned to dana."], ["dana, previously lee", "It is assigned to sam."]),
    ("search-timing", ["About 4 seconds.", "four seconds"], ["4 seconds, sometimes 10 seconds", "about 3 seconds"]),
    ("export-open-csv", ["The CSV has 9 data rows.", "It has **9** rows."], ["10 rows", "8 data rows", "It has 19 rows."]),
])  # fmt: skip
def test_read_facts_accept_the_answer_and_reject_wrong_ones(task, good, bad):
    spec = BENCH.tasks[task]
    required = [fact_from_config(fact) for fact in spec.required_facts]
    forbidden = [fact_from_config(fact) for fact in spec.forbidden_facts]
    for answer in good:
        assert check_answer(answer, required, forbidden) == [], answer
    for answer in bad:
        assert check_answer(answer, required, forbidden) != [], answer
