"""The report as JSON: every figure with its interval and n (data/report.schema.json)."""

from __future__ import annotations

import json

from ..model import Report

def render_json(report: Report) -> str:
    """Every figure with its interval and n; sorted keys, so equal reports are equal bytes.

    The shape is described by pytest_benchcell/data/report.schema.json (JSON Schema draft 2020-12).
    """
    return json.dumps(report.to_dict(), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"

