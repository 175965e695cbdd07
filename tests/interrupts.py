"""Starting a sitting that a test interrupts as a terminal's Ctrl-C would.

A shell that runs a command in the background without job control (a CI script's `cmd &`, a
non-interactive shell's jobs) starts it with SIGINT ignored, and the children inherit that; Python
then installs no KeyboardInterrupt handler, so a test's SIGINT would reach a sitting that cannot
hear it. A terminal's foreground job always has the default disposition: give the child that.
"""

from __future__ import annotations

import signal


def as_a_terminal_starts_it() -> None:
    """`preexec_fn` for a child that a test will send SIGINT: the default disposition, whatever the
    disposition the test run itself was started with."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
