"""The sandbox: every Bash command of a trial in bubblewrap (isolation/sandbox/, confinement.py).

Unit tests cover the pure parts (endpoints, the order of mounts, the prefix). The rest runs the real
bubblewrap, and end to end the real CLI against the scripted model with the in-band guard off
(guard_exempt = ["*"]), the evasions of tests/data/sandbox_corpus.toml a call each: what is judged is
what happened (files outside, connections to decoys, markers of the answer key in anything stored),
not what the agent typed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import tomllib
from pathlib import Path

import pytest

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.limits import CommandProcess, frozen_commands, usage
from pytest_benchcell.isolation.exec_audit import find_tracer
from pytest_benchcell.isolation.sandbox import Endpoint, SandboxPlan, bwrap_arguments, parse_endpoint

TOOL = sandbox.find_sandbox()
needs_sandbox = pytest.mark.skipif(not TOOL.available, reason=f"the sandbox cannot run here: {TOOL.reason}")
TESTS = Path(__file__).resolve().parent
CORPUS = tomllib.loads((Path(__file__).parent / "data" / "sandbox_corpus.toml").read_text())


# --- endpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("127.0.0.1:8080", Endpoint("127.0.0.1", 8080)),
        ("localhost:9", Endpoint("127.0.0.1", 9)),
        ("http://127.0.0.1:8080/api", Endpoint("127.0.0.1", 8080)),
        ("http://127.0.0.2/", Endpoint("127.0.0.2", 80)),
        ("https://localhost/x", Endpoint("127.0.0.1", 443)),
    ],
)
def test_endpoints_are_read_from_host_port_or_url(text: str, endpoint: Endpoint) -> None:
    assert parse_endpoint(text) == endpoint


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("10.0.0.1:80", "not a loopback address"),
        ("example.com:443", "not a loopback address"),
        ("127.0.0.1", "not a number"),
        ("127.0.0.1:0", "not a number from 1"),
        ("127.0.0.1:70000", "not a number from 1"),
        ("http://u@127.0.0.1:80/", "no user@ part"),
        ("127.0.0.300:80", "not a loopback address"),
    ],
)
def test_endpoints_elsewhere_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_endpoint(text)


# --- the mounts -----------------------------------------------------------------------------


def test_mounts_hide_first_then_show_then_write_then_hide_again(tmp_path: Path) -> None:
    for name in ("bench/bin", "bench/tracker", "trial/cwd", "trial/environment/service", "trial/home"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "bench" / "bench.toml").write_text("x")
    plan = SandboxPlan(
        writable=(str(tmp_path / "trial/cwd"), str(tmp_path / "trial/environment")),
        readable=(str(tmp_path / "bench/bin"), str(tmp_path / "bench/tracker"), str(tmp_path / "missing")),
        hidden=(str(tmp_path / "bench"), str(tmp_path / "trial")),
        home=str(tmp_path / "trial/home"),
        never=(str(tmp_path / "bench/bench.toml"), str(tmp_path / "trial/environment/service")),
    )
    args = bwrap_arguments(plan)

    def at(*words: str) -> int:
        for i in range(len(args) - len(words) + 1):
            if tuple(args[i : i + len(words)]) == words:
                return i
        raise AssertionError(f"{words} not in {args}")

    hide_bench = at("--tmpfs", str(tmp_path / "bench"))
    show_bin = at("--ro-bind", str(tmp_path / "bench/bin"), str(tmp_path / "bench/bin"))
    write_cwd = at("--bind", str(tmp_path / "trial/cwd"), str(tmp_path / "trial/cwd"))
    hide_service = at("--tmpfs", str(tmp_path / "trial/environment/service"))
    hide_toml = at("--ro-bind", "/dev/null", str(tmp_path / "bench/bench.toml"))
    assert at("--ro-bind", "/", "/") < hide_bench < show_bin < write_cwd < hide_service
    assert show_bin < hide_toml
    assert str(tmp_path / "missing") not in args  # nothing to show: bwrap would fail on it
    assert "--unshare-pid" in args and "--new-session" in args and "--die-with-parent" in args


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 254:0 /srv/benches /mnt/volume rw,relatime - ext4 /dev/vda rw
41 27 254:0 /srv/benches/b1/results /data/store rw,relatime - ext4 /dev/vda rw
42 27 254:1 /srv/benches /mnt/other\\040disk rw,relatime - ext4 /dev/vdb rw
43 27 254:0 /home /home rw,relatime - ext4 /dev/vda rw
"""


def test_mountinfo_is_read_with_its_escapes() -> None:
    mounts = sandbox.read_mounts(MOUNTINFO)
    assert sandbox.Mount("254:1", "/srv/benches", "/mnt/other disk") in mounts
    assert mounts[1] == sandbox.Mount("254:0", "/", "/")


def test_every_other_mount_of_a_hidden_folder_is_found() -> None:
    mounts = sandbox.read_mounts(MOUNTINFO)
    # The bench folder is also seen through the volume (same device, its folder holds the bench),
    # and its store through a mount of that part of it; another disk's folder of the same name is not it.
    assert sandbox.aliases("/srv/benches/b1", mounts) == [("/mnt/volume/b1", True), ("/data/store", False)]
    assert sandbox.aliases("/srv/benches/b1/bench.toml", mounts) == [("/mnt/volume/b1/bench.toml", True)]
    assert sandbox.aliases("/home/u/.ssh", mounts) == []  # on its own mount, shown nowhere else
    assert sandbox.aliases("/mnt/volume/b1", mounts) == [("/srv/benches/b1", True), ("/data/store", False)]


