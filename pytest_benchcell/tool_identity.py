"""What an arm's declared binaries are on this machine, for the cell's conditions.

The conditions name an arm's binaries; this says what each one is, so a new build of the CLI under
test starts a new definition instead of pooling with the old one's samples:

- each binary is found as a trial finds it (the arm's `path` folders, then the harness's PATH:
  `search_path`), its real file (symlinks resolved) hashed: `sha256`, 16 hex digits;
- a text script (`#!...`) is hashed itself, and so is every existing file its lines name (a
  wrapper's `exec node "$(dirname "$0")/../lib/cli.js" "$@"` or `exec python3 bench/cli.py "$@"`),
  relative to the script's folder or to the bench folder: `files`, keyed by the path relative to
  the bench folder when the file is in it (else as the script writes it); what those files import
  in turn is not followed;
- `version`: the first line `BINARY --version` prints when it exits 0 within VERSION_TIMEOUT_S,
  with stdin closed, in an empty temporary folder, on the search path, with the home, locale and
  terminal variables only and no bytecode written (absent otherwise), the bench folder and the home
  folder written `{bench}`, `~`;
- a binary not found is `{"found": False}`: its cell has no current definition on this machine;
- an MCP server's files (`server_files`): those its command line names (a script given to an
  interpreter, `{bench_root}` filled), and the files they name in turn, hashed the same way.

Hashes are kept per process by (real path, size, modification time), versions by the same keys of
the binary and the files it names, so a sitting or a report pays for a big binary (node: ~100 MB)
once and sees a file edited meanwhile. Knows nothing of pytest or of the bench's dataclasses.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HASH_DIGITS = 16
VERSION_TIMEOUT_S = 3.0
VERSION_CHARS = 200
SCRIPT_BYTES = 256 * 1024  # a larger file is a program, not a wrapper: hashed, its lines not read
WORDS_PER_SCRIPT = 32  # file-like words read from one script, at most
WARM_THREADS = 8  # binaries identified at once: their --version runs are mostly waiting on start-up
# Where a wrapper names its own folder: `$(dirname "$0")`, `$(dirname -- "$(readlink -f "$0")")`,
# `${0%/*}`, `` `dirname $0` ``, the same with BASH_SOURCE; then `$(cd "DIR" && pwd)` around it.
_SELF = r'"?\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)"?'
_RESOLVED_SELF = rf'(?:{_SELF}|"?\$\(\s*(?:readlink\s+-[fe]|realpath)\s+(?:--\s+)?{_SELF}\s*\)"?)'
_SCRIPT_FOLDER = re.compile(
    rf"\$\(\s*dirname\s+(?:--\s+)?{_RESOLVED_SELF}\s*\)|`\s*dirname\s+(?:--\s+)?{_RESOLVED_SELF}\s*`|\$\{{0%/\*\}}"
)
_CD_PWD = re.compile(r'\$\(\s*cd\s+(?:--\s+)?"?([^"$()`;&]+?)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?\s*\)')
_ASSIGNMENT = re.compile(r'^\s*(?:export\s+|readonly\s+|local\s+)?([A-Za-z_][A-Za-z0-9_]*)=("[^"$`]*"|\'[^\']*\'|[^\s"\'$`;&|]+)\s*$')
_FILE_LIKE = re.compile(r"/|\.[A-Za-z0-9]{1,4}$")
VERSION_VARIABLES = frozenset({"HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME"})
PLACEHOLDER_WORD = re.compile(r"(?<!\$)\{[A-Za-z_][A-Za-z0-9_]*\}")  # filled per trial: not a file known here
MARK = "{script}"  # the script's folder, in a name the conditions keep

_hashes: dict[tuple[str, int, int], str] = {}
_scripts: dict[tuple[str, int, int], tuple[str, ...]] = {}
_versions: dict[tuple[Any, ...], str | None] = {}
_warmed: set[tuple[Any, ...]] = set()


def search_path(folders: Sequence[str]) -> str:
    """The PATH an arm's binaries are found on (their folders first), and that they run with."""
    return os.pathsep.join([*folders, os.environ.get("PATH", "")])


