"""Argument rules per binary, and where a command line may write files.

An allowed program is a launcher when an argument makes it start another program (`git -c
alias.x='!cmd'`, `git difftool -x cmd`, `sort --compress-program`) or write a file something else
runs later (`git diff --output FILE`, `uniq IN OUT` onto the CLI's shell snapshot). The command
line shows those arguments, so the guard refuses them before anything runs:

- `ArgumentRule` (bench.toml `[arms.NAME.arguments.BINARY]`): for one binary, subcommands and options
  it may not be given, and for a network client the URLs it may reach (`allow_urls`: every URL the
  program is given must start with one of these, written up to the `/` after the host and port).
- `WritePolicy`: redirections and the output operands and options of the harmless utilities (uniq's
  second operand, `sort -o`, `mkdir`, `tee`, `split`) and of curl may write only inside the agent's
  working directory and the environment's workdir. The CLI resets the shell to the working directory
  when a command leaves it, so a relative path is inside it unless the same line `cd`s elsewhere
  first or climbs out with `..`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .words import Word

__all__ = ["ArgumentRule", "WritePolicy", "CURL", "argument_reason", "write_targets", "cd_leaves"]

@dataclass(frozen=True)
class ProgramOptions:
    """What the guard knows of one program's command line (getopt style)."""

    value_short: str = ""  # short options that take a value (-o FILE, -oFILE)
    value_long: frozenset[str] = frozenset()  # long options that take a value (--output FILE, --output=FILE)
    url_options: frozenset[str] = frozenset()  # options whose value is a URL or host to connect to
    rerouting: frozenset[str] = frozenset()  # options that send connections elsewhere or read options from a file
    writes: frozenset[str] = frozenset()  # options whose value is a file the program writes
    remote_name: frozenset[str] = frozenset()  # options that write a file named after the URL


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
    url_options=frozenset(
        "--url -x --proxy --preproxy --proxy1.0 --socks4 --socks4a --socks5 --socks5-hostname --doh-url".split()
    ),
    rerouting=frozenset(
        "-K --config --connect-to --resolve --unix-socket --abstract-unix-socket --dns-servers --interface".split()
    ),
    writes=frozenset(
        "-o --output -D --dump-header -c --cookie-jar --trace --trace-ascii --stderr --libcurl "
        "--etag-save --alt-svc --hsts --output-dir".split()
    ),
    remote_name=frozenset("-O --remote-name --remote-name-all -J --remote-header-name".split()),
)
# Programs with a built-in description; a rule for another program can list its value options.
KNOWN_PROGRAMS = {"curl": CURL}

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


@dataclass(frozen=True)
class ArgumentRule:
    """What one binary may be given (bench.toml `[arms.NAME.arguments.BINARY]`)."""

    binary: str
    deny_subcommands: tuple[str, ...] = ()  # first non-option argument, e.g. ("config", "difftool")
    deny_options: tuple[str, ...] = ()  # anywhere: -c (also -cVALUE, -xc), --output (also --output=F, --out)
    allow_urls: tuple[str, ...] = ()  # every URL must start with one of these ("http://127.0.0.1:8080/")
    value_options: tuple[str, ...] = ()  # options that take the next word as their value (curl: built in)


@dataclass(frozen=True)
class WritePolicy:
    """Folders the agent's command lines may write into (absolute, normalized)."""

    roots: tuple[str, ...]

    def reason(self, target: Word, what: str, after_cd: bool) -> str:
        """Why writing `target` is refused, or ""."""
        if target.raw.startswith(("<(", ">(")):
            return ""  # a process substitution: bash supplies a pipe
        known = target.literal if target.literal is not None else target.prefix
        shown = target.shown
        if target.raw.startswith("~") or (target.literal is None and not known):
            return (
                f"{what} writes `{shown}`, which the guard cannot place inside {self.places()}; "
                "write the file name literally there (e.g. > out.json or > \"out-$i.json\")"
            )
        if known in _DEVICES or re.match(r"/dev/fd/\d+$", known):
            return ""
        if known.startswith("/"):
            path = posixpath.normpath(known if target.literal is not None else posixpath.dirname(known) or "/")
            if _inside(path, self.roots):
                return ""
            return f"{what} would write {shown}, outside {self.places()}; write files there"
        if after_cd:
            return (
                f"{what} writes the relative path {shown} after a cd the guard cannot follow; write it as "
                f"a path inside {self.places()}"
            )
        if posixpath.normpath(known).split("/", 1)[0] == ".." or "/../" in f"/{known}/":
            return f"{what} would write {shown}, which climbs out of the working directory; write files inside {self.places()}"
        return ""

    def places(self) -> str:
        return "the working directory and the environment's folder (" + ", ".join(self.roots) + ")"


