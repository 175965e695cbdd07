"""Each trial's transcript, kept beside the store: what the agent saw, said and did, in order.

A sample keeps the tool calls (outputs clipped) and the final answer; its transcript keeps the rest:
every message, each tool call with its full result, the agent's text and thinking between calls, and
every model request with that request's own usage. Transcripts are for people (and exporters such
as `benchcell export inspect`, or the HTML report's links): nothing counts or reports from them, and
the store's readers never look into their folder. A trial without one (an older store, a trial that
ended before the agent started, a pruned file) is read exactly like one with it.

Where
-----
``<store>/transcripts/<model_kind>/<arm>/<task>/<sample id>.jsonl.gz``, gzip-compressed JSON lines.
The sample references it (the path is relative to the store root, always with ``/``)::

    "transcript": {"path": "transcripts/scripted/cli/close-bug/9f2c....jsonl.gz",
                   "bytes": 1834, "raw_bytes": 9120, "events": 23, "sha256": "5d41..."}

or ``"transcript": null`` when the trial has none (it ended before the agent started), or
``{"error": "..."}`` when it could not be written (the trial's sample is stored all the same). The
file is written whole (a temporary file, fsynced, renamed) before the sample is appended, so a sample
never points at a file that was never written; a crash between the two leaves at most an orphan file.
`benchcell transcripts prune` deletes files and never rewrites a sample: a referenced file that is
gone is "pruned" (`transcript_status`), and `read_transcript` returns None for it.

Format (version 1)
------------------
Every line is one JSON object with a ``kind``. The first line is the header; every other line is an
event with ``t_ms``, milliseconds since the agent run began (the harness's clock), in the order the
harness saw them. Strings are redacted exactly like the sample (secrets.redact with the same secrets).

``header``
    ``format`` (1), ``sample`` (its id), ``arm``, ``task``, ``trial``, ``model``, ``model_kind``,
    ``started_at`` (UTC, ISO 8601, when the agent run began: add ``t_ms``), ``source``.
``prompt``
    ``system_prompt``, ``prompt``: what the harness gave the agent.
``init``
    The CLI's init message: ``session_id``, ``model``, ``cwd``, ``tools`` (offered, names),
    ``mcp_servers`` (``[{"name", "status"}]``), ``permission_mode``.
``model_request``
    ``request`` (1, 2, ...): the CLI started a model request.
``model_response``
    ``request`` (the request it answers), ``message_id``, ``model``, ``stop_reason``, ``usage`` (that
    request's own tokens: ``fresh_input``, ``cache_write``, ``cache_read``, ``output``), ``complete``
    (false when the stream stopped before the response's final usage, or the harness cut it off
    (backstop, stall): then usage is what it reported so far and ``stop_reason`` null; the closing
    events the CLI makes up after an interrupt are not the API's and are ignored). Emitted when the
    response ends, so after its ``text``/``thinking``/``tool_use``.
``text`` / ``thinking``
    ``message_id``, ``text`` / ``thinking``: the assistant's text and its thinking, one block each.
``tool_use``
    ``message_id``, ``id``, ``name``, ``input``: a tool call as the model made it.
``guard``
    ``tool_use_id``, ``name``, ``allowed``, ``reason``: the harness's PreToolUse decision on a call.
``tool_result``
    ``tool_use_id``, ``is_error``, ``content``: the full result the model got (text parts joined; a
    non-text part is named, e.g. ``[image]``).
``user``
    ``content``: any other user message the CLI put into the conversation.
``api_error``
    ``error``, ``text``: a failed model request, as the CLI reported it.
``system``
    ``subtype``, ``data``: any other system message of the CLI; among them ``api_retry`` (``data``:
    ``attempt``, ``max_retries``, ``retry_delay_ms``, ``error_status``, ``error``), one per failed
    attempt of a model request the CLI retries.
``result``
    The CLI's final result: ``subtype``, ``is_error``, ``terminal_reason``, ``stop_reason``,
    ``result`` (final answer), ``num_turns``, ``duration_ms``, ``duration_api_ms``,
    ``total_cost_usd``, ``usage`` (total, four components), ``model_usage`` (per model, four
    components), ``permission_denials``.
``backstop``
    ``wall_clock_ms``: the harness stopped the run at the wall-clock backstop.
``api_stall``
    ``stall_ms``: the harness stopped the run: the model API sent no byte for this long while a
    request was open (``[bench] api_stall_ms``).
``api_refused``
    ``attempts``: the harness stopped the run: the API refused the credentials this many times in a row.
``mcp_failed``
    ``servers``: the harness stopped the run as it began: the init message showed these MCP servers
    of the arm not connected, so the agent could not have used the arm's tools.
``api_fault``
    ``fault`` (``failing``, ``credentials``, ``stalled``), ``status``, ``error``, ``attempts``,
    ``reason``: the model API ended the run (api_faults.classify); the sample's ``api_error``.
``error``
    ``error``: the SDK or CLI failed (a harness error, not the agent's), when no ``api_fault`` says why.
``ended``
    The last line: the trial as recorded: ``status``, ``outcome``, ``reason`` (a later rescore is
    in the store, not here).

Events of a subagent (Claude Code's Task tool) carry ``parent_tool_use_id``, the call that started it
(``text``, ``thinking``, ``tool_use``, ``tool_result``, ``user``, ``model_response``).

Kinds may be added (readers skip kinds they do not know); a change of meaning bumps ``format``.

Pure: no pytest, no SDK (agent.py turns the SDK's messages into these events).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import hashlib
import io
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sample import STATUS_RESCORE, conditions_of, utc_now_iso
from .secrets import redact

FORMAT = 1
FOLDER = "transcripts"
SUFFIX = ".jsonl.gz"
SOURCE = "claude-agent-sdk message stream with partial messages (the CLI's stdout, as the harness read it)"

# What transcript_status says.
NONE = "none"  # the sample has no transcript (older store, the agent never started, not written)
KEPT = "kept"  # the file is there and matches its reference
PRUNED = "pruned"  # the sample references a file that is gone (benchcell transcripts prune)
DAMAGED = "damaged"  # the file is there but does not match its reference or does not read


def relative_path(model_kind: str, arm: str, task: str, sample_id: str) -> str:
    """Where a sample's transcript lives, relative to the store root."""
    return f"{FOLDER}/{model_kind}/{arm}/{task}/{sample_id}{SUFFIX}"


