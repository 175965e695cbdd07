"""The index only accelerates: under any damage, counting, fill and reports through the index give
what a full parse of the samples files gives (issue 9).

Each damage case is applied to a store; the answers are compared with (a) the same store read with
every index file removed and (b) an independent full parse (Store.read_cell + effective_samples +
Definition.is_current), which shares no code with the index reader."""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_benchcell.report import ReportSettings, build_report, render_json
from pytest_benchcell.sample import Definition, conditions_of, effective_samples, scoring_of
from pytest_benchcell.sitting import fill_counts
from pytest_benchcell.store import INDEX_SUFFIX, Cell, Store, StoreSet, merge_stores

from sample_factory import make_sample

CELL = Cell("real", "cli", "close-bug")
DEFINITION = Definition("C", "S", legacy="L")
SETTINGS = ReportSettings(floor=3, definitions={("cli", "close-bug"): DEFINITION})


def sample(trial: int, *, outcome: str = "pass", status: str = "scored", conditions: str = "C", scoring: str = "S",
           tokens: tuple[int, int, int, int] = (100, 0, 0, 10)) -> dict:  # fmt: skip
    made = make_sample("cli", "close-bug", trial=trial, status=status, outcome=outcome, tokens=tokens, minutes=trial)
    made["provenance"] = {"fingerprint": conditions, "conditions": conditions, "scoring": scoring}
    return made


def rescore_of(original: dict, outcome: str, scoring: str = "S") -> dict:
    return {
        "schema": 2, "id": f"rescore-{original['id']}", "record": "rescore", "rescore_of": original["id"],
        "arm": original["arm"], "task": original["task"], "trial": original["trial"], "model_kind": "real",
        "status": "rescore", "outcome": outcome, "reason": "", "score": {"differences": []},
        "provenance": {"fingerprint": "C", "conditions": "C", "scoring": scoring},
    }  # fmt: skip


def build(root: Path) -> Store:
    """Seven lines: current passes, an old-scoring verdict brought up to date by a rescore, an
    old-scoring verdict not rescored, other conditions, an invalid trial and a schema-1 sample."""
    store = Store(root)
    stale = sample(3, outcome="incorrect", scoring="S-old")
    for record in (
        sample(1), sample(2, outcome="incorrect"), stale, sample(4, scoring="S-old"),
        sample(5, conditions="C-old"), sample(6, status="invalid"),
        {**sample(7), "schema": 1, "provenance": {"fingerprint": "L"}}, rescore_of(stale, "pass"),
    ):  # fmt: skip
        store.append(record)
    return store


def truth(store: Store) -> tuple[int, int]:
    """(current, stale scoring) from a full parse, written independently of the index reader."""
    current = stale = 0
    for one in effective_samples(store.read_cell(CELL).samples):
        conditions, scoring = conditions_of(one), scoring_of(one)
        if DEFINITION.is_current(one["status"], one["outcome"], conditions, scoring):
            current += 1
        elif one["status"] == "scored" and DEFINITION.pools(conditions):
            stale += 1
    return current, stale


def without_index(store: Store, where: Path) -> Store:
    shutil.copytree(store.root, where)
    for index in where.rglob(f"*{INDEX_SUFFIX}"):
        index.unlink()
    return Store(where)


def answers(store: Store) -> dict:
    count = store.count_current(CELL, DEFINITION)
    report = json.loads(render_json(build_report(store, SETTINGS)))
    for cell in report["cells"]:
        for failure in cell["failures"]:
            assert failure.pop("store") == str(store.root.absolute())  # the one answer that names the copy
    return {
        "count": (count.current, count.stale_scoring, count.other_conditions),
        "duplicates": count.duplicates,
        "fill": fill_counts({("cli", "close-bug"): count.current}, 6),
        "report_cells": report["cells"],
        "report_store": report["store"],
    }


# -- damage, each as (store) -> None --------------------------------------------------------------------
def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def index_missing(store: Store) -> None:
    store.index_path(CELL).unlink()


def index_truncated(store: Store) -> None:
    path = store.index_path(CELL)
    path.write_bytes(b"".join(_lines(path)[:3]))


def index_torn_mid_line_then_appended(store: Store) -> None:
    path = store.index_path(CELL)
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    store.append(sample(8))  # its row is glued onto the torn one unless the torn one is terminated


def index_lost_a_line(store: Store) -> None:  # a crash between the sample's fsync and the index write
    path = store.index_path(CELL)
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:2] + lines[3:]))


def stale_after_crash_between_sample_and_index(store: Store) -> None:
    with store.samples_path(CELL).open("ab") as handle:
        handle.write((json.dumps(sample(8)) + "\n").encode())  # sample written, index row never
    store.append(sample(9))


