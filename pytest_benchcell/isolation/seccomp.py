"""The sandbox's system-call filter: what no command of a trial may ask the kernel for.

Mounts and namespaces decide what a command can see; a few kernel services reach past them:
- **Unix sockets.** A read-only bind does not stop `connect` to a socket file on a visible path (a
  service's socket under /var/tmp, a database's, a desktop's), so no command may create one:
  `socket(AF_UNIX, ...)` is refused. `socketpair` stays (ordinary programs use it for their own
  children's pipes); abstract sockets live in the trial's own network namespace. The endpoints an
  arm declares (`network`) are TCP and reach the service through the trial's relays.
- **Keyrings.** The kernel's user keyring is per user, not per namespace: as root a key one trial
  adds is read by the next. `add_key`, `request_key` and `keyctl` are refused (as Docker's default
  profile does).
- **io_uring**, which creates and connects sockets without the `socket` and `connect` calls a
  filter sees.
- **Signals and ptrace aimed at the sandbox's first process** (pid 1 of the command's pid
  namespace, bubblewrap's own reaper). The kernel protects a namespace's init from its children's
  signals, but not while the execution audit's strace traces it: `kill -STOP $PPID` would stop it
  and the command would never end.

Arguments are compared on their low 32 bits (the kernel reads `int` arguments that way; a full
64-bit comparison would let `socket(0x100000001, ...)` through). System calls of another
architecture (32-bit calls from a 64-bit process) are killed by libseccomp's default.

The filter is compiled once per process with libseccomp, the library that writes the filters of
Docker, Podman, systemd and Flatpak, through pyseccomp (a ctypes binding with the same API as
libseccomp's own Python module, so no compiler and no Python-version-specific build is needed; the
official binding is only packaged by distributions, for their own Python). bubblewrap loads it with
`--seccomp FD` into every command, after setting up the mounts.
"""

from __future__ import annotations

import errno
import functools
import socket
import sys

__all__ = ["SeccompFilter", "compiled_filter"]

# Refused outright (keyrings, io_uring).
REFUSED = ("add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register")
# Refused when their first argument is the sandbox's first process.
AIMED_AT_PID = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "process_vm_writev")
FIRST_PROCESS = 1
LOW_32_BITS = 0xFFFFFFFF


class SeccompFilter:
    """A compiled filter (BPF bytes), or why there is none."""

    def __init__(self, program: bytes = b"", reason: str = "") -> None:
        self.program = program
        self.reason = reason

    @property
    def available(self) -> bool:
        return bool(self.program)


@functools.lru_cache(maxsize=1)
def compiled_filter() -> SeccompFilter:
    """The sandbox's filter, built once per process (about 1 ms)."""
    if not sys.platform.startswith("linux"):
        return SeccompFilter(reason=f"not on Linux ({sys.platform})")
    try:
        import pyseccomp as seccomp
    except ImportError:
        return SeccompFilter(reason="pyseccomp is not installed (pip install pyseccomp)")
    except (OSError, RuntimeError) as exc:  # pyseccomp loads libseccomp when imported
        return SeccompFilter(reason=f"libseccomp could not be loaded ({exc}; Debian/Ubuntu: apt-get install libseccomp2)")
    refuse = seccomp.ERRNO(errno.EPERM)

    def low(argument: int, value: int) -> object:
        return seccomp.Arg(argument, seccomp.MASKED_EQ, LOW_32_BITS, value)

    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        rules.add_rule(refuse, "socket", low(0, socket.AF_UNIX))
        for name in REFUSED:
            rules.add_rule(refuse, name)
        for name in AIMED_AT_PID:
            rules.add_rule(refuse, name, low(0, FIRST_PROCESS))
        rules.add_rule(refuse, "ptrace", low(1, FIRST_PROCESS))
        import tempfile

        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            program = out.read()
    except (OSError, RuntimeError, ValueError) as exc:
        return SeccompFilter(reason=f"libseccomp could not build the filter ({exc})")
    return SeccompFilter(program)
