"""A trial's sample: the new one it starts as (identity, provenance, nothing measured yet), and its
append to the store, with a small `error` sample that keeps the spend when the full one is refused."""

from __future__ import annotations

import socket
import sys
from typing import Any

from .. import __version__
from ..agent import sdk_versions
from ..confinement import exec_audit_state, sandbox_state
from ..sample import SCHEMA_VERSION, STATUS_ERROR, STATUS_SCORED, new_sample_id, utc_now_iso, zero_tokens
from ..store import StoreError
from .spec import StoreUnavailable, TrialSpec


def _record(spec: TrialSpec, sample: dict[str, Any]) -> dict[str, Any]:
    """Append the sample; if the store refuses it (disk full, folder gone or read-only), append a
    small `error` sample that keeps the trial's spend; if that fails too, raise StoreUnavailable."""
    provenance = sample["provenance"]
    bounds = {"turn_cap": spec.turn_cap, "wall_clock_ms": spec.wall_clock_ms}
    try:
        spec.store.write_definitions(
            f"{provenance['conditions']}-{provenance['scoring']}", spec.bench.definitions(spec.arm, spec.task, **bounds)
        )
    except StoreError:
        pass  # a missing definitions file loses no measurement; the sample itself must still go in
    try:
        spec.store.append(sample)
        return sample
    except StoreError as exc:
        failure = exc
    kept = {key: sample[key] for key in _KEPT_ON_STORE_FAILURE if key in sample}
    was = sample["outcome"] if sample["status"] == STATUS_SCORED else sample["status"]
    fallback = {
        **kept,
        "status": STATUS_ERROR,
        "outcome": None,
        "reason": f"the trial ended {was}, but its full sample could not be stored: {failure}",
    }
    try:
        spec.store.append(fallback)
    except StoreError as again:
        raise StoreUnavailable(f"{again}; the sitting stops (trial {spec.trial} of {spec.arm} x {spec.task} is not recorded)") from again
    return fallback


# What an `error` sample keeps when the full sample could not be stored: identity, spend, provenance.
_KEPT_ON_STORE_FAILURE = (
    "schema", "id", "sitting", "arm", "task", "tier", "bonus", "trial", "started_at", "ended_at", "model",
    "model_kind", "usage", "turns", "duration_ms", "api_wait_ms", "cost_usd", "result_subtype", "bounds", "provenance",
    "transcript", "api_error",
)  # fmt: skip


def _new_sample(spec: TrialSpec) -> dict[str, Any]:
    bench, task = spec.bench, spec.bench.tasks[spec.task]
    definition = bench.definition(spec.arm, spec.task, turn_cap=spec.turn_cap, wall_clock_ms=spec.wall_clock_ms)
    versions = sdk_versions()  # imports the SDK on the first trial: not part of the trial's time
    return {
        "schema": SCHEMA_VERSION,
        "id": new_sample_id(),
        "sitting": spec.sitting,
        "arm": spec.arm,
        "task": spec.task,
        "tier": task.tier,
        "bonus": task.bonus,
        "trial": spec.trial,
        "started_at": utc_now_iso(),
        "ended_at": None,
        "model": bench.model,
        "model_kind": spec.model_kind,
        "usage": {"total": zero_tokens(), "by_model": {}},
        "turns": 0,
        "duration_ms": 0,
        "api_wait_ms": 0,
        "api_retries": 0,
        "cost_usd": None,
        "status": STATUS_ERROR,
        "outcome": None,
        "reason": "the trial did not finish",
        "result_subtype": None,
        "final_answer": "",
        "tool_calls": [],
        "leaks": [],
        "score": {"differences": []},
        "state": None,
        "probe": dict(spec.probe) if spec.probe is not None else None,
        "bounds": {"turn_cap": spec.turn_cap, "wall_clock_ms": spec.wall_clock_ms},
        "provenance": {
            "plugin": __version__,
            **versions,
            "python": f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            "host": socket.gethostname(),  # where it ran: the machine, and the xdist worker (None: no worker)
            "gateway": spec.gateway,
            "fingerprint": definition.conditions,  # what older readers pool by
            "conditions": definition.conditions,
            "scoring": definition.scoring,
            "model_kind": spec.model_kind,
            "exec_audit": exec_audit_state(bench, bench.arms[spec.arm]).describe(),
            "sandbox": sandbox_state(bench, bench.arms[spec.arm]).describe(),
            **({"horizon_pairs": bench.horizon_pairs} if bench.horizon_pairs is not None else {}),  # horizon.py
        },
        "exec_audit": None,  # what the execution audit saw, when it ran
        "sandbox_blocked": [],  # failures of the arm's own programs the sandbox caused (isolation/blocked.py)
        "api_error": None,  # the model API ended the trial: {kind, status, error, attempts} (api_faults.py)
    }
