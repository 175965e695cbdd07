"""Reading the processes of this machine from /proc: their ids, and the fields of a stat line."""

from __future__ import annotations

import os
from collections.abc import Iterator


def process_ids() -> Iterator[str]:
    """The ids of the processes running now, as /proc names them."""
    return (name for name in os.listdir("/proc") if name.isdigit())


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name: the state letter first (Z exited, waiting to
    be reaped), then the parent, the process group and the rest; None once the process is gone. The
    name is cut at the last ')', since a program may put spaces and parentheses in its own."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return None
