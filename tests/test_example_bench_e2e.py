"""The example bench end to end: real sittings (pytest in a subprocess, the real SDK and CLI, the
scripted model) in a copy of the repo's bench, watched by a small plugin that logs each trial's
service (port, process, tokens) so the test can check what was left behind and what was stored."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benches import file_bytes
from interrupts import as_a_terminal_starts_it
from made_once import made_once

from pytest_benchcell.isolation.procfs import stat_fields
from pytest_benchcell.isolation.sandbox import find_sandbox

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

SPY = '''
import json, os
import pytest

LOG = os.environ["SERVICE_SPY_LOG"]


@pytest.hookimpl(wrapper=True)
def pytest_benchcell_provision(trial):
    environment = yield
    tracker = environment.data
    with open(LOG, "a") as log:
        log.write(json.dumps({"arm": trial.arm, "task": trial.task, "trial": trial.trial, "port": tracker.port,
                              "pid": tracker.process.pid, "secrets": list(environment.secrets)}) + "\\n")
    return environment


if os.environ.get("SERVICE_SPY_STALL"):
    @pytest.hookimpl(tryfirst=True)
    def pytest_benchcell_script(trial, environment):
        from pytest_benchcell.scripted import Answer, Delay
        return [Delay(60, Answer("too late"))]

if os.environ.get("SERVICE_SPY_COMMANDS"):
    @pytest.hookimpl(tryfirst=True)
    def pytest_benchcell_script(trial, environment):
        from pytest_benchcell.scripted import Answer, ToolUse
        commands = json.loads(os.environ["SERVICE_SPY_COMMANDS"])
        return [*(ToolUse("Bash", {"command": command}) for command in commands), Answer("done")]

if os.environ.get("SERVICE_SPY_BREAK_READY"):
    @pytest.hookimpl(tryfirst=True)
    def pytest_benchcell_ready(trial, environment):
        raise RuntimeError("the readiness check broke")
'''


def copy_bench(folder):
    for name in ("bench.toml", "conftest.py"):
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(ROOT / "bench", folder / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    (folder / "service_spy.py").write_text(SPY)
    (folder / "pytest.ini").write_text("[pytest]\n")  # rootdir here, not the repo's pyproject
    return folder


@pytest.fixture
def bench_copy(tmp_path):
    return copy_bench(tmp_path)


def run(folder, *args, env_extra=None, wait=True):
    env = {**os.environ, "SERVICE_SPY_LOG": str(folder / "spy.jsonl"), "PYTHONPATH": os.pathsep.join(filter(None, (str(folder), os.environ.get("PYTHONPATH")))), **(env_extra or {})}
    command = [sys.executable, "-m", "pytest", "-p", "service_spy", "-p", "no:randomly", "--bench-scripted",
               "--bench-store", str(folder / "results"), *args]  # fmt: skip
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=as_a_terminal_starts_it)  # the Ctrl-C test interrupts it
    if not wait:
        return process
    output, _ = process.communicate(timeout=600)
    return process.returncode, output


def spied(folder):
    path = folder / "spy.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def listening(port):
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def alive(pid):
    fields = stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def assert_nothing_left(trials):
    assert trials
    for trial in trials:
        assert not listening(trial["port"]), trial
        assert not alive(trial["pid"]), trial


def stored(folder):
    samples = []
    for path in sorted((folder / "results" / "scripted").glob("*/*.jsonl")):
        samples += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return samples


SWEEP_TASKS = ("reopen-typo", "close-duplicate")
REPORTS = ("md", "json", "html")


def sweep(folder):
    """Every arm x two tasks x three trials with -n 2, then the reports."""
    copy_bench(folder)
    code, output = run(folder, "--bench-arm", "all", "--bench-task", ",".join(SWEEP_TASKS), "--bench-trials", "3", "-n", "2")
    assert code == 1, output  # one cell fails by design (mcp close-duplicate: a collateral edit)
    reports = [f"--bench-report-{kind}={folder / f'report.{kind}'}" for kind in REPORTS]
    code, output = run(folder, *reports)
    assert code == 0 and all((folder / f"report.{kind}").is_file() for kind in REPORTS), output


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One sweep for the whole run, read by the tests below (which must not change it)."""
    return made_once(tmp_path_factory, "example-sweep", sweep)


