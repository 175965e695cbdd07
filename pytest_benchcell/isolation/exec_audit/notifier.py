"""The exec notifier: a small program of the plugin's own (data/exec_notifier.c) that records what a
command runs through the kernel's seccomp user notifications, where strace follows every process
with ptrace. A trial's Bash commands and the learned helpers' probes run under it when it can be
built and works here; strace stays the audit's tool for the pre-flight's traced runs, which also
trace opens, and for everything where the notifier is not available.

Why a compiled program. Each notification stops the calling process until the notifier answers, so
the notifier's own time is the price of every program start; a C program answers in microseconds and
starts in one, where a Python one costs far more on both. The source ships with the package and is
compiled once per machine, compiler and source with the C compiler found on PATH (`CC`, else `cc`),
into the user's cache folder; no compiler means no notifier, and the audit runs on strace as before.

Where it is kept. `$XDG_CACHE_HOME/pytest-benchcell` (else `~/.cache/pytest-benchcell`, else, where
HOME cannot be written, `pytest-benchcell-UID` in the temporary folder, made by and for this user
alone), named by a hash of the source, the compiler and the machine, so a changed source or compiler builds anew and
concurrent sittings (xdist workers) that build at once each rename a complete file into place. The
sandbox shows the cache read-only to every command; without the sandbox it is a file the agent's user
could replace, as are the strace logs (isolation.md says so).

Whether it works here is checked once per process with strace's own check (tracer.find_tracer: `sh -c
'true; true'` must show the shell and both children below it; a kernel without seccomp user
notifications, openat2 or pidfd_getfd, or a container that refuses them, fails it and keeps strace).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from ...user_cache import cache_folder, cache_folders

BUILD_TIMEOUT_S = 60.0
SOURCE_NAME = "exec_notifier.c"


def source() -> bytes:
    return resources.files("pytest_benchcell").joinpath("data", SOURCE_NAME).read_bytes()


def compiler() -> str | None:
    """The C compiler to build with: `CC` (its first word) when it names one on PATH, else cc, gcc, clang."""
    named = (os.environ.get("CC") or "").split()
    for candidate in ([named[0]] if named else []) + ["cc", "gcc", "clang"]:
        found = shutil.which(candidate)
        if found:
            return os.path.realpath(found)
    return None


@functools.lru_cache(maxsize=1)
def find_notifier() -> tuple[str, str]:
    """(the notifier's path, "") where it is built here, else ("", why not). Once per process; whether
    it works here is the tracer's check (find_tracer)."""
    if platform.system() != "Linux":
        return "", "not on Linux"
    if platform.machine() not in ("x86_64", "aarch64"):
        return "", f"no notifier for {platform.machine()}"
    cc = compiler()
    if cc is None:
        return "", "no C compiler (cc) to build the exec notifier"
    text = source()
    key = hashlib.sha256(text + b"\0" + cc.encode() + b"\0" + platform.machine().encode()).hexdigest()[:16]
    folder = cache_folder()
    if folder is None:
        return "", f"no folder to build the exec notifier in ({', '.join(map(str, cache_folders()))})"
    program = folder / f"exec-notifier-{key}"
    if not os.access(program, os.X_OK):
        built = _build(text, cc, program)
        if built:
            return "", built
    return str(program), ""


def _build(text: bytes, cc: str, program: Path) -> str:
    """Compile the source into `program` (a complete file renamed into place); "" or why it failed."""
    try:
        with tempfile.TemporaryDirectory(prefix="build-", dir=program.parent) as folder:
            source_file = Path(folder) / SOURCE_NAME
            source_file.write_bytes(text)
            output = Path(folder) / "exec-notifier"
            done = subprocess.run([cc, "-O2", "-o", str(output), str(source_file), "-pthread"],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["no message"])[0]
                return f"the exec notifier did not build with {cc}: {first}"
            output.chmod(0o555)
            os.replace(output, program)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the exec notifier could not be built in {program.parent}: {exc}"
    return ""

