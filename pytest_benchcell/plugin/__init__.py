"""pytest hooks of pytest-benchcell: the module pytest loads (entry point pytest11 benchcell). Hooks
and pytest glue only; the work happens in the cores. This package is the only one that imports pytest.

Outcome mapping (docs/sittings.md, "What the pytest outcome means"):
- scored pass                      -> PASSED
- scored incorrect/confused/hung   -> FAILED, "<tag>: <reason>" in the short summary
- invalid (a foreign tool ran)     -> INVALID (letter I), counted apart, never a pass
- harness error                    -> ERROR (letter E), counted apart from agent failures

pytest registers the hook functions it finds on this module: the module-level hooks live here (and
`pytest_addoption` is re-exported from options.py); the plugin objects pytest_configure registers
live in their own modules: item.py (the trial item), sitting_hooks.py (the sitting's hooks),
xdist_bridge.py, offload.py (rescore and report), with planning.py making a sitting's plan.

Cheap when unused: pytest imports this package in every run of every project that has the plugin
installed, so it imports nothing at module level but the hook specifications, keys.py and
options.py; the other modules of the package are imported once pytest_configure needs them (their
names stay attributes of this module, loaded on first access), and the cores (config, store,
sitting, filelock, the SDK) only once a bench option asks for them.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from .. import hookspecs
from .keys import (
    API_ERROR_PROPERTY,
    BLOCKED_PROPERTY,
    COST_PROPERTY,
    MODEL_REAL,
    MODEL_SCRIPTED,
    PROGRESS_PROPERTY,
    REASON_PROPERTY,
    SITTING_KEY,
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_PROPERTY,
    STATUS_SCORED,
    UNMETERED_PROPERTY,
    WORKER_PLAN_KEY,
)
from .options import (
    BENCH_CONFIG_ALLOWED,
    FILL_DECIDE,
    HTML_EXTRA_HINT,
    REPORT_OUTPUTS,
    STORE_ALLOWED,
    _bench_requested,
    _fill_target,
    _load,
    _positive_int,
    _refuse_unusable_outputs,
    _refuse_weights_outside_reports,
    _report_target,
    _require_extra,
    _store,
    _store_source,
    _trials_per_cell,
    bench_location,
    pytest_addoption,
)

# The names plugin.py had that live in the modules imported on demand: module -> names.
_ON_DEMAND = {
    "item": ("TRIAL_EXCEPTIONS", "TRIAL_TIMEOUT_MARGIN_S", "BenchFile", "TrialItem", "_outcome_exception"),
    "offload": ("OffloadPlugin", "ReportPlugin", "RescorePlugin"),
    "planning": (
        "CREDENTIAL_HINT", "_apply_probe", "_decide", "_has_credentials", "_load_worker_bench", "_plan_sitting",
        "_preflight", "_probe_exclusions", "_refuse_too_many_trials", "_run_probe", "_selection", "_trials_wanted",
        "_worker_spool", "_xdist_controller",
    ),
    "sitting_hooks": ("SittingPlugin", "_raise_keyboard_interrupt"),
    "xdist_bridge": ("_XdistBridge", "_XdistWorker"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _ON_DEMAND.items() for name in names}

__all__ = [  # the hooks pytest registers from this module, and the names imported with it (_ON_DEMAND: the others)
    "API_ERROR_PROPERTY",
    "BENCH_CONFIG_ALLOWED",
    "BLOCKED_PROPERTY",
    "COST_PROPERTY",
    "FILL_DECIDE",
    "HTML_EXTRA_HINT",
    "MODEL_REAL",
    "MODEL_SCRIPTED",
    "PROGRESS_PROPERTY",
    "REASON_PROPERTY",
    "REPORT_OUTPUTS",
    "SITTING_KEY",
    "STATUS_ERROR",
    "STATUS_INVALID",
    "STATUS_PROPERTY",
    "STATUS_SCORED",
    "STORE_ALLOWED",
    "UNMETERED_PROPERTY",
    "WORKER_PLAN_KEY",
    "_bench_requested",
    "_fill_target",
    "_load",
    "_positive_int",
    "_refuse_unusable_outputs",
    "_refuse_weights_outside_reports",
    "_report_target",
    "_require_extra",
    "_store",
    "_store_source",
    "_trials_per_cell",
    "bench_location",
    "hookspecs",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_teststatus",
]


def __getattr__(name: str) -> Any:
    """A name of a module imported on demand (PEP 562): `pytest_benchcell.plugin.TrialItem` keeps
    working without every pytest run paying for the sitting's classes."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "benchcell: one trial of a benchmark cell (added by pytest-benchcell)")
    if config.option.help:
        return
    if config.option.bench_rescore:
        from .offload import RescorePlugin

        _refuse_weights_outside_reports(config)
        config.pluginmanager.register(RescorePlugin(config, _load(config)), "benchcell-rescore")
        return
    option = config.option
    if (option.bench_report or option.bench_report_md or option.bench_report_json or option.bench_report_html
            or option.bench_report_store):
        _refuse_unusable_outputs(config)
        if option.bench_report_html:
            _require_extra("matplotlib", HTML_EXTRA_HINT)  # before any report file is written
        from .offload import ReportPlugin

        config.pluginmanager.register(ReportPlugin(config, _load(config)), "benchcell-report")
        return
    if not _bench_requested(config):
        return
    from .planning import _plan_sitting
    from .sitting_hooks import SittingPlugin
    from .xdist_bridge import _XdistBridge, _XdistWorker

    _refuse_weights_outside_reports(config)
    try:
        state = _plan_sitting(config)
    except pytest.UsageError as exc:
        if WORKER_PLAN_KEY not in getattr(config, "workerinput", {}):
            raise
        from ..remote import REFUSAL_PREFIX  # the controller names this worker's gateway and stops

        raise pytest.UsageError(f"{REFUSAL_PREFIX}{exc}") from None
    config.stash[SITTING_KEY] = state
    # A sitting runs trials only: the bench file is what gets collected, not the project's tests
    # (which would otherwise be imported and run beside trials that spend tokens).
    config.args[:] = [str(state.bench.path)]
    config.pluginmanager.register(SittingPlugin(state, config), "benchcell-sitting")
    if WORKER_PLAN_KEY in getattr(config, "workerinput", {}):
        config.pluginmanager.register(_XdistWorker(state, config), "benchcell-xdist-worker")
    elif config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistBridge(state, config), "benchcell-xdist")


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    if report.when != "call" or not report.failed:
        return None
    status = dict(report.user_properties).get(STATUS_PROPERTY)
    if status == STATUS_INVALID:
        return "invalid", "I", "INVALID"
    if status == STATUS_ERROR:
        return "error", "E", "ERROR"
    return None
