"""The within-task pairing of the report and of --bench-fill decide (report/figures/comparisons.py):
trials of one sitting pair first, and a later reading only appends pairs."""

from __future__ import annotations

import random

from pytest_benchcell.allocation import DIFFERS, judge
from pytest_benchcell.report.figures import paired_in_time_order, paired_within_task
from pytest_benchcell.statistics import compare_paired

EFFECTS = {"success": 0.3, "tokens": 0.5}


def trial(minute: int, sitting: int, cost: float = 1000.0, passed: bool = True) -> tuple[str, bool, float, str]:
    return (f"2026-12-02T{minute // 60:02d}:{minute % 60:02d}:00.000Z", passed, cost, f"s{sitting}")


def history(rng: random.Random, sittings: int, tasks: list[str]) -> list[dict[tuple[str, str], list]]:
    """The store as read after each sitting: each sitting runs a random number of trials (often none)
    of each arm on each task, in a random interleaving; some sittings run one arm only."""
    cells: dict[tuple[str, str], list] = {(arm, task): [] for arm in "ab" for task in tasks}
    readings, minute = [], 0
    for sitting in range(sittings):
        arms = rng.choice(["ab", "ab", "a", "b"])
        runs = [cell for cell in cells if cell[0] in arms for _ in range(rng.choice([0, 0, 1, 2, 3]))]
        rng.shuffle(runs)
        for cell in runs:
            minute += 1
            cells[cell].append(trial(minute, sitting, rng.choice([500.0, 1000.0, 2000.0]), rng.random() < 0.5))
        readings.append({cell: list(found) for cell, found in cells.items()})
    return readings


def test_a_reading_after_more_sittings_only_appends_pairs() -> None:
    rng = random.Random(27)
    tasks = ["t1", "t2", "t3"]
    for _ in range(300):
        readings = history(rng, rng.randrange(2, 9), tasks)
        earlier: list = []
        for store in readings:
            covered = [t for t in tasks if len(store[("a", t)]) >= 2 and len(store[("b", t)]) >= 2]
            pairs = paired_in_time_order(store, "a", "b", covered, 2)
            assert pairs[: len(earlier)] == earlier
            earlier = pairs


def test_trials_of_one_sitting_pair_first_and_only_leftovers_cross_sittings() -> None:
    rng = random.Random(28)
    for _ in range(300):
        store = history(rng, rng.randrange(1, 9), ["t1"])[-1]
        cell_a, cell_b = store[("a", "t1")], store[("b", "t1")]
        pairs = paired_within_task(cell_a, cell_b)
        assert len(pairs) == min(len(cell_a), len(cell_b))  # every trial pairs while the other arm has one
        assert len({a[0] for a, _ in pairs}) == len({b[0] for _, b in pairs}) == len(pairs)  # none twice
        for sitting in {t[3] for t in cell_a + cell_b}:
            of_a, of_b = ([t for t in cell if t[3] == sitting] for cell in (cell_a, cell_b))
            within = [(a, b) for a, b in pairs if a[3] == b[3] == sitting]
            # as many pairs inside the sitting as both arms allow, the k-th of a with the k-th of b
            assert within == list(zip(of_a, of_b))
        left_a = [a for a, b in pairs if a[3] != b[3]]
        left_b = [b for a, b in pairs if a[3] != b[3]]
        assert left_a == sorted(left_a) and left_b == sorted(left_b)  # the leftovers, k-th with k-th too


def test_trials_without_a_sitting_pair_in_start_order_as_before() -> None:
    cell_a = [trial(m, 0)[:3] for m in (1, 3, 5)]
    cell_b = [trial(m, 0)[:3] for m in (2, 4)]
    assert paired_within_task(cell_a, cell_b) == [(cell_a[0], cell_b[0]), (cell_a[1], cell_b[1])]


def test_a_drift_between_sittings_is_no_difference_between_identical_arms() -> None:
    # Identical arms; every trial of sitting 2 costs twice those of sitting 1 (the drift). The baseline
    # a ran 12 trials per task in sitting 1 for another comparison, b none; sitting 2 ran both, 12 each.
    # Paired k-th with k-th regardless of sitting, every pair would read "b costs twice a's tokens".
    tasks = ["t1", "t2"]
    store = {}
    for n, task in enumerate(tasks):
        first = [trial(100 * n + m, 1, 1000.0) for m in range(12)]
        second = [trial(1000 + 100 * n + 2 * m, 2, 2000.0) for m in range(12)]
        store[("a", task)] = first + second
        store[("b", task)] = [trial(1000 + 100 * n + 2 * m + 1, 2, 2000.0) for m in range(12)]
    pairs = paired_in_time_order(store, "a", "b", tasks, 3)
    assert len(pairs) == 24 and all(a[3] == b[3] == "s2" for a, b in pairs)
    states = judge(store, [("a", "b")], tasks, floor=3, smallest_effect=EFFECTS, alpha=0.05, compare=compare_paired)
    assert [state.decision != DIFFERS for state in states] == [True, True]
    assert {state.metric: state.estimate for state in states}["tokens"] == 0.0
