"""The report hooks: the modes that run no trials, --bench-rescore and --bench-report (tables in the
terminal, and Markdown, JSON or HTML files)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .keys import MODEL_REAL, MODEL_SCRIPTED
from .options import _report_target, _store
from .planning import _probe_exclusions, _selection

if TYPE_CHECKING:
    from ..config import Bench

class OffloadPlugin:
    """Base for modes that run no trials (rescore, report): nothing is collected, and pytest's
    "no tests collected" is success for them."""

    def __init__(self, config: pytest.Config, bench: Bench) -> None:
        self.config = config
        self.bench = bench
        self.lines: list[str] = []

    def selected_cells(self, model_kind: str) -> list[Any]:
        from ..store import Cell

        option = self.config.option
        arms, tasks = _selection(self.bench, option.bench_arm or ["all"], option.bench_task or ["all"])
        return [Cell(model_kind, arm, task) for arm in arms for task in tasks]

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool:
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK


class RescorePlugin(OffloadPlugin):
    """--bench-rescore: new verdicts for stored samples from the current checker."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from ..rescore import rescore_cells, samples_elsewhere  # imports the trial machinery, not the SDK itself
        from ..sitting import new_sitting_id

        option = self.config.option
        model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
        store = _store(self.config, self.bench, write=True)
        cells = [cell for cell in self.selected_cells(model_kind) if store.samples_path(cell).exists()]
        tally = rescore_cells(self.bench, store, cells, self.config.hook, sitting=new_sitting_id())
        self.lines = tally.summary_lines(f"{len(cells)} cell{'' if len(cells) == 1 else 's'} of {store.root / model_kind}")
        if not cells:  # real and scripted samples live apart: say where this selection's samples are
            other_kind = MODEL_REAL if model_kind == MODEL_SCRIPTED else MODEL_SCRIPTED
            flag = "add --bench-scripted" if other_kind == MODEL_SCRIPTED else "leave out --bench-scripted"
            self.lines.extend(samples_elsewhere(store, self.selected_cells(other_kind), flag))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "benchcell rescore")
        for line in self.lines:
            terminalreporter.write_line(line)


class ReportPlugin(OffloadPlugin):
    """--bench-report: tables from the store, in the terminal and optionally as files."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from ..cli import UsageError, parse_weights
        from ..report import (
            ReportError,
            build_report,
            render_html,
            render_json,
            render_markdown,
            render_terminal,
            settings_for_bench,
        )

        option = self.config.option
        model_kind = MODEL_SCRIPTED if option.bench_scripted else MODEL_REAL
        cells = self.selected_cells(model_kind)
        settings = settings_for_bench(self.bench, model_kind=model_kind)
        if option.bench_turn_cap or option.bench_wall_clock_ms:  # the bounds are part of the conditions
            settings.definitions = {
                (cell.arm, cell.task): self.bench.definition(
                    cell.arm, cell.task, turn_cap=option.bench_turn_cap, wall_clock_ms=option.bench_wall_clock_ms
                )
                for cell in cells
                if self.bench.binaries_found(cell.arm)
            }
        settings.arms = list(dict.fromkeys(cell.arm for cell in cells))
        settings.tasks = {task: info for task, info in (settings.tasks or {}).items() if any(c.task == task for c in cells)}
        for task, reason in _probe_exclusions(self.config, self.bench).items():
            if task in settings.tasks:
                settings.tasks[task] = dataclasses.replace(settings.tasks[task], excluded=reason)
        try:
            if option.bench_weights:
                settings.weights = parse_weights(option.bench_weights, settings.weights)
            settings.validate()
        except (UsageError, ReportError) as exc:
            raise pytest.UsageError(str(exc).replace("--weights:", "--bench-weights:")) from None
        store = _store(self.config, self.bench, write=False)
        extra = [(self.config.invocation_params.dir / path).resolve() for path in option.bench_report_store]
        for path in extra:
            if not path.is_dir():
                raise pytest.UsageError(f"--bench-report-store: {path} is not a folder; allowed: a store folder")
        try:  # a ReportError here: the bench's horizon_pairs is not the one the samples recorded
            if extra:
                from ..store import StoreSet

                report = build_report(StoreSet([store.root, *extra]), settings)
            else:
                report = build_report(store, settings)
        except ReportError as exc:
            raise pytest.UsageError(f"{self.bench.path}: [bench] horizon_pairs: {exc}") from None
        self.lines = render_terminal(report)
        writers = (
            (option.bench_report_md, render_markdown),
            (option.bench_report_json, render_json),
            (option.bench_report_html, render_html),
        )
        for path, render in writers:
            if path:
                target = _report_target(self.config, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(render(report), encoding="utf-8")
                self.lines.append(f"wrote {target}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "benchcell report")
        for line in self.lines:
            terminalreporter.write_line(line)
