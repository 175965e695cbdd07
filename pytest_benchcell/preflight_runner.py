"""How the pre-flight runs a command: as the trial's Bash tool would, through the confinement's shell
prefix (inside the sandbox) or plain bash (outside), with the variables the CLI passes on and the
agent's folder, in a session of its own that a timeout or a Ctrl-C ends whole. Knows nothing of pytest."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .confinement import Confinement, ConfinementError
from .isolation import exec_audit
from .isolation.hygiene import removed_variables
from .leftovers import printable

__all__ = ["Runner", "COMMAND_TIMEOUT_S"]

COMMAND_TIMEOUT_S = 60.0  # one run of an arm's checks (inside) or of one command (outside)
OUTPUT_CHARS = 800  # of the output of a prefix that could not run, quoted
KEPT_CHARS = 16000  # of a check's output, kept to pick the lines naming the error from (Node's come first)


class Runner:
    """Runs commands as the trial's Bash tool would: through the confinement's shell prefix (inside)
    or plain bash (outside), with the variables the CLI would pass on and the agent's folder."""

    def __init__(self, confined: Confinement, cwd: Path) -> None:
        self.confined = confined
        self.cwd = cwd
        inherited = {k: v for k, v in os.environ.items() if k not in set(removed_variables(os.environ, declared=confined.env))}
        self.env = {**inherited, **confined.env}
        self.env.pop("CLAUDE_CODE_SHELL_PREFIX", None)  # a command never sees it

    def inside_all(self, checks: Sequence[Sequence[str]]) -> list[tuple[str, int, str]]:
        """Every check (its alternative commands, the first that works wins) in one command through the
        prefix (one sandbox start): per check, the command that decided it, its exit status and its output."""
        mark = f"@@benchcell-preflight-{secrets.token_hex(8)}"
        parts = []
        for index, commands in enumerate(checks):
            parts.append("s=1")
            for alternative, command in enumerate(commands):
                guard = "" if alternative == 0 else "if [ $s -ne 0 ]; then "
                end = "" if alternative == 0 else "; fi"
                parts.append(
                    f"{guard}( {command}\n) </dev/null 2>&1; s=$?; printf '\\n{mark} {index} {alternative} %d\\n' $s{end}"
                )
        # Untraced: whether they work is all this pass asks; a failing one runs again, traced (inside_one).
        prefix = self.confined.untraced_prefix or self.confined.prefix
        status, output = self._run([str(prefix), "\n".join(parts)])
        results: list[tuple[str, int, str]] = [(commands[0], 1, "") for commands in checks]
        chunk: list[str] = []
        for line in output.splitlines():
            if line.startswith(mark + " "):
                index, alternative, code = (int(word) for word in line.split()[1:4])
                results[index] = (checks[index][alternative], code, "\n".join(chunk))
                chunk = []
            else:
                chunk.append(line)
        if status != 0 and not any(line.startswith(mark) for line in output.splitlines()):
            tail = printable(output.strip()[-OUTPUT_CHARS:])
            raise ConfinementError(f"the pre-flight's command did not run in the sandbox (exit {status}): {tail}")
        return results

    def inside_one(self, command: str, *, traced: bool = True) -> tuple[int, str, exec_audit.StraceLog | None]:
        audit = self.confined.audit if traced else None
        before = set(os.listdir(audit.logs)) if audit is not None else set()
        prefix = self.confined.prefix if traced else (self.confined.untraced_prefix or self.confined.prefix)
        status, output = self._run([str(prefix), f"( {command}\n) </dev/null 2>&1"])
        log = None
        if audit is not None:
            new = sorted(set(os.listdir(audit.logs)) - before)
            if new:
                log = exec_audit.parse_strace((audit.logs / new[-1]).read_text(errors="replace"), log=new[-1])
        return status, _clip(output), log

    def outside(
        self, command: str, tracer: exec_audit.Tracer | None, *, timeout: float = COMMAND_TIMEOUT_S
    ) -> tuple[int, str, exec_audit.StraceLog | None]:
        shell = self.confined.audit.shell if self.confined.audit is not None else "/bin/bash"
        argv = [shell, "-c", f"( {command}\n) </dev/null 2>&1"]
        if tracer is None:
            status, output = self._run(argv, timeout=timeout)
            return status, _clip(output), None
        with tempfile.TemporaryDirectory(prefix="benchcell-preflight-") as scratch:
            log_path = Path(scratch) / "outside.log"
            status, output = self._run([tracer.program, *tracer.options(), "-o", str(log_path), *argv], timeout=timeout)
            text = log_path.read_text(errors="replace") if log_path.exists() else ""
        return status, _clip(output), exec_audit.parse_strace(text, log="outside")

    def _run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
        process = subprocess.Popen(
            list(argv), cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            out, _ = process.communicate()
            return 124, out.decode(errors="replace") + f"\n(stopped after {timeout:.0f} s)"
        except BaseException:  # Ctrl-C: its own session does not get the terminal's signal
            _stop(process)
            raise
        return process.returncode, out.decode(errors="replace")


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.wait()


def _clip(output: str) -> str:
    text = printable(output.strip(), newlines=True)
    return text if len(text) <= KEPT_CHARS else "..." + text[-KEPT_CHARS:]