def test_a_second_mount_of_a_hidden_folder_is_hidden_too(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a bind mount needs root")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench.toml").write_text("x")
    alias = Path(tempfile.mkdtemp(prefix=".benchcell-alias-", dir=TESTS))
    try:
        subprocess.run(["mount", "--bind", str(tmp_path), str(alias)], check=True)
        plan = SandboxPlan(writable=(), readable=(), hidden=(str(tmp_path / "bench"),), home="")
        args = bwrap_arguments(plan)
    finally:
        subprocess.run(["umount", "-l", str(alias)], check=False)
        alias.rmdir()
    assert ["--tmpfs", str(alias / "bench")] == args[args.index(str(alias / "bench")) - 1 : args.index(str(alias / "bench")) + 1]


def test_capabilities_are_dropped_and_root_runs_as_an_unprivileged_uid() -> None:
    plan = SandboxPlan(writable=(), readable=(), hidden=(), home="")
    args = bwrap_arguments(plan, user_namespace=True)
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--unshare-user" in args and "--disable-userns" in args
    if os.geteuid() == 0:
        assert args[args.index("--uid") + 1] == str(sandbox.SANDBOX_UID)
        # root's own files under /etc are hidden: a command is still their owner on disk
        assert all(path in args for path in sandbox.root_only_files())
    assert all(["--tmpfs", folder] == args[args.index(folder) - 1 : args.index(folder) + 1] for folder in sandbox.world_writable_folders())
    assert "--cap-drop" in bwrap_arguments(plan) and "--unshare-user" not in bwrap_arguments(plan)


def test_the_seccomp_filter_is_built_with_libseccomp() -> None:
    from pytest_benchcell.isolation.seccomp import compiled_filter

    built = compiled_filter()
    assert built.available, built.reason
    assert len(built.program) % 8 == 0 and len(built.program) > 8 * 10  # BPF instructions, 8 bytes each


def test_the_sandbox_says_what_it_drops() -> None:
    tool = sandbox.SandboxTool(True, version="0.8.0", as_root=True, user_namespace=True)
    assert tool.describe() == (
        "on (bubblewrap 0.8.0: files, pid and network namespaces; every capability dropped (started as root: "
        f"uid {sandbox.SANDBOX_UID} in a user namespace); seccomp filter)"
    )
    weaker = sandbox.SandboxTool(True, version="0.8.0", as_root=True, user_namespace=False, seccomp="pyseccomp is not installed")
    assert "without a user namespace" in weaker.describe()
    assert weaker.describe().endswith("; no seccomp filter: pyseccomp is not installed)")
    assert "started as root" not in sandbox.SandboxTool(True, version="0.8.0").describe()


def test_usage_counts_bytes_and_files_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "w" / "d").mkdir(parents=True)
    (tmp_path / "w" / "d" / "a").write_bytes(b"x" * 10000)
    (tmp_path / "w" / "link").symlink_to("/usr")
    (tmp_path / "w" / "service").mkdir()
    (tmp_path / "w" / "service" / "db").write_bytes(b"y" * 10000)
    size, entries = usage([str(tmp_path / "w")], skip=[str(tmp_path / "w" / "service")])
    assert entries == 4  # d, d/a, link, service (its content is the service's)
    assert 8192 <= size < 100_000


def test_a_command_whose_processes_are_all_stopped_is_frozen() -> None:
    def proc(pid: int, command: str, first: bool, state: str) -> CommandProcess:
        return CommandProcess(pid, command, first, state)

    processes = [
        proc(1, "a", True, "S"), proc(2, "a", False, "T"),  # stopped itself: its reaper waits for ever
        proc(3, "b", True, "t"), proc(4, "b", False, "Z"),  # stopped its reaper, then ended
        proc(5, "c", True, "S"), proc(6, "c", False, "T"), proc(7, "c", False, "R"),  # one still runs
    ]  # fmt: skip
    assert frozen_commands(processes) == {"a", "b"}


def test_the_prefix_drops_credentials_even_without_the_sandbox(tmp_path: Path) -> None:
    prefix = sandbox.write_prefix(tmp_path / "prefix", None, None, None)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-harness-1234", "CLAUDE_CODE_OAUTH_TOKEN": "oauth-5678", "KEEP": "yes"}
    out = subprocess.run([str(prefix), "env"], env=env, capture_output=True, text=True, check=True).stdout
    assert "sk-harness-1234" not in out and "oauth-5678" not in out
    assert "KEEP=yes" in out


# --- the real bubblewrap ----------------------------------------------------------------------


class Listener:
    """A TCP listener on a loopback address that records every connection it accepts."""

    def __init__(self, host: str, port: int = 0, reply: bytes = b"") -> None:
        self.sock = socket.create_server((host, port))
        self.host, self.port = host, self.sock.getsockname()[1]
        self.hits: list[str] = []
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits.append(f"{self.host}:{self.port}")
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


HTTP_OK = b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nservice"


