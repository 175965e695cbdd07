"""Argument rules per binary, and where a command line may write files.

An allowed program is a launcher when an argument makes it start another program (`git -c
alias.x='!cmd'`, `git difftool -x cmd`, `sort --compress-program`) or write a file something else
runs later (`git diff --output FILE`, `uniq IN OUT` onto the CLI's shell snapshot). The command
line shows those arguments, so the guard refuses them before anything runs:

- `ArgumentRule` (bench.toml `[arms.NAME.arguments.BINARY]`): for one binary, subcommands and options
  it may not be given, and for a network client the URLs it may reach (`allow_urls`, judged by
  `curl_rule.url_refusal`; curl's own command line by `curl_rule.curl_refusal`). Known programs
  (`KNOWN_PROGRAMS`) say how they read their command line: options that take a value, tar's
  old-style bundles, npm's aliases and abbreviated commands.
- `WritePolicy`: redirections and the output operands and options of the harmless utilities (uniq's
  second operand, `sort -o`, `mkdir`, `tee`, `split`) and of curl may write only inside the agent's
  working directory and the environment's workdir. Paths are normalised; a part only known at run
  time must have known values (the arm's fixed variables, literal values given on the line). The
  CLI resets the shell to the working directory when a command leaves it, so a relative path is
  inside it unless the same line `cd`s where the guard cannot follow (`cd -`, `..` out, a variable).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from .curl_rule import CurlArgument, CurlConfinement, url_refusal
from .words import UNKNOWN_PART, Word, expand_fixed, possible_values, variables_in

__all__ = ["ArgumentRule", "WritePolicy", "CURL", "argument_reason", "write_targets", "cd_leaves", "subcommand_named"]

@dataclass(frozen=True)
class ProgramOptions:
    """What the guard knows of one program's command line (getopt style)."""

    value_short: str = ""  # short options that take a value (-o FILE, -oFILE)
    value_long: frozenset[str] = frozenset()  # long options that take a value (--output FILE, --output=FILE)
    writes: frozenset[str] = frozenset()  # options whose value is a file the program writes
    remote_name: frozenset[str] = frozenset()  # options that write a file named after the URL
    # tar's old style: a first argument without "-" is a bundle of short options whose value-taking
    # letters take the following arguments in order (`tar xfC a.tar DIR` is -x -f a.tar -C DIR).
    old_style_bundle: bool = False
    # The subcommand a written word runs, for programs that accept aliases or abbreviations (npm);
    # None: the word itself.
    subcommand: Callable[[str], str | None] | None = None


# curl 7.88.1 (`curl --help all`): every option that takes a value, so URL operands are found exactly.
CURL = ProgramOptions(
    value_short="EKCbcdDFPHhmoUQreXYytzTuAwx",
    value_long=frozenset(
        """--abstract-unix-socket --alt-svc --aws-sigv4 --cacert --capath --cert --cert-type --ciphers
        --config --connect-timeout --connect-to --continue-at --cookie --cookie-jar --create-file-mode
        --crlfile --curves --data --data-ascii --data-binary --data-raw --data-urlencode --delegation
        --dns-interface --dns-ipv4-addr --dns-ipv6-addr --dns-servers --doh-url --dump-header --egd-file
        --engine --etag-compare --etag-save --expect100-timeout --form --form-string --ftp-account
        --ftp-alternative-to-user --ftp-method --ftp-port --ftp-ssl-ccc-mode --happy-eyeballs-timeout-ms
        --header --help --hostpubmd5 --hostpubsha256 --hsts --interface --json --keepalive-time --key
        --key-type --krb --libcurl --limit-rate --local-port --login-options --mail-auth --mail-from
        --mail-rcpt --max-filesize --max-redirs --max-time --netrc-file --noproxy --oauth2-bearer --output
        --output-dir --parallel-max --pass --pinnedpubkey --proto --proto-default --proto-redir
        --proxy-cacert --proxy-capath --proxy-cert --proxy-cert-type --proxy-ciphers --proxy-crlfile
        --proxy-header --proxy-key --proxy-key-type --proxy-pass --proxy-pinnedpubkey
        --proxy-service-name --proxy-tls13-ciphers --proxy-tlsauthtype --proxy-tlspassword
        --proxy-tlsuser --proxy-user --proxy1.0 --pubkey --quote --random-file --range --rate --referer
        --request --request-target --resolve --retry --retry-delay --retry-max-time --sasl-authzid
        --service-name --socks4 --socks4a --socks5 --socks5-gssapi-service --socks5-hostname
        --speed-limit --speed-time --stderr --telnet-option --tftp-blksize --time-cond --tls-max
        --tls13-ciphers --tlsauthtype --tlspassword --tlsuser --trace --trace-ascii --unix-socket
        --upload-file --url --url-query --user --user-agent --write-out --proxy --preproxy""".split()
    ),
    writes=frozenset(
        "-o --output -D --dump-header -c --cookie-jar --trace --trace-ascii --stderr --libcurl "
        "--etag-save --alt-svc --hsts --output-dir".split()
    ),
    remote_name=frozenset("-O --remote-name --remote-name-all -J --remote-header-name".split()),
)
# GNU tar 1.34: the short options that take a value.
TAR = ProgramOptions(value_short="bCfFgHIKLNTVX", old_style_bundle=True)

