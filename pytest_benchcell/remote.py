"""Trials on xdist gateways (local processes, `popen//chdir=` checkouts, `ssh=` machines): the pure part.

The controller plans and reserves the trial numbers and holds the only store. It hands each worker
a plan (`worker_plan`): the sitting, the numbers, where the bench is relative to the rootdir, and
every selected cell's definitions with their fingerprints. A worker finds the bench in its own
checkout, refuses to run anything if a definition differs (`definition_mismatch`, before any
provisioning or model request), and records each finished sample into a spool of its own (a
store-format folder beside its bench, `spool_root`) instead of a store. The sample then travels back
as its store line on the trial's call report (`SAMPLE_ATTRIBUTE`; pytest-xdist serializes a report's
attributes), its transcript file beside it (`TRANSCRIPT_ATTRIBUTE`), and the controller writes the
transcript and appends the sample under its store lock (`Receiver`). If the controller
dies, `benchcell merge SPOOL --into STORE` takes in what it missed, by sample id.

Knows nothing of pytest; plugin.py calls in.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import transcript
from .config import Bench
from .store import Store, StoreError, StoreLine, sample_line

# The trial's call report carries its stored sample under this attribute, as its store line (bytes),
# and the sample's transcript file (compressed bytes, or None) under the next.
SAMPLE_ATTRIBUTE = "benchcell_sample"
TRANSCRIPT_ATTRIBUTE = "benchcell_transcript"
# A worker's output at its end: samples whose report never went out (an interrupted trial makes
# none), each as [store line, transcript bytes or None], and where its spool is.
UNSENT_OUTPUT = "benchcell_unsent"
SPOOL_OUTPUT = "benchcell_spool"
# A worker's configuration error starts with this, so the controller can tell it from a crash.
REFUSAL_PREFIX = "benchcell worker refused: "
SPOOL_FOLDER = ".benchcell-spool"


def bench_reference(bench_path: Path, rootdir: Path) -> str:
    """Where a worker finds the bench: relative to its rootdir when the controller's bench is under
    the controller's rootdir (a checkout has the same layout everywhere), else the absolute path."""
    try:
        return bench_path.resolve().relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        return str(bench_path.resolve())


def worker_bench_path(rootdir: Path, reference: str) -> Path:
    return rootdir / reference  # an absolute reference stays as it is


def cell_definitions(bench: Bench, cells: Iterable[tuple[str, str]], *, turn_cap: int, wall_clock_ms: int) -> list[list[Any]]:
    """[arm, task, conditions, scoring, definitions] per cell, what a worker checks its bench against."""
    bounds = {"turn_cap": turn_cap, "wall_clock_ms": wall_clock_ms}
    listed = []
    for arm, task in cells:
        definition = bench.definition(arm, task, **bounds)
        listed.append([arm, task, definition.conditions, definition.scoring, bench.definitions(arm, task, **bounds)])
    return listed


def definition_mismatch(bench: Bench, expected: Sequence[Sequence[Any]], *, turn_cap: int, wall_clock_ms: int) -> str | None:
    """Why this checkout's bench would not produce the controller's samples, or None: the first cell
    whose conditions or scoring fingerprint differs, with the first definition entry that differs."""
    for arm, task, conditions, scoring, definitions in expected:
        if arm not in bench.arms or task not in bench.tasks:
            missing = f"arm {arm}" if arm not in bench.arms else f"task {task}"
            return f"{bench.path} has no {missing}, which the controller's bench has"
        here = bench.definition(arm, task, turn_cap=turn_cap, wall_clock_ms=wall_clock_ms)
        for part, mine, theirs in (("conditions", here.conditions, conditions), ("scoring", here.scoring, scoring)):
            if mine != theirs:
                mine_defs = bench.definitions(arm, task, turn_cap=turn_cap, wall_clock_ms=wall_clock_ms)
                where = first_difference(mine_defs.get(part), definitions.get(part), part)
                return (
                    f"{bench.path} differs from the controller's bench for {arm} x {task}: {part} fingerprint "
                    f"{mine} here, {theirs} on the controller ({where})"
                )
    return None


