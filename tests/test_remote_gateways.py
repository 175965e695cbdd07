"""Trials on xdist gateways whose working directory is another checkout (as on another machine):
the bench is found and verified there, every sample comes home through xdist's report channel into
the controller's one store, a worker that cannot run trials stops the sitting once, and a worker's
spool keeps its finished samples if the controller dies. Real CLI, scripted model."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benches import BENCH_TOML, CONFTEST, write_bench

from pytest_benchcell.transcript import KEPT, transcript_status

pytestmark = pytest.mark.e2e

SITTING = ["--bench-arm", "all", "--bench-task", "say-hello,make-file", "--bench-scripted", "--bench-trials", "2"]


def stored(store: Path, arm: str, task: str) -> list[dict]:
    path = store / "scripted" / arm / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def trials_torn_down(pytester: pytest.Pytester) -> list[str]:
    """The trials whose environment was torn down (the pre-flight's, trial 0, left out)."""
    log = pytester.path / "teardown.log"
    return [line for line in log.read_text().split() if not line.endswith("-t0")] if log.exists() else []


def clone(pytester: pytest.Pytester, far: Path, *, bench_toml: str = BENCH_TOML) -> Path:
    """A second checkout of the bench (as another machine would have), its store folder read-only."""
    far.mkdir()
    (far / "bench.toml").write_text(bench_toml)
    shutil.copy(pytester.path / "conftest.py", far / "conftest.py")
    (far / "results").mkdir()
    (far / "results").chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    return far


@pytest.mark.slow
def test_popen_gateways_in_a_clone_bring_every_sample_home_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"2*popen//chdir={far}")
    result.assert_outcomes(passed=6, failed=2)  # the bare arm may not run touch: its make-file fails
    ids = []
    for arm in ("shell", "bare"):
        for task in ("say-hello", "make-file"):
            samples = stored(pytester.path / "results", arm, task)
            assert sorted(s["trial"] for s in samples) == [1, 2]
            ids += [s["id"] for s in samples]
            # Each transcript travelled with its sample: kept beside the controller's store.
            assert [transcript_status(pytester.path / "results", s) for s in samples] == [KEPT, KEPT]
    assert len(set(ids)) == 8
    assert files_under(far / "results") == []  # the clone's own store was never written
    assert not (far / ".benchcell-spool").exists()  # every spooled sample is stored: the spools went
    result.stdout.fnmatch_lines(
        [
            "shell x say-hello: 2 recorded this sitting (2 passed, 0 failed, 0 invalid, 0 errors)",
            "    scored samples of the current definition: 0 -> 2 (*)",
            "bare x make-file: 2 recorded this sitting (0 passed, 2 failed, 0 invalid, 0 errors)",
            "    scored samples of the current definition: 0 -> 2 (*)",
        ]
    )


@pytest.mark.slow
def test_a_clone_whose_bench_differs_is_refused_before_any_model_request(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    reworded = BENCH_TOML.replace('intent = "Say hello."', 'intent = "Say hello, politely."')
    far = clone(pytester, tmp_path / "far", bench_toml=reworded)
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//chdir={far}", "--tx", "popen")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            f"*benchcell: gateway gw0 (popen//chdir={far}) cannot run trials: {far}/bench.toml differs from the "
            f"controller's bench for * x say-hello: conditions fingerprint * here, * on the controller "
            f"(conditions.task.intent is \"Say hello, politely.\" here, \"Say hello.\" on the controller)*",
        ]
    )
    assert "replacing crashed worker" not in result.stdout.str()
    # No trial was provisioned anywhere (so no model request was made) and nothing was stored; the
    # controller's pre-flight (trial 0) ran its own environment before it handed out the numbers.
    assert trials_torn_down(pytester) == []
    assert list((pytester.path / "results").rglob("*.jsonl")) == []
    assert files_under(far / "results") == []
    # The numbers reserved for the stopped sitting are not handed out again.
    again = pytester.runpytest_subprocess(*SITTING, "--collect-only", "-q")
    again.stdout.fnmatch_lines(["bench.toml::shell-say-hello-t3", "bench.toml::shell-say-hello-t4"])