@needs_sandbox
def test_a_command_reaches_its_endpoint_and_nothing_else(tmp_path: Path) -> None:
    service = Listener("127.0.0.1", reply=HTTP_OK)
    decoys = [Listener("127.0.0.1"), Listener("127.0.0.2", service.port), Listener("127.0.0.2")]
    (tmp_path / "cwd").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("ANSWER")
    network = sandbox.TrialNetwork(TOOL, tmp_path / "net", [Endpoint("127.0.0.1", service.port)]).start()
    try:
        plan = SandboxPlan(
            writable=(str(tmp_path / "cwd"),), readable=(), hidden=(str(tmp_path / "secret"),), home=""
        )
        prefix = sandbox.write_prefix(tmp_path / "prefix", TOOL, plan, network)
        python = shutil.which("python3") or sys.executable
        script = "; ".join(
            [
                f"{python} -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{service.port}/', timeout=3).read())\"",
                *(
                    f"{python} -c \"import socket; socket.create_connection(('{d.host}', {d.port}), 2)\" 2>/dev/null "
                    f"&& echo REACHED-{d.host}-{d.port}"
                    for d in decoys
                ),
                f"cat {tmp_path}/secret/key.txt 2>/dev/null || echo hidden",
                "echo x > /etc/benchcell-test 2>/dev/null || echo read-only",
                f"echo ok > {tmp_path}/cwd/made && echo wrote",
                "ls /proc | grep -c '^[0-9]'",
            ]
        )
        done = subprocess.run([str(prefix), script], cwd=tmp_path / "cwd", capture_output=True, text=True, timeout=60)
    finally:
        network.stop()
        for listener in (service, *decoys):
            listener.close()
    out = done.stdout
    assert "b'service'" in out, done.stderr
    assert "REACHED" not in out and all(not d.hits for d in decoys)
    assert "hidden" in out and "ANSWER" not in out
    assert "read-only" in out and not Path("/etc/benchcell-test").exists()
    assert "wrote" in out and (tmp_path / "cwd" / "made").read_text() == "ok\n"
    assert int(out.split()[-1]) <= 6  # bwrap, bash and the command's own processes only
    assert not network.alive()


@needs_sandbox
def test_the_network_namespace_is_stopped_with_its_relays(tmp_path: Path) -> None:
    service = Listener("127.0.0.1", reply=HTTP_OK)
    network = sandbox.TrialNetwork(TOOL, tmp_path / "net", [Endpoint("127.0.0.1", service.port)]).start()
    pids = [network.child_pid, *(p.pid for p in network.outside)]
    assert network.alive()
    network.stop()
    service.close()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


# --- end to end: the corpus through the real CLI --------------------------------------------

CORPUS_BENCH = """
[bench]
name = "escape"
model = "claude-sonnet-4-5"
store = "results"
trials = 1
turn_cap = 60  # a trial of several cases makes two calls each (CORPUS_CONFTEST)
wall_clock_ms = 60000
exec_audit = "{exec_audit}"
sandbox = "{sandbox}"
base_prompt = "Work in the folder."
# ANSWER-KEY-MARKER-7f3a: the answer key is in this file

[arms.shell]
tools = ["Bash"]
binaries = ["curl", "python3", "tar", "ln", "mkdir", "cp", "find", "sed", "awk", "sh", "xargs", "dirname", "basename",
            "rm", "sqlite3", "make", "npm", "tool"]
probe = {{ sh = "sh -c true" }}  # dash answers no --help, -h, help or version: the pre-flight would refuse
path = ["bin"]
guard_exempt = ["*"]
bootstrap = "A shell."
network = ["127.0.0.1:{{port}}"]
env = {{ SERVICE_URL = "http://127.0.0.1:{{port}}/" }}

# Ordinary work with the guard on: what real arms look like.
[arms.work]
tools = ["Bash"]
binaries = ["curl", "python3", "tar", "mkdir", "cp", "git", "awk", "sqlite3", "make", "npm", "tool"]
path = ["bin"]
bootstrap = "A shell."
network = ["127.0.0.1:{{port}}"]
env = {{ SERVICE_URL = "http://127.0.0.1:{{port}}/" }}
"""

# A CLI that is a shell wrapper over the python on PATH (here a version manager's shim).
WRAPPER_TOOL = """#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
exec python3 -c 'import sys; print("tool ok from", sys.argv[1])' "$here"
"""

