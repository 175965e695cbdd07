"""The exec notifier (data/exec_notifier.c, isolation/exec_audit/notifier.py): what it writes is what
strace writes for the same command (the programs, their parents, the failed starts and their errors,
the connects and how processes ended), it answers a connect with the connect's real result, it keeps
a command's exit status, survives the signals sent to the command's group, and ends a call of another
architecture's convention. Where it cannot be built (no C compiler), the audit keeps strace."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from pytest_benchcell.isolation.exec_audit import StraceLog, find_tracer, parse_strace
from pytest_benchcell.isolation.exec_audit.notifier import compiler, find_notifier

TRACER = find_tracer()
NOTIFIER = TRACER.notifier  # built here and checked by the tracer
WHY_NOT = find_notifier()[1] or TRACER.reason or "it does not work here (seccomp user notifications refused?)"
needs_notifier = pytest.mark.skipif(not NOTIFIER, reason=f"the exec notifier cannot run here: {WHY_NOT}")
needs_both = pytest.mark.skipif(not (NOTIFIER and TRACER.available), reason=f"needs strace and the notifier: {TRACER.reason or WHY_NOT}")


def notified(argv: list[str], log: Path, **options: object) -> tuple[int, StraceLog]:
    done = subprocess.run([NOTIFIER, "-o", str(log), "--", *argv], capture_output=True, timeout=60, **options)  # type: ignore[call-overload]
    return done.returncode, parse_strace(log.read_text(errors="replace"))


def traced(argv: list[str], log: Path, **options: object) -> tuple[int, StraceLog]:
    done = subprocess.run([TRACER.program, *TRACER.options(opens=False), "-o", str(log), *argv],
                          capture_output=True, timeout=60, **options)  # type: ignore[call-overload]  # fmt: skip
    return done.returncode, parse_strace(log.read_text(errors="replace"))


def chain_names(log: StraceLog) -> list[tuple[str, ...]]:
    """Each program with the programs above it, by file name, in the order they started."""
    named = []
    for record in log.records:
        names = [Path(record.path).name]
        at = record.parent
        while at is not None:
            names.append(Path(log.records[at].path).name)
            at = log.records[at].parent
        named.append(tuple(names))
    return named


def failed_starts(log: StraceLog) -> list[tuple[str, str]]:
    return [(access.target, access.result) for access in log.accesses if access.call.startswith("execve")]


@needs_both
def test_it_writes_what_strace_writes_for_the_same_command(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "not-executable").write_text("#!/bin/sh\necho no\n")
    (folder / "no-interpreter").write_text("echo plain text\n")  # executable, but no #! nor ELF: ENOEXEC
    (folder / "no-interpreter").chmod(0o755)
    (folder / "script").write_text("#!/bin/sh\nexec printf 'script ran\\n'\n")
    (folder / "script").chmod(0o755)
    (folder / "a-folder").mkdir(mode=0o755)
    (folder / "absolute-link").symlink_to("/bin/true")  # resolved from the caller's root, not its folder
    (folder / "relative-link").symlink_to("../tools/absolute-link")
    command = (
        f"cd {folder}; ./not-executable; ./no-interpreter; ./a-folder; ./missing; script | cat; "
        "(sh -c 'ls / > /dev/null' &); wait; sh -c 'exit 3'; ./absolute-link; ./relative-link; "
        "exec 3< /bin/true; /dev/fd/3; /proc/self/exe -c true; true"  # the caller's own fd and executable
    )
    env = {"PATH": f"{tmp_path / 'nowhere'}:{folder}:{os.environ['PATH']}", "LANG": "C"}
    status, by_notifier = notified(["bash", "-c", command], tmp_path / "notified.log", env=env)
    expected_status, by_strace = traced(["bash", "-c", command], tmp_path / "traced.log", env=env)
    assert status == expected_status == 0
    assert sorted(chain_names(by_notifier)) == sorted(chain_names(by_strace))  # a pipeline's programs start in either order
    assert sorted(failed_starts(by_notifier)) == sorted(failed_starts(by_strace))
    assert {result for _, result in failed_starts(by_notifier)} >= {"EACCES", "ENOENT", "ENOEXEC"}
    assert sorted(by_notifier.exits.values()) == sorted(by_strace.exits.values())


@needs_both
def test_a_child_that_outlives_its_parent_keeps_its_parent(tmp_path: Path) -> None:
    command = "sh -c '(sleep 0.3; /bin/echo outlived) & exit 0'; sleep 0.6"
    _, by_notifier = notified(["bash", "-c", command], tmp_path / "notified.log")
    _, by_strace = traced(["bash", "-c", command], tmp_path / "traced.log")
    echo = [names for names in chain_names(by_notifier) if names[0] == "echo"]
    assert echo == [("echo", "sh", "bash")] == [names for names in chain_names(by_strace) if names[0] == "echo"]


@needs_both
def test_a_program_started_from_an_open_file_is_recorded_as_strace_records_it(tmp_path: Path) -> None:
    # fexecve: execveat(fd, "", ..., AT_EMPTY_PATH). Read as a failed start, it would run unseen.
    script = "import os; fd = os.open('/bin/true', os.O_RDONLY); os.execve(fd, ['true', 'from-a-file'], {})"
    status, by_notifier = notified([sys.executable, "-c", script], tmp_path / "notified.log")
    _, by_strace = traced([sys.executable, "-c", script], tmp_path / "traced.log")
    assert status == 0
    started = [(record.path, record.argv) for record in by_notifier.records if record.argv[:1] == ("true",)]
    assert started == [("", ("true", "from-a-file"))] == [(record.path, record.argv) for record in by_strace.records if record.argv[:1] == ("true",)]
    assert failed_starts(by_notifier) == [access for access in failed_starts(by_strace) if access[0] == ""]


@needs_notifier
def test_a_program_started_by_a_thread_belongs_to_its_process(tmp_path: Path) -> None:
    script = "import os, threading, time; threading.Thread(target=os.execv, args=('/bin/true', ['true'])).start(); time.sleep(5)"
    status, log = notified([sys.executable, "-c", script], tmp_path / "log")
    assert status == 0
    python, true = log.records[0], log.records[-1]
    assert Path(true.path).name == "true" and true.pid == python.pid and true.parent == python.index


@needs_notifier
def test_a_connect_gets_its_real_result_and_is_written_with_it(tmp_path: Path) -> None:
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connecting to it is refused
        ports = listening.getsockname()[1], closed.getsockname()[1]
        script = textwrap.dedent(f"""
            import socket
            for port in {ports}:
                with socket.socket() as s:
                    print(s.connect_ex(("127.0.0.1", port)))
            with socket.socket() as s:
                s.setblocking(False)
                print(s.connect_ex(("127.0.0.1", {ports[0]})) in (0, 115))
        """)
        done = subprocess.run([NOTIFIER, "-o", str(tmp_path / "log"), "--", sys.executable, "-c", script],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout.split() == ["0", "111", "True"], done  # 111: ECONNREFUSED, as without the notifier
    connects = [(access.target, access.result) for access in parse_strace((tmp_path / "log").read_text()).accesses if access.call == "connect"]
    assert connects[:2] == [(f"127.0.0.1:{ports[0]}", "ok"), (f"127.0.0.1:{ports[1]}", "ECONNREFUSED")]
    assert connects[2][1] in ("ok", "EINPROGRESS")


@needs_notifier
@pytest.mark.parametrize(("command", "status"), [("exit 7", 7), ("kill -TERM $$", 128 + signal.SIGTERM)])
def test_the_commands_exit_status_is_kept(tmp_path: Path, command: str, status: int) -> None:
    assert notified(["bash", "-c", command], tmp_path / "log")[0] == status


@needs_notifier
def test_a_signal_to_the_commands_group_leaves_a_complete_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    process = subprocess.Popen([NOTIFIER, "-o", str(log), "--", "bash", "-c", "trap '' TERM INT; sleep 0.5; /bin/true"],
                               start_new_session=True)  # fmt: skip
    time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)  # as a timeout ends a command: its whole group
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert [Path(record.path).name for record in parse_strace(log.read_text()).records][-1] == "true"


@needs_notifier
@pytest.mark.skipif(platform.machine() != "x86_64" or compiler() is None, reason="a 32-bit call from x86_64, built with cc")
def test_a_call_of_another_architectures_convention_ends_the_process(tmp_path: Path) -> None:
    source = tmp_path / "i386.c"
    source.write_text("int main(void) { long pid; __asm__ volatile (\"int $0x80\" : \"=a\"(pid) : \"a\"(20L)); return pid > 0 ? 0 : 1; }\n")
    program = tmp_path / "i386"
    subprocess.run([compiler() or "cc", "-o", str(program), str(source)], check=True, timeout=60)
    assert subprocess.run([str(program)], timeout=60).returncode == 0  # getpid the 32-bit way works outside
    assert notified([str(program)], tmp_path / "log")[0] == 128 + signal.SIGSYS


@needs_notifier
def test_a_long_argument_is_cut_and_marked_as_strace_cuts_it(tmp_path: Path) -> None:
    _, log = notified(["/bin/echo", "x" * 70_000], tmp_path / "log")
    (echo,) = log.records
    assert echo.truncated and len(echo.argv[1]) == 65_535


def test_without_a_c_compiler_the_audit_keeps_strace(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from pytest_benchcell.isolation.exec_audit import find_tracer
        from pytest_benchcell.isolation.exec_audit.notifier import find_notifier
        tracer = find_tracer()
        print(find_notifier())
        print(tracer.describe() if tracer.available else "no strace")
    """)
    nowhere = tmp_path / "bin"
    nowhere.mkdir()
    for program in ("strace", "taskset", "true", "sh"):  # what the tracer needs, without cc, gcc or clang
        if shutil.which(program):
            (nowhere / program).symlink_to(shutil.which(program) or "")
    env = {**os.environ, "PATH": str(nowhere), "XDG_CACHE_HOME": str(tmp_path / "cache"), "CC": ""}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    found, described = done.stdout.splitlines()
    assert found == "('', 'no C compiler (cc) to build the exec notifier')", done
    assert "exec notifier" not in described