_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def _inside(path: str, roots: Sequence[str]) -> bool:
    """Whether a normalized absolute path is one of the roots or below one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def cd_leaves(args: Sequence[Word], roots: Sequence[str]) -> bool:
    """Whether `cd ARGS` may leave the folders the agent may write into (then relative paths can't be placed)."""
    operands = [word for word in args if not (word.literal or "").startswith("-") or word.literal == "-"]
    if not operands:
        return True  # cd alone goes HOME
    target = operands[0]
    if target.literal is None:
        return True
    if target.literal == "-":
        return False
    if target.literal.startswith("/"):
        path = posixpath.normpath(target.literal)
        return not _inside(path, roots)
    return target.literal.startswith("~") or ".." in target.literal.split("/")


def argument_reason(rule: ArgumentRule, args: Sequence[Word], arm: str) -> str:
    """Why `rule.binary ARGS` is refused by the rule's options and URLs, or "". (Subcommands are
    checked with the subcommand rules.)"""
    binary = rule.binary
    options = _options_for(rule)
    if rule.deny_options:
        reason = _denied_option(binary, args, rule.deny_options, arm)
        if reason:
            return reason
    if rule.allow_urls:
        return _url_reason(binary, args, options, rule.allow_urls, arm)
    return ""


def _options_for(rule: ArgumentRule) -> ProgramOptions:
    known = KNOWN_PROGRAMS.get(rule.binary, ProgramOptions())
    if not rule.value_options:
        return known
    extra_short = "".join(option[1] for option in rule.value_options if re.fullmatch(r"-[^-]", option))
    extra_long = frozenset(option for option in rule.value_options if option.startswith("--"))
    return ProgramOptions(
        value_short=known.value_short + extra_short,
        value_long=known.value_long | extra_long,
        url_options=known.url_options,
        rerouting=known.rerouting,
        writes=known.writes,
        remote_name=known.remote_name,
    )


def _denied_option(binary: str, args: Sequence[Word], denied: Sequence[str], arm: str) -> str:
    denied_short = {option[1] for option in denied if re.fullmatch(r"-[^-]", option)}
    denied_long = [option for option in denied if option.startswith("--")]
    listed = ", ".join(denied)
    after_option = False
    for word in args:
        text = word.literal
        if text is None:
            if not after_option and (word.prefix.startswith("-") or not word.prefix):
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


def _url_reason(binary: str, args: Sequence[Word], options: ProgramOptions, allowed: Sequence[str], arm: str) -> str:
    shown = ", ".join(allowed)
    for option, value in _getopt(args, options):
        if option in options.rerouting:
            return (
                f"`{binary} {option}` could send the request somewhere other than the URL, which arm '{arm}' "
                f"does not allow; {binary} may reach only {shown}"
            )
        if option and option not in options.url_options:
            continue
        if value is None:
            return f"`{binary} {option}` is missing its value"
        known = value.literal if value.literal is not None else value.prefix
        url = known if "://" in known else f"http://{known}"  # curl guesses http:// for a bare host
        if not any(url.startswith(prefix) for prefix in allowed):
            what = f"the URL `{value.shown}`" if value.literal is not None else f"`{value.text}` (not written literally)"
            return (
                f"{binary} is given {what}: in arm '{arm}' {binary} may reach only {shown}; write the whole "
                "URL literally, starting with one of these"
            )
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