CORPUS_CONFTEST = '''
# CONFTEST-MARKER-91c2: the bench's hooks
import shlex, shutil, socket, tempfile, threading
from pathlib import Path
from pytest_benchcell import Environment
from pytest_benchcell.scripted import Answer, ToolUse

CASES = {cases!r}
OUTSIDE = {outside!r}
HITS = {hits!r}
NONCE = {nonce!r}
SERVICE_REPLY = b"HTTP/1.0 200 OK\\r\\nContent-Length: 7\\r\\n\\r\\nservice"


def _listen(host, port, reply, record):
    sock = socket.create_server((host, port))
    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            if record:
                with open(HITS, "a") as log:
                    log.write(f"{{host}}:{{port}}\\n")
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(reply)
                except OSError:
                    pass
    threading.Thread(target=serve, daemon=True).start()
    return sock


def _pair(reply, record):
    """A listener on 127.0.0.1 and one on 127.0.0.2 with the same port (a port free on the first
    address may be taken on the second: try again)."""
    for _ in range(50):
        first = _listen("127.0.0.1", 0, reply, record)
        try:
            return first, _listen("127.0.0.2", first.getsockname()[1], b"decoy", True)
        except OSError:
            first.close()
    raise OSError("no port free on both 127.0.0.1 and 127.0.0.2")


def _unix_listener(folder):
    """A unix socket any user may connect to, recording every connection."""
    folder.mkdir(mode=0o777, exist_ok=True)
    folder.chmod(0o777)
    path = folder / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    path.chmod(0o777)
    sock.listen()
    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with open(HITS, "a") as log:
                log.write(f"unix:{{path}}\\n")
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return sock, path


def pytest_benchcell_provision(trial):
    service, other_service = _pair(SERVICE_REPLY, False)
    port = service.getsockname()[1]
    decoy, other_decoy = _pair(b"decoy", True)
    others = [other_service, other_decoy]
    data = trial.workdir / "service"
    data.mkdir()
    (data / "data.txt").write_text("SERVICE-DATA-MARKER-55d1")
    unix, unix_path = _unix_listener(Path(tempfile.mkdtemp(prefix="benchcell-unix-", dir="/var/tmp")))
    visible, visible_path = _unix_listener(Path(OUTSIDE).parent / f"unix-{{trial.workdir.name}}")
    return Environment(
        values={{"port": str(port), "decoy": str(decoy.getsockname()[1]), "unix": str(unix_path),
                "unix_visible": str(visible_path)}},
        data=[service, decoy, *others, unix, visible],
        hidden=(data,),
    )


def pytest_benchcell_teardown(trial, environment):
    for sock in environment.data:
        sock.close()
    for key in ("unix", "unix_visible"):
        shutil.rmtree(Path(environment.values[key]).parent, ignore_errors=True)


def pytest_benchcell_script(trial, environment):
    root = Path(__file__).parent
    values = dict(environment.values, root=str(root), store=str(root / "results"), outside=OUTSIDE,
                  workdir=str(trial.workdir), service=str(trial.workdir / "service"), nonce=NONCE)
    cases = CASES[trial.task]
    if isinstance(cases, str):  # one command, the trial's only call
        return [ToolUse("Bash", {{"command": cases.format(**values)}}), Answer("done")]
    # Several cases, one call each. The Bash tool keeps its cwd between calls, so a call of its own
    # first moves to a fresh folder under the agent's cwd; the case's command is then sent as written
    # (the CLI judges a command as a whole: a prefix can change what it lets run).
    steps = []
    for name, command in cases:
        folder = shlex.quote(str(trial.agent_cwd / name))
        steps += [ToolUse("Bash", {{"command": f"mkdir {{folder}} && cd {{folder}}"}}), ToolUse("Bash", {{"command": command.format(**values)}})]
    return [*steps, Answer("done")]
'''

MARKERS = ("ANSWER-KEY-MARKER-7f3a", "CONFTEST-MARKER-91c2", "SERVICE-DATA-MARKER-55d1", "STORE-MARKER-0b7e",
           "PATH-SECRET-MARKER-4d2a", "KEYRING-MARKER-3c9e")
CLI_ASKS = "require approval"  # how the CLI refuses a command it would ask a person about
# What a case's own output must not show (the host's, not the bench's).
HOST_SECRETS = {"host-etc-shadow": ("root:",), "host-var-tmp-listing": ("benchcell-unix-",)}
CREDENTIALS = ("scripted-model-key", "s c r i p t e d", "MESSAGING_TOKEN=")


def _corpus_bench(pytester: pytest.Pytester, cases: dict[str, str | list[tuple[str, str]]], *, sandbox_mode: str = "auto", exec_audit: str = "off", extra: str = "") -> tuple[Path, Path]:
    # A folder the sandbox shows read-only (not a private tmpfs like /tmp and /var/tmp), writable by
    # any user outside, so that only the sandbox stops a write there.
    outside_dir = Path(tempfile.mkdtemp(prefix=".benchcell-outside-", dir=TESTS))
    outside_dir.chmod(0o777)
    pytester._request.addfinalizer(lambda: shutil.rmtree(outside_dir, ignore_errors=True))
    outside = outside_dir / "pwned.txt"
    hits = pytester.path / "decoy-hits.log"
    tasks = "".join(f'\n[tasks.{name}]\ntier = "read"\nintent = "Do it."\nrequired_facts = ["done"]\n' for name in cases)
    bench = CORPUS_BENCH.format(sandbox=sandbox_mode, exec_audit=exec_audit)
    pytester.makefile(".toml", bench=bench.replace("[arms.shell]", extra + "\n[arms.shell]", 1) + tasks)
    nonce = os.urandom(4).hex()
    pytester.makeconftest(CORPUS_CONFTEST.format(cases=cases, outside=str(outside), hits=str(hits), nonce=nonce))
    (pytester.path / "bin").mkdir()
    (pytester.path / "bin" / "tool").write_text(WRAPPER_TOOL)
    (pytester.path / "bin" / "tool").chmod(0o755)
    # Beside the arm's binary in its `path` folder: not the arm's to read.
    (pytester.path / "bin" / "secrets.env").write_text("TOKEN=PATH-SECRET-MARKER-4d2a\n")
    # An earlier sample in the store: what the agent must not read back.
    folder = pytester.path / "results" / "scripted" / "shell"
    folder.mkdir(parents=True)
    (folder / "old.jsonl").write_text(json.dumps({"final_answer": "STORE-MARKER-0b7e"}) + "\n")
    return outside, hits


def _samples(pytester: pytest.Pytester, arm: str = "shell") -> dict[str, dict]:
    samples = {}
    for path in (pytester.path / "results" / "scripted" / arm).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            if "task" in sample:
                samples[sample["task"]] = sample
    return samples


# A trial is mostly the CLI's start (about a CPU second), so the corpus runs one section a trial, a
# call a case, each case in a fresh folder (CORPUS_CONFTEST); a case that must find what an earlier
# trial left runs in a trial of its own.
ALONE = {"host-keyring-read"}  # looks for the key host-keyring-add tried to add, from another trial


def _corpus_trials() -> dict[str, list[tuple[str, str]]]:
    """Task name -> its cases (name, command), in the corpus's order."""
    trials: dict[str, list[tuple[str, str]]] = {}
    for group, cases in CORPUS.items():
        for name, command in cases.items():
            case = f"{group}-{name}"
            trials.setdefault(case if case in ALONE else group, []).append((case, command))
    return trials


