"""Confine curl to a few base URLs: which arguments of a curl command line would reach elsewhere.

Pure (no pytest, no bashlex): the guard calls `curl_refusal` for every `curl` command an arm with a
`CurlConfinement` runs, handing it each argument as written (`raw`) and, when the guard could work
it out, its value (`literal`). It returns "" (allowed) or a reason the agent can act on.

What is checked
---------------
- Every URL curl would fetch: each operand (an argument that is neither an option nor an option's
  value) and the value of `--url`. Its scheme, host and port must be those of an allowed base URL,
  its path must start with the base URL's path, and it may not carry a user part (`http://a@b/`).
  A URL without a scheme is read as curl reads it (`http://`).
- A URL may use the arm's fixed variables (`"$TRACKER_URL/issues"`, `${TRACKER_URL}`): their values
  are known, and the guard refuses every assignment to them (`protected_variables`). Any other
  expansion (`$(...)`, another variable, `${X%...}`), or a wildcard outside quotes, makes the URL
  unknown before it runs, so it is refused.
- Options that send the request elsewhere or let something else choose: proxies (`-x`, `--proxy*`,
  `--preproxy`, `--socks*`), name and address overrides (`--resolve`, `--connect-to`, `--interface`,
  `--dns-*`, `--doh-url`, `--unix-socket`), configuration files (`-K`/`--config`, `--netrc*`), and
  options that write files (`-o`, `-O`, `-D`, `-c`, `--trace*`, ...) unless the guard checks where
  they write (`writes_checked`: the arm has write roots, and `arguments.write_targets` finds them).
  Unknown options are refused too, so a curl option added later cannot open a path.
- `url_refusal` is the one URL judge: the guard also applies it to the operands of any other
  client an arm confines with `allow_urls`.
- Variables that would redirect curl (`http_proxy`, `ALL_PROXY`, `NO_PROXY`, `CURL_HOME`, ...) are
  in `protected_variables` with the fixed ones.

What it cannot see: a `.curlrc` or other file written earlier by a redirection (curl reads
`$HOME/.curlrc`), and where the service itself redirects with `-L` (the example service never does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .words import UNKNOWN_PART, expand_fixed

__all__ = ["CurlConfinement", "CurlArgument", "curl_refusal", "url_refusal", "PROXY_VARIABLES", "expand_fixed"]

PROXY_VARIABLES: frozenset[str] = frozenset(
    "http_proxy HTTP_PROXY https_proxy HTTPS_PROXY ftp_proxy FTP_PROXY all_proxy ALL_PROXY "
    "no_proxy NO_PROXY CURL_HOME CURL_CA_BUNDLE SSLKEYLOGFILE".split()
)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Short options without a value; any of them may be clustered (-sSf).
_SHORT_FLAGS = set("sSfiIvLGgk0123456NZq#:lj")
# Short options that take a value (the rest of the cluster or the next argument).
_SHORT_VALUED = set("XHdAeuwmbYyzrCF") | {"T"}
# Long options without a value (a `--no-` form of each is accepted as well).
_LONG_FLAGS = frozenset(
    "silent show-error fail fail-with-body include head verbose location get globoff compressed "
    "insecure http1.0 http1.1 http2 http2-prior-knowledge http3 no-buffer no-keepalive no-progress-meter "
    "path-as-is raw ipv4 ipv6 tcp-nodelay tr-encoding list-only disable next progress-bar "
    "location-trusted post301 post302 post303 fail-early styled-output remote-time ssl-reqd "
    "no-sessionid digest basic anyauth ntlm negotiate".split()
)
# Long options that take a value.
_LONG_VALUED = frozenset(
    "request header data data-raw data-binary data-ascii data-urlencode json user-agent referer user "
    "write-out max-time connect-timeout retry retry-delay retry-max-time max-redirs cookie form "
    "form-string upload-file url-query range limit-rate speed-limit speed-time expect100-timeout "
    "keepalive-time proto proto-redir proto-default oauth2-bearer".split()
)
# Options refused, with why.
_REFUSED_LONG = {
    **dict.fromkeys(
        "proxy preproxy proxy-user proxytunnel socks4 socks4a socks5 socks5-hostname proxy-header "
        "noproxy haproxy-protocol".split(),
        "sends the request through another host",
    ),
    **dict.fromkeys(
        "resolve connect-to interface dns-servers dns-interface dns-ipv4-addr dns-ipv6-addr doh-url "
        "unix-socket abstract-unix-socket local-port".split(),
        "changes which address curl connects to",
    ),
    **dict.fromkeys("config netrc netrc-file netrc-optional variable".split(), "reads options or URLs from a file"),
    **dict.fromkeys(
        "output remote-name remote-name-all output-dir dump-header cookie-jar trace trace-ascii "
        "stderr libcurl etag-save hsts alt-svc create-dirs".split(),
        "writes a file; curl's output is meant for a pipe here (`| jq ...`)",
    ),
}
# The options above that only write a file: accepted when the guard checks where they write
# (`CurlConfinement.writes_checked`: every trial, through arguments.write_targets and WritePolicy).
_WRITING_LONG_VALUED = frozenset(
    "output output-dir dump-header cookie-jar trace trace-ascii stderr libcurl etag-save hsts alt-svc".split()
)
_WRITING_LONG_FLAGS = frozenset("remote-name remote-name-all create-dirs".split())
_WRITING_SHORT_VALUED, _WRITING_SHORT_FLAGS = set("oDc"), set("O")
_REFUSED_SHORT = {"x": "proxy", "K": "config", "n": "netrc", "o": "output", "O": "remote-name", "D": "dump-header",
                  "c": "cookie-jar", "E": "cert", "U": "proxy-user", "p": "proxytunnel"}  # fmt: skip


@dataclass(frozen=True)
class CurlConfinement:
    """Where curl may go: URL prefixes (scheme://host:port/path) and the variables that hold them."""

    allowed: tuple[str, ...]
    variables: Mapping[str, str] = field(default_factory=dict)  # fixed names -> their values
    writes_checked: bool = False  # the guard checks where -o, -D, ... write, so they may be given

    @property
    def protected_variables(self) -> frozenset[str]:
        return frozenset(self.variables) | PROXY_VARIABLES


@dataclass(frozen=True)
class CurlArgument:
    raw: str  # as written on the command line, quotes included
    literal: str | None = None  # its value when known before running, else None


def curl_refusal(args: Sequence[CurlArgument], confinement: CurlConfinement) -> str:
    """Why this curl command (its arguments, without the program name) is refused, or ""."""
    urls: list[CurlArgument] = []
    pending_value: str | None = None  # the option whose value the next argument is
    only_operands = False
    for arg in args:
        value = arg.literal if arg.literal is not None else expand_fixed(arg.raw, confinement.variables)
        if pending_value is not None:
            if pending_value == "url":
                urls.append(arg)
            elif pending_value == "write-out" and "%output{" in arg.raw:
                return "curl --write-out %output{...} writes a file; curl's output is meant for a pipe here"
            pending_value = None
            continue
        if only_operands or value is None or not value.startswith("-") or value == "-":
            urls.append(arg)
            continue
        if value == "--":
            only_operands = True
            continue
        if value.startswith("--"):
            name = value[2:]
            reason = _long_option(name, confinement.writes_checked)
            if reason:
                return reason
            if name == "url" or name in _LONG_VALUED or name in _WRITING_LONG_VALUED:
                pending_value = "url" if name == "url" else name
            continue
        reason, takes_next = _short_cluster(value[1:], confinement.writes_checked)
        if reason:
            return reason
        if takes_next:
            pending_value = "write-out" if takes_next == "w" else takes_next
    if pending_value is not None:
        return f"curl's option --{pending_value} needs a value"
    for url in urls:
        reason = url_refusal("curl", url, confinement)
        if reason:
            return reason
    return ""


def _long_option(name: str, writes_checked: bool) -> str:
    if "=" in name:
        return f"curl does not accept --{name}; write the value as the next argument"
    if writes_checked and (name in _WRITING_LONG_VALUED or name in _WRITING_LONG_FLAGS):
        return ""
    if name in _REFUSED_LONG:
        return f"curl --{name} {_REFUSED_LONG[name]}, which is not allowed in this arm"
    if name.startswith("expand-"):
        return f"curl --{name} expands variables into arguments, which is not allowed in this arm"
    if name in _LONG_FLAGS or name == "url" or name in _LONG_VALUED:
        return ""
    if name.startswith("no-") and name[3:] in _LONG_FLAGS:
        return ""
    return f"curl --{name} is not an option this arm may use (the guard checks where curl connects and refuses options it does not know)"


def _short_cluster(cluster: str, writes_checked: bool) -> tuple[str, str]:
    """(reason, name of the option that takes the next argument as its value)."""
    for index, letter in enumerate(cluster):
        if writes_checked and letter in _WRITING_SHORT_FLAGS:
            continue
        if writes_checked and letter in _WRITING_SHORT_VALUED:
            return "", ("" if cluster[index + 1 :] else letter)
        if letter in _REFUSED_SHORT:
            long = _REFUSED_SHORT[letter]
            why = _REFUSED_LONG.get(long, "is not allowed in this arm")
            return f"curl -{letter} (--{long}) {why}, which is not allowed in this arm", ""
        if letter in _SHORT_VALUED:
            rest = cluster[index + 1 :]
            if letter == "w" and "%output{" in rest:
                return "curl -w %output{...} writes a file; curl's output is meant for a pipe here", ""
            return "", ("" if rest else letter)
        if letter not in _SHORT_FLAGS:
            return f"curl -{letter} is not an option this arm may use (the guard checks where curl connects)", ""
    return "", ""


def url_refusal(program: str, url: CurlArgument, confinement: CurlConfinement) -> str:
    """Why `program` may not fetch this URL (as written and, when known, its value), or "". The one
    URL judge: curl's URLs and those of any other client an arm confines with allow_urls."""
    allowed = " or ".join(confinement.allowed) or "(none)"
    hint = "; write the URL literally or as " + (
        " / ".join(f'"${name}/..."' for name in sorted(confinement.variables)) or "a literal"
    )
    value = url.literal if url.literal is not None else expand_fixed(url.raw, confinement.variables, unknown=UNKNOWN_PART)
    if value is None:
        return f"{program}'s URL {url.raw} is only known when it runs, so the guard cannot check where it goes{hint}"
    if UNKNOWN_PART in value:
        # "$TRACKER_URL/issues/$n": a variable inside double quotes, after the base URL and a "/" or
        # "?", cannot change the host (no word splitting, no wildcard) whatever its value.
        known = value.split(UNKNOWN_PART, 1)[0]
        if not any(known.startswith((base.rstrip("/") + "/", base + "?")) for base in confinement.allowed):
            return (
                f"{program}'s URL {url.raw} has a part only known when it runs before the path of "
                f"{allowed}, so the guard cannot check where it goes{hint}"
            )
        value = known
    if not _reaches_allowed(value, confinement.allowed):
        return f"{program} may only reach {allowed} in this arm; {value!r} is elsewhere"
    return ""


def _reaches_allowed(url: str, allowed: Sequence[str]) -> bool:
    if any(ord(char) < 33 or char in "\\" for char in url):
        return False
    if not _SCHEME.match(url):
        url = "http://" + url  # what curl assumes without a scheme
    try:
        target = urlsplit(url)
        target_port = target.port
    except ValueError:
        return False
    if "@" in target.netloc:
        return False
    for prefix in allowed:
        base = urlsplit(prefix)
        try:
            base_port = base.port
        except ValueError:
            continue  # a prefix whose {placeholders} were never filled reaches nothing
        if (
            target.scheme.lower() == base.scheme.lower()
            and target.netloc.lower() == base.netloc.lower()
            and target_port == base_port
            and (target.path or "/").startswith(base.path or "/")
        ):
            return True
    return False
