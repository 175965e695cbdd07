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
# Variables that name a program another program starts, or the configuration that does (git reads
# aliases, pagers, hooks and external diff programs from GIT_CONFIG_* and GIT_DIR), or where a
# network client connects: refused when set, whatever the value (`PAGER=cat` too), because an
# allowed program would then start or reach something the command line does not show. Unsetting
# them is fine.
PROGRAM_VARIABLES: frozenset[str] = frozenset(
    "PAGER GIT_PAGER MANPAGER SYSTEMD_PAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR BROWSER SHELL "
    "GIT_SSH GIT_SSH_COMMAND GIT_PROXY_COMMAND GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS "
    "GIT_DIR GIT_COMMON_DIR GIT_TEMPLATE_DIR GIT_ALTERNATE_OBJECT_DIRECTORIES FCEDIT TERMINAL "
    "http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy ftp_proxy FTP_PROXY CURL_HOME "
    "SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE".split()
)
PROGRAM_VARIABLE_PREFIXES: tuple[str, ...] = ("GIT_CONFIG",)  # GIT_CONFIG, _GLOBAL, _COUNT, _KEY_<n>, ...


def names_a_program(name: str) -> bool:
    """Whether setting the variable `name` can make an allowed program start or reach another one."""
    return name in PROGRAM_VARIABLES or name.startswith(PROGRAM_VARIABLE_PREFIXES)
