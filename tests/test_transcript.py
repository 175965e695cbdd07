"""The transcript format: writing, reading, references, damage, pruned files, copies (pure, no SDK)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_benchcell import transcript
from pytest_benchcell.transcript import DAMAGED, KEPT, NONE, PRUNED


def a_sample(**overrides: object) -> dict:
    return {"id": "abc123", "arm": "cli", "task": "close-bug", "trial": 3, "model": "m", "model_kind": "scripted", **overrides}


def some_lines(sample: dict) -> list[dict]:
    recorder = transcript.Recorder()
    recorder.start()
    recorder.add("prompt", system_prompt="be brief", prompt="close bug 7")
    recorder.add("model_request", request=1)
    recorder.add("tool_use", message_id="m1", id="t1", name="Bash", input={"command": "tracker close 7"})
    recorder.add("model_response", request=1, message_id="m1", model="m", stop_reason="tool_use",
                 usage={"fresh_input": 10, "cache_write": 20, "cache_read": 0, "output": 5}, complete=True)  # fmt: skip
    recorder.add("tool_result", tool_use_id="t1", is_error=False, content="closed 7\n" * 1000)
    return [transcript.header(sample, "2026-12-03T06:00:00.000Z"), *recorder.events]


def test_a_written_transcript_reads_back_whole_with_its_reference(tmp_path: Path) -> None:
    sample = a_sample()
    lines = some_lines(sample)
    ref = transcript.write_transcript(tmp_path, sample, lines)
    assert ref["path"] == "transcripts/scripted/cli/close-bug/abc123.jsonl.gz"
    file = tmp_path / ref["path"]
    assert ref["bytes"] == file.stat().st_size < ref["raw_bytes"]  # compressed
    assert ref["events"] == 5
    sample["transcript"] = ref
    read = transcript.read_transcript(tmp_path, sample)
    assert read == json.loads(json.dumps(lines))
    assert read[0]["kind"] == "header" and read[0]["format"] == transcript.FORMAT and read[0]["sample"] == "abc123"
    assert [e["kind"] for e in transcript.events_of(read, "tool_use", "tool_result")] == ["tool_use", "tool_result"]
    assert read[-1]["content"] == "closed 7\n" * 1000  # the full result, not clipped
    assert all(event["t_ms"] >= 0 for event in read[1:])
    assert transcript.transcript_status(tmp_path, sample) == KEPT
    assert not [p for p in file.parent.iterdir() if p != file]  # no temporary file left


def test_the_same_events_give_the_same_bytes(tmp_path: Path) -> None:
    lines = some_lines(a_sample())
    assert transcript.encode(lines) == transcript.encode(lines)


def test_a_sample_without_transcript_reads_as_none(tmp_path: Path) -> None:
    for value in (None, {"error": "could not write: disk full"}):
        sample = a_sample(transcript=value)
        assert transcript.read_transcript(tmp_path, sample) is None
        assert transcript.transcript_status(tmp_path, sample) == NONE
    assert transcript.read_transcript(tmp_path, a_sample()) is None  # an older sample: no field at all


def test_a_removed_file_is_pruned_and_a_changed_one_damaged(tmp_path: Path) -> None:
    sample = a_sample()
    sample["transcript"] = transcript.write_transcript(tmp_path, sample, some_lines(sample))
    file = tmp_path / sample["transcript"]["path"]
    file.write_bytes(gzip.compress(b'{"kind":"header"}\n'))
    assert transcript.transcript_status(tmp_path, sample) == DAMAGED
    assert transcript.read_transcript(tmp_path, sample) is None
    file.write_bytes(b"not gzip")
    assert transcript.transcript_status(tmp_path, {**sample, "transcript": {"path": sample["transcript"]["path"]}}) == DAMAGED
    file.unlink()
    assert transcript.transcript_status(tmp_path, sample) == PRUNED
    assert transcript.read_transcript(tmp_path, sample) is None


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "transcripts/../../etc/passwd", "../transcripts/x.jsonl.gz", "real/cli/t.jsonl", "transcripts", "transcripts//x"]
)
def test_a_reference_outside_the_transcripts_folder_is_never_followed(tmp_path: Path, path: str) -> None:
    sample = a_sample(transcript={"path": path})
    assert transcript.transcript_path(tmp_path, sample) is None
    assert transcript.transcript_status(tmp_path, sample) == NONE


def test_a_vanished_store_is_not_recreated_for_a_transcript(tmp_path: Path) -> None:
    from pytest_benchcell.store import Store

    store = Store(tmp_path / "store")
    assert not store.vanished()  # never seen: a first trial may create it
    store.root.mkdir()
    store.expect_root()
    store.root.rmdir()
    assert store.vanished()
    sample = a_sample()
    with pytest.raises(FileNotFoundError, match="gone"):
        transcript.write_transcript(store.root, sample, some_lines(sample), store_vanished=store.vanished())
    assert not store.root.exists()


def test_copy_carries_a_kept_transcript_and_reports_a_pruned_one(tmp_path: Path) -> None:
    source, dest = tmp_path / "a", tmp_path / "b"
    source.mkdir()
    dest.mkdir()
    sample = a_sample()
    sample["transcript"] = transcript.write_transcript(source, sample, some_lines(sample))
    assert transcript.copy_transcript(sample, source, dest) == KEPT
    assert transcript.read_transcript(dest, sample) == transcript.read_transcript(source, sample)
    assert transcript.copy_transcript(a_sample(), source, dest) == NONE
    (source / sample["transcript"]["path"]).unlink()
    other = {**sample, "id": "def456", "transcript": {**sample["transcript"], "path": sample["transcript"]["path"].replace("abc123", "def456")}}
    assert transcript.copy_transcript(other, source, dest) == PRUNED
    assert transcript.transcript_status(dest, other) == PRUNED


def stored_with_transcripts(root: Path) -> list[dict]:
    """Three samples of one cell (two older conditions, one newest) and one of another cell."""
    samples = [
        a_sample(id="old1", started_at="2026-11-01T10:00:00.000Z", provenance={"conditions": "c-old"}),
        a_sample(id="old2", started_at="2026-11-20T10:00:00.000Z", provenance={"conditions": "c-old"}),
        a_sample(id="new1", started_at="2026-11-25T10:00:00.000Z", provenance={"conditions": "c-new"}),
        a_sample(id="other", task="other-task", started_at="2026-11-02T10:00:00.000Z", provenance={"conditions": "c-old"}),
    ]
    for sample in samples:
        sample["transcript"] = transcript.write_transcript(root, sample, some_lines(sample))
    # a rescore record has no transcript of its own and never selects one
    return samples + [{"id": "r1", "status": "rescore", "rescore_of": "new1", "started_at": "2026-12-01T00:00:00Z"}]


def kept_ids(root: Path, samples: list[dict]) -> set[str]:
    return {s["id"] for s in samples if transcript.transcript_status(root, s) == KEPT}


def test_prune_before_a_date_removes_only_older_trials_transcripts(tmp_path: Path) -> None:
    samples = stored_with_transcripts(tmp_path)
    dry = transcript.prune(tmp_path, samples, before=transcript.parse_utc("2026-11-10"), dry_run=True)
    assert (dry.removed, dry.kept) == (2, 2) and dry.bytes > 0
    assert kept_ids(tmp_path, samples) == {"old1", "old2", "new1", "other"}  # a dry run removes nothing
    pruning = transcript.prune(tmp_path, samples, before=transcript.parse_utc("2026-11-10"))
    assert (pruning.removed, pruning.kept, pruning.bytes) == (2, 2, dry.bytes)
    assert kept_ids(tmp_path, samples) == {"old2", "new1"}
    assert not (tmp_path / "transcripts" / "scripted" / "cli" / "other-task").exists()  # emptied folder removed
    again = transcript.prune(tmp_path, samples, before=transcript.parse_utc("2026-11-10"))
    assert (again.removed, again.already_gone) == (0, 2)


def test_prune_older_definitions_keeps_each_cells_newest_conditions(tmp_path: Path) -> None:
    samples = stored_with_transcripts(tmp_path)
    pruning = transcript.prune(tmp_path, samples, older_definitions=True)
    assert pruning.removed == 2
    assert kept_ids(tmp_path, samples) == {"new1", "other"}  # "other" is its cell's newest


def test_prune_with_both_needs_both(tmp_path: Path) -> None:
    samples = stored_with_transcripts(tmp_path)
    transcript.prune(tmp_path, samples, older_definitions=True, before=transcript.parse_utc("2026-11-10T00:00Z"))
    assert kept_ids(tmp_path, samples) == {"old2", "new1", "other"}
    with pytest.raises(ValueError, match="say which"):
        transcript.prune(tmp_path, samples)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "", "01/12/2026"])
def test_a_bad_date_says_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match="is not a date; allowed: YYYY-MM-DD"):
        transcript.parse_utc(text)


def test_dates_are_utc_unless_given() -> None:
    assert transcript.parse_utc("2026-12-01").isoformat() == "2026-12-01T00:00:00+00:00"
    assert transcript.parse_utc("2026-12-01T08:00:00Z") == transcript.parse_utc("2026-12-01T09:00:00+01:00")


def test_the_prune_command_refuses_bad_input_with_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_benchcell.cli import main

    store = tmp_path / "store"
    (store / "scripted").mkdir(parents=True)
    assert main(["transcripts", "prune", "--store", str(store)]) == 2
    assert "say which transcripts to remove: --before DATE, --older-definitions, or both" in capsys.readouterr().err
    assert main(["transcripts", "prune", "--store", str(store), "--before", "last week"]) == 2
    assert "--before: 'last week' is not a date; allowed: YYYY-MM-DD" in capsys.readouterr().err
    assert main(["transcripts", "prune", "--store", str(tmp_path / "nowhere"), "--older-definitions"]) == 2
    assert "is not a sample store" in capsys.readouterr().err
    assert main(["transcripts", "prune", "--store", str(store), "--older-definitions", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("0 transcripts would be removed (0 bytes)")


def test_the_stores_readers_never_look_into_the_transcripts_folder(tmp_path: Path) -> None:
    from sample_factory import cell_samples, write_samples

    from pytest_benchcell.report import ReportSettings, build_report, render_json
    from pytest_benchcell.store import looks_like_store

    store = write_samples(tmp_path / "store", cell_samples("cli", "close-bug", 3) + cell_samples("mcp", "close-bug", 3))
    before = (store.cells(), render_json(build_report(store, ReportSettings())))
    # transcripts shaped like cells (a kind, an arm, .jsonl files) and a damaged one
    for name in ("real/cli/close-bug.jsonl", "real/cli/close-bug/x.jsonl.gz", "scripted/ghost/task.jsonl"):
        (store.root / "transcripts" / name).parent.mkdir(parents=True, exist_ok=True)
        (store.root / "transcripts" / name).write_text('{"schema": 2, "id": "ghost", "arm": "ghost"}\n')
    assert (store.cells(), render_json(build_report(store, ReportSettings()))) == before
    assert looks_like_store(store.root)
    only_transcripts = tmp_path / "elsewhere"
    (only_transcripts / "transcripts").mkdir(parents=True)
    assert not looks_like_store(only_transcripts)  # a folder of transcripts alone is no store
