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
    sample = a_sample()
    with pytest.raises(FileNotFoundError, match="gone"):
        transcript.write_transcript(tmp_path / "gone", sample, some_lines(sample))
    assert not (tmp_path / "gone").exists()


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
