"""`benchcell export inspect DIR`: Inspect AI logs read back with inspect_ai's own reader, and
opened in `inspect view` in headless Chromium.

Stores without transcripts are written with sample_factory (older stores look like that); the
end-to-end store comes from real sittings of the example bench (the real CLI against the scripted
model), whose transcripts are kept beside the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from made_once import made_once
from sample_factory import cell_samples, make_sample, scripted_bench, write_samples

from pytest_benchcell.cli import main

inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is not installed (pip install 'pytest-benchcell[inspect]')")


def export(capsys, *argv):
    code = main(["export", "inspect", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def logs_in(folder: Path) -> dict[str, object]:
    """arm -> its log, read back through inspect_ai."""
    logs = {}
    for path in sorted(folder.iterdir()):
        log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
        logs[log.eval.task] = log
    return logs


@pytest.fixture
def store(tmp_path):
    """Two arms x two tasks, every way a trial can end, plus a sample of older conditions."""
    samples = [
        *cell_samples("cli", "close-bug", 3, outcomes=["pass", "incorrect", "pass"], minutes=10),
        make_sample("cli", "close-bug", trial=4, status="invalid", minutes=20),
        make_sample("cli", "close-bug", trial=5, status="error", minutes=21),
        *cell_samples("cli", "count-open", 2, outcomes=["confused", "hung"], minutes=10),
        *cell_samples("mcp", "close-bug", 2, minutes=10),
        make_sample("cli", "count-open", trial=9, fingerprint="fp-older", minutes=1),  # other conditions
    ]
    samples[3]["reason"] = "foreign tool call ran: curl"
    samples[4]["reason"] = "provisioning failed: the tracker did not start"
    samples[0]["tool_calls"].append(
        {"id": "toolu_2", "tool": "Bash", "input": {"command": "tracker close 3"}, "allowed": False,
         "reason": "tracker admin is not allowed", "is_error": True, "output": ""})  # fmt: skip
    write_samples(tmp_path / "store", samples)
    return tmp_path / "store"


def test_every_sample_of_the_selection_is_read_back_with_messages_score_and_usage(store, tmp_path, capsys):
    code, out, err = export(capsys, tmp_path / "logs", "--store", store)
    assert code == 0, err
    logs = logs_in(tmp_path / "logs")
    assert sorted(logs) == ["cli", "mcp"]  # one log per arm
    cli = logs["cli"]
    verdicts = sorted((s.id, s.epoch, s.scores["verdict"].value) for s in cli.samples)
    assert verdicts == [
        ("close-bug", 1, "pass"), ("close-bug", 2, "incorrect"), ("close-bug", 3, "pass"),
        ("close-bug", 4, "invalid"), ("close-bug", 5, "error"),
        ("count-open", 1, "confused"), ("count-open", 2, "hung"),
    ]  # fmt: skip  (the older-conditions sample is left out, as in the report)
    assert "left out: 1 samples of other conditions" in out
    by_verdict = {s.scores["verdict"].value: s for s in cli.samples}
    assert by_verdict["incorrect"].scores["verdict"].explanation == "incorrect for a test"
    assert by_verdict["invalid"].scores["verdict"].explanation == "foreign tool call ran: curl"
    assert by_verdict["invalid"].metadata["status"] == "invalid" and by_verdict["invalid"].error is None
    assert by_verdict["invalid"].invalidation.reason == "foreign tool call ran: curl"
    assert [s.invalidation for s in cli.samples].count(None) == 6
    errored = by_verdict["error"]
    assert errored.error is not None and "provisioning failed" in errored.error.message
    assert by_verdict["confused"].limit.type == "turn" and by_verdict["confused"].limit.limit == 40
    assert by_verdict["hung"].limit.type == "time" and by_verdict["hung"].limit.limit == 300
    # Usage: Inspect's input_tokens is fresh input only; cache writes and reads apart; the cost.
    (usage,) = by_verdict["pass"].model_usage.values()
    assert (usage.input_tokens, usage.input_tokens_cache_write, usage.input_tokens_cache_read, usage.output_tokens) == (1000, 800, 4000, 300)
    assert usage.total_tokens == 6100 and usage.total_cost == pytest.approx(0.0123)
    # The trial in dollars at the package's prices (sonnet 4.5: $3, $3.75, $0.30, $15 per million), the
    # CLI's own estimate beside it; a sample without requests has its cache writes at the 5-minute price.
    metadata = by_verdict["pass"].metadata
    assert metadata["dollars"] == pytest.approx((1000 * 3 + 800 * 3.75 + 4000 * 0.3 + 300 * 15) / 1e6)
    assert metadata["dollars_default_lifetime"] is True and metadata["cost_usd"] == pytest.approx(0.0123)
    assert cli.stats.model_usage["anthropic/claude-sonnet-4-5"].input_tokens_cache_read == 7 * 4000
    assert cli.results.scores[0].metrics["pass_rate"].value == pytest.approx(2 / 5)
    assert cli.results.scores[0].metrics["invalid"].value == 1 and cli.results.scores[0].metrics["error"].value == 1


def test_at_the_root_of_a_bench_an_export_needs_no_option(tmp_path, capsys, monkeypatch):
    # As `benchcell report`: the bench a sitting here would load, its store, and the one model kind it holds.
    scripted_bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = export(capsys, "logs")
    assert code == 0, err
    logs = logs_in(tmp_path / "logs")
    assert sorted(logs) == ["cli", "mcp"] and all(len(log.samples) == 2 for log in logs.values())


def test_a_store_without_transcripts_exports_its_tool_calls_and_final_answer(store, tmp_path, capsys):
    code, out, err = export(capsys, tmp_path / "logs", "--store", store, "--arm", "cli", "--task", "close-bug")
    assert code == 0, err
    assert "transcripts: 0 of 5 trials" in out
    (log,) = logs_in(tmp_path / "logs").values()
    first = next(s for s in log.samples if s.epoch == 1)
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    calls = [m.tool_calls[0] for m in first.messages if m.role == "assistant" and m.tool_calls]
    assert [(c.function, c.arguments) for c in calls] == [("Bash", {"command": "tracker list"}), ("Bash", {"command": "tracker close 3"})]
    refused = first.messages[4]
    assert refused.error.type == "permission" and refused.error.message == "tracker admin is not allowed"
    assert first.messages[-1].text == "There are 5 open issues." and first.output.completion == "There are 5 open issues."
    tools = [event for event in first.events if event.event == "tool"]
    assert [event.arguments["command"] for event in tools] == ["tracker list", "tracker close 3"]
    assert first.metadata["messages_from"].startswith("the sample's tool calls")


def test_the_selection_follows_arm_and_task(store, tmp_path, capsys):
    code, out, err = export(capsys, tmp_path / "logs", "--store", store, "--arm", "mcp")
    assert code == 0, err
    (log,) = logs_in(tmp_path / "logs").values()
    assert log.eval.task == "mcp" and {(s.id, s.epoch) for s in log.samples} == {("close-bug", 1), ("close-bug", 2)}
    code, out, err = export(capsys, tmp_path / "counting", "--store", store, "--task", "count-open")
    assert code == 0, err
    (log,) = logs_in(tmp_path / "counting").values()  # mcp has no count-open trial: no log for it
    assert log.eval.task == "cli" and {s.id for s in log.samples} == {"count-open"}


def test_no_secret_of_the_exporter_reaches_a_log(store, tmp_path, capsys, monkeypatch):
    # A store written before a secret was declared still holds it; the export redacts once more.
    secret = "sk-ant-export-test-5f1c0a"
    sample = make_sample("cli", "close-bug", trial=20, minutes=30)
    sample["tool_calls"][0]["output"] = f"token: {secret}"
    sample["final_answer"] = f"the key is {secret}"
    write_samples(store, [sample])
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    code, out, err = export(capsys, tmp_path / "logs", "--store", store)
    assert code == 0, err
    assert_absent(tmp_path / "logs", [secret])
    (text,) = [s.output.completion for s in logs_in(tmp_path / "logs")["cli"].samples if s.metadata["trial"] == 20]
    assert text == "the key is [redacted]"


def assert_absent(folder: Path, secrets) -> None:
    """No secret in any member of any log (.eval logs are zip files: read every entry)."""
    found = []
    for path in folder.iterdir():
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                text = archive.read(name).decode("utf-8", "replace")
                found += [(path.name, name, secret) for secret in secrets if secret in text]
    assert found == []


def test_bad_input_gets_one_clear_error(store, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no bench.toml here nor above (the suite's own checkout has one)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "not-a-store").mkdir()
    (tmp_path / "not-a-store" / "notes.txt").write_text("x")
    cases = [
        ((tmp_path / "a-file", "--store", store), "DIR {tmp}/a-file is a file; allowed: a folder (created if missing)"),
        ((tmp_path / "logs", "--store", tmp_path / "missing"), "--store: {tmp}/missing is not a folder"),
        ((tmp_path / "logs", "--store", tmp_path / "not-a-store"), "--store: {tmp}/not-a-store is not a sample store; *"),
        ((tmp_path / "logs", "--store", store, "--arm", "cli-skil"), "--arm: unknown arm 'cli-skil'; known: cli, mcp"),
        ((tmp_path / "logs", "--store", store, "--task", "nope"), "--task: unknown task 'nope'; known: close-bug, count-open"),
        ((tmp_path / "logs", "--store", store, "--model-kind", "scripted"),
         "the store holds no samples of the scripted model; it holds real ones: add --model-kind real"),
        ((tmp_path / "logs",), "say which store to export: --store DIR, or --config bench.toml (no bench.toml in {tmp} "
                               "or its parents, nor named by the ini key bench_config)"),
    ]  # fmt: skip
    for argv, message in cases:
        code, out, err = export(capsys, *argv)
        assert code == 2 and out == "", (argv, out, err)
        pattern = "benchcell export inspect: error: " + message.format(tmp=tmp_path)
        assert re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), err.strip()), (pattern, err)
    assert not (tmp_path / "logs").exists()


def test_without_inspect_ai_the_error_names_the_extra(store, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # what an install without the extra sees
    code, out, err = export(capsys, tmp_path / "logs", "--store", store)
    assert code == 1 and "pip install 'pytest-benchcell[inspect]'" in err, err
    assert not (tmp_path / "logs").exists()


def test_an_inspect_ai_outside_the_pinned_range_is_refused(store, tmp_path, capsys, monkeypatch):
    import inspect_ai

    monkeypatch.setattr(inspect_ai, "__version__", "0.4.0")
    code, out, err = export(capsys, tmp_path / "logs", "--store", store)
    assert code == 1 and "inspect_ai 0.4.0 is installed; the export writes logs for inspect-ai >=0.3.285,<0.4" in err, err
    assert not (tmp_path / "logs").exists()


def test_a_transcript_cut_by_the_wall_clock_exports_what_it_kept(tmp_path, capsys):
    from pytest_benchcell.transcript import header, write_transcript

    sample = make_sample("cli", "close-bug", status="scored", outcome="hung")
    sample["reason"] = "hung: wall-clock backstop of 300000 ms reached"
    t0 = "2026-12-02T12:00:00.000Z"
    lines = [
        header(sample, t0),
        {"kind": "prompt", "t_ms": 0.0, "system_prompt": "You manage the tracker.", "prompt": "Close the bug."},
        {"kind": "model_request", "t_ms": 10.0, "request": 1},
        {"kind": "thinking", "t_ms": 20.0, "message_id": "m1", "thinking": "First list the issues."},
        {"kind": "text", "t_ms": 21.0, "message_id": "m1", "text": "Listing them."},
        {"kind": "tool_use", "t_ms": 22.0, "message_id": "m1", "id": "t1", "name": "Bash", "input": {"command": "tracker list"}},
        {"kind": "guard", "t_ms": 23.0, "tool_use_id": "t1", "name": "Bash", "allowed": True, "reason": ""},
        {"kind": "model_response", "t_ms": 30.0, "request": 1, "message_id": "m1", "model": "claude-sonnet-4-5",
         "stop_reason": "tool_use", "usage": {"fresh_input": 10, "cache_write": 20, "cache_read": 30, "output": 5}, "complete": True},
        {"kind": "tool_result", "t_ms": 530.0, "tool_use_id": "t1", "is_error": False, "content": "#3 open Crash"},
        {"kind": "model_request", "t_ms": 540.0, "request": 2},
        {"kind": "tool_use", "t_ms": 560.0, "message_id": "m2", "id": "t2", "name": "Bash", "input": {"command": "sleep 999"}},
        {"kind": "backstop", "t_ms": 300000.0, "wall_clock_ms": 300000},
        {"kind": "ended", "status": "scored", "outcome": "hung", "reason": sample["reason"]},
    ]  # fmt: skip
    store = tmp_path / "store"
    store.mkdir()
    sample["transcript"] = write_transcript(store, sample, lines)
    write_samples(store, [sample])
    code, out, err = export(capsys, tmp_path / "logs", "--store", store)
    assert code == 0, err
    (log,) = logs_in(tmp_path / "logs").values()
    (exported,) = log.samples
    assert exported.scores["verdict"].value == "hung" and exported.limit.type == "time"
    roles = [m.role for m in exported.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]  # the cut response kept, unanswered
    first = exported.messages[2]
    assert [part.type for part in first.content] == ["reasoning", "text"] and first.content[0].reasoning == "First list the issues."
    assert exported.messages[-1].tool_calls[0].arguments == {"command": "sleep 999"}
    (model,) = [e for e in exported.events if e.event == "model"]
    assert (model.output.usage.input_tokens, model.output.usage.input_tokens_cache_write,
            model.output.usage.input_tokens_cache_read, model.output.usage.output_tokens) == (10, 20, 30, 5)  # fmt: skip
    assert model.working_start == pytest.approx(0.01) and model.working_time == pytest.approx(0.02)
    tools = [e for e in exported.events if e.event == "tool"]
    assert [(t.arguments["command"], t.result, t.error) for t in tools][0] == ("tracker list", "#3 open Crash", None)
    assert tools[0].working_time == pytest.approx(0.508)
    assert tools[1].arguments["command"] == "sleep 999" and tools[1].error.type == "cancelled"
    assert [e.source for e in exported.events if e.event == "info"] == ["backstop"]


def test_several_stores_export_as_one_each_sample_once(store, tmp_path, capsys):
    # Another machine's store: its own trial 1 and 2 of the same cell, and a copy of one sample here.
    here = next(json.loads(line) for line in (store / "real" / "mcp" / "close-bug.jsonl").read_text().splitlines())
    other = write_samples(tmp_path / "other", [*cell_samples("mcp", "close-bug", 2, minutes=40), here])
    with (store / "real" / "mcp" / "close-bug.jsonl").open("a") as file:
        file.write('{"id": "torn')  # a write cut short: reported, the rest exported
    code, out, err = export(capsys, tmp_path / "logs", "--store", store, "--store", other.root, "--arm", "mcp")
    assert code == 0, err
    (log,) = logs_in(tmp_path / "logs").values()
    trials = sorted((s.epoch, s.metadata["trial"]) for s in log.samples)
    assert trials == [(1, 1), (2, 2), (3, 1), (4, 2)]  # trial numbers repeat across stores; epochs do not
    assert len({s.uuid for s in log.samples}) == 4
    assert "torn last line" in out


def test_the_same_selection_writes_the_same_log_file(store, tmp_path, capsys):
    assert export(capsys, tmp_path / "logs", "--store", store)[0] == 0
    first = sorted(path.name for path in (tmp_path / "logs").iterdir())
    assert export(capsys, tmp_path / "logs", "--store", store)[0] == 0
    assert sorted(path.name for path in (tmp_path / "logs").iterdir()) == first
    # Inspect's own name shape: a timestamp first (the viewer lists .json logs only then; .eval always).
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d_(cli|mcp)_[0-9a-f]{22}\.eval", name) for name in first), first


# --- end to end: real sittings with transcripts, then the viewer -------------------------------------
def sit_and_export(folder):
    """The example bench, one trial of two cells (the raw-api arm's `curl -v` prints its token,
    redacted in the store and the transcript), exported with the bench known."""
    from test_example_bench_e2e import copy_bench, run

    copy_bench(folder)
    code, output = run(folder, "--bench-arm", "raw-api,cli-skill", "--bench-task", "reopen-typo", "--bench-trials", "1")
    assert code == 0, output
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchcell.cli", "export", "inspect", str(folder / "inspect-logs"), "--config",
         "bench.toml", "--store", "results", "--model-kind", "scripted"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (folder / "export.out").write_text(done.stdout)


@pytest.fixture(scope="module")
def sat(tmp_path_factory):
    """(the bench folder, the exported logs, what the export printed, the trials' spied environments),
    made once a run (tests/made_once.py)."""
    from test_example_bench_e2e import spied

    folder = made_once(tmp_path_factory, "export-sitting", sit_and_export)
    return folder, folder / "inspect-logs", (folder / "export.out").read_text(), spied(folder)


@pytest.mark.slow
@pytest.mark.e2e
def test_kept_transcripts_export_with_each_request_usage_and_no_secret(sat):
    folder, logs, out, trials = sat
    assert "transcripts: 2 of 2 trials" in out
    raw = logs_in(logs)["raw-api"]
    (sample,) = raw.samples
    assert sample.scores["verdict"].value == "pass" and sample.metadata["messages_from"] == "the kept transcript"
    assert sample.input == "The typo in the installation guide is back. Reopen that issue."
    models = [event for event in sample.events if event.event == "model"]
    tools = [event for event in sample.events if event.event == "tool"]
    assert len(models) == sample.metadata["turns"] == 4 and len(tools) == 3
    assert (sample.metadata["skill_use"], sample.metadata["subagent_calls"], sample.metadata["compactions"]) == (None, 0, 0)
    skilled = logs_in(logs)["cli-skill"].samples[0].metadata["skill_use"]  # its skill embedded: in every trial
    assert (skilled["delivery"], skilled["used"], skilled["loaded"]) == ("embed", True, False)
    stored = json.loads((folder / "results" / "scripted" / "raw-api" / "reopen-typo.jsonl").read_text())
    per_request = [event.output.usage for event in models]
    total = stored["usage"]["total"]
    assert sum(u.input_tokens for u in per_request) == total["fresh_input"]
    assert sum(u.input_tokens_cache_read for u in per_request) == total["cache_read"]
    assert sum(u.input_tokens_cache_write for u in per_request) == total["cache_write"]
    assert all(event.working_start >= 0 and event.working_time is not None for event in models + tools)
    # the full tool result (the sample's is clipped), with the token redacted
    verbose = next(event for event in tools if "-sv" in event.arguments["command"])
    assert "Authorization: Bearer [redacted]" in verbose.result
    # The two trials' tokens (and those of the pre-flight's environments, trial 0, where the sandbox ran one).
    tokens = [secret for trial in trials for secret in trial["secrets"]]
    assert len([trial for trial in trials if trial["trial"] != 0]) * 2 == 4 <= len(tokens)
    assert_absent(logs, tokens)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_inspect_view_shows_a_trials_tool_call(sat):
    aiohttp = pytest.importorskip("aiohttp", reason="aiohttp (an inspect_ai dependency) is not installed")
    folder, logs, _, _ = sat
    (path,) = [path for path in logs.iterdir() if "_raw-api_" in path.name]
    (sample,) = inspect_log.read_eval_log(str(path), resolve_attachments=True).samples
    command = next(event.arguments["command"] for event in sample.events if event.event == "tool")
    port = free_port()
    viewer = subprocess.Popen(
        [sys.executable, "-m", "inspect_ai", "view", "--log-dir", str(logs), "--port", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_port(port, viewer, timeout=60)
        url = f"http://127.0.0.1:{port}/#/logs/{path.name}/samples/sample/{sample.id}/{sample.epoch}/"
        text = asyncio.run(page_text_once_it_shows(aiohttp, url, "curl -s -H", timeout=60))
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)
    assert command in text, text[-3000:]  # the tool call as the agent made it
    assert "raw-api" in text and "pass" in text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"inspect view exited {process.returncode}: {process.stderr.read()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"inspect view did not listen on port {port} within {timeout} s")


async def page_text_once_it_shows(aiohttp, url: str, expected: str, timeout: float) -> str:
    """The page's rendered text once it contains `expected` (or at the deadline), read through the
    DevTools protocol: the viewer loads its log in a web worker, which --dump-dom does not wait for."""
    deadline = time.monotonic() + timeout
    # Chromium's helper processes (renderer, crashpad) may still write the profile after the browser
    # itself is gone: the whole session is killed, and the profile's removal tolerates a late file.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            endpoint = await asyncio.wait_for(asyncio.to_thread(devtools_endpoint, browser), timeout)
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
                async with http.get(f"http://{endpoint}/json/list") as answer:
                    page = next(target for target in await answer.json() if target["type"] == "page")
                async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as socket_:
                    devtools = DevTools(socket_)
                    await devtools.call("Page.navigate", url=url)
                    text = ""
                    while time.monotonic() < deadline and expected not in text:
                        await asyncio.sleep(0.5)
                        answer = await devtools.call(
                            "Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True
                        )
                        text = answer.get("result", {}).get("value", "")
                    return text
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(browser.pid, signal.SIGKILL)
            browser.wait(timeout=30)


def devtools_endpoint(browser: subprocess.Popen) -> str:
    """host:port of the browser's DevTools server, from the line Chromium prints when it listens."""
    for line in browser.stderr:
        found = re.search(r"DevTools listening on ws://([^/\s]+)/", line)
        if found:
            return found.group(1)
    raise RuntimeError("chromium exited without opening its DevTools port")


class DevTools:
    def __init__(self, socket_) -> None:
        self.socket = socket_
        self.last = 0

    async def call(self, method: str, **params) -> dict:
        self.last += 1
        await self.socket.send_json({"id": self.last, "method": method, "params": params})
        async for message in self.socket:
            data = json.loads(message.data)
            if data.get("id") == self.last:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data["result"]
        raise RuntimeError(f"{method}: the browser closed the connection")


def test_each_samples_skill_use_subagent_calls_and_compactions_go_to_its_metadata(tmp_path, capsys):
    loaded = make_sample("cli", "close-bug", trial=1)
    loaded.update(subagent_calls=2, compactions=1, skill_use={
        "delivery": "native", "name": "tracker", "used": True, "loaded": True, "how": "skill_tool", "turn": 2,
        "files": ["SKILL.md"], "scripts": [], "tokens_before": 1200, "tokens_after": 3400})  # fmt: skip
    older = make_sample("cli", "close-bug", trial=2)  # stored before these fields: none made up
    write_samples(tmp_path / "store", [loaded, older])
    assert export(capsys, tmp_path / "logs", "--store", tmp_path / "store")[0] == 0
    by_trial = {s.metadata["trial"]: s.metadata for s in logs_in(tmp_path / "logs")["cli"].samples}
    assert by_trial[1]["skill_use"] == loaded["skill_use"]
    assert (by_trial[1]["subagent_calls"], by_trial[1]["compactions"]) == (2, 1)
    assert not {"skill_use", "subagent_calls", "compactions"} & set(by_trial[2])