def test_a_gateway_without_the_bench_stops_the_sitting_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    empty = tmp_path / "empty"
    empty.mkdir()
    started = time.monotonic()
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//chdir={empty}", timeout=120)
    assert time.monotonic() - started < 60
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"*benchcell: gateway gw0 (popen//chdir={empty}) cannot run trials: no bench file at {empty}/bench.toml (*"]
    )
    assert "replacing crashed worker" not in result.stdout.str()


def python_without_the_plugins_dependencies(folder: Path) -> Path:
    """A real venv with pytest, execnet and pytest-xdist (linked from this one, no network) but none of
    the plugin's own dependencies, and this checkout on its path through a .pth: the far Python of a
    machine where the checkout is there and pytest-benchcell was never installed."""
    import importlib.metadata as metadata
    import venv

    venv.EnvBuilder(with_pip=False).create(folder)
    (site,) = folder.glob("lib/python*/site-packages")
    linked = folder / "linked"
    linked.mkdir()
    for name in ("pytest", "pluggy", "iniconfig", "packaging", "pygments", "execnet", "pytest-xdist"):
        distribution = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in distribution.files or () if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(distribution.locate_file(top)))
            if source.exists() and not (linked / top).exists():
                (linked / top).symlink_to(source)
    checkout = Path(__file__).resolve().parents[1]
    (site / "benchcell_checkout.pth").write_text(f"{linked}\n{checkout}\n")
    python = folder / "bin" / "python"
    found = subprocess.run([str(python), "-c", "import xdist, execnet, pytest_benchcell.plugin; import filelock"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert "No module named 'filelock'" in found.stderr  # the plugin's source imports, its dependencies do not
    return python


def test_a_gateway_python_that_finds_the_checkout_but_not_its_dependencies_is_told_to_install_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    python = python_without_the_plugins_dependencies(tmp_path / "far-python")
    checkout = Path(__file__).resolve().parents[1]
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"popen//python={python}//chdir={far}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        f"*benchcell: gateway gw0 (popen//python={python}//chdir={far}) cannot run trials: pytest-benchcell is "
        f"not installed in {python}*install it there with {python} -m pip install -e '{checkout}[[]xdist]'; the "
        "sitting stops (no trial ran there)*",
    ])  # fmt: skip
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "ModuleNotFoundError" not in text
    assert trials_torn_down(pytester) == []


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_killed_controller_loses_nothing_merging_the_spools(pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    store = pytester.path / "results"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-arm", "bare", "--bench-task", "say-hello",
           "--bench-scripted", "--bench-trials", "8", "-d", "--tx", f"2*popen//chdir={far}"]  # fmt: skip
    controller = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while len(stored(store, "bare", "say-hello")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    controller.kill()  # SIGKILL: no cleanup of any kind on the controller's side
    controller.wait()
    home_before = {s["id"] for s in stored(store, "bare", "say-hello")}
    assert 2 <= len(home_before) < 8
    deadline = time.monotonic() + 120  # the workers notice their controller is gone and end
    while _group_alive(controller.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _group_alive(controller.pid):
        os.killpg(controller.pid, 9)
        pytest.fail("the workers outlived their controller by two minutes")
    spools = sorted((far / ".benchcell-spool").iterdir())
    assert len(spools) == 2
    spooled = [s for spool in spools for s in stored(spool, "bare", "say-hello")]
    spool_lines = {line for spool in spools for line in (spool / "scripted/bare/say-hello.jsonl").read_bytes().splitlines()}
    assert set((store / "scripted/bare/say-hello.jsonl").read_bytes().splitlines()) <= spool_lines  # byte for byte
    assert home_before <= {s["id"] for s in spooled}  # every sample the controller got is in a spool too
    finished = (pytester.path / "teardown.log").read_text().split()  # every trial torn down
    merge = [sys.executable, "-m", "pytest_benchcell.cli", "merge", *map(str, spools), "--into", str(store)]
    subprocess.run(merge, check=True, capture_output=True)
    subprocess.run(merge, check=True, capture_output=True)  # idempotent: nothing is added twice
    home = stored(store, "bare", "say-hello")
    assert sorted(s["id"] for s in home) == sorted({s["id"] for s in spooled})
    assert sorted(f"bare-say-hello-t{s['trial']}" for s in home) == sorted(finished)  # each finished trial once
    # A spooled trial keeps the number its controller reserved for it.
    assert {s["id"]: s["trial"] for s in home} == {s["id"]: s["trial"] for s in spooled}


SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").is_file() else None)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ssh_login(tmp_path: Path):
    """An sshd of this test's own on 127.0.0.1 (a free port, keys made here): (user, ssh_config)."""
    if SSHD is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("no ssh server here (apt-get install openssh-server); the popen gateway tests cover the rest")
    import getpass

    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    (keys / "authorized_keys").write_text((keys / "user_key.pub").read_text())
    port = _free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\nAuthorizedKeysFile {keys / 'authorized_keys'}\n"
        f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n"
        f"StrictModes no\nPermitRootLogin prohibit-password\nPidFile {keys / 'sshd.pid'}\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(keys / "sshd_config")], stderr=subprocess.PIPE)
    (keys / "ssh_config").write_text(
        f"Host 127.0.0.1\n  Port {port}\n  IdentityFile {keys / 'user_key'}\n  IdentitiesOnly yes\n  BatchMode yes\n"
        f"  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    )
    user = getpass.getuser()
    try:
        deadline = time.monotonic() + 20
        while True:
            probe = subprocess.run(["ssh", "-F", str(keys / "ssh_config"), f"{user}@127.0.0.1", "true"], capture_output=True)
            if probe.returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.skip(f"the test's sshd did not accept a login: {probe.stderr.decode()[-300:]}")
            time.sleep(0.2)
        yield user, keys / "ssh_config"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def ssh_gateway(ssh_login: tuple[str, Path], tmp_path: Path) -> str:
    """The `--tx` spec parts that reach the test's sshd: ssh=USER@127.0.0.1//ssh_config=...//python=..."""
    user, config = ssh_login
    # The far side's python: the same interpreter, with this checkout of the plugin on its path.
    python = tmp_path / "ssh" / "python"
    python.write_text(f"#!/bin/sh\nexport PYTHONPATH={os.environ.get('PYTHONPATH', '')}\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return f"ssh={user}@127.0.0.1//ssh_config={config}//python={python}"


@pytest.mark.slow
def test_ssh_gateways_in_a_clone_bring_every_sample_home_once(
    pytester: pytest.Pytester, tmp_path: Path, ssh_gateway: str
) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far")
    sitting = ["--bench-arm", "all", "--bench-task", "make-file", "--bench-scripted", "--bench-trials", "2"]
    result = pytester.runpytest_subprocess(*sitting, "-d", "--tx", f"2*{ssh_gateway}//chdir={far}")
    result.assert_outcomes(passed=2, failed=2)
    ids = [s["id"] for arm in ("shell", "bare") for s in stored(pytester.path / "results", arm, "make-file")]
    assert len(ids) == len(set(ids)) == 4
    assert sorted(s["trial"] for s in stored(pytester.path / "results", "bare", "make-file")) == [1, 2]
    assert files_under(far / "results") == []
    assert not (far / ".benchcell-spool").exists()
    result.stdout.fnmatch_lines(["bare x make-file: 2 recorded this sitting (0 passed, 2 failed, 0 invalid, 0 errors)",
                                 "    scored samples of the current definition: 0 -> 2 (*)"])  # fmt: skip


def test_an_ssh_gateway_with_a_differing_bench_is_refused(pytester: pytest.Pytester, tmp_path: Path, ssh_gateway: str) -> None:
    write_bench(pytester)
    far = clone(pytester, tmp_path / "far", bench_toml=BENCH_TOML.replace('intent = "Say hello."', 'intent = "Wave."'))
    result = pytester.runpytest_subprocess(*SITTING, "-d", "--tx", f"{ssh_gateway}//chdir={far}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["*benchcell: gateway gw0 (ssh=*) cannot run trials: *(conditions.task.intent is \"Wave.\" here*"]
    )
    assert trials_torn_down(pytester) == []


# Observes (never replaces) every sample write a worker process makes (Store._append_lines is the one
# method that writes sample lines): which store it went to.
APPEND_WATCH = '''
import os as _os
from pytest_benchcell import store as _store_module
if _os.environ.get("PYTEST_XDIST_WORKER"):
    _append = _store_module.Store._append_lines
    def _watched(self, cell, lines):
        with open(APPEND_LOG, "a") as log:
            log.write(f"{_os.environ['PYTEST_XDIST_WORKER']} {self.root}\\n")
        return _append(self, cell, lines)
    _store_module.Store._append_lines = _watched
'''


@pytest.mark.slow
def test_local_workers_send_their_samples_home_the_same_way(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this suite's own xdist worker: not the sitting's
    log = pytester.path / "appends.log"
    write_bench(pytester, conftest=CONFTEST + f"APPEND_LOG = {str(log)!r}\n" + APPEND_WATCH)
    result = pytester.runpytest_subprocess("--bench-arm", "all", "--bench-task", "say-hello", "--bench-scripted",
                                           "--bench-trials", "2", "-n", "2")  # fmt: skip
    result.assert_outcomes(passed=4)
    appends = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert len(appends) == 4
    assert {worker for worker, _ in appends} == {"gw0", "gw1"}
    assert all(f"{os.sep}.benchcell-spool{os.sep}" in root for _, root in appends), appends  # never the store itself
    samples = [s for arm in ("shell", "bare") for s in stored(pytester.path / "results", arm, "say-hello")]
    assert len(samples) == 4
    assert [transcript_status(pytester.path / "results", s) for s in samples] == [KEPT] * 4
    assert not (pytester.path / ".benchcell-spool").exists()  # the spools (and their transcripts) went


@pytest.mark.slow
def test_the_budget_holds_across_local_workers(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    result = pytester.runpytest_subprocess("--bench-arm", "bare", "--bench-task", "say-hello", "--bench-scripted",
                                           "--bench-trials", "4", "--bench-budget", "100", "-n", "2")  # fmt: skip
    outcomes = result.parseoutcomes()
    # Each worker starts its first trial with nothing spent; after that each sees the spend and stops.
    assert outcomes.get("passed", 0) <= 2 and outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 4, outcomes
    assert len(stored(pytester.path / "results", "bare", "say-hello")) == outcomes["passed"]


@pytest.mark.slow
def test_a_trial_interrupted_on_a_worker_still_reaches_the_store(pytester: pytest.Pytester) -> None:
    started = pytester.path / "started.pid"
    conftest = CONFTEST.replace(
        "def pytest_benchcell_script(trial, environment):\n",
        "def pytest_benchcell_script(trial, environment):\n"
        f"    import os\n    open({str(started)!r}, 'w').write(str(os.getpid()))\n",
    )
    write_bench(pytester, conftest=conftest)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-arm", "bare", "--bench-task", "stall",
           "--bench-scripted", "--bench-trials", "1", "-n", "1"]  # fmt: skip
    process = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (started.exists() and started.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # the CLI now waits on the scripted model's Delay
    os.kill(int(started.read_text()), 15)  # SIGTERM to the worker only: its trial ends, no report is made
    output = process.communicate(timeout=120)[0].decode()
    (sample,) = stored(pytester.path / "results", "bare", "stall")
    assert (sample["status"], sample["trial"]) == ("error", 1), output
    assert sample["reason"].startswith("interrupted"), sample["reason"]
    assert not (pytester.path / ".benchcell-spool").exists(), output  # stored, so its spool went