def plausible_wrong_offsets(store: Store) -> None:
    """Rows re-signed with offsets of other real line boundaries: every row checks out as a row
    (its own checksum holds), but none names its own line."""
    path = store.index_path(CELL)
    rows = [line.rstrip(b"\n").decode().rsplit("\t", 1)[0].split("\t") for line in _lines(path)]
    ranges = [(row[2], row[3]) for row in rows]
    shuffled = ranges[1:] + ranges[:1]
    out = []
    for row, (start, end) in zip(rows, shuffled):
        row[2], row[3] = start, end
        text = "\t".join(row)
        out.append(f"{text}\t{zlib.crc32(text.encode()):08x}\n")
    path.write_text("".join(out))


def _shift_end_of_last_row(store: Store) -> None:
    """A hand edit of the last index row: its end offset no longer names a line end."""
    path = store.index_path(CELL)
    lines = _lines(path)
    row = lines[-1].split(b"\t")
    row[3] = str(int(row[3]) + 7).encode()
    path.write_bytes(b"".join(lines[:-1]) + b"\t".join(row))


def index_row_damaged_then_appended(store: Store) -> None:
    """The damaged row ends up in the middle of the index once the next sample is appended."""
    _shift_end_of_last_row(store)
    store.append(sample(8))


def index_row_damaged_then_chained_over(store: Store) -> None:
    """As an earlier plugin left it: the next row's prior checksum covers the damaged row, so the
    chain vouches for a row that names no line of the samples file."""
    index_row_damaged_then_appended(store)
    path = store.index_path(CELL)
    lines = _lines(path)
    body = b"".join(lines[:-1])
    text = lines[-1].rstrip(b"\n").decode().rsplit("\t", 1)[0].split("\t")
    text[-2] = f"{zlib.crc32(body):08x}"
    signed = "\t".join(text)
    path.write_bytes(body + f"{signed}\t{zlib.crc32(signed.encode()):08x}\n".encode())


def samples_truncated_into_last_line(store: Store) -> None:
    path = store.samples_path(CELL)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])


def samples_middle_line_deleted(store: Store) -> None:
    path = store.samples_path(CELL)
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:2] + lines[3:]))


def samples_line_duplicated(store: Store) -> None:  # a hand-merged store: the same sample twice
    path = store.samples_path(CELL)
    lines = _lines(path)
    with path.open("ab") as handle:
        handle.write(lines[0])
    store.append(sample(8))


def index_of_another_file(store: Store) -> None:
    other = Store(store.root.parent / "other")
    for trial in range(1, 12):
        other.append(sample(trial))
    shutil.copy(other.index_path(CELL), store.index_path(CELL))


DAMAGE: list[Callable[[Store], None]] = [
    lambda store: None, index_missing, index_truncated, index_torn_mid_line_then_appended, index_lost_a_line,
    stale_after_crash_between_sample_and_index, plausible_wrong_offsets, samples_truncated_into_last_line,
    samples_middle_line_deleted, samples_line_duplicated, index_of_another_file, index_row_damaged_then_appended,
    index_row_damaged_then_chained_over,
]  # fmt: skip
IDS = ["undamaged", *(damage.__name__ for damage in DAMAGE[1:])]


@pytest.mark.parametrize("damage", DAMAGE, ids=IDS)
def test_every_answer_through_the_index_equals_a_full_parse(tmp_path: Path, damage: Callable[[Store], None]) -> None:
    store = build(tmp_path / "store")
    damage(store)
    through_index = answers(store)
    assert through_index == answers(without_index(store, tmp_path / "parsed"))
    current, stale = truth(store)
    assert through_index["count"][:2] == (current, stale)
    cell = through_index["report_cells"][0]
    assert cell["scored"] == current  # the report uses exactly the samples the floor counts
    unreadable = [p for p in store.read_cell(CELL).problems if p.kind != "duplicate"]
    assert len(through_index["report_store"]["problems"]) == len(unreadable)  # a bad index row loses no sample


def test_the_undamaged_store_counts_what_the_definition_says(tmp_path: Path) -> None:
    count = build(tmp_path).count_current(CELL, DEFINITION)
    # 1, 2 current; 3 rescored under S; 7 schema-1 of this checkout's definition. 4: old scoring.
    assert (count.current, count.stale_scoring, count.other_conditions) == (4, 1, 1)


def test_duplicates_count_once_and_are_named(tmp_path: Path) -> None:
    store = build(tmp_path)
    samples_line_duplicated(store)
    count = store.count_current(CELL, DEFINITION)
    first_id = store.read_cell(CELL).samples[0]["id"]
    assert count.duplicates == [first_id] and count.current == 5
    report = build_report(store, SETTINGS)
    assert report.store.duplicates == [first_id]
    assert any("stored more than once" in note and first_id in note for note in report.notices)