@pytest.mark.slow
def test_a_parallel_sweep_stores_exactly_one_sample_per_trial(swept):
    samples = stored(swept)
    keys = sorted((s["arm"], s["task"], s["trial"]) for s in samples)
    expected = sorted((arm, task, trial) for arm in ("cli-skill", "cli-skill-native", "native", "mcp", "raw-api")
                      for task in SWEEP_TASKS for trial in (1, 2, 3))  # fmt: skip
    assert keys == expected  # none lost, none twice
    assert {(s["arm"], s["task"], s["outcome"]) for s in samples if s["outcome"] != "pass"} == {
        ("mcp", "close-duplicate", "incorrect")}  # fmt: skip
    assert all(s["status"] == "scored" for s in samples)
    started = spied(swept)
    trials = [t for t in started if t["trial"] != 0]
    assert sorted((t["arm"], t["task"], t["trial"]) for t in trials) == expected
    # The pre-flight, on the xdist controller, provisioned one environment per arm with a shell (trial 0)
    # and one for the arm with an MCP server, which it starts outside the sandbox.
    preflight = sorted(t["arm"] for t in started if t["trial"] == 0)
    assert preflight == (["cli-skill", "cli-skill-native", "mcp", "native", "raw-api"] if find_sandbox().available else ["mcp"])
    assert_nothing_left(started)  # every service stopped, the pre-flight's too: no process, no listening socket


@pytest.mark.slow
def test_a_scripted_sweep_reports_dollars_per_arm_from_the_packages_table(swept):
    from pytest_benchcell.prices import PACKAGE_ORIGIN, package_table, price_usage

    dollars = json.loads((swept / "report.json").read_text())["dollars"]
    assert [row["arm"] for row in dollars["rows"]] == ["cli-skill", "cli-skill-native", "native", "mcp", "raw-api"]
    for row in dollars["rows"]:
        # every trial priced, its cache writes by the lifetime the (scripted) API reported
        assert row["per_trial"]["mean"] > 0 and (row["trials"], row["unknown"], row["default_lifetime"]) == (6, 0, 0), row
        assert row["cli_estimate_per_trial"] > 0 and row["per_success"] >= row["per_trial"]["mean"]
    (price,) = dollars["prices"]
    assert (price["model"], price["origin"], price["as_of"]) == ("claude-sonnet-4-5", PACKAGE_ORIGIN, package_table().as_of)
    markdown = (swept / "report.md").read_text()
    assert "## Dollars" in markdown and "| cli-skill | $" in markdown
    # Each stored sample holds its requests with the cache-write split, and priced they make the report's figure.
    samples = stored(swept)
    assert all(s["usage"]["requests"] and all(r[3] is not None for r in s["usage"]["requests"]) for s in samples)
    cli_skill = [price_usage(s["usage"], s["model"], package_table()).dollars for s in samples if s["arm"] == "cli-skill"]
    by_task = [sum(d for d, s in zip(cli_skill, [s for s in samples if s["arm"] == "cli-skill"]) if s["task"] == task) / 3
               for task in SWEEP_TASKS]  # fmt: skip
    assert dollars["rows"][0]["per_trial"]["mean"] == pytest.approx(sum(by_task) / 2, rel=1e-5)


@pytest.mark.slow
def test_the_per_trial_token_never_reaches_the_store_or_a_report(swept):
    samples, trials = stored(swept), spied(swept)
    # The raw-api arm ran `curl -v`, whose output shows the Authorization header: redacted.
    verbose = [c for s in samples if (s["arm"], s["task"]) == ("raw-api", "reopen-typo")
               for c in s["tool_calls"] if "-sv" in c["input"].get("command", "")]  # fmt: skip
    assert len(verbose) == 3 and all("Authorization: Bearer [redacted]" in c["output"] for c in verbose)
    written = [p for p in swept.rglob("*") if p.is_file() and ("results" in p.parts or p.name.startswith("report."))]
    assert any(p.suffix == ".jsonl" for p in written) and any(p.suffix == ".toml" for p in written)
    assert any(p.name.endswith(".jsonl.gz") for p in written)  # transcripts, searched decompressed
    text = "\n".join(file_bytes(p).decode(errors="replace") for p in written)
    tokens = {secret for trial in trials for secret in trial["secrets"]}
    assert len(tokens) == 2 * len(trials)  # per trial: fresh user and admin tokens
    assert [token for token in tokens if token in text] == []


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_html_report_renders_in_chromium_with_its_plots(swept, tmp_path):
    page = (swept / "report.html").as_uri()
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    plots = dom.stdout.split('<div class="plot">')[1:]
    assert len(plots) == 2 and all("<svg" in plot and "<path" in plot for plot in plots)  # scatter and tier bars
    # The comparisons' forest plot: one point per metric and declared pair (bench.toml declares 3), drawn by its claim.
    forest = dom.stdout.split('<figure class="forest" id="forest-plot">')[1].split("</figure>")[0]
    claims = {"tasks like these": "tasks-like-these", "these tasks": "these-tasks", None: "none"}
    comparisons = json.loads((swept / "report.json").read_text())["comparisons"]
    expected = [f'id="forest-{c["metric"]}-{i}-{claims[p["scope"]]}"' for c in comparisons for i, p in enumerate(c["pairs"])]
    points = [found for found in re.findall(r'id="forest-[^"]+"', forest) if not found.startswith('id="forest-margin-')]
    assert len(expected) == 2 * 3 and points == expected
    # bench.toml declares a smallest effect on both metrics: each metric's panel shows its margin band.
    assert re.findall(r'id="forest-margin-[^"]+"', forest) == ['id="forest-margin-cost_equivalent"', 'id="forest-margin-success"']
    # The trials that did not pass: each named with its reason, its transcript linked, the viewer's command.
    failed = [s for s in stored(swept) if s["outcome"] != "pass"]
    section = dom.stdout.split("<h2>Trials that did not pass</h2>")[1].split("<h2>")[0]
    assert f"<h3>mcp \u00d7 close-duplicate: {len(failed)} of 3 trials</h3>" in section
    rows = {cells[0]: cells for cells in (
        [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.DOTALL)]
        for row in re.findall(r"<tr>(.*?)</tr>", section, flags=re.DOTALL)) if cells}  # fmt: skip
    store = swept / "results"
    for sample in failed:
        transcript = sample["transcript"]["path"]
        assert rows[f"#{sample['trial']}"] == [f"#{sample['trial']}", "incorrect", sample["reason"], transcript]
        assert f'href="{(store / transcript).as_uri()}"' in section and (store / transcript).is_file()
    assert f"benchcell export inspect inspect-logs --store {store} --model-kind scripted --arm mcp --task close-duplicate" in html.unescape(section)
    shot = tmp_path / "report.png"
    result = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--window-size=1280,1100", f"--screenshot={shot}", page],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = (matplotlib_image().imread(shot)[..., :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (1100, 1280)
    # The plots are drawn in the arms' colours (matplotlib's tab10); the tables are black and white.
    for name, rgb in {"blue": (31, 119, 180), "orange": (255, 127, 14), "green": (44, 160, 44), "red": (214, 39, 40)}.items():
        near = (abs(pixels - rgb).max(axis=-1) <= 8).sum()
        assert near >= 200, f"too few {name} pixels ({near}): a plot did not render"


