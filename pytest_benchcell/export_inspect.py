"""Samples as Inspect AI logs, so a maintainer reads a trial's transcript in `inspect view`.

One log per arm: in Inspect's terms an arm is one solver run over a dataset, so the bench's tasks are
the log's samples and a cell's trials are that sample's epochs (numbered 1..n in the order they
started: trial numbers of several stores read as one may repeat, their sample ids never do). The
viewer then shows each arm's pass rate in its log list and every task with its trials side by side;
one log per cell would show twenty one-sample logs per arm instead.

The score of each trial is our verdict (`pass`, `incorrect`, `confused`, `hung`), its explanation
the verdict's reason; `invalid` and `error` samples are exported too, with those words as their
score, and an error sample also carries Inspect's sample error so the viewer flags it. Usage per
model keeps cache reads and writes apart (Inspect's `input_tokens` is fresh input only, like ours),
with the trial's cost in USD.

Which samples: those a report reads (store.read_summaries through report.reading), each cell's
current conditions with the bench known, else its newest conditions; verdicts of an older scoring
definition are left out and counted, as the report does. The messages come from the trial's kept
transcript when there is one, else from what every sample holds: the tool calls with their
(clipped) outputs and the final answer.

This is the only module that imports inspect_ai, lazily: the format is not a frozen public spec, so
logs are written only through inspect_ai's own API, in the version range the `[inspect]` extra pins.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .harness_broke import judge
from .inspect_messages import from_tool_calls, from_transcript, int_or_zero, utc_moment
from .report.model import plural
from .report.reading import newest, read_cell
from .sample import (
    OUTCOME_CONFUSED,
    OUTCOME_HUNG,
    OUTCOME_PASS,
    OUTCOMES,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_SCORED,
    TOKEN_COMPONENTS,
    Definition,
    effective_samples,
)
from .secrets import HARNESS_CREDENTIALS, redact
from .store import Cell, Problem, Store
from .transcript import read_transcript

INSTALL_HINT = "pip install 'pytest-benchcell[inspect]'"
SUPPORTED = ((0, 3, 285), (0, 4))  # the [inspect] extra's range: from the first, below the second
SCORER = "benchcell"
VERDICT = "verdict"  # the name of the one score of every sample
LOG_SUFFIX = ".eval"  # the viewer lists .eval logs whatever their name (.json only with a timestamp name)

class ExportError(Exception):
    """The export cannot be made (inspect_ai missing or of another version, nothing selected)."""


@dataclass
class Selection:
    """What to export: the CLI fills it the way `benchcell report` selects."""

    model_kind: str = "real"
    arms: Sequence[str] | None = None  # None: every arm of the store
    tasks: Sequence[str] | None = None  # None: every task of the store
    definitions: Mapping[tuple[str, str], Definition] | None = None  # the bench's current ones, if known
    secrets: Sequence[str] = ()  # values to redact once more (the exporter's credentials, declared secrets)
    prices: Any = None  # prices.PriceTable each trial's dollars are priced at; None: the package's table


@dataclass
class ExportResult:
    logs: list[Path] = field(default_factory=list)
    samples: dict[str, Counter[str]] = field(default_factory=dict)  # arm -> verdict -> count
    with_transcript: int = 0
    left_out: int = 0  # samples of other conditions, or judged by an older scoring definition
    problems: list[Problem] = field(default_factory=list)

    def lines(self, directory: Path) -> list[str]:
        """What the command prints: one line per log, what was left out, how to open them."""
        lines = []
        for path, (arm, verdicts) in zip(self.logs, sorted(self.samples.items())):
            counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items(), key=_verdict_order))
            lines.append(f"wrote {path}: arm {arm}, {plural(sum(verdicts.values()), 'trial')} ({counts})")
        total = sum(sum(verdicts.values()) for verdicts in self.samples.values())
        lines.append(
            f"transcripts: {self.with_transcript} of {total} trials; the others show the tool calls and final answer "
            "their sample holds"
        )
        if self.left_out:
            lines.append(
                f"left out: {self.left_out} samples of other conditions or judged by an older scoring definition "
                "(as in `benchcell report`)"
            )
        lines += [f"    {problem}" for problem in self.problems]
        lines.append(f"open them with: inspect view --log-dir {directory}")
        return lines


_ORDER = (*OUTCOMES, STATUS_INVALID, STATUS_ERROR)


def _verdict_order(item: tuple[str, int]) -> int:
    return _ORDER.index(item[0]) if item[0] in _ORDER else len(_ORDER)


@dataclass
class _Trial:
    sample: dict[str, Any]
    store_root: Path
    epoch: int = 0


def import_inspect() -> Any:
    """inspect_ai's log API, or ExportError saying how to install it."""
    try:
        import inspect_ai
        import inspect_ai.event
        import inspect_ai.log
        import inspect_ai.model
        import inspect_ai.scorer
        import inspect_ai.tool
    except ImportError as exc:
        raise ExportError(f"exporting Inspect logs needs inspect_ai ({exc}); install it with: {INSTALL_HINT}") from None
    version = str(getattr(inspect_ai, "__version__", ""))
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    low, high = SUPPORTED
    if not low <= numbers < high:
        raise ExportError(
            f"inspect_ai {version or '(version unknown)'} is installed; the export writes logs for inspect-ai "
            f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))} (its log format is not a frozen spec): {INSTALL_HINT}"
        )
    return inspect_ai


