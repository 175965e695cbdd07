"""The execution audit under the sandbox, with each watcher of a trial's commands: strace, in a pid
namespace of the command's own in which the sandbox's is nested, and the exec notifier, outside the
sandbox's namespaces with the host's pids. The records keep every program with its real parent chain, and
nothing inside the sandbox can see, signal or read the observer or its log. A command runs through
a trial's real prefix (as a trial runs it, without the Claude CLI)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_benchcell.isolation import sandbox
from pytest_benchcell.isolation.exec_audit import ExecAudit, Tracer, audit_state, find_tracer, parse_strace
from pytest_benchcell.isolation.exec_audit.notifier import find_notifier
from pytest_benchcell.isolation.limits import DEFAULT_LIMITS

TOOL, TRACER = sandbox.find_sandbox(), find_tracer()
needs_both = pytest.mark.skipif(
    not (TOOL.available and TRACER.available), reason=f"sandbox: {TOOL.describe()}; audit: {TRACER.describe()}"
)


@pytest.fixture(params=["strace", "notifier"])
def watcher(request: pytest.FixtureRequest) -> Tracer:
    """What watches a trial's commands: strace, or the exec notifier where it works here."""
    if request.param == "notifier" and not TRACER.notifier:
        pytest.skip(f"the exec notifier cannot run here: {find_notifier()[1] or 'it does not watch programs here'}")
    return TRACER if request.param == "notifier" else replace(TRACER, notifier="")


