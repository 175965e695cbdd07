"""Complete sample records (docs/architecture.md) for report tests, written through Store.append."""

from __future__ import annotations

import datetime as _dt
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_benchcell.store import Store

_ids = itertools.count(1)
_EPOCH = _dt.datetime(2026, 12, 2, 12, 0, 0, tzinfo=_dt.UTC)


def iso(minutes: float) -> str:
    moment = _EPOCH + _dt.timedelta(minutes=minutes)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def make_sample(
    arm: str = "cli",
    task: str = "close-bug",
    *,
    trial: int = 1,
    tier: str = "single-mutation",
    bonus: bool = False,
    status: str = "scored",
    outcome: str | None = "pass",
    tokens: tuple[int, int, int, int] = (1000, 800, 4000, 300),
    turns: int = 4,
    duration_ms: int = 7000,
    cost_usd: float | None = 0.0123,
    model: str = "claude-sonnet-4-5",
    model_kind: str = "real",
    fingerprint: str = "fp-current",
    minutes: float = 0.0,
) -> dict[str, Any]:
    """One sample as the trial runner writes it; `minutes` after a fixed epoch sets started_at."""
    number = next(_ids)
    fresh, write, read, output = tokens
    total = {"fresh_input": fresh, "cache_write": write, "cache_read": read, "output": output}
    if status != "scored":
        outcome = None
    return {
        "schema": 1,
        "id": f"{number:032x}",
        "sitting": "20261202T120000Z-test",
        "arm": arm,
        "task": task,
        "tier": tier,
        "bonus": bonus,
        "trial": trial,
        "started_at": iso(minutes),
        "ended_at": iso(minutes + duration_ms / 60000),
        "model": model,
        "model_kind": model_kind,
        "usage": {"total": total, "by_model": {model: dict(total)}},
        "turns": turns,
        "duration_ms": duration_ms,
        "cost_usd": cost_usd,
        "status": status,
        "outcome": outcome,
        "reason": "" if outcome in (None, "pass") else f"{outcome} for a test",
        "result_subtype": "success",
        "final_answer": "There are 5 open issues.",
        "tool_calls": [
            {"tool": "Bash", "input": {"command": "tracker list"}, "allowed": True, "reason": "", "is_error": False}
        ],
        "leaks": [] if status != "invalid" else ["curl ran"],
        "score": {"differences": []},
        "bounds": {"turn_cap": 40, "wall_clock_ms": 300000},
        "provenance": {
            "plugin": "0.1.0", "sdk": "0.2.189", "cli": "2.1.332",
            "fingerprint": fingerprint, "model_kind": model_kind,
        },  # fmt: skip
    }


def write_samples(root: Path, samples: Iterable[dict[str, Any]]) -> Store:
    store = Store(root)
    for sample in samples:
        store.append(sample)
    return store


def cell_samples(
    arm: str, task: str, count: int, *, start_trial: int = 1, minutes: float = 0.0, **fields: Any
) -> list[dict[str, Any]]:
    """`count` samples of one cell with consecutive trial numbers; extra fields go to make_sample.

    `tokens_by_trial`, if given, is a list of token tuples (one per trial), and `outcomes` a list of
    outcomes, so a cell can have spread.
    """
    tokens_by_trial = fields.pop("tokens_by_trial", None)
    outcomes = fields.pop("outcomes", None)
    samples = []
    for i in range(count):
        extra = dict(fields)
        if tokens_by_trial is not None:
            extra["tokens"] = tokens_by_trial[i]
        if outcomes is not None:
            extra["outcome"] = outcomes[i]
        samples.append(make_sample(arm, task, trial=start_trial + i, minutes=minutes + i, **extra))
    return samples


def of_bench(sample: dict[str, Any], bench_toml: Path) -> dict[str, Any]:
    """The sample as a trial of the bench's current definitions records it (its conditions and scoring
    fingerprints), so reports that know the bench use it."""
    from pytest_benchcell.config import load_bench

    definition = load_bench(bench_toml).definition(sample["arm"], sample["task"])
    sample["provenance"] = {
        **sample["provenance"], "fingerprint": definition.conditions, "conditions": definition.conditions,
        "scoring": definition.scoring,
    }  # fmt: skip
    return sample


SMALL_BENCH = """
[bench]
model = "claude-sonnet-4-5"
store = "results"
floor = 2

[arms.cli]
tools = ["Bash"]

[arms.mcp]
tools = ["Read"]

[tasks.t1]
tier = "read"
intent = "How many issues are open?"
required_facts = ["5"]
"""


def scripted_bench(root: Path) -> Path:
    """A bench whose store holds scripted samples only (what the example bench's sittings leave)."""
    root.mkdir(parents=True, exist_ok=True)
    bench = root / "bench.toml"
    bench.write_text(SMALL_BENCH)
    samples = [*cell_samples("cli", "t1", 2, tier="read", model_kind="scripted"),
               *cell_samples("mcp", "t1", 2, tier="read", model_kind="scripted")]  # fmt: skip
    write_samples(root / "results", [of_bench(sample, bench) for sample in samples])
    return bench
