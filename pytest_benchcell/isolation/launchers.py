"""Launchers: what a program that runs other programs (timeout, env, xargs, bash -c, ...) would run.

Each resolver reads a launcher's arguments and returns the commands and command strings it would
start, or the reason the guard cannot tell."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .catalog import LAUNCHERS, SHELLS
from .words import IDENTIFIER, option_spec, parse_options, OptionSpec, Word


@dataclass(frozen=True)
class Launch:
    argvs: tuple[tuple[Word, ...], ...] = ()  # commands it runs directly
    scripts: tuple[str, ...] = ()  # command lines it hands to a shell
    assignments: tuple[tuple[str, Word], ...] = ()  # env NAME=value
    appended_input: bool = False  # xargs: input words are appended
    replace: str = ""  # xargs -I: input replaces this string
    problem: str = ""  # why the guard cannot tell what it runs




@dataclass(frozen=True)
class _Wrapper:
    """A program of the form `program [options] [N operands] command [args...]`."""

    options: OptionSpec
    skip: int = 0  # operands before the wrapped command (timeout's duration, chroot's root)
    runs_nothing_with: frozenset[str] = frozenset()  # options that make it run no command
    unfollowable: frozenset[str] = frozenset()  # options whose effect the guard cannot follow
    scripts_via: frozenset[str] = frozenset()  # options whose value is a shell command line
    joins_into_script: frozenset[str] = frozenset()  # options that make it hand argv to a shell
    without_command: str = ""  # problem when no command is given ("": nothing runs)


def _resolve_wrapper(program: str, spec: _Wrapper, args: Sequence[Word]) -> Launch:
    parsed = parse_options(program, args, spec.options)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    for name, _ in parsed.options:
        if name in spec.unfollowable:
            return Launch(problem=f"is given {name}, whose effect the guard cannot follow")
    if parsed.has(*spec.runs_nothing_with):
        return Launch()
    for name, value in parsed.options:
        if name in spec.scripts_via:
            return _script_launch(program, [value] if value else [])
    command = parsed.operands[spec.skip :]
    if not command:
        return Launch(problem=spec.without_command)
    if parsed.has(*spec.joins_into_script):
        return _script_launch(program, command)
    return Launch(argvs=(tuple(command),))


def _script_launch(program: str, words: Sequence[Word]) -> Launch:
    """The words are joined with spaces and handed to a shell, as eval and sh -c do."""
    if not words:
        return Launch(problem="is given no command string")
    if any(word.literal is None for word in words):
        dynamic = next(word for word in words if word.literal is None)
        return Launch(problem=f"runs a command string that {dynamic.dynamic} ({dynamic.text})")
    return Launch(scripts=(" ".join(word.literal or "" for word in words),))


_WRAPPERS: dict[str, _Wrapper] = {
    "timeout": _Wrapper(
        option_spec("--preserve-status --foreground -v --verbose", "-k --kill-after -s --signal"), skip=1
    ),
    "nice": _Wrapper(option_spec(valued="-n --adjustment", numeric=True)),
    "nohup": _Wrapper(option_spec()),
    "stdbuf": _Wrapper(option_spec(valued="-i -o -e --input --output --error")),
    "setsid": _Wrapper(option_spec("-c --ctty -f --fork -w --wait")),
    "command": _Wrapper(option_spec("-p -v -V"), runs_nothing_with=frozenset({"-v", "-V"})),
    "exec": _Wrapper(option_spec("-c -l", "-a")),
    "builtin": _Wrapper(option_spec()),
    "busybox": _Wrapper(option_spec()),
    "ionice": _Wrapper(
        option_spec("-t --ignore", "-c --class -n --classdata -p --pid -P --pgid -u --uid"),
        runs_nothing_with=frozenset({"-p", "--pid", "-P", "--pgid", "-u", "--uid"}),
    ),
    "taskset": _Wrapper(
        option_spec("-a --all-tasks -c --cpu-list -p --pid"),
        skip=1,
        runs_nothing_with=frozenset({"-p", "--pid"}),
    ),
    "chroot": _Wrapper(
        option_spec("--skip-chdir", "--userspec --groups"),
        skip=1,
        without_command="starts a shell without a command",
    ),
    "doas": _Wrapper(option_spec("-n -L -s", "-u -C"), unfollowable=frozenset({"-s", "-C"})),
    "sudo": _Wrapper(
        option_spec(
            "-A -b -E -H -K -k -n -P -S -B -N -s -i -e -l -v -V --edit --list --validate --version "
            "--askpass --background --set-home --non-interactive --stdin --bell --shell --login "
            "--preserve-env",
            "-C -D -g -h -p -R -r -T -t -U -u --close-from --chdir --group --host --prompt --chroot --role "
            "--command-timeout --type --other-user --user",
            "--preserve-env",
        ),
        unfollowable=frozenset({"-e", "--edit", "-l", "--list", "-v", "--validate", "-V", "--version"}),
        joins_into_script=frozenset({"-s", "--shell", "-i", "--login"}),
        without_command="starts a shell without a command",
    ),
    "script": _Wrapper(
        option_spec(
            "-a --append -e --return -f --flush -q --quiet",
            "-c --command -E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m "
            "--logging-format -o --output-limit",
            "-t --timing",
        ),
        scripts_via=frozenset({"-c", "--command"}),
        without_command="starts an interactive shell without -c",
    ),
}


def _resolve_shell(program: str, args: Sequence[Word]) -> Launch:
    spec = option_spec(
        "-c -e -u -x -v -n -f -h -k -m -p -t -a -b -B -C -E -H -P -T -r -i -l -s --norc --noprofile "
        "--posix --login --noediting --restricted --verbose",
        "-o -O --rcfile --init-file",
    )
    parsed = parse_options(program, args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    if parsed.has("-i", "-l", "--login", "-s", "--rcfile", "--init-file"):
        return Launch(problem="would also run start-up files or standard input")
    if parsed.has("-c"):
        return _script_launch(program, parsed.operands[:1])
    if parsed.operands:
        script = parsed.operands[0].shown
        return Launch(problem=f"runs the script file {script}, which the guard cannot read")
    return Launch(problem="reads commands from standard input, which the guard cannot see")


def _resolve_env(args: Sequence[Word]) -> Launch:
    spec = option_spec("-i --ignore-environment -0 --null -v --debug", "-u --unset -C --chdir -S --split-string")
    parsed = parse_options("env", args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    if parsed.has("-S", "--split-string"):
        return Launch(problem="is given -S, whose effect the guard cannot follow")
    operands = list(parsed.operands)
    if operands and operands[0].literal == "-":
        operands.pop(0)
    assignments: list[tuple[str, Word]] = []
    while operands and "=" in operands[0].text:
        name, _, value = operands[0].text.partition("=")
        if operands[0].literal is None and not IDENTIFIER.match(name):
            return Launch(problem=f"sets a variable whose name is not literal ({operands[0].text})")
        assignments.append((name, Word.plain(value) if operands[0].literal is not None else operands[0]))
        operands.pop(0)
    if not operands:
        return Launch()  # prints the environment
    return Launch(argvs=(tuple(operands),), assignments=tuple(assignments))


def _resolve_xargs(args: Sequence[Word]) -> Launch:
    spec = option_spec(
        "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty",
        "-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
        "--process-slot-var",
        "-e -i -l --eof --replace --max-lines",
    )
    parsed = parse_options("xargs", args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    replace = ""
    if parsed.has("-I"):
        value = parsed.value("-I")
        if value is None or value.literal is None:
            return Launch(problem="is given a replacement string that is not literal")
        replace = value.literal
    elif parsed.has("-i", "--replace"):
        value = parsed.value("-i", "--replace")
        replace = value.literal if value is not None and value.literal else "{}"
    command = parsed.operands or (Word.plain("echo"),)
    return Launch(argvs=(tuple(command),), appended_input=not replace, replace=replace)


def _resolve_find(args: Sequence[Word]) -> Launch:
    argvs: list[tuple[Word, ...]] = []
    i = 0
    while i < len(args):
        if args[i].literal in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end].literal not in (";", "+"):
                end += 1
            if end == len(args):
                return Launch(problem=f"has {args[i].literal} without its closing ; or +")
            argvs.append(tuple(args[i + 1 : end]))
            i = end
        i += 1
    return Launch(argvs=tuple(argvs))


def _resolve_su(args: Sequence[Word]) -> Launch:
    spec = option_spec(
        "-l --login -m -p --preserve-environment -P --pty",
        "-c --command --session-command -s --shell -g --group -G --supp-group -w --whitelist-environment",
    )
    parsed = parse_options("su", args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    if parsed.has("-s", "--shell", "-l", "--login") or any(word.literal == "-" for word in parsed.operands):
        return Launch(problem="starts a login or chosen shell, which the guard cannot follow")
    if len(parsed.operands) > 1:
        return Launch(problem="passes extra arguments to a shell")
    script = parsed.value("-c", "--command", "--session-command")
    if script is None:
        return Launch(problem="starts a shell without -c")
    return _script_launch("su", [script])


def _resolve_flock(args: Sequence[Word]) -> Launch:
    spec = option_spec(
        "-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F --no-fork --verbose",
        "-w --wait --timeout -E --conflict-exit-code -c --command",
    )
    parsed = parse_options("flock", args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    rest = parsed.operands[1:]  # the lock file or descriptor comes first
    if parsed.has("-c", "--command"):
        value = parsed.value("-c", "--command")
        return _script_launch("flock", [value] if value else [])
    if rest and rest[0].literal in ("-c", "--command"):
        return _script_launch("flock", rest[1:2])
    return Launch(argvs=(tuple(rest),)) if rest else Launch()


def _resolve_watch(args: Sequence[Word]) -> Launch:
    spec = option_spec(
        "-b --beep -e --errexit -g --chgexit -t --no-title -c --color -C --no-color -p --precise "
        "-r --no-rerun -w --no-wrap -x --exec",
        "-n --interval -q --equexit",
        "-d --differences",
    )
    parsed = parse_options("watch", args, spec)
    if parsed.problem:
        return Launch(problem=parsed.problem)
    if not parsed.operands:
        return Launch()
    if parsed.has("-x", "--exec"):
        return Launch(argvs=(parsed.operands,))
    return _script_launch("watch", parsed.operands)


def _resolve_parallel(args: Sequence[Word]) -> Launch:
    if args and (args[0].literal is None or args[0].literal.startswith("-")):
        return Launch(problem="is given options, which the guard cannot follow")
    template = []
    for word in args:
        if word.literal in (":::", "::::", ":::+", "::::+"):
            break
        template.append(word)
    if not template:
        return Launch(problem="runs its input lines as commands")
    launch = _script_launch("parallel", template)
    return Launch(scripts=launch.scripts, problem=launch.problem, appended_input=True)


def _resolve_eval(args: Sequence[Word]) -> Launch:
    return _script_launch("eval", args) if args else Launch()


def _resolve_source(args: Sequence[Word]) -> Launch:
    return Launch(problem="runs the commands in a file, which the guard cannot read")


RESOLVERS: dict[str, Callable[[Sequence[Word]], Launch]] = {
    **{
        name: functools.partial(_resolve_wrapper, name, spec) for name, spec in _WRAPPERS.items()
    },
    **{name: functools.partial(_resolve_shell, name) for name in SHELLS},
    "env": _resolve_env,
    "xargs": _resolve_xargs,
    "find": _resolve_find,
    "su": _resolve_su,
    "flock": _resolve_flock,
    "watch": _resolve_watch,
    "parallel": _resolve_parallel,
    "eval": _resolve_eval,
    "source": _resolve_source,
    ".": _resolve_source,
}
assert set(RESOLVERS) == LAUNCHERS, "every launcher needs a resolver"