def arm_identities(
    binaries: Iterable[str], folders: Sequence[str], bench_root: Path, every: Sequence[tuple[Sequence[str], Sequence[str]]] = ()
) -> dict[str, dict[str, Any]]:
    """{binary: {"sha256": ..., "files": {...}, "version": ...}} for each declared binary, or
    {"found": False} for one this machine does not have. `every`: the (binaries, folders) of all the
    bench's arms, identified together the first time (their `--version` runs at once, not in turn)."""
    if every:
        _warm(tuple((tuple(names), tuple(paths)) for names, paths in every), bench_root)
    path = search_path(folders)
    return {name: binary_identity(name, path, bench_root) for name in sorted(binaries)}


def _warm(every: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], bench_root: Path) -> None:
    """Fill the caches for every binary of the bench in parallel, once per process and bench."""
    key = (every, str(bench_root), os.environ.get("PATH", ""))
    if key in _warmed:
        return
    _warmed.add(key)
    pairs = list(dict.fromkeys((name, search_path(folders)) for names, folders in every for name in names))
    if len(pairs) > 1:
        with ThreadPoolExecutor(max_workers=min(WARM_THREADS, len(pairs))) as pool:
            list(pool.map(lambda pair: binary_identity(pair[0], pair[1], bench_root), pairs))


def binary_identity(name: str, path: str, bench_root: Path) -> dict[str, Any]:
    found = shutil.which(name, path=path)
    if found is None:
        return {"found": False}
    real = os.path.realpath(found)
    key = _stat_key(real)
    if key is None:
        return {"found": False}
    root = os.path.realpath(bench_root)
    named = _named(real, key, root)
    identity: dict[str, Any] = {"sha256": _hash_file(real, key)}
    if named:
        identity["files"] = {label: _hash_file(*file) for label, file in sorted(named.items())}
    version = _version(real, path, root, (key, *(file_key for _, file_key in sorted(named.values()))))
    if version is not None:
        identity["version"] = version
    return identity


def server_files(command: str, args: Sequence[str], bench_root: Path) -> dict[str, str]:
    """{name: sha256} of the files an MCP server's command line names (`{bench_root}` filled; a
    relative one is the bench folder's), and of the files those scripts name in turn: the server's
    own code, which a trial starts outside the sandbox and whose new version is a new definition."""
    root = os.path.realpath(bench_root)
    found: dict[str, tuple[str, tuple[str, int, int]]] = {}
    for word in (command, *args):
        word = word.replace("{bench_root}", root)
        file = None if PLACEHOLDER_WORD.search(word) or not _FILE_LIKE.search(word) else _resolve(word, root, root)
        key = _stat_key(file) if file else None
        if file and key:
            found[_portable_name(word, file, root)] = (file, key)
            found.update(_named(file, key, root))
    return {label: _hash_file(*file) for label, file in sorted(found.items())}


def _named(real: str, key: tuple[str, int, int], root: str) -> dict[str, tuple[str, tuple[str, int, int]]]:
    """The existing files a text script names, by portable name, with their cache keys."""
    named = {}
    for token in _named_files(real, key):
        file = _resolve(token, os.path.dirname(real), root)
        file_key = _stat_key(file) if file else None
        if file and file_key and file != real:
            named[_portable_name(token, file, root)] = (file, file_key)
    return named


def _stat_key(file: str) -> tuple[str, int, int] | None:
    try:
        status = os.stat(file)
    except OSError:
        return None
    if not os.path.isfile(file):
        return None
    return (file, status.st_size, status.st_mtime_ns)