def matplotlib_image():
    return pytest.importorskip("matplotlib.image")


@pytest.mark.slow
def test_the_raw_api_arm_cannot_reach_another_host_or_port(bench_copy):
    decoy = socket.socket()  # another service on the same host: nothing may connect to it
    decoy.bind(("127.0.0.1", 0))
    decoy.listen()
    decoy.settimeout(0.5)
    other = f"http://127.0.0.1:{decoy.getsockname()[1]}/api/issues"
    commands = [f"curl -s {other}", "curl -s https://example.com/", 'curl -s -x "http://127.0.0.1:9" "$TRACKER_URL"',
                'curl -s -H "Authorization: Bearer $TRACKER_TOKEN" "$TRACKER_URL/user"']  # fmt: skip
    code, output = run(bench_copy, "--bench-arm", "raw-api", "--bench-task", "count-open", "--bench-trials", "1",
                       env_extra={"SERVICE_SPY_COMMANDS": json.dumps(commands)})  # fmt: skip
    with pytest.raises(TimeoutError):
        decoy.accept()
    decoy.close()
    (sample,) = stored(bench_copy)
    calls = sample["tool_calls"]
    assert [call["allowed"] for call in calls] == [False, False, False, True], calls
    assert "curl may only reach http://127.0.0.1:" in calls[0]["reason"] and "is elsewhere" in calls[0]["reason"]
    assert "'https://example.com/' is elsewhere" in calls[1]["reason"]
    assert "through another host" in calls[2]["reason"]
    assert '"login": "me"' in calls[3]["output"]  # the service itself stays reachable
    assert sample["status"] == "scored" and sample["leaks"] == []


@pytest.mark.slow
def test_ctrl_c_mid_trial_stops_the_service(bench_copy):
    process = run(bench_copy, "--bench-arm", "raw-api", "--bench-task", "close-export", "--bench-trials", "1",
                  env_extra={"SERVICE_SPY_STALL": "1"}, wait=False)  # fmt: skip
    # The pre-flight provisions (and tears down) its own environment first, as trial 0: wait for the
    # trial's, and for its service to listen (the spy notes an environment as it is provisioned).
    deadline = time.monotonic() + 60
    trials = []
    while time.monotonic() < deadline:
        trials = [t for t in spied(bench_copy) if t["trial"] != 0]
        if trials and listening(trials[0]["port"]):
            break
        time.sleep(0.2)
    (trial,) = trials
    assert listening(trial["port"])
    time.sleep(2)  # the agent is waiting on the stalled model
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 2, output
    assert_nothing_left(spied(bench_copy))  # the trial's service and the pre-flight's
    (sample,) = stored(bench_copy)
    assert sample["status"] == "error" and "interrupted" in sample["reason"]


def test_a_failing_hook_stops_the_service(bench_copy):
    code, output = run(bench_copy, "--bench-arm", "cli-skill,mcp", "--bench-task", "close-export", "--bench-trials", "1",
                       env_extra={"SERVICE_SPY_BREAK_READY": "1"})  # fmt: skip
    assert code == 1, output
    assert [s["status"] for s in stored(bench_copy)] == ["error", "error"]
    assert all("readiness check broke" in s["reason"] for s in stored(bench_copy))
    assert_nothing_left(spied(bench_copy))
