"""What do the sandbox and the execution audit cost a sitting? Target: every guard on within 1.10x of both off.

    .venv/bin/python benchmarks/guards_cost.py [--pairs 3] [--task close-export] [--configs one two]
        [--venvs current] [--load] [--commands] [--runs 15] [--first-sittings]

Runs the example bench's own sitting (this checkout's bench.toml, conftest.py and bench/, copied to
a temporary folder twice: as shipped, and with `exec_audit = "off"` and `sandbox = "off"`):

    python -m pytest --bench-arm cli-skill --bench-task TASK --bench-scripted --bench-trials N -p no:cacheprovider -q [-n 2]

guards on and off alternating, --pairs times each, per configuration (`--configs`):
- `one`: one worker, 3 trials, Python's default environment (bytecode written);
- `two`: `-n 2`, 4 trials, `PYTHONDONTWRITEBYTECODE=1` (as container images set it);
- `one-dont`: one worker, 3 trials, `PYTHONDONTWRITEBYTECODE=1`.
The CLI is the example's `tracker` (a Python program with imports, behind `#!/usr/bin/env python3`:
a pyenv shim where one is installed), several commands per trial (close-export: `tracker list`,
`tracker close`; `--task hand-over-dana`: five).

Each sitting runs under a small reaper (this script with `--reap`) that is the child subreaper of
its tree, so the processes the sitting leaves behind are reaped by it too: the CPU printed is the
user and system time of the whole process tree (pytest, xdist workers, every Claude CLI, every
command, strace, the services), from os.wait4 of the reaper.

`--pythons A B`: the sittings (and --commands) run with each of these Pythons alternately (default:
the one running this script), e.g. this checkout's .venv and another checkout's, before and after a
change. `--venvs current uv pip`: the same sittings run with those Pythons (`current`), of a fresh venv installed by uv without bytecode (`uv`, as the README's test command
and CI install), and of one installed with bytecode compiled (`pip`, which compiles as it installs;
made with `uv pip install --compile-bytecode` from uv's cache, which is what pip leaves behind).

`--variants on off sandbox audit`: besides every guard on and both off, the sandbox alone and the
audit alone (what each guard costs by itself), in the same rotation.

The sittings keep what the plugin keeps in the user's cache in a cache folder of this run's own
(`XDG_CACHE_HOME`, with the exec notifier built into it once): by default a pre-flight that passed
and each binary's probe are kept from the uncounted first round on, as a maintainer's later sittings
of the same bench find them. `--first-sittings`: each sitting starts with neither (the notifier stays
built), as the first sitting of a bench on a machine does.

`--load`: a second sitting (guards on) runs in a loop beside the measured ones, on the other core.
The load average is printed before and after every configuration.

`--commands`: per-command figures instead (or as well): a bare `bash -c` of `git --version` and of
the example's `tracker list` (against a tracker service started here) against the same through
the trial's prefix with the sandbox alone and with the sandbox under the execution audit (the
trial's full prefix, its log parsed as the audit reads it), alternating, --runs each; quiet, then
with a sitting running beside it when --load is given.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.10
CONFIGS = {
    "one": ("one worker, bytecode written", [], 3, {}),
    "two": ("-n 2, PYTHONDONTWRITEBYTECODE=1", ["-n", "2"], 4, {"PYTHONDONTWRITEBYTECODE": "1"}),
    "one-dont": ("one worker, PYTHONDONTWRITEBYTECODE=1", [], 3, {"PYTHONDONTWRITEBYTECODE": "1"}),
}
SITTING_TIMEOUT_S = 600
PR_SET_CHILD_SUBREAPER = 36


# --------------------------------------------------------------------------- the reaper


def reap(argv: list[str]) -> int:
    """Run argv as the subreaper of its tree; wait for it, then for everything it left behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = subprocess.Popen(argv)
    status = child.wait()
    deadline = time.monotonic() + 30
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if time.monotonic() > deadline:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            time.sleep(0.05)
    return status


def run_reaped(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, str]:
    """(wall s, user s, system s, the sitting's last line) of one sitting and everything it started."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, __file__, "--reap", *command], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    summary = next((line.strip("= ") for line in reversed(output.splitlines()) if " passed" in line or " failed" in line), "")
    if process.returncode != 0 or not re.search(r"\b\d+ passed", summary) or "failed" in summary:
        raise SystemExit(f"a sitting failed (exit {process.returncode}):\n{output[-3000:]}")
    return wall, usage.ru_utime, usage.ru_stime, summary


# --------------------------------------------------------------------------- the benches


VARIANTS = {"on": "", "off": 'exec_audit = "off"\nsandbox = "off"\n', "sandbox": 'exec_audit = "off"\n', "audit": 'sandbox = "off"\n'}


def copy_bench(folder: Path, guards: bool | str) -> Path:
    """The example bench in `folder`: as shipped (True, "on"), with both guards off (False, "off"), or
    with one of them alone ("sandbox", "audit")."""
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    shutil.copytree(ROOT / "bench", folder / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    text = (ROOT / "bench.toml").read_text()
    variant = guards if isinstance(guards, str) else "on" if guards else "off"
    text = text.replace("[bench]\n", f"[bench]\n{VARIANTS[variant]}", 1)
    (folder / "bench.toml").write_text(text)
    return folder


def make_venv(folder: Path, compile_bytecode: bool) -> Path:
    """A fresh venv with this checkout installed by uv (from its cache), with or without bytecode."""
    uv = shutil.which("uv", path=str(ROOT / ".venv" / "bin")) or "uv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(folder)], check=True)
    options = ["--compile-bytecode"] if compile_bytecode else []
    subprocess.run([uv, "pip", "install", "-q", "-p", str(folder / "bin" / "python"), *options, "-e", f"{ROOT}[test]"], check=True)
    return folder / "bin" / "python"


def load_loop(python: str, bench: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A sitting with every guard on, over and over, beside the measured ones."""
    command = " ".join(sitting_command(python, "close-export", [], 3))
    return subprocess.Popen(
        ["bash", "-c", f"while true; do {command} >/dev/null 2>&1; done"], cwd=bench, env=env, start_new_session=True
    )


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def sitting_command(python: str, task: str, workers: list[str], trials: int) -> list[str]:
    return [python, "-m", "pytest", "--bench-arm", "cli-skill", "--bench-task", task, "--bench-scripted",
            "--bench-trials", str(trials), "-p", "no:cacheprovider", "-q", *workers]  # fmt: skip