# npm 11 (lib/utils/cmd-list.js): its commands and aliases. npm runs a word that names one, its
# camelCase spelling, or any unique prefix of one (`npm outd` runs outdated).
_NPM_COMMANDS = frozenset(
    """access adduser approve-scripts audit bugs cache ci completion config dedupe deny-scripts deprecate
    diff dist-tag docs doctor edit exec explain explore find-dupes fund get help help-search init install
    install-ci-test install-scripts install-test link ll login logout ls org outdated owner pack ping pkg
    prefix profile prune publish query rebuild repo restart root run sbom search set shrinkwrap stage
    star stars start stop team test token trust undeprecate uninstall unpublish unstar update version
    view whoami""".split()
)
_NPM_ALIASES = dict(
    pair.split(":")
    for pair in """author:owner home:docs issues:bugs info:view show:view find:search add:install
    unlink:uninstall remove:uninstall rm:uninstall r:uninstall un:uninstall rb:rebuild list:ls ln:link
    create:init i:install it:install-test cit:install-ci-test u:update up:update c:config s:search
    se:search tst:test t:test ddp:dedupe v:view run-script:run clean-install:ci
    clean-install-test:install-ci-test x:exec why:explain la:ll verison:version ic:ci innit:init
    in:install ins:install inst:install insta:install instal:install isnt:install isnta:install
    isntal:install isntall:install install-clean:ci isntall-clean:ci hlep:help dist-tags:dist-tag
    upgrade:update udpate:update rum:run sit:install-ci-test urn:run ogr:org add-user:adduser""".split()
)


def _npm_command(word: str) -> str | None:
    """The command npm runs for `npm WORD` (its cmd-list deref), None when it runs none."""
    word = re.sub(r"[A-Z]", lambda upper: "-" + upper.group(0).lower(), word)
    if word in _NPM_COMMANDS:
        return word
    if word in _NPM_ALIASES:
        return _NPM_ALIASES[word]
    names = _NPM_COMMANDS | set(_NPM_ALIASES)
    completions = [name for name in names if name.startswith(word)] if word else []
    if len(completions) != 1:
        return None
    command = completions[0]
    while command in _NPM_ALIASES:
        command = _NPM_ALIASES[command]
    return command


NPM = ProgramOptions(subcommand=_npm_command)

# Programs with a built-in description; a rule for another program can list its value options.
KNOWN_PROGRAMS = {"curl": CURL, "tar": TAR, "npm": NPM}