def harness_secrets(declared: Sequence[str] = ()) -> list[str]:
    """The secrets this process knows: the harness's credentials and the bench's declared secret
    variables, from the environment. Samples are redacted when stored; this is a second pass."""
    values = {os.environ.get(name, "") for name in (*HARNESS_CREDENTIALS, *declared)}
    return sorted((value for value in values if value), key=len, reverse=True)


# --- which samples ------------------------------------------------------------------------------
def select_trials(stores: Sequence[Store], selection: Selection, problems: list[Problem]) -> tuple[dict[str, dict[str, list[_Trial]]], int]:
    """arm -> task -> the trials to export (epochs numbered), and how many samples were left out."""
    from .store import StoreSet

    reader: Store | StoreSet = stores[0] if len(stores) == 1 else StoreSet([store.root for store in stores])
    cells = [
        cell for cell in reader.cells([selection.model_kind])
        if (selection.arms is None or cell.arm in selection.arms) and (selection.tasks is None or cell.task in selection.tasks)
    ]  # fmt: skip
    chosen: dict[str, dict[str, list[_Trial]]] = {}
    left_out = 0
    for cell in cells:
        pool = _pool_of(reader, cell, selection)
        rows = reader.iter_summaries(problems, cells=[cell], definitions=selection.definitions)
        keys = {row["id"]: row["provenance"]["fingerprint"] for row in rows}
        wanted = {sample_id for sample_id, key in keys.items() if key == pool}
        left_out += len(keys) - len(wanted)
        trials = [trial for trial in _full_samples(stores, cell) if trial.sample.get("id") in wanted]
        trials.sort(key=lambda trial: (str(trial.sample.get("started_at") or ""), int_or_zero(trial.sample.get("trial"))))
        for epoch, trial in enumerate(trials, start=1):
            trial.epoch = epoch
        if trials:
            chosen.setdefault(cell.arm, {})[cell.task] = trials
    return chosen, left_out


def _pool_of(reader: Any, cell: Cell, selection: Selection) -> str | None:
    """The pool key of the samples a report would read for this cell (report.figures.build_report)."""
    definition = (selection.definitions or {}).get((cell.arm, cell.task))
    if definition is not None:
        return definition.conditions
    used = newest(read_cell(reader, cell, [1.0] * len(TOKEN_COMPONENTS), []))  # its problems: select_trials
    return used.fingerprint if used is not None else None


def _full_samples(stores: Sequence[Store], cell: Cell) -> list[_Trial]:
    """Every trial sample of the cell, fully parsed, each id once (the first store that has it),
    with the latest rescore applied; with the store each came from (its transcript lives there)."""
    roots: dict[str, Path] = {}
    samples: list[dict[str, Any]] = []
    for store in stores:
        for sample in store.iter_samples([], cells=[cell]):
            sample_id = str(sample.get("id"))
            if sample.get("status") != "rescore" and sample_id in roots:
                continue
            roots.setdefault(sample_id, store.root)
            samples.append(sample)
    trials = effective_samples(samples)
    for sample in trials:
        judge(sample)  # a trial the harness broke is an error here as in every report
    return [_Trial(sample, roots[str(sample.get("id"))]) for sample in trials]