def _hash_file(file: str, key: tuple[str, int, int]) -> str:
    if key not in _hashes:
        digest = hashlib.sha256()
        try:
            with open(file, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            return f"unreadable ({exc.strerror})"  # not kept: the next reading may succeed
        _hashes[key] = digest.hexdigest()[:HASH_DIGITS]
    return _hashes[key]


def _named_files(script: str, key: tuple[str, int, int]) -> tuple[str, ...]:
    """The file-like words of a text script's lines (its shebang aside), its own folder written MARK."""
    if key not in _scripts:
        _scripts[key] = _read_named_files(script, key[1])
    return _scripts[key]


def _read_named_files(script: str, size: int) -> tuple[str, ...]:
    if size > SCRIPT_BYTES:
        return ()
    try:
        with open(script, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    if not text.startswith("#!"):
        return ()
    variables: dict[str, str] = {}
    words: list[str] = []
    for line in text.splitlines()[1:]:
        line = _CD_PWD.sub(lambda match: match.group(1), _SCRIPT_FOLDER.sub(MARK, line))
        for name, value in variables.items():
            line = line.replace("${" + name + "}", value)
            line = re.sub(rf"\${name}(?![A-Za-z0-9_])", lambda _: value, line)  # noqa: B023 - called at once
        assignment = _ASSIGNMENT.match(line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2).strip("\"'")
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            tokens = line.split()
        for token in tokens:
            token = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
            if token and "$" not in token and "*" not in token and _FILE_LIKE.search(token) and token not in words:
                words.append(token)
    return tuple(words[:WORDS_PER_SCRIPT])


def _resolve(token: str, folder: str, root: str) -> str | None:
    """The real file a script's word names: itself when absolute, else relative to the script's
    folder, then to the bench folder; None when it names no file."""
    if token.startswith(MARK):
        candidates = [folder + token[len(MARK) :]]
    elif os.path.isabs(token):
        candidates = [token]
    else:
        candidates = [os.path.join(folder, token), os.path.join(root, token)]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def _portable_name(token: str, file: str, root: str) -> str:
    """A name for a named file that holds no folder of this machine the script does not write:
    relative to the bench folder when it is there, else the word as the script writes it."""
    if file.startswith(root + os.sep):
        return os.path.relpath(file, root).replace(os.sep, "/")
    return MARK + "/" + os.path.normpath(token[len(MARK) :].lstrip("/")) if token.startswith(MARK) else token


def _version(real: str, path: str, root: str, keys: tuple[Any, ...]) -> str | None:
    cache_key = (real, path, root, keys)
    if cache_key not in _versions:
        _versions[cache_key] = _run_version(real, path, root)
    return _versions[cache_key]


def _run_version(real: str, path: str, root: str) -> str | None:
    """The first line of `real --version`, run in an empty folder of its own, so a program that
    writes where it runs (a log, Python's bytecode cache) leaves nothing in the bench folder."""
    try:
        with tempfile.TemporaryDirectory(prefix="benchcell-version-") as folder:
            with subprocess.Popen(
                [real, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=folder, env=_version_environment(path), start_new_session=True,
            ) as process:  # fmt: skip
                try:
                    stdout, stderr = process.communicate(timeout=VERSION_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    # Its whole process group: a child left holding the pipes would keep us waiting.
                    os.killpg(process.pid, signal.SIGKILL)
                    process.communicate()
                    return None
    except (OSError, subprocess.SubprocessError):
        return None
    if process.returncode != 0:
        return None
    for output in (stdout, stderr):
        lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
        if lines:
            return _portable_text(lines[0][:VERSION_CHARS], root)
    return None


def _version_environment(path: str) -> dict[str, str]:
    """The few variables a `--version` needs, the same in every process of a sitting (an xdist
    worker's own variables, or the harness's credentials, never reach the arm's program)."""
    kept = {name: value for name, value in os.environ.items() if name in VERSION_VARIABLES or name.startswith("LC_")}
    return {**kept, "PATH": path, "PYTHONDONTWRITEBYTECODE": "1"}  # a Python CLI's cache would land in the bench


def _portable_text(line: str, root: str) -> str:
    """The version line without this machine's folders: the bench folder and the home folder."""
    line = line.replace(root, "{bench}")
    home = os.path.expanduser("~")
    return line.replace(home, "~") if home not in ("", "/") else line

