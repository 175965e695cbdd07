"""One verdict everywhere (issue 27): no store makes `--bench-fill decide`'s listing and the report
disagree on any comparison, at any sitting.

Simulated histories (seeded): a bench of four arms whose worlds differ by a success shift and a token
ratio per arm, sittings planned by allocation.plan_sitting (what `pytest --collect-only --bench-fill
decide` prints) or run as equal sittings, every trial appended to a real store. After every sitting the
plan's comparisons are set against the report's JSON (build_report(...).to_dict()) for every comparison
and metric: decision, the claim in words, the e-value, the interval. A few stores are also read black-box
through pytester: the listing's lines against `--bench-report-json`.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from sample_factory import cell_samples, make_sample, of_bench, write_samples

from pytest_benchcell.allocation import plan_sitting
from pytest_benchcell.config import parse_bench
from pytest_benchcell.report import build_report, settings_for_bench
from pytest_benchcell.report.verdict_text import a_minus_b, claim
from pytest_benchcell.store import Store

REPO = Path(__file__).resolve().parent.parent
ARMS = ("base", "rough", "twin", "dear")
TASKS = tuple(f"t{n}" for n in range(4))
# arm -> (success shift against base, token ratio against base), per world. "rough" is the case:
# the same tokens by construction, a success gap; "twin" is base again; "dear" costs 30% more.
WORLDS = {
    "identical": dict.fromkeys(ARMS, (0.0, 1.0)),
    "differ": {"base": (0.0, 1.0), "rough": (-0.35, 1.0), "twin": (0.0, 1.0), "dear": (0.0, 1.3)},
    "close": {"base": (0.0, 1.0), "rough": (-0.1, 1.1), "twin": (0.0, 1.0), "dear": (-0.2, 1.6)},
}
METRIC_OF_REPORT = {"success": "success", "cost_equivalent": "tokens"}
HISTORIES_PER_WORLD = 4
SITTINGS = 8
PER_CELL = 6  # trials per cell in an equal sitting; a decide sitting runs as many in all


def bench_document(declared: bool) -> dict[str, Any]:
    bench: dict[str, Any] = {"model": "m", "floor": 3, "smallest_effect": {"success": 0.15, "tokens": 0.2}}
    if declared:  # base against each other arm; otherwise every pair of arms (the default family)
        bench["comparisons"] = [["base", arm] for arm in ARMS[1:]]
    return {
        "bench": bench,
        "arms": {arm: {"tools": ["Read"]} for arm in ARMS},
        "tasks": {task: {"tier": "read", "intent": "x", "required_facts": ["y"]} for task in TASKS},
    }


class History:
    """One simulated bench: a world, a store, and the clock the trials start by."""

    def __init__(self, root: Path, rng: random.Random, world: dict[str, tuple[float, float]], declared: bool) -> None:
        self.rng, self.world = rng, world
        self.bench = parse_bench(root / "bench.toml", bench_document(declared))
        self.store = Store(root / "results")
        self.minutes = 0.0
        self.trials: dict[tuple[str, str], int] = {}  # trials so far per cell (their numbers)
        self.rates: dict[tuple[str, str], float] = {}
        self.costs: dict[tuple[str, str], float] = {}
        for task in TASKS:
            # Half the tasks nearly always solved: success equivalences come within a few sittings there.
            base_rate = rng.uniform(0.9, 1.0) if rng.random() < 0.5 else min(0.9, max(0.2, rng.betavariate(2, 2)))
            base_cost = 8_000 * math.exp(rng.gauss(0.0, 0.8))
            for arm, (shift, ratio) in world.items():
                self.rates[(arm, task)] = min(1.0, max(0.0, base_rate + shift))
                self.costs[(arm, task)] = base_cost * ratio

    def plan(self) -> Any:
        cells = [(arm, task) for arm in ARMS for task in TASKS]
        return plan_sitting(self.store, self.bench, model_kind="real", arms=list(ARMS), cells=cells, definitions={},
                            trials=PER_CELL * len(cells), budget=None)  # fmt: skip

    def run(self, counts: dict[tuple[str, str], int]) -> None:
        """The sitting's trials, interleaved as a sitting orders them, appended to the store."""
        sigma = math.sqrt(math.log1p(0.1**2))  # trial noise CV 0.1: token equivalences within the replay
        for round_index in range(max(counts.values(), default=0)):
            for cell, count in counts.items():
                if round_index >= count:
                    continue
                self.minutes += 1.0
                passed = self.rng.random() < self.rates[cell]
                fresh = int(self.costs[cell] * math.exp(self.rng.gauss(-sigma * sigma / 2, sigma)))
                self.trials[cell] = self.trials.get(cell, 0) + 1
                self.store.append(make_sample(
                    cell[0], cell[1], trial=self.trials[cell], minutes=self.minutes, tokens=(fresh, 0, 0, 0),
                    outcome="pass" if passed else "incorrect", tier="read",
                ))  # fmt: skip