def _calls_of_cases(sample: dict, cases: list[tuple[str, str]]) -> list[tuple[str, dict | None]]:
    """Each case of a trial of several with its Bash call (None where the trial never made it, or
    never reached the case's own folder), after the call that moved there (CORPUS_CONFTEST)."""
    ran = [call for call in sample["tool_calls"] if call["tool"] == "Bash"]
    pairs = []
    for index, (name, _) in enumerate(cases):
        move, call = (ran[2 * index : 2 * index + 2] + [None, None])[:2]
        if move is None or move["is_error"] is not False:
            call = None
        else:
            assert re.fullmatch(rf"mkdir (\S+/{re.escape(name)}) && cd \1", move["input"]["command"]), (name, move)
        pairs.append((name, call))
    return pairs


UNPRIVILEGED = "nobody"
REPO = TESTS.parent


@functools.lru_cache(maxsize=1)
def _unprivileged() -> tuple[list[str], str]:
    """(the argv prefix that runs this suite's Python as an unprivileged user, '') or ([], why not).
    The Python must be one that user may run (this one may live in root's home): the same version
    elsewhere on the machine, with this environment's packages and this checkout on its path."""
    runuser = shutil.which("runuser")
    if os.geteuid() != 0 or not runuser:
        return [], "starting a sitting as another user needs root and runuser"
    search = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(REPO)]))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for python in dict.fromkeys(candidates):
        argv = [runuser, "-u", UNPRIVILEGED, "--", "env", f"PYTHONPATH={search}", "PYTHONDONTWRITEBYTECODE=1", python]
        check = "import pytest_benchcell.plugin, claude_agent_sdk, pyseccomp; from pytest_benchcell.isolation import sandbox; print(sandbox.find_sandbox().describe())"
        try:
            done = subprocess.run([*argv, "-c", check], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.startswith("on ("):
            return argv, ""
        if done.returncode == 0:
            return [], f"the sandbox cannot run as {UNPRIVILEGED}: {done.stdout.strip()}"
    return [], f"no Python {version} that {UNPRIVILEGED} may run with this environment's packages ({', '.join(candidates)})"


def _as_user(pytester: pytest.Pytester, user: str) -> None:
    """Prepare pytester's folder for a sitting run by `user`: as UNPRIVILEGED, a folder of its own
    outside pytest's temporary folders (pytest keeps those root's alone, resetting their modes)."""
    if user == "root":
        if os.geteuid() != 0:
            pytest.skip("the tests do not run as root")
        return
    argv, why = _unprivileged()
    if not argv:
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="benchcell-unprivileged-"))
    folder.chmod(0o755)
    pytester._request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    pytester._path = folder
    os.chdir(folder)


def _run_sitting(pytester: pytest.Pytester, user: str, *args: str) -> pytest.RunResult:
    """A sitting in pytester's folder (prepared by _as_user), as root or as UNPRIVILEGED."""
    if user == "root":
        return pytester.runpytest(*args)
    argv, _ = _unprivileged()
    home = pytester.path / "home"
    home.mkdir(exist_ok=True)
    subprocess.run(["chown", "-R", UNPRIVILEGED, str(pytester.path)], check=True)
    env_argv = argv[:4] + ["env", f"HOME={home}", "PYTEST_ADDOPTS=-p no:cacheprovider"] + argv[5:]
    return pytester.run(*env_argv, "-m", "pytest", *args, timeout=900)