def test_index_rows_are_used_when_they_check_out(tmp_path: Path) -> None:
    from pytest_benchcell.store.index import IndexReader

    store = build(tmp_path)
    reader = IndexReader(store.samples_path(CELL), store.index_path(CELL), [], {})
    assert len(reader.rows()) == 8 and reader.parsed == 0  # nothing parsed: the index is complete
    assert reader.trusted  # the last row vouched for all of them
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "real", copy / "real")  # another inode and ctime: the chain checksum decides
    reader = IndexReader(Store(copy).samples_path(CELL), Store(copy).index_path(CELL), [], {})
    assert len(reader.rows()) == 8 and reader.parsed == 0 and reader.trusted
    index_lost_a_line(store)
    reader = IndexReader(store.samples_path(CELL), store.index_path(CELL), [], {})
    assert len(reader.rows()) == 8 and reader.parsed == 1  # exactly the line the index lacks
    assert not reader.trusted


def test_several_stores_read_as_one_each_sample_once(tmp_path: Path) -> None:
    one, two = Store(tmp_path / "one"), Store(tmp_path / "two")
    shared = sample(1)
    for record in (shared, sample(2)):
        one.append(record)
    for record in (shared, sample(2, outcome="incorrect"), sample(3)):
        two.append(record)
    both = StoreSet([one.root, two.root])
    count = both.count_current(CELL, DEFINITION)
    assert count.current == 4 and count.duplicates == [shared["id"]]
    report = build_report(both, SETTINGS)
    assert report.cells[0].scored == 4 and report.store.duplicates == [shared["id"]]
    assert any("Read 2 stores as one" in note for note in report.notices)


def test_merge_keeps_trial_numbers_unique_and_each_sample_once(tmp_path: Path) -> None:
    one, two = Store(tmp_path / "one"), Store(tmp_path / "two")
    one.reserve_trials(CELL, 3, sitting="s1")
    two.reserve_trials(CELL, 2, sitting="s2")
    shared = sample(1)
    for record in (shared, sample(2), sample(3)):
        one.append(record)
    second = sample(2, outcome="incorrect")  # trial 2 on both machines, and a shared sample
    for record in (shared, second, rescore_of(second, "pass")):
        two.append(record)
    two.definitions_path("x").parent.mkdir()
    two.definitions_path("x").write_text('[bench]\nname = "x"\n')

    result = merge_stores([two], one, sitting="merge")
    assert (result.appended, result.already_there, result.definitions) == (2, 1, 1)
    merged = one.read_cell(CELL)
    assert merged.problems == []
    trials = [s["trial"] for s in merged.samples if s["status"] != "rescore"]
    assert trials == [1, 2, 3, 4]
    moved = [s for s in merged.samples if "merged_from" in s]
    assert [s["merged_from"]["trial"] for s in moved] == [2, 2]
    assert all(s["merged_from"]["store"] == str(two.root.resolve()) for s in moved)
    rescore = next(s for s in moved if s["status"] == "rescore")
    assert rescore["trial"] == next(s["trial"] for s in moved if s["id"] == rescore["rescore_of"])
    assert one.reserve_trials(CELL, 1, sitting="next") == [5]  # later sittings continue past the merged numbers
    again = merge_stores([two], one, sitting="merge-again")
    assert again.appended == 0 and again.already_there == 3  # merging twice changes nothing
    assert one.definitions_path("x").read_text() == two.definitions_path("x").read_text()


def test_verdicts_of_an_older_scoring_are_set_apart_in_reports(tmp_path: Path) -> None:
    report = build_report(build(tmp_path), ReportSettings(floor=3, fingerprint_policy="group",
                                                          definitions={("cli", "close-bug"): DEFINITION}))  # fmt: skip
    (cell,) = report.cells
    assert (cell.fingerprint, cell.scored) == ("C", 4)  # 1, 2, 3 (rescored), 7 (schema 1 of this definition)
    groups = {group.fingerprint: group.samples for group in cell.groups}
    assert groups == {"C": 5, "stale-scoring:S-old": 1, "C-old": 1}  # 5: the invalid trial is in C too
    # Without the bench (benchcell report without --config) samples pool by conditions alone, and the
    # schema-1 sample is a group of its own: here the newest, so it is the one used.
    unknown = build_report(build(tmp_path / "two"), ReportSettings(floor=3, fingerprint_policy="group"))
    assert {group.fingerprint: group.samples for group in unknown.cells[0].groups} == {"L": 1, "C": 5, "C-old": 1}


def test_a_cell_without_an_index_gets_one_at_its_next_append(tmp_path: Path) -> None:
    from pytest_benchcell.store.index import IndexReader

    store = build(tmp_path)
    with store.samples_path(CELL).open("ab") as handle:
        handle.write(b'{"torn')  # a torn fragment the rebuilt index must leave to the parser
    store.index_path(CELL).unlink()  # as in a store written by an earlier plugin (it kept `.index`)
    store.append(sample(8))
    problems: list = []
    reader = IndexReader(store.samples_path(CELL), store.index_path(CELL), problems, {})
    assert len(reader.rows()) == 9 and reader.parsed == 0 and reader.trusted
    assert [p.line for p in problems] == [9]  # the fragment is still reported, on its own line
    assert answers(store) == answers(without_index(store, tmp_path / "parsed"))