# The harmless utilities that can write files: option letters and names whose value is written,
# and which operand (1-based) is an output file (0: every operand).
_UTILITY_WRITES: dict[str, tuple[ProgramOptions, int | None]] = {
    "sort": (
        ProgramOptions(
            value_short="kotST",
            value_long=frozenset(
                "--key --output --field-separator --buffer-size --temporary-directory --parallel "
                "--random-source --files0-from --sort --batch-size --compress-program".split()
            ),
            writes=frozenset("-o --output -T --temporary-directory".split()),
        ),
        None,
    ),
    "uniq": (ProgramOptions(value_short="fsw", value_long=frozenset("--skip-fields --skip-chars --check-chars".split())), 2),
    "mkdir": (ProgramOptions(value_short="m", value_long=frozenset({"--mode", "--context"})), 0),
    "tee": (ProgramOptions(value_long=frozenset({"--output-error"})), 0),
    "split": (
        ProgramOptions(
            value_short="abClnt",
            value_long=frozenset(
                "--suffix-length --additional-suffix --bytes --line-bytes --lines --number "
                "--separator --numeric-suffixes --hex-suffixes --filter".split()
            ),
        ),
        2,
    ),
    "curl": (CURL, None),
}
# The harmless utilities that can write a file (never accepted as a pager or an editor).
WRITING_UTILITIES = frozenset(_UTILITY_WRITES) - {"curl"}


@dataclass(frozen=True)
class ArgumentRule:
    """What one binary may be given (bench.toml `[arms.NAME.arguments.BINARY]`)."""

    binary: str
    deny_subcommands: tuple[str, ...] = ()  # first non-option argument, e.g. ("config", "difftool")
    deny_options: tuple[str, ...] = ()  # anywhere: -c (also -cVALUE, -xc), --output (also --output=F, --out)
    # Every URL must reach one of these ("http://127.0.0.1:8080/"); None: not confined, (): nowhere.
    allow_urls: tuple[str, ...] | None = None
    value_options: tuple[str, ...] = ()  # options that take the next word as their value (curl: built in)


@dataclass(frozen=True)
class WritePolicy:
    """Folders the agent's command lines may write into (absolute, normalized)."""

    roots: tuple[str, ...]

    def reason(self, target: Word, what: str, after_cd: bool, values: Mapping[str, Sequence[str]] = {}) -> str:
        """Why writing `target` is refused, or "". `values`: what each variable can hold, where known
        (the arm's fixed variables, literal values given on the line)."""
        if target.raw.startswith(("<(", ">(")):
            return ""  # a process substitution: bash supplies a pipe
        if target.literal is not None:
            return self._path_reason(target.literal, target.shown, what, after_cd)
        shown = target.shown
        if target.raw.startswith("~"):
            return (
                f"{what} writes `{shown}`, which the guard cannot place inside {self.places()}; "
                "write the file name literally there (e.g. > out.json)"
            )
        paths = possible_values(target.raw, values)
        if paths is None:
            # A part only known at run time could hold "/../.." and climb out whatever surrounds it.
            unknown = [f"${name}" for name in variables_in(target.raw) if name not in values]
            part = f"`{unknown[0]}`" if unknown else "a part computed when it runs"
            return (
                f"{what} writes `{shown}`, and {part} is only known when it runs (it could hold ..), so the "
                f"guard cannot place it inside {self.places()}; write the name literally, or use a variable "
                'given literal values on the same line (for i in 1 2; do ... > "out-$i.json"; done)'
            )
        return _first_reason(self._path_reason(path, f"{shown} (as {path})", what, after_cd) for path in paths)

    def _path_reason(self, path: str, shown: str, what: str, after_cd: bool) -> str:
        if path in _DEVICES or re.match(r"/dev/fd/\d+$", path):
            return ""
        if path.startswith("~"):
            return f"{what} writes `{shown}`, which the guard cannot place inside {self.places()}; write inside them"
        if path.startswith("/"):
            if _inside(posixpath.normpath(path), self.roots):
                return ""
            return f"{what} would write {shown}, outside {self.places()}; write files there"
        if after_cd:
            return (
                f"{what} writes the relative path {shown} after a cd the guard cannot follow; write it as "
                f"a path inside {self.places()}"
            )
        if posixpath.normpath(path).split("/", 1)[0] == "..":
            return f"{what} would write {shown}, which climbs out of the working directory; write files inside {self.places()}"
        return ""

    def places(self) -> str:
        return "the working directory and the environment's folder (" + ", ".join(self.roots) + ")"