# --- writing ------------------------------------------------------------------------------------
def export_inspect(stores: Sequence[Store], directory: Path, selection: Selection) -> ExportResult:
    """Write one Inspect log per selected arm into `directory`; returns what was written.

    A trial without a readable transcript (an older store, a pruned or damaged file) exports with
    the tool calls and final answer its sample holds.
    """
    inspect_ai = import_inspect()
    result = ExportResult()
    chosen, result.left_out = select_trials(stores, selection, result.problems)
    if not chosen:
        raise ExportError(
            "nothing to export: no sample of the selection"
            + (f" ({result.left_out} samples of other conditions or an older scoring left out)" if result.left_out else "")
        )
    directory.mkdir(parents=True, exist_ok=True)
    writer = _LogWriter(inspect_ai, selection)
    for arm, tasks in sorted(chosen.items()):
        log, name = writer.log(arm, tasks, stores)
        path = directory / name
        inspect_ai.log.write_eval_log(log, str(path))
        result.logs.append(path)
        result.samples[arm] = Counter(_verdict(trial.sample) for trials in tasks.values() for trial in trials)
    result.with_transcript = writer.with_transcript
    return result


def _verdict(sample: Mapping[str, Any]) -> str:
    """The score of a trial: its outcome when scored, else its status (invalid, error)."""
    status = sample.get("status")
    if status == STATUS_SCORED and sample.get("outcome") in OUTCOMES:
        return str(sample["outcome"])
    return str(status if status in (STATUS_INVALID, STATUS_ERROR) else STATUS_ERROR)