def report_verdicts(history: History) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The report's JSON, read back: (arm_a, arm_b, metric) -> the pair's entry, with the family's margin."""
    settings = settings_for_bench(history.bench)
    settings.definitions = None  # the samples are not of the bench's definitions: each cell's newest group, as the plan
    settings.resamples = 100
    document = json.loads(json.dumps(build_report(history.store, settings).to_dict()))
    return {
        (pair["arm_a"], pair["arm_b"], METRIC_OF_REPORT[comparison["metric"]]): pair
        for comparison in document["comparisons"]
        for pair in comparison["pairs"]
    }


def disagreements(plan: Any, report: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    """Every way a comparison reads differently in the plan's listing and the report's JSON."""
    found = []
    assert {(s.arm_a, s.arm_b, s.metric) for s in plan.comparisons} == set(report)
    for state in plan.comparisons:
        pair = report[(state.arm_a, state.arm_b, state.metric)]
        within = pair["within_tasks"]
        listed = claim(state.verdict, state.arm_a, state.arm_b) if state.verdict is not None else "not compared"
        if (state.decision, listed) != (pair["decision"], pair["claim"]):
            found.append(f"{state.describe()} | report: {pair['decision']}, {pair['claim']}: {pair['verdict']}")
            continue
        if state.verdict is None:
            continue
        if state.e_value != pytest.approx(within["e_max"], rel=1e-5) or state.verdict.pairs != within["pairs"]:
            found.append(f"{state.name}: e {state.e_value} over {state.verdict.pairs} vs {within['e_max']} over {within['pairs']}")
        _, interval = a_minus_b(state.verdict)
        shown = None if within["low"] is None else (within["low"], within["high"])
        if interval is not None and state.metric == "tokens":
            interval = (math.exp(interval[0]), math.exp(interval[1]))
        if (interval is None) != (shown is None) or (interval and interval != pytest.approx(shown, abs=2e-6)):
            found.append(f"{state.name}: interval {interval} vs the report's {shown}")
    return found


@pytest.mark.slow
def test_the_plan_and_the_report_agree_on_every_comparison_at_every_sitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.fsync", lambda fd: None)  # durability is not what this replays: 4 x faster
    rng = random.Random(27)
    checked = histories = 0
    decisions: dict[str, int] = {}
    problems: list[str] = []
    for world_name, world in WORLDS.items():
        for number in range(HISTORIES_PER_WORLD):
            root = tmp_path / f"{world_name}-{number}"
            root.mkdir()
            history = History(root, random.Random(rng.randrange(2**32)), world, declared=number % 3 != 2)
            adaptive = number % 2 == 0  # half the histories as `--bench-fill decide` sittings, half as equal ones
            histories += 1
            for sitting in range(SITTINGS + 1):
                plan = history.plan()
                report = report_verdicts(history)
                problems += [f"{world_name} #{number}, sitting {sitting}: {line}" for line in disagreements(plan, report)]
                checked += len(plan.comparisons)
                for state in plan.comparisons:
                    decisions[state.decision] = decisions.get(state.decision, 0) + 1
                counts = plan.counts() if adaptive else {(arm, task): PER_CELL for arm in ARMS for task in TASKS}
                if not sum(counts.values()):
                    counts = {(arm, task): 2 for arm in ARMS for task in TASKS}  # all decided: keep reading as it grows
                history.run(counts)
    assert not problems, "\n".join(problems[:20])
    # The replay must have met every kind of verdict, or agreeing would prove little.
    assert decisions.get("differs", 0) > 20 and decisions.get("equivalent", 0) > 20 and decisions.get("undecided", 0) > 20
    print(f"{histories} histories x {SITTINGS + 1} readings: {checked} comparison readings agree ({decisions})")


# -- black-box: the listing of `pytest --collect-only --bench-fill decide` against `--bench-report-json` ---
def listed(lines: list[str]) -> dict[tuple[str, str, str], str]:
    """(arm_a, arm_b, metric) -> the claim, from the listing's comparison lines (between "comparisons (" and "plan:")."""
    start = next(i for i, line in enumerate(lines) if line.startswith("comparisons ("))
    end = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    out = {}
    for line in lines[start + 1 : end]:
        name, rest = line.strip().split(": ", 1)
        pair, metric = name.split(" on ")
        a, b = pair.split(" vs ")
        out[(a, b, metric)] = rest.split(" (", 1)[0]
    return out


@pytest.mark.parametrize("seed", [3, 11])
def test_the_listing_and_the_json_report_read_the_same(pytester: pytest.Pytester, seed: int) -> None:
    for name in ("bench.toml", "conftest.py"):
        shutil.copy(REPO / name, pytester.path / name)
    shutil.copytree(REPO / "bench", pytester.path / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    rng = random.Random(seed)
    tasks = ("count-open", "close-export", "open-bugs", "reopen-typo")
    costs = {"cli-skill": 20_000, "mcp": 26_000, "raw-api": 20_000, "native": 34_000}
    samples = []
    for arm, cost in costs.items():
        for n, task in enumerate(tasks):
            outcomes = ["pass" if rng.random() < (0.9 if arm != "native" else 0.4) else "incorrect" for _ in range(12)]
            spread = [(int(cost * math.exp(rng.gauss(0, 0.1))), 0, 0, 0) for _ in range(12)]
            samples += cell_samples(arm, task, 12, outcomes=outcomes, tokens_by_trial=spread, minutes=100 * n)
    write_samples(pytester.path / "bench" / "results", [of_bench(s, pytester.path / "bench.toml") for s in samples])
    plan = pytester.runpytest("--bench-arm", "all", "--bench-task", ",".join(tasks), "--bench-fill", "decide",
                              "--bench-trials", "8", "--collect-only", "-q", "-p", "no:randomly")  # fmt: skip
    assert plan.ret == pytest.ExitCode.OK
    report = pytester.runpytest("--bench-report-json", "r.json", "-p", "no:randomly")
    assert report.ret == pytest.ExitCode.OK
    document = json.loads((pytester.path / "r.json").read_text())
    from_report = {
        (pair["arm_a"], pair["arm_b"], METRIC_OF_REPORT[comparison["metric"]]): pair["claim"]
        for comparison in document["comparisons"] for pair in comparison["pairs"]
    }  # fmt: skip
    from_listing = listed(plan.stdout.lines)
    assert from_listing and from_listing == from_report
    # The terminal report prints the same claims, in its compact table (pair named on its first metric's row).
    lines = report.stdout.lines
    start = next(i for i, line in enumerate(lines) if "a \u2212 b or a/b [anytime interval]" in line)
    table = lines[start : next(i for i in range(start, len(lines)) if not lines[i].strip())]
    assert max(map(len, table)) <= 100
    pair = None
    for row in table[2:]:
        cells = [cell for cell in row.strip().split("  ") if cell.strip()]
        if " vs " in cells[0]:
            pair, cells = tuple(cells[0].strip().split(" vs ")), cells[1:]
        assert pair is not None
        assert cells[1].strip().removesuffix(" (generalizes)") == from_report[(*pair, cells[0].strip())]
    assert set(from_report.values()) - {"undecided"}  # something was decided
