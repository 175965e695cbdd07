"""The names the isolation layers share: harmless utilities, allowed shell builtins, launchers,
and variables that choose or load programs. Pure data; the guard and the execution audit read it."""

from __future__ import annotations

from dataclasses import dataclass

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

# Variables the agent may never change, not even unset: they decide which program runs, load code
# into every program, or steer where relative paths and `cd` lead (CDPATH, OLDPWD for `cd -`, PWD).
# HOME also keeps `> ~/x` from reaching /dev/tcp.
LOADER_VARIABLES: frozenset[str] = frozenset(
    "PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV SHELLOPTS BASHOPTS PS1 PS2 PS3 PS4 "
    "PROMPT_COMMAND NODE_OPTIONS PYTHONSTARTUP PYTHONPATH PERL5OPT PERL5LIB RUBYOPT LESSOPEN "
    "LESSCLOSE GIT_EXEC_PATH GCONV_PATH HOME XDG_CONFIG_HOME CDPATH OLDPWD PWD".split()
)


@dataclass(frozen=True)
class VariableFamily:
    """Variables one program or library reads to find code, options or configuration.

    Why families and not an allowlist: an agent's shell variables are its own scratch space
    (`id=$(...)`, `for n in ...`, `IFS= read -r line`), and any of them can reach a program's
    environment (`set -a`, a prefix, one already exported), so an allowlist of names would refuse
    ordinary scripting. What makes a variable dangerous is that a program reads it, and programs name
    their variables after themselves or their library (OPENSSL_*, PYTHON*, npm_config_*, MAKE*,
    TAR_*): refusing the whole family, minus the members that only change formatting, also covers
    the members no list names (OPENSSL_MODULES, PYTHONWARNINGS, LD_DEBUG_OUTPUT, ...). Unsetting is fine.
    """

    prefixes: tuple[str, ...]  # a name equal to or starting with one of these is in the family
    does: str  # what setting one does, for the refusal
    harmless: frozenset[str] = frozenset()  # members that change output, caching or identity only
    any_case: bool = False  # the program reads the names in any case (npm, curl's proxies)


def _family(prefixes: str, does: str, harmless: str = "", any_case: bool = False) -> VariableFamily:
    return VariableFamily(tuple(prefixes.split()), does, frozenset(harmless.split()), any_case)


VARIABLE_FAMILIES: tuple[VariableFamily, ...] = (
    _family(
        "LD_ DYLD_ GCONV_PATH GLIBC_TUNABLES LOCPATH NLSPATH HOSTALIASES RES_OPTIONS LOCALDOMAIN GETCONF_DIR",
        "the C library and the dynamic loader read it in every program (libraries, converters, name lookup)",
    ),
    _family(
        "OPENSSL_ SSL_ SSLKEYLOGFILE GNUTLS_ NSS_ KRB5 CURL_ NETRC WGETRC",
        "the network and TLS libraries read it (a configuration can load an engine library)",
    ),
    _family("http_proxy https_proxy ftp_proxy all_proxy no_proxy socks_proxy", "it sends connections elsewhere", any_case=True),
    _family(
        "PYTHON PIP_",
        "python reads it to find modules, start-up code or options",
        "PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE PYTHONIOENCODING PYTHONUTF8 PYTHONHASHSEED PYTHONNOUSERSITE "
        "PYTHONSAFEPATH PYTHONFAULTHANDLER",
    ),
    _family("PERL RUBY GEM_ BUNDLE_ LUA_ PHPRC PHP_INI TCLLIBPATH GUILE_", "an interpreter loads code or options from it"),
    _family("NODE_ YARN_ COREPACK_", "node loads modules or options from it", "NODE_ENV NODE_NO_WARNINGS NODE_DISABLE_COLORS"),
    _family("npm_config_", "npm reads its whole configuration (registry, scripts' shell, userconfig) from it", any_case=True),
    _family("JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS CLASSPATH MAVEN_OPTS GRADLE_OPTS", "every JVM loads agents or options from it"),
    _family("GOFLAGS GOENV GOROOT GOPATH GOTOOLCHAIN GOPROXY CGO_", "go reads build options and toolchains from it"),
    _family(
        "MAKE MFLAGS GNUMAKEFLAGS CC CXX CPP CFLAGS CXXFLAGS CPPFLAGS LDFLAGS LDLIBS",
        "make reads options, makefiles or the programs its recipes run from it",
    ),
    _family("TAR_ TAPE", "tar reads options or its archive from it"),
    _family("AWKPATH AWKLIBPATH GREP_OPTIONS SQLITE_ LESS", "a text tool reads options, source files or extensions from it"),
    _family("BASH_ INPUTRC", "bash reads start-up files or builtins from it"),
    _family("XDG_ TMPDIR", "programs read their configuration or write their temporary files where it says"),
    _family(
        "GIT_",
        "git reads configuration, hooks, object and index paths, trace files or programs to run from it",
        "GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL "
        "GIT_COMMITTER_DATE GIT_TERMINAL_PROMPT GIT_OPTIONAL_LOCKS GIT_MERGE_AUTOEDIT GIT_FLUSH "
        "GIT_LITERAL_PATHSPECS GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS GIT_ADVICE "
        "GIT_REFLOG_ACTION GIT_MERGE_VERBOSITY GIT_PROGRESS_DELAY GIT_DEFAULT_HASH",
    ),
    _family(
        "PAGER MANPAGER SYSTEMD_PAGER EDITOR VISUAL BROWSER SHELL FCEDIT TERMINAL SSH_ASKPASS SUDO_ASKPASS",
        "it names a program another program starts",
    ),
)

# Variables that name a program to start on text (a pager or an editor): accepted when the value is
# one harmless utility written literally (`GIT_PAGER=cat`, `GIT_EDITOR=true`), ":" or empty (no pager).
PAGER_VARIABLES: frozenset[str] = frozenset(
    "PAGER GIT_PAGER MANPAGER SYSTEMD_PAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR".split()
)


# Members of a family that only change output, caching or identity.
HARMLESS_VARIABLES: frozenset[str] = frozenset().union(*(family.harmless for family in VARIABLE_FAMILIES))


def variable_family(name: str) -> VariableFamily | None:
    """The family of programs that read the variable `name` (None: no program we know reads it)."""
    if name in HARMLESS_VARIABLES:
        return None
    for family in VARIABLE_FAMILIES:
        candidate = name.lower() if family.any_case else name
        if any(candidate.startswith(prefix.lower() if family.any_case else prefix) for prefix in family.prefixes):
            return family
    return None