@dataclass
class Recorder:
    """The events of one trial as they happen. agent.py adds them (a trial that is interrupted
    keeps what was added so far: the recorder belongs to the trial, not to the agent run)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    started_at: str | None = None  # UTC, when the agent run began
    _began: float | None = None

    def start(self) -> None:
        """The agent run begins now: `t_ms` counts from here."""
        self._began = time.monotonic()
        self.started_at = utc_now_iso()

    def add(self, kind: str, **fields: Any) -> None:
        if self._began is None:
            self.start()
        elapsed = (time.monotonic() - (self._began or 0.0)) * 1000
        self.events.append({"kind": kind, "t_ms": round(elapsed, 1), **fields})


def header(sample: Mapping[str, Any], started_at: str) -> dict[str, Any]:
    return {
        "kind": "header",
        "format": FORMAT,
        "sample": sample.get("id"),
        "arm": sample.get("arm"),
        "task": sample.get("task"),
        "trial": sample.get("trial"),
        "model": sample.get("model"),
        "model_kind": sample.get("model_kind"),
        "started_at": started_at,
        "source": SOURCE,
    }


def encode(lines: list[Mapping[str, Any]]) -> tuple[bytes, int]:
    """The gzip file's bytes and the size of the JSON lines inside."""
    raw = b"".join(_json_line(line) for line in lines)
    buffer = io.BytesIO()
    # mtime=0: the same events always give the same bytes (and the same sha256).
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=6) as handle:
        handle.write(raw)
    return buffer.getvalue(), len(raw)


