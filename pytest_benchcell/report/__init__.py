"""Store -> report: tables with honest statistics, rendered as terminal lines, Markdown, JSON, HTML.

Pure: takes a Store and ReportSettings, returns a Report (plain dataclasses, every figure with its
interval and n), and renders it. matplotlib is imported only inside render_html.

The package has one room per responsibility:

* ``model``: the settings and the report's dataclasses (their field names are the JSON keys);
* ``reading``: the store, one cell at a time, reduced to per-cell summaries;
* ``figures``: every figure of every table, one module a responsibility (the statistics themselves
  are in the ``statistics`` package);
* ``renderers``: ``document`` (what every text format says), then one module per format:
  ``terminal``, ``markdown``, ``json``, ``html``.

A statistics change touches ``figures`` only; a new output format adds one renderer.
"""

from .figures import build_report
from .model import (
    COMPONENT_LABELS,
    DEFAULT_WEIGHTS,
    FINGERPRINT_POLICIES,
    REPORT_SCHEMA_VERSION,
    Report,
    ReportError,
    ReportSettings,
    TaskInfo,
    settings_for_bench,
)
from .reading import discover_tasks
from .renderers import render_html, render_json, render_markdown, render_terminal

__all__ = [
    "COMPONENT_LABELS",
    "DEFAULT_WEIGHTS",
    "FINGERPRINT_POLICIES",
    "REPORT_SCHEMA_VERSION",
    "Report",
    "ReportError",
    "ReportSettings",
    "TaskInfo",
    "build_report",
    "discover_tasks",
    "render_html",
    "render_json",
    "render_markdown",
    "render_terminal",
    "settings_for_bench",
]
