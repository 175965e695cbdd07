"""The allocation core of `--bench-fill decide` (pytest_benchcell/allocation.py), with the real statistics."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from sample_factory import cell_samples, write_samples

from pytest_benchcell.allocation import (
    DIFFERS,
    EQUIVALENT,
    UNDECIDED,
    judge,
    plan_decisions,
    read_trials,
)
from pytest_benchcell.config import BenchConfigError, parse_bench
from pytest_benchcell.statistics import Family, compare_paired, decide

EFFECTS = {"success": 0.3, "tokens": 0.5}


def cell(count: int, *, passed: bool = True, cost: float | None = 1000.0, start: int = 0) -> list[tuple[str, bool, float | None]]:
    return [(f"2026-12-02T12:{start + i:02d}:00.000Z", passed, cost) for i in range(count)]


def decided_trials() -> dict:
    """a passes every trial for 1,000 tokens, b fails every one for 3,000: 24 pairs over two tasks."""
    return {
        ("a", "t1"): cell(12), ("a", "t2"): cell(12, start=20),
        ("b", "t1"): cell(12, passed=False, cost=3000.0), ("b", "t2"): cell(12, passed=False, cost=3000.0, start=20),
    }  # fmt: skip


def test_decide_reads_b_minus_a_per_pair_and_leaves_an_unknown_usage_out_of_tokens() -> None:
    outcomes = [((True, 100.0), (False, 300.0)), ((False, None), (True, 50.0))]
    success = decide(outcomes, metric="success", family=Family.of(1), margin=None, tasks=3)
    tokens = decide(outcomes, metric="tokens", family=Family.of(1), margin=None, tasks=3)
    assert (success.pairs, success.nonzero, success.positives, success.estimate) == (2, 2, 1, 0.0)
    assert (tokens.pairs, tokens.estimate, tokens.clipped) == (1, pytest.approx(math.log(2.5)), 1)  # 301/101 cut at 2.5
    assert success.claim_e == tokens.claim_e == 40.0  # one pair x two metrics at 0.05


def test_judge_pairs_as_the_report_does_and_splits_alpha_over_the_family() -> None:
    states = judge(decided_trials(), [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, alpha=0.05,
                   compare=compare_paired)  # fmt: skip
    success, tokens = states
    assert (success.metric, success.decision, success.pairs, success.estimate) == ("success", DIFFERS, 24, -1.0)
    assert (tokens.metric, tokens.decision) == ("tokens", DIFFERS)
    expected = compare_paired([-1.0] * 24, metric="success", alpha=0.05 / 2, margin=0.3)
    assert success.e_value == expected.e_value and success.claim_e == 40.0
    assert success.interval is None  # two shared tasks: the interval is withheld, as in the report


def test_a_decided_comparison_gets_no_more_trials() -> None:
    trials = {**decided_trials(), ("c", "t1"): [], ("c", "t2"): []}
    plan = plan_decisions(trials, [("a", "b"), ("a", "c")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS,
                          trial_limit=12)  # fmt: skip
    counts = plan.counts()
    assert counts[("b", "t1")] == counts[("b", "t2")] == 0
    assert "every comparison it serves is decided: a vs b on success differs; a vs b on tokens differs" in plan.cells[("b", "t1")].reason
    # a is deep already (12 per task), but in other sittings: c's trials pair with a's of this sitting,
    # so the undecided a vs c gets both arms to the floor here, both tasks alike
    assert counts[("a", "t1")] == counts[("a", "t2")] == 3
    assert counts[("c", "t1")] == counts[("c", "t2")] == 3
    assert "0 scored, the floor is 3; advances a vs c (success, tokens undecided)" in plan.cells[("c", "t1")].reason
    assert plan.nothing_left is None


def test_nothing_left_to_decide_plans_nothing_and_says_why() -> None:
    plan = plan_decisions(decided_trials(), [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, trial_limit=50)
    assert plan.total == 0
    assert plan.nothing_left == "nothing left to decide: every comparison is decided; no trial runs"
    assert plan.lines()[-1] == plan.nothing_left
    assert "comparisons (0 of 2 undecided):" in plan.lines()


def test_equivalence_within_the_smallest_effect_decides_and_without_one_it_cannot() -> None:
    tasks = ["t1", "t2", "t3"]
    twins = {(arm, task): cell(14, start=20 * n) for arm in "ab" for n, task in enumerate(tasks)}
    success, tokens = judge(twins, [("a", "b")], tasks, floor=3, smallest_effect=EFFECTS, alpha=0.05)
    assert (success.decision, tokens.decision) == (EQUIVALENT, EQUIVALENT)
    assert success.describe().startswith("a vs b on success: equivalent (\u00b130 pp) (42 paired trials on 3 tasks, e 1 of the 40")
    assert "a - b +0.0 pp [" in success.describe()
    assert tokens.describe().startswith("a vs b on tokens: equivalent (\u00b150%) (42 paired trials on 3 tasks")
    plan = plan_decisions(twins, [("a", "b")], tasks, floor=3, smallest_effect={}, trial_limit=6)
    assert {state.decision for state in plan.comparisons} == {UNDECIDED}
    assert "only a difference can decide it" in plan.comparisons[0].describe()
    assert plan.total == 6


def test_equivalence_needs_the_interval_and_the_interval_needs_three_tasks() -> None:
    twins = {(arm, task): cell(40, start=50 * n) for arm in "ab" for n, task in enumerate(("t1", "t2"))}
    success, tokens = judge(twins, [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, alpha=0.05)
    assert (success.decision, tokens.decision) == (UNDECIDED, UNDECIDED)
    assert success.interval is None and "a - b +0.0 pp; no interval below 3 shared tasks" in success.describe()


def test_rounds_keep_tasks_balanced_and_the_trial_count_is_respected() -> None:
    trials = {(arm, task): cell(3, passed=arm == "a") for arm in "ab" for task in ("t1", "t2", "t3")}
    plan = plan_decisions(trials, [("a", "b")], ["t1", "t2", "t3"], floor=3, smallest_effect=EFFECTS, trial_limit=13)
    assert plan.total == 12  # two whole rounds (2 arms x 3 tasks each); the 13th would unbalance a pair
    assert set(plan.counts().values()) == {2}
    cut = plan_decisions(trials, [("a", "b")], ["t1", "t2", "t3"], floor=3, smallest_effect=EFFECTS, trial_limit=10)
    # a round that does not fit whole is cut task by task, fewest-paired first, each task as a pair
    assert cut.total == 10 and sorted(cut.counts()[("a", t)] for t in ("t1", "t2", "t3")) == [1, 2, 2]
    assert all(cut.counts()[("a", t)] == cut.counts()[("b", t)] for t in ("t1", "t2", "t3"))


def test_the_budget_is_respected_from_stored_token_means() -> None:
    trials = {("a", "t1"): cell(3, cost=1000.0), ("b", "t1"): cell(3, passed=False, cost=3000.0),
              ("a", "t2"): cell(3, cost=2000.0), ("b", "t2"): cell(3, passed=False, cost=2000.0)}  # fmt: skip
    plan = plan_decisions(trials, [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, trial_limit=None,
                          budget=20_000)  # fmt: skip
    assert plan.expected_tokens is not None and plan.expected_tokens <= 20_000
    assert plan.expected_tokens == sum(n * {"t1": 1000, "t2": 2000}[t] + n * {"t1": 3000, "t2": 2000}[t]
                                       for (arm, t), n in plan.counts().items() if arm == "a")  # fmt: skip
    assert plan.expected_tokens > 20_000 - 4000  # a whole further pair (the cheapest costs 4,000) would not fit
    tiny = plan_decisions(trials, [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, trial_limit=None, budget=100)
    assert tiny.total == 0
    assert tiny.nothing_left == (
        "nothing fits: a budget of 100 cost-equivalent tokens leaves no room for one more trial; no trial runs"
    )


def test_a_budget_with_no_stored_usage_falls_back_to_a_trial_count() -> None:
    trials = {(arm, task): [] for arm in "ab" for task in ("t1", "t2")}
    plan = plan_decisions(trials, [("a", "b")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, trial_limit=None,
                          budget=5000, fallback_trials=12)  # fmt: skip
    assert plan.total == 12 and plan.expected_tokens is None
    assert "checked as trials run" in plan.limit


def test_the_same_store_gives_the_same_plan(tmp_path: Path) -> None:
    samples = []
    for arm, outcomes in (("a", ["pass", "pass", "incorrect", "pass"]), ("b", ["incorrect", "pass", "incorrect", "incorrect"])):
        for n, task in enumerate(("t1", "t2")):
            samples += cell_samples(arm, task, 4, outcomes=outcomes, minutes=10 * n,
                                    tokens_by_trial=[(1000 * (i + 1), 0, 0, 0) for i in range(4)])  # fmt: skip
    store = write_samples(tmp_path, samples)
    weights = {"fresh_input": 1.0, "cache_write": 1.0, "cache_read": 1.0, "output": 1.0}
    cells = [(arm, task) for arm in "abc" for task in ("t1", "t2")]

    def plan():  # type: ignore[no-untyped-def]
        trials = read_trials(store, "real", cells, weights, None)
        return plan_decisions(trials, [("a", "b"), ("b", "c")], ["t1", "t2"], floor=3, smallest_effect=EFFECTS, trial_limit=9)

    first, second = plan(), plan()
    assert first.lines() == second.lines() and first.counts() == second.counts()
    assert first.total == 9
    assert first.cells[("a", "t1")].expected_tokens == 2500.0  # the cell's stored mean steers the plan


BASE = {
    "bench": {"model": "m"},
    "arms": {"a": {"tools": ["Read"]}, "b": {"tools": ["Read"]}, "c": {"tools": ["Read"]}},
    "tasks": {"t": {"tier": "read", "intent": "x", "required_facts": ["y"]}},
}


@pytest.mark.parametrize(
    ("bench", "message"),
    [
        ({"comparisons": [["a", "x"]]}, "[bench] comparisons has value 'x'; allowed: a declared arm: a, b, c"),
        ({"comparisons": [["a", "a"]]}, "[bench] comparisons has value ['a', 'a']; allowed: a pair of two different arms"),
        ({"comparisons": [["a", "b"], ["b", "a"]]}, "allowed: each pair once (a pair in either order is the same comparison)"),
        ({"comparisons": [["a"]]}, "[bench] comparisons has value ['a']; allowed: a list of pairs of declared arm names"),
        ({"comparisons": []}, "(leave the key out to compare every pair)"),
        ({"smallest_effect": {"success": 1.5}}, "[bench.smallest_effect] success has value 1.5; allowed: a number above 0 and below 1"),
        ({"smallest_effect": {"tokens": 0}}, "[bench.smallest_effect] tokens has value 0; allowed: a number above 0 and below 10"),
        ({"smallest_effect": {"token": 0.2}}, "[bench.smallest_effect] has unknown key 'token' (did you mean 'tokens'?)"),
        ({"smallest_effect": 0.2}, "[bench.smallest_effect] has value 0.2; allowed: a table"),
    ],
)
def test_bad_comparisons_and_smallest_effects_get_one_clear_error(bench: dict, message: str) -> None:
    document = copy.deepcopy(BASE)
    document["bench"].update(bench)
    with pytest.raises(BenchConfigError) as caught:
        parse_bench(Path("/b/bench.toml"), document)
    assert str(caught.value).startswith("/b/bench.toml: ") and message in str(caught.value)


def test_declared_comparisons_and_the_default_of_every_pair() -> None:
    every = parse_bench(Path("/b/bench.toml"), copy.deepcopy(BASE))
    assert every.compared_pairs() == [("a", "b"), ("a", "c"), ("b", "c")]
    assert every.compared_pairs(["c", "a"]) == [("c", "a")]
    document = copy.deepcopy(BASE)
    document["bench"].update(comparisons=[["b", "a"], ["a", "c"]], smallest_effect={"success": 0.15, "tokens": 0.2})
    declared = parse_bench(Path("/b/bench.toml"), document)
    assert declared.compared_pairs() == [("b", "a"), ("a", "c")]
    assert declared.compared_pairs(["a", "b"]) == [("b", "a")]
    assert declared.smallest_effect == {"success": 0.15, "tokens": 0.2}


def test_the_cheaper_round_goes_first_and_a_trial_count_with_a_budget_obeys_both() -> None:
    trials = {("a", "t1"): cell(3, cost=1000.0), ("b", "t1"): cell(3, passed=False, cost=1000.0),
              ("c", "t1"): cell(3, cost=9000.0), ("d", "t1"): cell(3, passed=False, cost=9000.0)}  # fmt: skip
    pairs = [("c", "d"), ("a", "b")]  # the dear pair is declared first; the cheap one still goes first
    plan = plan_decisions(trials, pairs, ["t1"], floor=3, smallest_effect=EFFECTS, trial_limit=2)
    assert plan.counts() == {("a", "t1"): 1, ("b", "t1"): 1, ("c", "t1"): 0, ("d", "t1"): 0}
    assert plan.cells[("c", "t1")].reason == "no room left in the sitting's limit for its next paired trial"
    both = plan_decisions(trials, pairs, ["t1"], floor=3, smallest_effect=EFFECTS, trial_limit=6, budget=24_000)
    # round 1: a + b (2,000), then c + d (18,000); round 2: a + b; c + d again would pass the budget; then the count is full
    assert both.counts() == {("a", "t1"): 2, ("b", "t1"): 2, ("c", "t1"): 1, ("d", "t1"): 1}
    assert both.expected_tokens == 22_000
    assert plan_decisions(trials, pairs, ["t1"], floor=3, smallest_effect=EFFECTS, trial_limit=4, budget=24_000).total == 4


def test_expected_tokens_fall_back_to_the_arm_then_the_bench() -> None:
    from pytest_benchcell.allocation import expected_costs

    costs = expected_costs({("a", "t1"): cell(2, cost=1000.0), ("a", "t2"): [], ("b", "t1"): cell(1, cost=3000.0),
                            ("c", "t1"): cell(1, cost=None)})  # fmt: skip
    assert costs == {("a", "t1"): 1000.0, ("a", "t2"): 1000.0, ("b", "t1"): 3000.0, ("c", "t1"): 2000.0}


def mixed(count: int, cost: float, gap: float, *, start: int = 0, pattern: str = "+-") -> tuple[list, list]:
    """Two cells of one task: a at `cost`, b at cost x (1 + gap) or / (1 + gap) by turns of `pattern`."""
    a = cell(count, cost=cost, start=start)
    b = [(f"2026-12-02T12:{start + i:02d}:00.000Z", True, cost * (1 + gap) if pattern[i % len(pattern)] == "+" else cost / (1 + gap))
         for i in range(count)]  # fmt: skip
    return a, b


def test_pairs_to_decide_reads_the_e_value_and_the_interval() -> None:
    from pytest_benchcell.allocation import ComparisonState, pairs_to_decide

    # e grew to 10 in 20 pairs (log 10 / 20 a pair), 120 needed: log(12) / (log(10) / 20) more pairs.
    growing = ComparisonState("a", "b", "tokens", UNDECIDED, 20, ("t",), 0.1, (-0.2, 0.4), 10.0, None, 120.0)
    assert pairs_to_decide([growing]) == pytest.approx(math.log(12) / (math.log(10) / 20))
    # No trend, but a margin: the half-width 0.3 must shrink to 0.2 - 0.05 = 0.15, i.e. 4 times the pairs.
    flat = ComparisonState("a", "b", "tokens", UNDECIDED, 20, ("t",), 0.05, (-0.25, 0.35), 1.0, 0.2, 120.0)
    assert pairs_to_decide([flat]) == pytest.approx(60.0)
    # The pair runs until its last metric is decided; no pair at all is an unknown the plan must explore.
    assert pairs_to_decide([growing, flat]) == pytest.approx(60.0)
    assert pairs_to_decide([ComparisonState("a", "b", "success", UNDECIDED, 0, ("t",))]) == 64.0


def test_the_plan_prefers_the_comparison_nearest_its_decision_per_token() -> None:
    # a vs b: tokens consistently 60% apart, nearly claimed; a vs c: a coin-flip gap of 10%, far from any
    # decision. Both rounds cost alike (b and c at the same price): a sitting with room for one paired
    # trial gives it to a vs b. Two comparisons alike but for price: the cheap one goes first. Three
    # tasks, so that equivalence (which needs an interval, withheld below 3 tasks) is a route too.
    a1, b1 = mixed(3, 1000.0, 0.6, pattern="+")
    _, c1 = mixed(3, 1000.0, 0.1, pattern="+-")
    tasks = ["t1", "t2", "t3"]
    trials = {(arm, task): cells for task in tasks for arm, cells in (("a", a1), ("b", b1), ("c", c1))}
    effects = {"success": 0.3, "tokens": 0.05}  # tokens: a margin too small to be met soon
    plan = plan_decisions(trials, [("a", "b"), ("a", "c")], tasks, floor=3, smallest_effect=effects, trial_limit=2)
    assert [s.decision for s in plan.comparisons if s.metric == "tokens"] == [UNDECIDED, UNDECIDED]
    assert plan.counts()[("b", "t1")] == 1 and plan.counts()[("c", "t1")] == 0
    alike = {**trials, **{(arm, task): cells for task in tasks for arm, cells in
                          (("b", [(t[0], t[1], 10 * t[2]) for t in b1]), ("c", list(b1)))}}  # fmt: skip
    dear = plan_decisions(alike, [("a", "b"), ("a", "c")], tasks, floor=3, smallest_effect=effects, trial_limit=2)
    assert dear.counts()[("c", "t1")] == 1 and dear.counts()[("b", "t1")] == 0


def test_no_pair_gets_many_more_rounds_than_it_is_expected_to_need() -> None:
    # a vs b on three tasks, nearly claimed on tokens and on success nearly equivalent within a wide
    # margin: a sitting of 300 trials gives it 1.5 x the rounds it is expected to need, far below what
    # the limit would allow; a narrower success margin needs more.
    from pytest_benchcell.allocation import pairs_to_decide

    a1, b1 = mixed(3, 1000.0, 0.6, pattern="+")
    tasks = ["t1", "t2", "t3"]
    trials = {(arm, task): cells for task in tasks for arm, cells in (("a", a1), ("b", b1))}
    given = []
    for margin in (0.9, 0.5):
        plan = plan_decisions(trials, [("a", "b")], tasks, floor=3, smallest_effect={"success": margin, "tokens": 0.05},
                              trial_limit=300)  # fmt: skip
        rounds = plan.counts()[("b", "t1")]
        assert rounds == math.ceil(1.5 * pairs_to_decide(plan.comparisons) / len(tasks)) < 50
        given.append(rounds)
    assert given[0] < given[1]