@needs_notifier
def test_it_is_built_once_per_machine_and_source(tmp_path: Path) -> None:
    code = "from pytest_benchcell.isolation.exec_audit.notifier import find_notifier; print(find_notifier()[0])"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first, second = (subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
                     for _ in range(2))  # fmt: skip
    assert first == second and first.startswith(str(tmp_path / "cache" / "pytest-benchcell" / "exec-notifier-"))
    assert list((tmp_path / "cache" / "pytest-benchcell").iterdir()) == [Path(first)]  # no build folder left behind
    assert not os.access(first, os.W_OK) or os.geteuid() == 0  # read-only for its owner


@needs_notifier
def test_where_home_cannot_be_written_it_is_built_in_a_temporary_folder_of_the_users_own(tmp_path: Path) -> None:
    code = "from pytest_benchcell.isolation.exec_audit.notifier import find_notifier; print(find_notifier())"
    (tmp_path / "not-a-folder").write_text("")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "not-a-folder"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    program, why = eval(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert why == "" and Path(program).parent == tmp_path / "tmp" / f"pytest-benchcell-{os.geteuid()}"
    assert Path(program).parent.stat().st_mode & 0o777 == 0o700
    (tmp_path / "tmp" / f"pytest-benchcell-{os.geteuid()}").chmod(0o777)  # another user could plant a program there
    program, why = eval(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert program == "" and why.startswith("no folder to build the exec notifier in")


@needs_notifier
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None or not os.path.exists("/usr/bin/python3"),
                    reason="runs the notifier as nobody: needs root, runuser and a system python3")
def test_a_start_whose_path_cannot_be_read_is_refused_not_run_unseen() -> None:
    folder = Path(tempfile.mkdtemp(prefix="benchcell-notifier-nobody-"))  # outside root's private temporary folders
    try:
        shutil.copy(NOTIFIER, folder / "notifier")
        folder.chmod(0o755)
        shutil.chown(folder, "nobody")
        # As another user than root, the memory of a process that made itself non-dumpable cannot be read.
        hidden = "import ctypes, os; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); os.execv('/bin/true', ['true'])"
        done = subprocess.run(["runuser", "-u", "nobody", "--", str(folder / "notifier"), "-o", str(folder / "log"), "--",
                               "/usr/bin/python3", "-c", hidden], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 1 and "PermissionError" in done.stderr, done
        log = parse_strace((folder / "log").read_text())
        assert [Path(record.path).name for record in log.records] == ["python3"]  # true never ran
        assert [(access.target, access.result) for access in log.accesses] == [("?", "EPERM")]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
