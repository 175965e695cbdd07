"""The names the isolation layers share: harmless utilities, allowed shell builtins, launchers,
and variables that choose or load programs. Pure data; the guard and the execution audit read it."""

from __future__ import annotations

HARMLESS_UTILITIES: frozenset[str] = frozenset(
    "cat head tail wc cut tr sort uniq comm grep egrep fgrep diff echo printf ls pwd cd mkdir "
    "test [ true false basename dirname seq sleep date nl rev tac fold column expr jq".split()
)

# Shell builtins and keywords that run no program. `set` is allowed in every form: its options
# change the shell's own behaviour only (the one indirect path, xtrace expanding PS4, is closed
# by refusing assignments to PS4). `wait` only waits for this shell's own background jobs. `type`
# only describes names. Not here on purpose: eval, source, ., exec, command, builtin, alias,
# trap, hash (`hash -p` rebinds a name to any file), enable, let and declare (arithmetic on
# array subscripts runs substitutions), kill, mapfile (-C runs a callback), getopts.
SHELL_BUILTINS_ALLOWED: frozenset[str] = frozenset(
    "cd echo printf test [ true false read export unset set local return exit break continue "
    "shift : pwd wait type".split()
)

# Programs that run another program given on their command line. Refused unless the arm lists
# them; when listed, the wrapped command is extracted and checked too.
SHELLS: frozenset[str] = frozenset("bash sh zsh dash ksh mksh ash fish".split())
LAUNCHERS: frozenset[str] = SHELLS | frozenset(
    "eval env xargs find timeout nice nohup command exec busybox builtin stdbuf setsid chroot "
    "sudo su doas watch parallel script flock ionice taskset source .".split()
)

# Variables that decide which program runs, load code into programs, or decide which configuration
# (and credentials) they read: never settable. HOME also keeps `> ~/x` from reaching /dev/tcp.
LOADER_VARIABLES: frozenset[str] = frozenset(
    "PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV SHELLOPTS BASHOPTS PS1 PS2 PS3 PS4 "
    "PROMPT_COMMAND NODE_OPTIONS PYTHONSTARTUP PYTHONPATH PERL5OPT PERL5LIB RUBYOPT LESSOPEN "
    "LESSCLOSE GIT_EXEC_PATH GCONV_PATH HOME XDG_CONFIG_HOME".split()
)
# Variables naming a program that other programs start: settable only to a program the arm may run.
PROGRAM_VARIABLES: frozenset[str] = frozenset(
    "PAGER GIT_PAGER MANPAGER EDITOR VISUAL GIT_EDITOR BROWSER SHELL GIT_SSH GIT_SSH_COMMAND "
    "GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS".split()
)