_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def _first_reason(reasons: Iterable[str]) -> str:
    return next((reason for reason in reasons if reason), "")


def _inside(path: str, roots: Sequence[str]) -> bool:
    """Whether a normalized absolute path is one of the roots or below one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def cd_leaves(args: Sequence[Word], roots: Sequence[str], values: Mapping[str, Sequence[str]] = {}) -> bool:
    """Whether `cd ARGS` may leave the folders the agent may write into (then relative paths can't
    be placed). `cd -` goes to OLDPWD, wherever an earlier command left it; a variable part could
    hold `..` unless its values are known (`values`); CDPATH, which could steer a relative cd, may
    not be set."""
    operands = [word for word in args if not (word.literal or "").startswith("-") or word.literal == "-"]
    if not operands:
        return True  # cd alone goes HOME
    target = operands[0].literal
    if target is None:
        paths = possible_values(operands[0].raw, values)
        return paths is None or any(cd_leaves([Word.plain(path)], roots) for path in paths)
    if target == "-":
        return True
    if target.startswith("/"):
        return not _inside(posixpath.normpath(target), roots)
    return target.startswith("~") or posixpath.normpath(target).split("/", 1)[0] == ".."


def argument_reason(rule: ArgumentRule, args: Sequence[Word], arm: str, variables: Mapping[str, str] = {}) -> str:
    """Why `rule.binary ARGS` is refused by the rule's options and URLs, or "". (Subcommands are
    checked with the subcommand rules.) `variables`: the arm's fixed variables and their values."""
    binary = rule.binary
    options = _options_for(rule)
    if options.old_style_bundle:
        args = _unbundle(args, options)
    if rule.deny_options:
        reason = _denied_option(binary, args, rule.deny_options, arm, variables)
        if reason:
            return reason
    if rule.allow_urls is not None:
        return _url_reason(binary, args, options, CurlConfinement(rule.allow_urls, dict(variables)))
    return ""


def subcommand_named(binary: str, written: str, denied: Sequence[str]) -> str:
    """The denied subcommand `binary WRITTEN` runs ("" if none): the word itself, or for a program
    that takes aliases and abbreviations (npm) the command it stands for."""
    if written in denied:
        return written
    runs = KNOWN_PROGRAMS.get(binary, ProgramOptions()).subcommand
    if runs is None:
        return ""
    command = runs(written)
    return next((name for name in denied if command is not None and runs(name) == command), "")


def _unbundle(args: Sequence[Word], options: ProgramOptions) -> list[Word]:
    """tar's old style: `xfC a.tar DIR` read as `-x -f a.tar -C DIR`."""
    first = args[0].literal if args else None
    if first is None or not re.fullmatch(r"[A-Za-z]+", first):
        return list(args)
    rest = list(args[1:])
    spelled: list[Word] = []
    for letter in first:
        spelled.append(Word.plain(f"-{letter}"))
        if letter in options.value_short and rest:
            spelled.append(rest.pop(0))
    return spelled + rest


def _options_for(rule: ArgumentRule) -> ProgramOptions:
    known = KNOWN_PROGRAMS.get(rule.binary, ProgramOptions())
    if not rule.value_options:
        return known
    extra_short = "".join(option[1] for option in rule.value_options if re.fullmatch(r"-[^-]", option))
    extra_long = frozenset(option for option in rule.value_options if option.startswith("--"))
    return replace(known, value_short=known.value_short + extra_short, value_long=known.value_long | extra_long)