def _run_audited(
    root: Path, command: str, tracer: Tracer = TRACER, **audit_options: bool
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run one command through the audited sandbox prefix, as a trial's (`audit_options` for its
    ExecAudit; a trial's traces no opens): (the run, the text of each log)."""
    audit_options.setdefault("opens", False)
    for name in ("cwd", "environment", "home"):
        (root / name).mkdir(parents=True)
    plan = sandbox.SandboxPlan(writable=(str(root / "cwd"), str(root / "environment")), readable=(), hidden=(str(root / "trial"),),
                               home=str(root / "home"), never=())  # fmt: skip
    network = sandbox.TrialNetwork(TOOL, root / "trial" / "network", []).start()
    try:
        audit = ExecAudit(root / "trial" / "audit", tracer, wrappers=(TOOL.bwrap, TOOL.nsenter, TOOL.prlimit), **audit_options)
        prefix = sandbox.write_prefix(
            root / "trial" / "prefix", TOOL, plan, network, trace=audit.trace_command(), shell=audit.shell, limits=DEFAULT_LIMITS,
            pin=audit.pin_line(), traced_namespace=not audit.notified,
        )
        done = subprocess.run([str(prefix), command], cwd=root / "cwd", capture_output=True, text=True, timeout=60)
        return done, [log.read_text() for log in sorted(audit.logs.iterdir())]
    finally:
        network.stop()


@needs_both
def test_every_program_is_recorded_with_its_parent_chain_and_the_watcher_says_nothing(tmp_path: Path, watcher: Tracer) -> None:
    command = "(sh -c 'ls / | wc -l' &); git --version | cat; sleep 0.1"
    done, logs = _run_audited(tmp_path, command, watcher)
    assert done.returncode == 0 and done.stderr == "", done  # no word of strace's in the command's output
    [text] = logs
    records = parse_strace(text).records
    by_name = {record.path.rsplit("/", 1)[-1]: record for record in records}
    shell = next(record for record in records if record.argv[1:] == ("-c", command))
    assert by_name["sh"].parent == shell.index  # a background subshell's program: below the shell
    assert by_name["ls"].parent == by_name["wc"].parent == by_name["sh"].index
    assert by_name["git"].parent == by_name["cat"].parent == shell.index
    if watcher.notifier:  # the notifier starts the launchers: nsenter heads the log
        assert [Path(record.path).name for record in records[:2]] == ["nsenter", "bwrap"] and records[0].parent is None
    else:
        assert by_name["bwrap"].parent is None  # the launcher heads the log; nsenter and unshare ran before strace


@needs_both
def test_programs_started_through_links_and_the_callers_own_files_are_recorded(tmp_path: Path, watcher: Tracer) -> None:
    # Inside the sandbox /dev/fd and /proc/self name the command's process, which the observer is not.
    command = "ln -s /bin/true here; ./here; exec 3< /bin/true; /dev/fd/3; /proc/self/exe -c true"
    done, [text] = _run_audited(tmp_path, command, watcher)
    assert done.returncode == 0, done
    started = [record.path for record in parse_strace(text).records]
    assert {"./here", "/dev/fd/3", "/proc/self/exe"} <= set(started), started


@needs_both
def test_nothing_inside_sees_signals_or_reads_the_observer(tmp_path: Path, watcher: Tracer) -> None:
    command = (
        "cat /proc/[0-9]*/comm | sort -u | tr '\\n' ' '; echo; "
        f"ls -A {tmp_path / 'trial'} | wc -l; "
        "kill -KILL -1 2>/dev/null; echo after"
    )
    done, logs = _run_audited(tmp_path, command, watcher)
    seen = done.stdout.splitlines()[0].split()
    assert "strace" not in seen and "unshare" not in seen and "nsenter" not in seen, seen
    assert not any(name.startswith("exec-notifier") for name in seen), seen
    assert done.stdout.splitlines()[1:] == ["0", "after"]  # the trial's folder (the logs) is hidden: an empty tmpfs
    [text] = logs  # killing everything it can see did not end the observer: the shell's end is logged
    log = parse_strace(text)
    shell = next(record for record in log.records if record.argv[1:2] == ("-c",))
    assert shell.pid in log.exits


@needs_both
@pytest.mark.parametrize("one_cpu", [True, False])
def test_a_command_runs_on_one_cpu_with_its_tracer_unless_told_otherwise(tmp_path: Path, one_cpu: bool, watcher: Tracer) -> None:
    tracer = audit_state("auto", watches_bash=True, no_bash="", one_cpu=one_cpu)  # [bench] exec_audit_cpus
    tracer = replace(tracer, notifier=watcher.notifier)
    assert tracer.describe().endswith(", one CPU per command)") == one_cpu
    done, [text] = _run_audited(tmp_path / "run", "grep Cpus_allowed_list /proc/self/status", tracer)
    allowed = done.stdout.split()[-1]
    if one_cpu:
        assert allowed.isdigit() and int(allowed) in os.sched_getaffinity(0), done
    else:
        assert _cpus(allowed) == os.sched_getaffinity(0), done
    records = parse_strace(text).records
    assert [Path(record.path).name for record in records][-2:] == ["bash", "grep"]  # taskset runs before strace: not a record
    assert not any(Path(record.path).name == "taskset" for record in records)


def _cpus(listed: str) -> set[int]:
    """The CPUs of a list as /proc shows it: "0-3,6"."""
    cpus: set[int] = set()
    for part in listed.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


@needs_both
def test_a_trial_traces_its_connects_and_the_preflight_its_opens_as_well(tmp_path: Path, watcher: Tracer) -> None:
    command = "cat /etc/hostname > /dev/null; (exec 3<>/dev/tcp/127.0.0.1/9) 2> /dev/null; true"
    for opens, calls in ((False, {"connect"}), (True, {"openat", "connect"})):
        done, [text] = _run_audited(tmp_path / str(opens), command, watcher, opens=opens)
        accesses = parse_strace(text).accesses
        assert {access.call for access in accesses if access.call != "execve"} == calls, done
        refused = [access for access in accesses if access.call == "connect"]
        assert [(access.target, access.result) for access in refused] == [("127.0.0.1:9", "ECONNREFUSED")]


def test_without_taskset_commands_are_not_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_benchcell.isolation.exec_audit.tracer import _working_taskset

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without taskset
    assert _working_taskset() == ""
    monkeypatch.undo()
    audit = ExecAudit(tmp_path / "audit", replace(TRACER, taskset=""))
    assert audit.pin_line() == ""
    if TRACER.available:
        done = subprocess.run([str(audit.prefix), "grep Cpus_allowed_list /proc/self/status"], capture_output=True, text=True, timeout=60)
        assert _cpus(done.stdout.split()[-1]) == os.sched_getaffinity(0), done