def write_transcript(
    store_root: Path, sample: Mapping[str, Any], lines: list[Mapping[str, Any]], *, store_vanished: bool = False
) -> dict[str, Any]:
    """Write the transcript (header first) of a sample that is about to be appended; return the
    reference the sample keeps. Raises OSError when it cannot be written (the caller records that).
    A store folder that vanished mid-sitting (Store.vanished) is never recreated from here."""
    if store_vanished:
        raise FileNotFoundError(f"the store folder {store_root} is gone")
    relative = relative_path(str(sample["model_kind"]), str(sample["arm"]), str(sample["task"]), str(sample["id"]))
    payload, raw_bytes = encode(lines)
    _write_whole(store_root / relative, payload)
    return {
        "path": relative,
        "bytes": len(payload),
        "raw_bytes": raw_bytes,
        "events": max(len(lines) - 1, 0),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


def keep(
    store_root: Path, sample: Mapping[str, Any], recorder: Recorder, secrets: list[str], *, store_vanished: bool = False
) -> dict[str, Any] | None:
    """Write the trial's transcript, redacted like its sample and ending with the trial's verdict, and
    return the sample's `transcript` field: None when the agent never started (nothing was seen),
    {"error": ...} when the file could not be written (the sample is stored all the same)."""
    if not recorder.events:
        return None
    ended = {"kind": "ended", "status": sample.get("status"), "outcome": sample.get("outcome"), "reason": sample.get("reason")}
    lines = [header(sample, recorder.started_at or str(sample.get("started_at"))), *recorder.events, ended]
    lines = redact({"lines": lines}, secrets)["lines"]
    try:
        return write_transcript(store_root, sample, lines, store_vanished=store_vanished)
    except OSError as exc:
        return {"error": f"the transcript could not be written: {exc}"}


def _write_whole(target: Path, payload: bytes) -> None:
    """A temporary file beside the target, fsynced, then renamed: the target is whole or absent."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with temporary.open("wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def reference(sample: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The sample's transcript reference, when it names a file."""
    ref = sample.get("transcript")
    if isinstance(ref, Mapping) and isinstance(ref.get("path"), str) and _safe(ref["path"]):
        return ref
    return None


def _safe(relative: str) -> bool:
    """Only paths inside the store's transcripts folder are ever read, copied or deleted (a sample
    is data: a hand-edited one must not make a reader open /etc/passwd or a prune delete it)."""
    parts = relative.split("/")
    return parts[0] == FOLDER and len(parts) > 1 and all(part not in ("", ".", "..") for part in parts) and "\\" not in relative


def transcript_path(store_root: Path, sample: Mapping[str, Any]) -> Path | None:
    """Where the sample's transcript file is (or was), or None when it has none."""
    ref = reference(sample)
    return None if ref is None else Path(store_root, *str(ref["path"]).split("/"))


def transcript_status(store_root: Path, sample: Mapping[str, Any]) -> str:
    """NONE, KEPT, PRUNED or DAMAGED (see the module's docstring)."""
    return _load(store_root, sample)[0]


def read_transcript(store_root: Path, sample: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The sample's transcript as a list of dicts, header first; None when it has none, when its file
    was pruned, or when the file does not match its reference (see transcript_status for which)."""
    return _load(store_root, sample)[1]


def _load(store_root: Path, sample: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]] | None]:
    path = transcript_path(store_root, sample)
    if path is None:
        return NONE, None
    try:
        payload = path.read_bytes()
    except FileNotFoundError:
        return PRUNED, None
    except OSError:
        return DAMAGED, None
    expected = (reference(sample) or {}).get("sha256")
    if expected and hashlib.sha256(payload).hexdigest() != expected:
        return DAMAGED, None
    lines = _decode(payload)
    return (KEPT, lines) if lines is not None else (DAMAGED, None)


def _decode(payload: bytes) -> list[dict[str, Any]] | None:
    try:
        text = gzip.decompress(payload).decode("utf-8")
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError):
        return None
    if not lines or not all(isinstance(line, dict) for line in lines) or lines[0].get("kind") != "header":
        return None
    return lines


def events_of(lines: list[dict[str, Any]] | None, *kinds: str) -> Iterator[dict[str, Any]]:
    """The events of the given kinds (all events without kinds), header left out."""
    for line in (lines or [])[1:]:
        if not kinds or line.get("kind") in kinds:
            yield line


def copy_transcript(sample: Mapping[str, Any], source_root: Path, dest_root: Path) -> str:
    """Copy a merged sample's transcript from its source store to the same path in DEST (samples
    keep their id, arm and task in a merge, so the reference stays true). Returns what happened:
    NONE (no transcript), KEPT (copied, or DEST had it), PRUNED or DAMAGED (not copied: DEST's
    sample then reads as pruned)."""
    source = transcript_path(source_root, sample)
    target = transcript_path(dest_root, sample)
    if source is None or target is None:
        return NONE
    status = transcript_status(source_root, sample)
    if status != KEPT:
        return status
    if not target.exists():
        _write_whole(target, source.read_bytes())
    return KEPT


def payload_of(store_root: Path, sample: Mapping[str, Any]) -> bytes | None:
    """The sample's transcript file as it is on disk (compressed), when it is kept whole: what an xdist
    worker sends to its controller beside the sample."""
    path = transcript_path(store_root, sample)
    if path is None or transcript_status(store_root, sample) != KEPT:
        return None
    return path.read_bytes()


def receive(sample: Mapping[str, Any], payload: bytes | None, dest_root: Path) -> str:
    """Write a transcript that travelled with its sample to the sample's path in DEST, before the sample
    is appended. Only bytes that match the sample's reference are written (a path outside the transcripts
    folder or other bytes never are). Returns NONE, KEPT (written, or DEST had it), or PRUNED (nothing
    came, or what came does not match: DEST's sample then reads as pruned, and the worker's spool keeps
    the file)."""
    target = transcript_path(dest_root, sample)
    if target is None:
        return NONE
    if target.exists():
        return KEPT
    expected = (reference(sample) or {}).get("sha256")
    if payload is None or (expected and hashlib.sha256(payload).hexdigest() != expected) or _decode(payload) is None:
        return PRUNED
    _write_whole(target, payload)
    return KEPT


@dataclass
class Pruning:
    """What `prune` removed (or, dry, would remove)."""

    removed: int = 0
    bytes: int = 0
    kept: int = 0  # transcripts left in place
    already_gone: int = 0  # selected, but pruned before


def prune(
    store_root: Path,
    samples: Iterable[Mapping[str, Any]],
    *,
    before: _dt.datetime | None = None,
    older_definitions: bool = False,
    dry_run: bool = False,
) -> Pruning:
    """Delete the transcripts of the samples selected: those started before `before` (a UTC time)
    and/or, with `older_definitions`, those whose conditions are not those of their cell's newest
    sample (what a report without the bench treats as current). Given both, a transcript must meet
    both. Samples are never touched: a sample whose file is gone reads as PRUNED. Folders left empty
    are removed."""
    if before is None and not older_definitions:
        raise ValueError("say which transcripts to prune: before a date, of older definitions, or both")
    trials = [sample for sample in samples if sample.get("status") != STATUS_RESCORE]
    newest: dict[tuple[str, str, str], tuple[str, str]] = {}
    for sample in trials:
        cell = (str(sample.get("model_kind")), str(sample.get("arm")), str(sample.get("task")))
        started = str(sample.get("started_at") or "")
        if cell not in newest or started >= newest[cell][0]:
            newest[cell] = (started, conditions_of(sample))
    pruning = Pruning()
    emptied: set[Path] = set()
    for sample in trials:
        path = transcript_path(store_root, sample)
        if path is None:
            continue
        cell = (str(sample.get("model_kind")), str(sample.get("arm")), str(sample.get("task")))
        started_at = _utc(sample.get("started_at"))
        selected = (before is None or (started_at is not None and started_at < before)) and (
            not older_definitions or conditions_of(sample) != newest[cell][1]
        )
        if not selected:
            pruning.kept += path.exists()
            continue
        try:
            size = path.stat().st_size
            if not dry_run:
                path.unlink()
        except FileNotFoundError:
            pruning.already_gone += 1
            continue
        pruning.removed += 1
        pruning.bytes += size
        emptied.add(path.parent)
    root = store_root / FOLDER
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        while not dry_run and folder != root and root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (or not ours to remove): what is left stays
            folder = folder.parent
    return pruning


def parse_utc(text: str) -> _dt.datetime:
    """A date (2026-12-01) or time (2026-12-01T08:00, 2026-12-01T08:00:00Z) as UTC; raises ValueError."""
    parsed = _utc(text)
    if parsed is None:
        raise ValueError(f"{text!r} is not a date; allowed: YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM] (UTC unless given)")
    return parsed


def _utc(text: Any) -> _dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=_dt.UTC) if parsed.tzinfo is None else parsed


def _json_line(value: Mapping[str, Any]) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:  # an unpaired surrogate (a file name that is not UTF-8): kept as a \u escape
        return (json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
