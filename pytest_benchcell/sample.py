"""The sample record: the one JSON object the store keeps per trial.

Pure values only. The shape is documented in docs/store.md ("The sample format") and in
docs/architecture.md; SCHEMA_VERSION changes whenever a field changes meaning.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# 2: provenance carries `conditions` and `scoring` (docs/store.md, "Accumulating samples: conditions and scoring"), usage.total may
#    be null (unknown), `turns` counts model replies. Schema-1 samples keep their single `fingerprint`.
SCHEMA_VERSION = 2

# status: what kind of record this is.
STATUS_SCORED = "scored"  # the agent ran and was scored: outcome says how it went
STATUS_INVALID = "invalid"  # a tool outside the arm actually ran: kept, never scored
STATUS_ERROR = "error"  # the harness failed (provisioning, API error, hook crash): not the agent's fault
STATUS_RESCORE = "rescore"  # not a trial: a later verdict for the sample named in rescore_of
STATUSES = (STATUS_SCORED, STATUS_INVALID, STATUS_ERROR, STATUS_RESCORE)
RECORD_RESCORE = "rescore"

# outcome of a scored trial.
OUTCOME_PASS = "pass"
OUTCOME_INCORRECT = "incorrect"  # finished, but the checker rejected the result
OUTCOME_CONFUSED = "confused"  # turn cap reached
OUTCOME_HUNG = "hung"  # wall-clock backstop fired
OUTCOMES = (OUTCOME_PASS, OUTCOME_INCORRECT, OUTCOME_CONFUSED, OUTCOME_HUNG)
FAILURE_TAGS = (OUTCOME_INCORRECT, OUTCOME_CONFUSED, OUTCOME_HUNG)
# Outcomes the checker decides, so they depend on the scoring definition. confused and hung are
# bounds: they end the trial before any checker runs, whatever the facts say.
CHECKER_OUTCOMES = (OUTCOME_PASS, OUTCOME_INCORRECT)

MODEL_REAL = "real"
MODEL_SCRIPTED = "scripted"
MODEL_KINDS = (MODEL_REAL, MODEL_SCRIPTED)

TOKEN_COMPONENTS = ("fresh_input", "cache_write", "cache_read", "output")

# The SDK reports two usage shapes with different casing; reading one with the other's keys
# silently yields zeros (the upstream harness lost every token that way), so both are pinned here.
_SNAKE_USAGE_KEYS = {
    "fresh_input": "input_tokens",
    "cache_write": "cache_creation_input_tokens",
    "cache_read": "cache_read_input_tokens",
    "output": "output_tokens",
}
_CAMEL_USAGE_KEYS = {
    "fresh_input": "inputTokens",
    "cache_write": "cacheCreationInputTokens",
    "cache_read": "cacheReadInputTokens",
    "output": "outputTokens",
}


def conditions_of(sample: Mapping[str, Any]) -> str:
    """What decides pooling: the conditions fingerprint (schema 2), or the single fingerprint a
    schema-1 sample recorded (which covered conditions and scoring together)."""
    provenance = sample.get("provenance")
    if not isinstance(provenance, dict):
        return ""
    return str(provenance.get("conditions") or provenance.get("fingerprint") or "")


def scoring_of(sample: Mapping[str, Any]) -> str:
    """The scoring fingerprint the sample's verdict was computed under (schema 1: its single fingerprint)."""
    provenance = sample.get("provenance")
    if not isinstance(provenance, dict):
        return ""
    return str(provenance.get("scoring") or provenance.get("fingerprint") or "")


@dataclass(frozen=True)
class Definition:
    """The current definition of one cell, as the bench gives it now (config.Bench.definition).

    `legacy` is the single fingerprint a schema-1 plugin computed for these same definitions in this
    checkout: schema-1 samples that recorded it are pooled with the current conditions and scoring.
    """

    conditions: str
    scoring: str
    legacy: str | None = None

    def pools(self, conditions: str) -> bool:
        return conditions == self.conditions or (self.legacy is not None and conditions == self.legacy)

    def scores(self, scoring: str) -> bool:
        return scoring == self.scoring or (self.legacy is not None and scoring == self.legacy)

    def is_current(self, status: Any, outcome: Any, conditions: str, scoring: str) -> bool:
        """A scored sample of these conditions whose verdict (if the checker gave it) is of this scoring."""
        if status != STATUS_SCORED or not self.pools(conditions):
            return False
        return outcome not in CHECKER_OUTCOMES or self.scores(scoring)


def zero_tokens() -> dict[str, int]:
    return dict.fromkeys(TOKEN_COMPONENTS, 0)


def tokens_from_snake(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """Token components from an API-style usage block (input_tokens, ...)."""
    usage = usage or {}
    return {name: int(usage.get(key) or 0) for name, key in _SNAKE_USAGE_KEYS.items()}


def tokens_from_camel(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """Token components from the SDK's per-model usage map entry (inputTokens, ...)."""
    usage = usage or {}
    return {name: int(usage.get(key) or 0) for name, key in _CAMEL_USAGE_KEYS.items()}


def add_tokens(left: Mapping[str, int], right: Mapping[str, int]) -> dict[str, int]:
    return {name: int(left.get(name, 0)) + int(right.get(name, 0)) for name in TOKEN_COMPONENTS}


def sum_tokens(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = zero_tokens()
    for part in parts:
        total = add_tokens(total, part)
    return total


def raw_tokens(tokens: Mapping[str, int]) -> int:
    return sum(int(tokens.get(name, 0)) for name in TOKEN_COMPONENTS)


def cost_equivalent(tokens: Mapping[str, int] | None, weights: Mapping[str, float]) -> float:
    """Tokens weighted by price ratios relative to fresh input (see [pricing] in bench.toml).

    Unknown usage (None: no reply ever reported any) adds nothing to a sitting's spend figure."""
    if not tokens:
        return 0.0
    return sum(float(weights[name]) * int(tokens.get(name, 0)) for name in TOKEN_COMPONENTS)


def new_sample_id() -> str:
    return uuid.uuid4().hex


def utc_now_iso() -> str:
    now = _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def effective_samples(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One cell's trial samples with the latest rescore of each applied over its verdict.

    Rescore records are appended after their originals (--bench-rescore); they carry a new
    outcome, reason and differences for the sample named in `rescore_of`, and nothing else. The
    result holds only trial samples, in store order, each marked `rescored: true` when overridden.
    """
    originals: list[dict[str, Any]] = []
    latest: dict[str, Mapping[str, Any]] = {}
    for sample in samples:
        if sample.get("status") == STATUS_RESCORE:
            latest[str(sample.get("rescore_of"))] = sample
        else:
            originals.append(dict(sample))
    for sample in originals:
        override = latest.get(str(sample.get("id")))
        if override is not None:
            sample["outcome"] = override.get("outcome")
            sample["reason"] = override.get("reason", "")
            sample["score"] = override.get("score", {})
            sample["rescored"] = True
            # The verdict now stands under the scoring it was re-computed with.
            provenance = dict(sample.get("provenance") or {})
            provenance["scoring"] = scoring_of(override)
            provenance.setdefault("conditions", conditions_of(sample))
            sample["provenance"] = provenance
    return originals