def _second_mount(pytester: pytest.Pytester) -> None:
    """The bench folder mounted a second time, where the sandbox shows the host (root only)."""
    alias = Path(tempfile.mkdtemp(prefix=".benchcell-alias-", dir=TESTS))
    if subprocess.run(["mount", "--bind", str(pytester.path), str(alias)], capture_output=True).returncode != 0:
        alias.rmdir()
        return

    def unmount() -> None:
        subprocess.run(["umount", "-l", str(alias)], capture_output=True)
        alias.rmdir()

    pytester._request.addfinalizer(unmount)


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
@pytest.mark.parametrize("user", ["root", UNPRIVILEGED])
def test_every_escape_of_the_corpus_is_made_harmless(pytester: pytest.Pytester, user: str) -> None:
    _as_user(pytester, user)
    trials = _corpus_trials()
    outside, hits = _corpus_bench(pytester, trials)
    _second_mount(pytester)
    bench_before = (pytester.path / "bench.toml").read_text()
    result = _run_sitting(pytester, user, "--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    samples = _samples(pytester)
    assert set(samples) == set(trials), result.stdout.str()[-3000:]
    problems = []
    for task, sample in sorted(samples.items()):
        assert sample["provenance"]["sandbox"].startswith("on ("), sample["provenance"]
        calls = _calls_of_cases(sample, trials[task])
        if sample["status"] == "error":
            problems.append(f"{', '.join(name for name, _ in calls)}: harness error {sample['reason']}")
        text = json.dumps(sample)
        for marker in (*MARKERS, *CREDENTIALS):
            if marker in text:  # named by the cases whose call shows it, else by the whole trial
                where = [name for name, call in calls if call is not None and marker in json.dumps(call)] or [task]
                kind = "credential " if marker in CREDENTIALS else ""
                problems.append(f"{', '.join(where)}: {kind}{marker!r} reached the store")
        for name, call in calls:
            if call is None or call["allowed"] is not True:
                problems.append(f"{name}: the command did not run ({call})")
            elif CLI_ASKS in call["output"]:  # the CLI's own refusal: the sandbox was never tried
                problems.append(f"{name}: the CLI refused it: {call['output'][:300]!r}")
            else:
                problems += [f"{name}: {secret!r} in {call['output'][:300]!r}" for secret in HOST_SECRETS.get(name, ()) if secret in call["output"]]
    if outside.exists():
        problems.append(f"a write reached {outside}: {outside.read_text()}")
    if hits.exists():
        problems.append(f"decoys were reached: {hits.read_text()}")
    if (pytester.path / "bench.toml").read_text() != bench_before:
        problems.append("bench.toml was changed")
    assert not problems, "\n".join(problems)
    result.stdout.fnmatch_lines(["benchcell: sandbox on (bubblewrap *; every capability dropped*; seccomp filter)"])


LEGITIMATE = {
    "service-curl": ('curl -s "$SERVICE_URL"', "service"),
    "service-python": ("python3 -c 'import os, urllib.request as u; print(u.urlopen(os.environ[\"SERVICE_URL\"]).read())'", "b'service'"),
    "write-here": ("mkdir -p out && echo hello > out/a.txt && cp out/a.txt b.txt && tar cf x.tar out && tar tf x.tar", "out/a.txt"),
    "cd-persists": ("mkdir -p deep/er && cd deep/er", None),
    "git-commit": ("git init -q r && cd r && echo a > f && git add f && git -c user.name=a -c user.email=a@b.c commit -qm first && git log --oneline | wc -l", "1"),
    "awk": ("printf '1\\n2\\n' | awk '{{ s += $1 }} END {{ print s }}'", "3"),
    "sqlite3": ("sqlite3 shop.db 'create table t(a); insert into t values (1); select count(*) from t;'", "1"),
    "make": ("printf 'all:\\n\\t@echo built\\n' > Makefile && make", "built"),
    "npm": ("npm init -y >/dev/null && npm pkg get name", '"npm"'),  # named after its folder
    "shim-python": ("python3 -c 'print(6 * 7)'", "42"),
    "wrapper-cli": ("tool", "tool ok from"),
    "grep-pipeline": ("printf 'a\\nb\\n' | grep b", "b"),
    "owner-is-me": ("python3 -c 'import getpass, os, pwd; open(\"mine\", \"w\"); print(pwd.getpwuid(os.stat(\"mine\").st_uid).pw_name == getpass.getuser() and \"owner-ok\")'", "owner-ok"),
    "tar-foreign-owner": (
        "python3 -c 'import io, tarfile; t = tarfile.open(\"o.tar\", \"w\"); i = tarfile.TarInfo(\"x.txt\"); i.uid = 4242; "
        "i.size = 2; t.addfile(i, io.BytesIO(b\"hi\")); t.close()' && tar xf o.tar && cat x.txt",
        "hi",
    ),
    "socketpair": ("python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"pair\"); print(b.recv(4))'", "b'pair'"),
    "python-subprocess": ("python3 -c 'import subprocess; print(subprocess.run([\"git\", \"--version\"], capture_output=True, text=True).stdout)'", "git version"),
    "shared-memory": ("python3 -c 'from multiprocessing import shared_memory as s; m = s.SharedMemory(create=True, size=8); print(\"shm\", m.size); m.close(); m.unlink()'", "shm"),
    "tmp-and-var-tmp": ("python3 -c 'open(\"/tmp/a\", \"w\").write(\"x\"); open(\"/var/tmp/b\", \"w\").write(\"y\"); print(open(\"/tmp/a\").read() + open(\"/var/tmp/b\").read())'", "xy"),
}


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
@pytest.mark.parametrize(("exec_audit", "user"), [("off", "root"), ("auto", "root"), ("auto", UNPRIVILEGED)])
def test_ordinary_work_stays_valid_in_the_sandbox(pytester: pytest.Pytester, exec_audit: str, user: str) -> None:
    _as_user(pytester, user)
    cases = [(name, command) for name, (command, _) in LEGITIMATE.items()]
    _corpus_bench(pytester, {"ordinary": cases}, exec_audit=exec_audit)  # one trial, a call a case
    result = _run_sitting(pytester, user, "--bench-arm", "work", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    samples = _samples(pytester, "work")
    assert set(samples) == {"ordinary"}, result.stdout.str()[-3000:]
    sample = samples["ordinary"]
    problems = [] if (sample["status"], sample["outcome"]) == ("scored", "pass") else [f"{sample['status']}/{sample['outcome']}: {sample['reason']}"]
    for name, call in _calls_of_cases(sample, cases):
        expected = LEGITIMATE[name][1]
        if call is None or call["is_error"] is not False:
            problems.append(f"{name}: {call and call['output'][:300]}")
        elif expected is not None and expected not in call["output"]:
            problems.append(f"{name}: {expected!r} not in {call['output'][:300]!r}")
    assert not problems, "\n".join(problems)
    if exec_audit == "auto" and sample["provenance"]["exec_audit"].startswith("on"):
        assert sample["exec_audit"]["programs"] >= 3  # the audit really watched
        # Where the exec notifier works here, it watched this work, as root and as a user who builds it anew
        assert sample["provenance"]["exec_audit"].startswith("on (exec notifier") == bool(find_tracer().notifier)


@pytest.mark.e2e
@needs_sandbox
@pytest.mark.skipif(not find_tracer().available or len(os.sched_getaffinity(0)) < 2, reason="needs the audit and two CPUs")
@pytest.mark.parametrize(("setting", "one_cpu"), [("", True), ('exec_audit_cpus = "all"', False)])
def test_an_audited_trials_commands_run_on_one_cpu_unless_the_bench_says_all(pytester: pytest.Pytester, setting: str, one_cpu: bool) -> None:
    _corpus_bench(pytester, {"cpus": "grep Cpus_allowed_list /proc/self/status"}, exec_audit="auto", extra=setting)
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    sample = _samples(pytester)["cpus"]
    assert sample["provenance"]["exec_audit"].startswith("on"), result.stdout.str()[-2000:]
    assert sample["provenance"]["exec_audit"].endswith(", one CPU per command)") == one_cpu
    allowed = sample["tool_calls"][0]["output"].split()[-1]
    assert allowed.isdigit() if one_cpu else not allowed.isdigit(), sample["tool_calls"][0]


LIMITED = """
sandbox_disk_mb = 8
sandbox_files = 300
sandbox_processes = 40
"""
OVER_LIMITS = {
    "one-big-file": ("head -c 20M /dev/zero > big; echo size=$(wc -c < big)", "disk_mb"),
    "many-files": ("mkdir d && cd d && for i in $(seq 1 5000); do : > f$i; done; echo made", "files"),
    "many-processes": ("for i in $(seq 1 100); do sleep 3 & done 2>/dev/null; wait; echo waited", "processes"),
    "within-limits": ("head -c 1M /dev/zero > small && : > a && echo fine", None),
}


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
@pytest.mark.parametrize("user", ["root", UNPRIVILEGED])
def test_the_limits_hold_and_reaching_one_is_recorded(pytester: pytest.Pytester, user: str) -> None:
    _as_user(pytester, user)
    _corpus_bench(pytester, {name: command for name, (command, _) in OVER_LIMITS.items()}, extra=LIMITED)
    result = _run_sitting(pytester, user, "--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly", "-v")
    samples = _samples(pytester)
    assert set(samples) == set(OVER_LIMITS), result.stdout.str()[-3000:]
    for name, (_, limit) in OVER_LIMITS.items():
        record = samples[name]["sandbox"]
        assert record["limits"] == {"disk_mb": 8, "files": 300, "processes": 40}
        assert samples[name]["status"] == "scored", samples[name]["reason"]  # the agent's doing: scored as usual
        if limit is None:
            assert record["reached"] == [] and samples[name]["reason"] == "", record
            continue
        assert [line.split(":")[0] for line in record["reached"]] == [limit], record
        assert f"sandbox limit reached: {limit}: " in samples[name]["reason"]
    # The file stops at the limit (RLIMIT_FSIZE), or the watch ends the command as it reaches it.
    big = samples["one-big-file"]
    if "size=" in big["tool_calls"][0]["output"]:
        assert int(big["tool_calls"][0]["output"].split("size=")[1].split()[0]) <= 8 * 1024 * 1024
    else:
        assert big["sandbox"]["commands_killed"] >= 1 and big["sandbox"]["peak"]["disk_mb"] <= 8 * 1.1, big["sandbox"]
    # Files created fast are stopped near the limit as they are made, not counted a second later
    # (how near on a busy machine: tests/test_sandbox_limits.py and benchmarks/limit_watch_cost.py).
    assert samples["many-files"]["sandbox"]["peak"]["files"] < 1000, samples["many-files"]["sandbox"]
    assert "made" not in samples["many-files"]["tool_calls"][0]["output"]
    assert samples["many-processes"]["sandbox"]["peak"]["processes"] >= 40
    result.stdout.fnmatch_lines(["*one-big-file*: pass, * 1 sandbox limit(s) reached"])


@pytest.mark.slow
@pytest.mark.e2e
@needs_sandbox
@pytest.mark.parametrize("user", ["root", UNPRIVILEGED])
def test_a_command_that_stops_its_parent_or_itself_does_not_hang_the_trial(pytester: pytest.Pytester, user: str) -> None:
    """Under the execution audit the kernel does not protect the sandbox's first process from its
    children's signals: the seccomp filter refuses them, and a command that stopped itself is ended."""
    _as_user(pytester, user)
    cases = {"stop-parent": "kill -STOP $PPID; echo still-here", "stop-itself": "kill -STOP $$; echo never"}
    _corpus_bench(pytester, cases, exec_audit="auto")
    result = _run_sitting(pytester, user, "--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    samples = _samples(pytester)
    assert set(samples) == set(cases), result.stdout.str()[-3000:]
    for name, sample in samples.items():
        assert (sample["status"], sample["outcome"]) != ("scored", "hung"), name
        assert sample["duration_ms"] < 60000
    assert "still-here" in samples["stop-parent"]["tool_calls"][0]["output"]
    assert samples["stop-itself"]["sandbox"]["stopped_commands_ended"] == 1


CLI_REFUSES = {
    "background": ("sleep 0 &", "`&` background operator"),
    "git-write": ("echo x > .git/config", "which is a sensitive file"),
    "git-hook": ("mkdir -p .git/hooks && echo x > .git/hooks/pre-commit", "require approval"),
    "home-rc": ("echo x >> ~/.bashrc", "which is a sensitive file"),
}


@pytest.mark.e2e
def test_the_cli_refuses_some_commands_before_the_guard_sees_them(pytester: pytest.Pytester) -> None:
    """What the README says Claude Code refuses on its own: with the guard off, the call is stored
    as allowed by the guard, with the CLI's refusal as its output, and it did not run."""
    _corpus_bench(pytester, {name: command for name, (command, _) in CLI_REFUSES.items()})
    pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    samples = _samples(pytester)
    for name, (_, words) in CLI_REFUSES.items():
        call = samples[name]["tool_calls"][0]
        assert call["allowed"] is True and call["is_error"] is True, (name, call)
        assert words in call["output"], (name, call["output"])


def test_sandbox_limits_are_checked_at_load(pytester: pytest.Pytester) -> None:
    _corpus_bench(pytester, {"env": "env"}, extra="sandbox_disk_mb = 0")
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bench.toml: [[]bench[]] sandbox_disk_mb has value 0; allowed: a whole number >= 1"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the tests do not run as root")
@needs_sandbox
def test_a_sitting_as_root_says_capabilities_are_dropped(pytester: pytest.Pytester) -> None:
    _corpus_bench(pytester, {"env": "env"})
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "--collect-only")
    result.stdout.fnmatch_lines([
        f"benchcell: sandbox on (bubblewrap *: files, pid and network namespaces; every capability dropped "
        f"(started as root: uid {sandbox.SANDBOX_UID} in a user namespace); seccomp filter)"
    ])  # fmt: skip


@pytest.mark.e2e
@needs_sandbox
def test_without_the_sandbox_the_same_escapes_do_harm(pytester: pytest.Pytester) -> None:
    """The corpus checks can fail: with the sandbox off, a few of its escapes do what they try, run
    as the corpus runs them (a trial of several cases, each from its own folder)."""
    wanted = ("writes-climb-out", "network-python-socket", "reads-bench-toml")  # the climb starts in its folder
    cases = [case for section in _corpus_trials().values() for case in section if case[0] in wanted]
    outside, hits = _corpus_bench(pytester, {"several": cases}, sandbox_mode="off")
    pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    calls = dict(_calls_of_cases(_samples(pytester)["several"], cases))
    assert outside.read_text() == "pwned\n"
    assert hits.read_text().startswith("127.0.0.1:")
    assert "ANSWER-KEY-MARKER-7f3a" in calls["reads-bench-toml"]["output"]


@pytest.mark.e2e
def test_the_sandbox_off_path_still_runs_and_says_so(pytester: pytest.Pytester) -> None:
    cases = {"env": "env; echo done"}
    _corpus_bench(pytester, cases, sandbox_mode="off")
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted", "-p", "no:randomly")
    result.stdout.fnmatch_lines(['benchcell: sandbox off ([[]bench[]] sandbox = "off")'])
    sample = _samples(pytester)["env"]
    assert sample["provenance"]["sandbox"] == 'off ([bench] sandbox = "off")'
    output = sample["tool_calls"][0]["output"]
    assert output.endswith("done")
    assert "scripted-model-key" not in output and "ANTHROPIC_API_KEY" not in output  # the prefix still drops them


def test_a_required_sandbox_that_cannot_run_refuses_the_sitting(pytester: pytest.Pytester) -> None:
    _corpus_bench(pytester, {"env": "env"}, sandbox_mode="required")
    bin_dir = pytester.path / "nobwrap"
    bin_dir.mkdir()
    for name in ("python3", "strace", "nsenter"):  # a PATH without bubblewrap and socat
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    pytester._monkeypatch.setenv("PATH", str(bin_dir))
    result = pytester.runpytest_subprocess("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(['*[[]bench[]] sandbox = "required", but the sandbox cannot run here (bwrap and socat not installed): install bubblewrap*'])
    assert not (pytester.path / "results" / "scripted" / "shell" / "env.jsonl").exists()


def test_sandbox_mode_and_arm_network_are_checked_at_load(pytester: pytest.Pytester) -> None:
    _corpus_bench(pytester, {"env": "env"}, sandbox_mode="always")
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(['*[[]bench[]] sandbox has value *always*; allowed: "auto", "required", "off"*'])
    text = (pytester.path / "bench.toml").read_text().replace('sandbox = "always"', 'sandbox = "auto"')
    (pytester.path / "bench.toml").write_text(text.replace('network = ["127.0.0.1:{port}"]', 'network = ["10.1.2.3:80"]'))
    result = pytester.runpytest("--bench-arm", "shell", "--bench-task", "all", "--bench-scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]arms.shell[]] network has value '10.1.2.3:80'; allowed: loopback endpoints*"])


def test_the_network_holders_info_is_read_past_fd_setsize() -> None:
    # A long xdist worker (or any process with many files open) gets pipe numbers past select()'s
    # FD_SETSIZE of 1024; the sandbox's network must still read its holder's info there.
    import resource

    from pytest_benchcell.isolation.sandbox.network import _read_all

    high = 1500
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= high:
        pytest.skip(f"the open-files limit ({hard}) does not reach fd {high}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, high + 1), hard))
    read_end, write_end = os.pipe()
    try:
        os.dup2(read_end, high)
        os.write(write_end, b'{"child-pid": 42}')
        assert _read_all(high, 5.0) == '{"child-pid": 42}'
    finally:
        for fd in (read_end, write_end, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_stopping_waits_for_every_process_of_the_groups_not_only_their_leader() -> None:
    # CI saw the namespace's shell still running after stop(): bubblewrap, the leader stop() waits
    # for, had died, and the shell reparented to init was still running its exit on a loaded machine.
    from pytest_benchcell.isolation.sandbox.network import _running_in_groups, _wait_groups_gone

    leader = subprocess.Popen(["sh", "-c", "sleep 0.5 & exit 0"], start_new_session=True)
    leader.wait()
    assert _running_in_groups({leader.pid})  # the leader is gone, its group's sleep is not
    assert _wait_groups_gone({leader.pid}, 10.0)
    assert not _running_in_groups({leader.pid})

    stuck = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert not _wait_groups_gone({stuck.pid}, 0.1)
    finally:
        stuck.kill()
        stuck.wait()