def first_difference(mine: Any, theirs: Any, path: str) -> str:
    """The first entry where two definitions differ, with both values (shortened)."""
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        for key in sorted(set(mine) | set(theirs), key=str):
            if key not in mine or key not in theirs:
                side = "here" if key in mine else "on the controller"
                return f"{path}.{key} is only {side}"
            if mine[key] != theirs[key]:
                return first_difference(mine[key], theirs[key], f"{path}.{key}")
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for index, (left, right) in enumerate(zip(mine, theirs)):
            if left != right:
                return first_difference(left, right, f"{path}[{index}]")
    return f"{path} is {_short(mine)} here, {_short(theirs)} on the controller"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def spool_root(bench_root: Path, sitting: str, worker_id: str) -> Path:
    """The worker's spool: a store-format folder of its own finished samples, beside its bench."""
    return bench_root / SPOOL_FOLDER / f"{sitting}-{worker_id}"


def stop_file(bench_root: Path, sitting: str) -> Path:
    """Where the controller says that the sitting stops (sitting.SittingStop), for its workers on this
    machine to read before each trial: beside the spools, gone when the sitting ends."""
    return bench_root / SPOOL_FOLDER / f"{sitting}.stop"


def arm_stop_file(bench_root: Path, sitting: str) -> Path:
    """Where the controller says which arms run no more trials (arm_stops.py), for its workers on this
    machine to read before each trial: beside the spools, gone when the sitting ends."""
    return bench_root / SPOOL_FOLDER / f"{sitting}.arms.stop"


def gateway_label(gateway_id: str, spec: str) -> str:
    """'gw0 (popen//chdir=/far)': the gateway as the user wrote it (xdist adds its execmodel)."""
    words = [word for word in spec.split("//") if not word.startswith("execmodel=")]
    return f"{gateway_id} ({'//'.join(words)})"


class Spool(Store):
    """A worker's spool: a store of its own finished samples that remembers the line each was written
    as, so what travels to the controller is those very bytes, encoded once."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.lines: dict[str, bytes] = {}  # sample id -> its line, until it is sent

    def append(self, sample: Mapping[str, Any]) -> Path:
        stored = StoreLine.of(sample)
        path = self.append_store_line(stored)
        self.lines[str(sample.get("id"))] = stored.line
        return path

    def line_of(self, sample: Mapping[str, Any]) -> bytes:
        return self.lines.pop(str(sample.get("id")), None) or sample_line(sample)

    def transcript_of(self, sample: Mapping[str, Any]) -> bytes | None:
        """The sample's transcript as the spool keeps it (written before the sample), to travel with it."""
        return transcript.payload_of(self.root, sample)


def encode_sample(sample: Mapping[str, Any]) -> bytes:
    """What travels: the sample's store line, the very bytes its spool holds (bytes, so no character of
    a sample, not even a lone surrogate, can trip the channel's serializer)."""
    return sample_line(sample)


def refusal_cause(error: str) -> str:
    """The worker's own message in a remote traceback (its refusal, with the lines that follow it:
    a refusal may take several; else the last line said)."""
    lines = [line.rstrip() for line in str(error).splitlines() if line.strip()]
    for at, line in enumerate(lines):
        start = line.find(REFUSAL_PREFIX)
        if start >= 0:
            return "\n".join([line[start + len(REFUSAL_PREFIX):].strip(), *lines[at + 1 :]])
    return lines[-1].strip() if lines else "no reason given"