def _denied_option(binary: str, args: Sequence[Word], denied: Sequence[str], arm: str, variables: Mapping[str, str]) -> str:
    denied_short = {option[1] for option in denied if re.fullmatch(r"-[^-]", option)}
    denied_long = [option for option in denied if option.startswith("--")]
    listed = ", ".join(denied)
    after_option = False
    for word in args:
        text = word.literal
        if text is None:
            # The known start of its value: the arm's fixed variables are known ("$SERVICE_URL/x").
            expanded = expand_fixed(word.raw, variables, unknown=UNKNOWN_PART)
            known = expanded.split(UNKNOWN_PART, 1)[0] if expanded is not None else word.prefix
            if not after_option and (known.startswith("-") or not known):
                return (
                    f"{binary} is given `{word.text}`, which is not written literally and could be one of the "
                    f"options excluded in arm '{arm}' ({listed}); write {binary}'s arguments literally"
                )
            after_option = False
            continue
        if text == "--":
            return ""
        if text.startswith("--"):
            name = text.partition("=")[0]
            for option in denied_long:
                # getopt and git accept a unique abbreviation of a long option (--out for --output)
                if name == option or (len(name) >= 4 and option.startswith(name)):
                    return f"`{binary} {option}` is excluded in arm '{arm}' (excluded options: {listed})"
            after_option = "=" not in text
        elif text.startswith("-") and len(text) > 1:
            hit = next((letter for letter in text[1:] if letter in denied_short), None)
            if hit is not None:
                return f"`{binary} -{hit}` is excluded in arm '{arm}' (excluded options: {listed})"
            after_option = True
        else:
            after_option = False
    return ""



def _getopt(args: Sequence[Word], options: ProgramOptions) -> Iterator[tuple[str, Word | None]]:
    """(option, value) pairs and ("", operand) pairs, getopt style (operands may come between options)."""
    i = 0
    only_operands = False
    while i < len(args):
        word = args[i]
        text = word.literal
        if only_operands or text is None or not text.startswith("-") or text == "-":
            yield "", word
        elif text == "--":
            only_operands = True
        elif text.startswith("--"):
            name, equals, value = text.partition("=")
            long = _long_option(name, options.value_long)
            if long in options.value_long and not equals:
                yield long, args[i + 1] if i + 1 < len(args) else None
                i += 1
            else:
                yield long, Word.plain(value) if equals else None
        else:
            for j in range(1, len(text)):
                letter = text[j]
                if letter in options.value_short:
                    if j + 1 < len(text):
                        yield f"-{letter}", Word.plain(text[j + 1 :])
                    else:
                        yield f"-{letter}", args[i + 1] if i + 1 < len(args) else None
                        i += 1
                    break
                yield f"-{letter}", None
        i += 1


def _long_option(name: str, known: frozenset[str]) -> str:
    """The option a (possibly abbreviated) long name stands for: getopt_long takes unique prefixes."""
    if name in known:
        return name
    matches = [option for option in known if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def _url_reason(binary: str, args: Sequence[Word], options: ProgramOptions, confinement: CurlConfinement) -> str:
    """Every operand of a network client other than curl must be a URL curl_rule would allow."""
    for option, value in _getopt(args, options):
        if option or value is None:
            continue
        reason = url_refusal(binary, CurlArgument(value.raw, value.literal), confinement)
        if reason:
            return reason
    return ""


def write_targets(program: str, args: Sequence[Word]) -> list[tuple[Word, str]] | str:
    """The files `program ARGS` writes (word, description), or a refusal when that cannot be told."""
    spec = _UTILITY_WRITES.get(program)
    if spec is None:
        return []
    options, output_operand = spec
    targets: list[tuple[Word, str]] = []
    operands: list[Word] = []
    for option, value in _getopt(args, options):
        if not option:
            operands.append(value)  # type: ignore[arg-type]
        elif program == "split" and option == "--filter":
            return "split --filter starts a shell command for each piece; split without it"
        elif option in options.writes:
            if value is None:
                return f"`{program} {option}` is missing its file"
            targets.append((value, f"`{program} {option}`"))
        elif option in options.remote_name:
            targets.append((Word.plain("./remote-name"), f"`{program} {option}`"))
    if output_operand == 0:
        targets += [(word, f"{program}") for word in operands]
    elif output_operand is not None and len(operands) >= output_operand:
        targets.append((operands[output_operand - 1], f"{program}'s output operand"))
    return targets