class _LogWriter:
    def __init__(self, inspect_ai: Any, selection: Selection) -> None:
        self.ai = inspect_ai
        self.selection = selection
        self.with_transcript = 0
        self.intents: dict[tuple[Path, str], dict[str, Any]] = {}

    def log(self, arm: str, tasks: Mapping[str, list[_Trial]], stores: Sequence[Store]) -> tuple[Any, str]:
        L = self.ai.log
        samples = [self.sample(trial) for task in sorted(tasks) for trial in tasks[task]]
        trials = [trial for task in sorted(tasks) for trial in tasks[task]]
        verdicts = Counter(_verdict(trial.sample) for trial in trials)
        scored = sum(verdicts[outcome] for outcome in OUTCOMES)
        models = Counter(str(trial.sample.get("model") or "unknown") for trial in trials)
        model = self.model_name(models.most_common(1)[0][0])
        starts = sorted(str(trial.sample.get("started_at") or "") for trial in trials)
        ends = sorted(str(trial.sample.get("ended_at") or "") for trial in trials)
        ids = sorted(str(trial.sample.get("id")) for trial in trials)
        digest = hashlib.sha256("\n".join([self.selection.model_kind, arm, *ids]).encode()).hexdigest()[:22]
        spec = L.EvalSpec(
            eval_id=digest,
            run_id=digest,
            created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            task=arm,
            task_id=digest,
            task_display_name=f"{arm} ({self.selection.model_kind} model)",
            task_description=f"pytest-benchcell arm {arm}: its tasks are the samples, its trials the epochs",
            solver="claude-code",
            dataset=L.EvalDataset(name="benchcell", samples=len(tasks), sample_ids=sorted(tasks)),
            model=model,
            config=L.EvalConfig(epochs=max(len(ts) for ts in tasks.values())),
            packages={"pytest-benchcell": __version__},
            metadata={
                "arm": arm,
                "model_kind": self.selection.model_kind,
                "stores": [str(store.root) for store in stores],
                "samples": dict(verdicts),
                "exported_by": f"benchcell export inspect (pytest-benchcell {__version__})",
            },
        )
        metrics = {
            "pass_rate": L.EvalMetric(name="pass_rate", value=verdicts[OUTCOME_PASS] / scored if scored else 0.0),
            "scored": L.EvalMetric(name="scored", value=scored),
            **{name: L.EvalMetric(name=name, value=verdicts[name]) for name in (*OUTCOMES[1:], STATUS_INVALID, STATUS_ERROR)},
        }
        results = L.EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[L.EvalScore(name=VERDICT, scorer=SCORER, scored_samples=scored,
                                unscored_samples=len(samples) - scored, metrics=metrics)],
        )  # fmt: skip
        usage: dict[str, Any] = {}
        for sample in samples:
            for name, one in sample.model_usage.items():
                usage[name] = _add_usage(self.ai, usage.get(name), one)
        log = L.EvalLog(
            status="success",
            eval=spec,
            plan=L.EvalPlan(name="benchcell", steps=[L.EvalPlanStep(solver="claude-code", params={"arm": arm})]),
            results=results,
            stats=L.EvalStats(started_at=starts[0] if starts else "", completed_at=ends[-1] if ends else "", model_usage=usage),
            samples=samples,
        )
        stamp = (utc_moment(starts[-1]) if starts else None) or _dt.datetime.now(_dt.UTC)
        # Inspect's own name shape (timestamp_task_id): the same selection always gets the same name.
        return log, f"{stamp.strftime('%Y-%m-%dT%H-%M-%S')}_{arm}_{digest}{LOG_SUFFIX}"

    def model_name(self, model: str) -> str:
        # Inspect names models provider/model; a scripted trial never reached Anthropic.
        return f"{'anthropic' if self.selection.model_kind == 'real' else 'scripted'}/{model}"

    def sample(self, trial: _Trial) -> Any:
        M, L, S = self.ai.model, self.ai.log, self.ai.scorer
        sample = redact(trial.sample, self.selection.secrets) if self.selection.secrets else trial.sample
        task = str(sample.get("task"))
        verdict = _verdict(sample)
        events = read_transcript(trial.store_root, trial.sample)
        if events is not None and self.selection.secrets:
            events = redact({"events": events}, self.selection.secrets)["events"]
        intent = self.intent(trial.store_root, sample)
        started = utc_moment(sample.get("started_at")) or _dt.datetime.now(_dt.UTC)
        model = str(sample.get("model") or "unknown")
        if events:
            self.with_transcript += 1
            messages, timeline = from_transcript(self.ai, events, model, intent, started)
        else:
            messages, timeline = from_tool_calls(self.ai, sample, model, intent, started)
        final_answer = str(sample.get("final_answer") or "")
        reason = str(sample.get("reason") or "")
        differences = (sample.get("score") or {}).get("differences") or []
        score = S.Score(
            value=verdict,
            answer=final_answer or None,
            explanation=reason or ("the checker accepted the result" if verdict == OUTCOME_PASS else verdict),
            metadata={"status": sample.get("status"), "outcome": sample.get("outcome"), "differences": differences,
                      "leaks": sample.get("leaks") or [], "rescored": bool(sample.get("rescored"))},
        )  # fmt: skip
        duration = sample.get("duration_ms")
        seconds = duration / 1000.0 if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
        bounds = sample.get("bounds") or {}
        limit = None
        if verdict == OUTCOME_CONFUSED and type(bounds.get("turn_cap")) is int:
            limit = L.EvalSampleLimit(type="turn", limit=bounds["turn_cap"], reason=reason or None)
        elif verdict == OUTCOME_HUNG and type(bounds.get("wall_clock_ms")) is int:
            limit = L.EvalSampleLimit(type="time", limit=bounds["wall_clock_ms"] / 1000.0, reason=reason or None)
        error = invalidation = None
        if verdict == STATUS_INVALID:  # Inspect's own word for a sample that must not count
            invalidation = L.ProvenanceData(author=f"pytest-benchcell {__version__}", reason=reason or "invalid")
        if verdict == STATUS_ERROR:
            error = L.EvalError(message=f"harness error (not the agent's fault): {reason}", traceback="", traceback_ansi="")
        return L.EvalSample(
            id=task,
            epoch=trial.epoch,
            input=intent or f"task {task}",
            target="",
            messages=messages,
            output=M.ModelOutput.from_content(model, final_answer),
            scores={VERDICT: score},
            metadata={**_metadata(sample, verdict, bool(events)), **_dollars(sample, self.selection.prices)},
            events=timeline,
            model_usage=_usage(self.ai, sample, self.model_name),
            started_at=sample.get("started_at"),
            completed_at=sample.get("ended_at"),
            total_time=seconds,
            working_time=seconds,
            uuid=str(sample.get("id")),
            error=error,
            invalidation=invalidation,
            limit=limit,
            turn_count=sample.get("turns") if type(sample.get("turns")) is int else None,
        )

    def intent(self, root: Path, sample: Mapping[str, Any]) -> str:
        """The task's intent as the store's definitions file recorded it (placeholders unfilled)."""
        provenance = sample.get("provenance") or {}
        name = f"{provenance.get('conditions')}-{provenance.get('scoring')}"
        key = (root, name)
        if key not in self.intents:
            try:
                self.intents[key] = tomllib.loads((root / "definitions" / f"{name}.toml").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self.intents[key] = {}
        definitions = self.intents[key]
        task = (definitions.get("conditions") or definitions).get("task") or {}
        return str(task.get("intent") or "") if isinstance(task, dict) else ""


def _metadata(sample: Mapping[str, Any], verdict: str, transcript: bool) -> dict[str, Any]:
    keys = ("arm", "task", "trial", "id", "sitting", "status", "outcome", "reason", "tier", "bonus", "turns",
            "cli_num_turns", "duration_ms", "cost_usd", "result_subtype", "bounds", "leaks", "exec_audit", "provenance",
            "skill_use", "subagent_calls", "compactions")  # fmt: skip
    return {
        "verdict": verdict,
        **{key: sample.get(key) for key in keys if key in sample},
        "messages_from": "the kept transcript" if transcript else "the sample's tool calls and final answer (no transcript kept)",
    }


def _dollars(sample: Mapping[str, Any], prices: Any) -> dict[str, Any]:
    """The trial in US dollars at the selection's prices (prices.py; None: unknown), beside the CLI's own
    estimate (`cost_usd`), and whether its cache writes were priced at the default 5-minute lifetime."""
    from .prices import package_table, price_usage

    priced = price_usage(sample.get("usage"), sample.get("model"), prices or package_table())
    return {"dollars": priced.dollars, "dollars_default_lifetime": priced.assumed_5m}


def _usage(ai: Any, sample: Mapping[str, Any], model_name: Callable[[str], str]) -> dict[str, Any]:
    """Per model: fresh input (Inspect's input_tokens excludes the cache), cache writes and reads,
    output, total; the trial's cost goes with its model when it used one model (the CLI reports
    one cost per trial)."""
    usage = sample.get("usage") or {}
    by_model = usage.get("by_model") or {}
    if not by_model and usage.get("total"):
        by_model = {str(sample.get("model") or "unknown"): usage["total"]}
    cost = sample.get("cost_usd")
    out = {}
    for model, tokens in by_model.items():
        if not isinstance(tokens, Mapping):
            continue
        counts = {name: int_or_zero(tokens.get(name)) for name in TOKEN_COMPONENTS}
        out[model_name(str(model))] = ai.model.ModelUsage(
            input_tokens=counts["fresh_input"],
            output_tokens=counts["output"],
            input_tokens_cache_write=counts["cache_write"],
            input_tokens_cache_read=counts["cache_read"],
            total_tokens=sum(counts.values()),
            total_cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and len(by_model) == 1 else None,
        )
    return out


def _add_usage(ai: Any, left: Any, right: Any) -> Any:
    if left is None:
        return right
    costs = [cost for cost in (left.total_cost, right.total_cost) if cost is not None]
    return ai.model.ModelUsage(
        input_tokens=left.input_tokens + right.input_tokens,
        output_tokens=left.output_tokens + right.output_tokens,
        input_tokens_cache_write=(left.input_tokens_cache_write or 0) + (right.input_tokens_cache_write or 0),
        input_tokens_cache_read=(left.input_tokens_cache_read or 0) + (right.input_tokens_cache_read or 0),
        total_tokens=left.total_tokens + right.total_tokens,
        total_cost=sum(costs) if costs else None,
    )