@dataclass
class Receiver:
    """The controller's end of the channel: each sample a worker sends is appended to the one store,
    once, if it belongs to a trial this sitting reserved."""

    store: Store
    bench: Bench
    sitting: str
    model_kind: str
    turn_cap: int
    wall_clock_ms: int
    expected: set[tuple[str, str, int]]
    received: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # sample id -> trial
    kept: set[str] = field(default_factory=set)  # ids of received samples whose transcript the store keeps

    def take(self, line: bytes, transcript_payload: bytes | None = None) -> dict[str, Any]:
        """Append one sample a worker sent (its store line, byte for byte as in the worker's spool),
        after writing the transcript that came with it beside the store (as a trial run here does);
        raises StoreError when it cannot be stored (the spool still holds it) or does not belong to
        this sitting."""
        try:
            stored = StoreLine.parse(line)  # the one parse on its way into the store
        except StoreError as exc:
            raise StoreError(f"a worker sent a sample the store cannot take: {exc}") from None
        sample = dict(stored.sample)
        trial = (sample.get("arm"), sample.get("task"), sample.get("trial"))
        if sample.get("sitting") != self.sitting or sample.get("model_kind") != self.model_kind or trial not in self.expected:
            raise StoreError(
                f"a worker sent a sample of {trial[0]} x {trial[1]} trial {trial[2]} (sitting {sample.get('sitting')}), "
                f"which this sitting did not reserve"
            )
        sample_id = str(sample.get("id") or "")
        if sample_id in self.received:
            return sample  # the same sample twice: stored once
        provenance = sample.get("provenance") or {}
        bounds = {"turn_cap": self.turn_cap, "wall_clock_ms": self.wall_clock_ms}
        try:
            self.store.write_definitions(
                f"{provenance.get('conditions')}-{provenance.get('scoring')}",
                self.bench.definitions(str(trial[0]), str(trial[1]), **bounds),
            )
        except StoreError:
            pass  # a missing definitions file loses no measurement (as for a trial run here)
        try:
            transcript.receive(sample, transcript_payload, self.store.root)
        except OSError:
            pass  # the sample still counts; its transcript stays in the worker's spool (merge carries it)
        self.store.append_store_line(stored)
        self.received[sample_id] = trial
        if transcript.transcript_status(self.store.root, sample) == transcript.KEPT:
            self.kept.add(sample_id)
        return sample

    def spool_settled(self, spool: Path) -> bool:
        """Whether every sample in a spool on this machine, and every transcript it keeps, is in the
        store now (then it can go)."""
        def keeps(sample: Mapping[str, Any]) -> bool:
            return transcript.transcript_status(self.store.root, sample) == transcript.KEPT

        return not unstored(spool, self.model_kind, set(self.received), keeps)


def unstored(spool: Path, model_kind: str, stored: set[str], store_keeps: Callable[[Mapping[str, Any]], bool]) -> list[str]:
    """The ids of a spool's samples the controller's store lacks (`stored`: the ids it took this
    sitting), or whose transcript the spool keeps and the store does not (`store_keeps`)."""
    spooled = Store(spool)
    missing = []
    for cell in spooled.cells([model_kind]):
        for sample, _ in spooled.iter_raw(cell, []):
            kept_here = transcript.transcript_status(spool, sample) == transcript.KEPT
            if str(sample.get("id")) not in stored or (kept_here and not store_keeps(sample)):
                missing.append(str(sample.get("id")))
    return missing


# Run by execnet in a worker's own Python at the end of its part of the sitting (the spool may be on
# another machine): removes the spool once the controller has stored all it holds.
SETTLE_SOURCE = """
from pytest_benchcell.remote import settle_spool
spool, model_kind, stored, kept = channel.receive()
channel.send(settle_spool(spool, model_kind, stored, kept))
"""


def settle_spool(spool: str, model_kind: str, stored: Iterable[str], kept: Iterable[str]) -> str | None:
    """Remove a spool whose samples the controller's store holds, all of them; else say what stays."""
    path = Path(spool)
    if not path.is_dir():
        return None
    kept_home = set(kept)
    missing = unstored(path, model_kind, set(stored), lambda sample: str(sample.get("id")) in kept_home)
    if missing:
        return f"{len(missing)} of its samples are not in the controller's store"
    remove_settled_spool(path)
    return None


def remove_settled_spool(spool: Path) -> None:
    """Remove a spool whose samples are all stored, and the spool folder once no spool is left."""
    shutil.rmtree(spool, ignore_errors=True)
    try:
        spool.parent.rmdir()
    except OSError:
        pass  # other spools (other workers, an unmerged sitting) are still there

