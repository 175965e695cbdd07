"""The append-only store: locking, numbering, torn lines, definitions."""

from __future__ import annotations

import json
import multiprocessing
import tomllib
from pathlib import Path

import pytest

from pytest_benchcell.sample import Definition
from pytest_benchcell.store import Cell, Store, StoreError

CELL = Cell("scripted", "cli", "count-open")


def make_sample(trial: int, *, arm: str = "cli", task: str = "count-open", status: str = "scored") -> dict:
    return {
        "schema": 1,
        "id": f"id-{arm}-{task}-{trial}",
        "arm": arm,
        "task": task,
        "trial": trial,
        "status": status,
        "outcome": "pass" if status == "scored" else None,
        "model_kind": "scripted",
    }


def test_append_then_read_round_trips(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(make_sample(1))
    store.append(make_sample(2))
    contents = store.read_cell(CELL)
    assert [s["trial"] for s in contents.samples] == [1, 2]
    assert contents.problems == []
    assert store.samples_path(CELL) == tmp_path / "scripted" / "cli" / "count-open.jsonl"


def test_append_never_rewrites_earlier_bytes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(make_sample(1))
    before = store.samples_path(CELL).read_bytes()
    store.append(make_sample(2))
    assert store.samples_path(CELL).read_bytes().startswith(before)


def test_rejects_incomplete_sample(tmp_path: Path) -> None:
    sample = make_sample(1)
    del sample["trial"]
    with pytest.raises(StoreError, match="trial"):
        Store(tmp_path).append(sample)
    with pytest.raises(StoreError, match="status"):
        Store(tmp_path).append({**make_sample(1), "status": "done"})


def test_reservations_continue_past_highest_and_keep_gaps(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.reserve_trials(CELL, 3, sitting="s1") == [1, 2, 3]
    store.append(make_sample(1))
    store.append(make_sample(3))  # trial 2 was deselected: a gap
    assert store.reserve_trials(CELL, 2, sitting="s2") == [4, 5]
    assert store.highest_trial(CELL) == 5


def test_preview_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    assert store.preview_trials(CELL, 2) == [1, 2]
    assert not (tmp_path / "store").exists()


def test_previewed_numbers_are_reserved_as_they_were_unless_another_sitting_took_them(tmp_path: Path) -> None:
    store = Store(tmp_path)
    previewed = store.preview_trials(CELL, 3)
    assert store.reserve_previewed(CELL, [previewed[1]], sitting="s1") == [2]  # t1 and t3 deselected
    late = store.preview_trials(CELL, 2)
    assert store.reserve_trials(CELL, 1, sitting="other") == [3]  # another sitting, in between
    assert store.reserve_previewed(CELL, late, sitting="s2") == [4, 5]  # moved past it, never shared
    assert store.reserve_previewed(CELL, [], sitting="s3") == [] and store.highest_trial(CELL) == 5


def test_numbering_falls_back_to_samples_when_reservations_are_missing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(make_sample(7))
    assert store.reserve_trials(CELL, 1, sitting="s") == [8]


def test_torn_last_line_is_reported_and_the_next_append_starts_a_new_line(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(make_sample(1))
    path = store.samples_path(CELL)
    with path.open("ab") as handle:
        handle.write(b'{"schema": 1, "id": "torn", "tri')  # a crash mid-write
    contents = store.read_cell(CELL)
    assert [s["trial"] for s in contents.samples] == [1]
    assert len(contents.problems) == 1
    assert "torn last line" in str(contents.problems[0])
    assert ":2:" in str(contents.problems[0])

    store.append(make_sample(2))
    contents = store.read_cell(CELL)
    assert [s["trial"] for s in contents.samples] == [1, 2]
    assert len(contents.problems) == 1  # the fragment is kept and still reported, never hidden
    assert b'"tri\n' in path.read_bytes()


def test_iter_samples_streams_every_cell_and_collects_problems(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(make_sample(1))
    store.append(make_sample(1, arm="mcp"))
    store.samples_path(Cell("scripted", "mcp", "count-open")).open("ab").write(b"not json\n")
    problems: list = []
    samples = list(store.iter_samples(problems))
    assert sorted(s["arm"] for s in samples) == ["cli", "mcp"]
    assert len(problems) == 1 and "unreadable line" in problems[0].message
    assert store.cells() == [Cell("scripted", "cli", "count-open"), Cell("scripted", "mcp", "count-open")]


def test_definitions_are_written_once(tmp_path: Path) -> None:
    store = Store(tmp_path)
    first = store.write_definitions("abc", {"arm": {"name": "cli", "tools": ["Bash"]}})
    store.write_definitions("abc", {"arm": {"name": "changed"}})
    assert tomllib.loads(first.read_text())["arm"]["name"] == "cli"


def test_lock_timeout_is_a_clear_error(tmp_path: Path) -> None:
    import filelock

    holder = filelock.FileLock(str(tmp_path / ".lock"))
    with holder:
        with pytest.raises(StoreError, match="could not lock the store"):
            Store(tmp_path, lock_timeout=0.1).append(make_sample(1))


def _sitting_worker(root: str, rounds: int, worker: int) -> None:
    store = Store(root)
    for _ in range(rounds):
        (trial,) = store.reserve_trials(CELL, 1, sitting=f"w{worker}")
        sample = make_sample(trial)
        sample["id"] = f"w{worker}-{trial}"
        sample["padding"] = "x" * 3000  # long lines make torn or interleaved writes visible
        store.append(sample)


def test_concurrent_processes_never_share_a_trial_number_or_lose_a_line(tmp_path: Path) -> None:
    workers, rounds = 6, 40
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_sitting_worker, args=(str(tmp_path), rounds, w)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    contents = Store(tmp_path).read_cell(CELL)
    assert contents.problems == []
    trials = [s["trial"] for s in contents.samples]
    assert len(trials) == workers * rounds
    assert sorted(trials) == list(range(1, workers * rounds + 1))
    lines = Store(tmp_path).samples_path(CELL).read_bytes().split(b"\n")
    assert all(json.loads(line)["padding"] == "x" * 3000 for line in lines if line)


def test_count_current_follows_conditions_and_scoring(tmp_path: Path) -> None:
    store = Store(tmp_path)
    rows = [("scored", "pass", "C", "S"), ("scored", "pass", "C-old", "S"), ("invalid", None, "C", "S"),
            ("scored", "incorrect", "C", "S-old"), ("scored", "confused", "C", "S-old"), ("scored", "pass", "L", "L")]
    for trial, (status, outcome, conditions, scoring) in enumerate(rows, start=1):
        store.append({**make_sample(trial, status=status), "outcome": outcome,
                      "provenance": {"conditions": conditions, "scoring": scoring}})  # fmt: skip
    count = store.count_current(CELL, Definition("C", "S", legacy="L"))
    # pass (C,S); confused is a bound, not a verdict of the old scoring; the schema-1 "L" sample
    assert (count.current, count.stale_scoring, count.other_conditions) == (3, 1, 1)
    assert store.count_current(CELL).current == 5  # no definition: every scored sample


def test_count_current_uses_the_index_and_the_samples_written_after_it(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append({**make_sample(1), "provenance": {"fingerprint": "fp"}})
    store.append({**make_sample(2, status="invalid"), "provenance": {"fingerprint": "fp"}})
    assert store.index_path(CELL).read_text().splitlines()[0].startswith("b7\tid-cli-count-open-1\t0\t")
    # a sample that reached the samples file but not the index (a crash between the two writes)
    with store.samples_path(CELL).open("ab") as handle:
        handle.write((json.dumps({**make_sample(3), "provenance": {"fingerprint": "fp"}}) + "\n").encode())
    assert store.count_scored(CELL, Definition("fp", "fp")) == 2


def test_count_current_ignores_an_index_that_does_not_match_the_samples(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append({**make_sample(1), "provenance": {"fingerprint": "fp"}})
    store.index_path(CELL).write_text("scored\tfp\t999999\nscored\tfp\t999999\n")  # describes another file
    assert store.count_scored(CELL, Definition("fp", "fp")) == 1
    store.index_path(CELL).write_text("garbage")
    assert store.count_scored(CELL, Definition("fp", "fp")) == 1
    store.index_path(CELL).unlink()
    assert store.count_scored(CELL, Definition("fp", "fp")) == 1


REPORT_FIELDS = ("id", "status", "outcome", "turns", "duration_ms", "cost_usd", "model", "tier", "bonus", "started_at")


def _rich(trial: int, **extra) -> dict:
    return {**make_sample(trial), "usage": {"total": {"fresh_input": 10 * trial, "cache_write": 2, "cache_read": 30,
            "output": 4}}, "turns": trial, "duration_ms": 1000 + trial, "cost_usd": 0.5, "model": "m\tx",
            "tier": "read", "bonus": trial % 2 == 0, "started_at": "2026-12-02T12:00:00.000Z",
            "provenance": {"fingerprint": "fp"}, "tool_calls": [{"output": "x" * 500}], **extra}  # fmt: skip


def test_summaries_from_the_index_match_the_samples(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for trial in range(1, 5):
        store.append(_rich(trial))
    full = list(store.iter_samples([]))
    summaries = list(store.iter_summaries([]))
    assert len(summaries) == len(full) == 4
    for sample, summary in zip(full, summaries):
        expected = {k: sample[k] for k in REPORT_FIELDS}
        expected["model"] = "m x"  # tabs cannot live in the index
        assert {k: summary[k] for k in REPORT_FIELDS} == expected
        assert summary["usage"]["total"] == sample["usage"]["total"]
        assert summary["provenance"]["fingerprint"] == "fp"


def test_summaries_report_a_torn_fragment_the_index_skips_and_read_unindexed_tails(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append(_rich(1))
    with store.samples_path(CELL).open("ab") as handle:
        handle.write(b'{"schema":1,"id":"torn')  # a crash mid-write: never indexed
    store.append(_rich(2))
    with store.samples_path(CELL).open("ab") as handle:  # written, but the index line was lost
        handle.write((json.dumps(_rich(3)) + "\n").encode())
    problems: list = []
    summaries = list(store.iter_summaries(problems))
    assert [s["id"] for s in summaries] == ["id-cli-count-open-1", "id-cli-count-open-2", "id-cli-count-open-3"]
    assert len(problems) == 1 and problems[0].line == 2 and "unreadable line" in problems[0].message


def _where_ran(store: Store) -> list[tuple[str | None, str | None]]:
    return [(s["provenance"]["host"], s["provenance"]["gateway"]) for s in store.iter_summaries([], cells=[CELL])]


def test_summaries_say_where_each_sample_ran_and_none_for_older_samples(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.append({**make_sample(1), "provenance": {"fingerprint": "fp", "host": "box-a", "gateway": "gw1"}})
    store.append({**make_sample(2), "provenance": {"fingerprint": "fp", "host": "box-b", "gateway": None}})
    store.append({**make_sample(3), "provenance": {"fingerprint": "fp"}})  # stored before hosts were recorded
    assert _where_ran(store) == [("box-a", "gw1"), ("box-b", None), (None, None)]


def test_an_index_of_an_older_row_format_is_parsed_around_then_rebuilt_at_the_next_append(tmp_path: Path) -> None:
    from pytest_benchcell.store.index import IndexReader

    store = Store(tmp_path)
    for trial in (1, 2):
        store.append({**make_sample(trial), "provenance": {"fingerprint": "fp", "host": "box-a", "gateway": "gw0"}})
    index = store.index_path(CELL)
    # The rows an earlier plugin wrote: tag b3, without host and gateway (the samples do record them).
    older = ["\t".join(["b3", *row.split("\t")[1:20], *row.split("\t")[22:]]) for row in index.read_text().splitlines()]
    index.write_text("\n".join(older) + "\n")
    reader = IndexReader(store.samples_path(CELL), index, [], {})
    assert len(reader.rows()) == 2 and reader.parsed == 2  # no row of another format is used
    assert _where_ran(store) == [("box-a", "gw0")] * 2

    store.append({**make_sample(3), "provenance": {"fingerprint": "fp", "host": "box-b", "gateway": None}})
    assert [row.split("\t")[0] for row in index.read_text().splitlines()] == ["b7"] * 3
    reader = IndexReader(store.samples_path(CELL), index, [], {})
    assert len(reader.rows()) == 3 and reader.parsed == 0 and reader.trusted
    assert _where_ran(store) == [("box-a", "gw0"), ("box-a", "gw0"), ("box-b", None)]
    assert not list(index.parent.glob("*.tmp-*"))