def forget_kept(cache: Path) -> None:
    """What a first sitting finds: no pre-flight passed, no probe kept (the notifier stays)."""
    for name in ("preflight", "probes"):
        shutil.rmtree(cache / "pytest-benchcell" / name, ignore_errors=True)


def base_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure_sittings(args, pythons: dict[str, str], folder: Path) -> list[str]:
    """Every configuration: guards on and off with each Python, alternating, --pairs rounds."""
    lines = []
    for config in args.configs:
        title, workers, trials, extra = CONFIGS[config]
        env = {**base_environment(), **extra}
        variants = ["on", "off", *(variant for variant in args.variants if variant not in ("on", "off"))]
        benches = {variant: copy_bench(folder / f"{config}-{variant}", variant) for variant in variants}
        before = os.getloadavg()[0]
        figures: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for pair in range(args.pairs + 1):  # the first round warms the caches and is not counted
            for label, python in pythons.items():
                command = sitting_command(python, args.task, workers, trials)
                for variant in variants[pair % len(variants):] + variants[: pair % len(variants)]:
                    if args.first_sittings:
                        forget_kept(Path(env["XDG_CACHE_HOME"]))
                    wall, user, system, summary = run_reaped(command, benches[variant], env)
                    if pair:
                        figures.setdefault((label, variant), []).append((wall, user, system))
                    print(f"  {label} {config} guards {variant:7}: wall {wall:6.2f} s, "
                          f"CPU {user + system:6.2f} s (user {user:.2f}, sys {system:.2f})  [{summary}]", flush=True)  # fmt: skip
        after = os.getloadavg()[0]
        for label in pythons:
            off = _medians(figures[(label, "off")])
            for variant in (v for v in variants if v != "off"):
                on = _medians(figures[(label, variant)])
                wall_ratio, cpu_ratio = on[0] / off[0], (on[1] + on[2]) / (off[1] + off[2])
                met = "met" if max(wall_ratio, cpu_ratio) <= TARGET_RATIO else "missed"
                lines.append(
                    f"{label}, {title}, {args.task} x{trials}, {'first sittings' if args.first_sittings else 'later sittings'}, guards {variant} / off: wall {on[0]:.2f} / {off[0]:.2f} s = "
                    f"{wall_ratio:.2f}x; CPU {on[1] + on[2]:.2f} / {off[1] + off[2]:.2f} s = {cpu_ratio:.2f}x "
                    f"(sys {on[2]:.2f} / {off[2]:.2f}); load {before:.1f} -> {after:.1f}"
                    + (f"; target <= {TARGET_RATIO:.2f}x: {met}" if variant == "on" else "")
                )
                print(lines[-1], flush=True)
    return lines


def _medians(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return tuple(statistics.median(column) for column in zip(*rows))  # type: ignore[return-value]


def main() -> int:
    if sys.argv[1:2] == ["--reap"]:
        return reap(sys.argv[2:])
    made = harness.parser(__doc__, pairs=3, task="close-export", configs=["one", "two"], venvs=["current"], load=False,
                          commands=False, runs=15, sittings=False, pythons=[sys.executable], variants=["on", "off"],
                          first_sittings=False)  # fmt: skip
    args = made.parse_args()
    results: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchcell-guards-") as name:
        folder = Path(name)
        os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # the sittings' own (see the docstring)
        loader = None
        if args.load:
            loaded = {**base_environment(), "XDG_CACHE_HOME": str(folder / "load-cache")}  # none of its records
            loader = load_loop(sys.executable, copy_bench(folder / "load", True), loaded)
            time.sleep(5)
        try:
            if args.commands:
                for python in args.pythons:  # each Python measures its own checkout's guards
                    done = subprocess.run([python, str(Path(__file__).with_name("command_cost.py")), str(args.runs), str(args.load)],
                                          capture_output=True, text=True, check=True)  # fmt: skip
                    results += [f"{python}: {line}" for line in done.stdout.splitlines()]
                    print("\n".join(results[-2:]), flush=True)
            if args.sittings or not args.commands:
                for venv in args.venvs:
                    if venv == "current":
                        pythons = {python: python for python in args.pythons}
                    else:
                        made_python = str(make_venv(folder / f"venv-{venv}", compile_bytecode=venv == "pip"))
                        pythons = {f"{venv}-installed venv": made_python}
                    results += measure_sittings(args, pythons, folder / venv)
        finally:
            stop(loader)
    print()
    print("\n".join(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
