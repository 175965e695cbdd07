"""The append-only sample store (see docs/architecture.md).

One module a responsibility, lower ones never importing higher ones:
`layout` (where things live, what a sample must carry) <- `lines` (the line format) <- `index` (the
checked index) <- `appending` <- `lock` (the lock and trial numbers) <- `reading` (one or several
stores) <- `stores` (`Store`, `StoreSet`) <- `merge`.

Guarantees:
- Nothing is ever rewritten or deleted. The only write operations are appends and the creation of a
  definitions file that does not exist yet.
- Every append and every reservation happens under one cross-process filelock, is written with a
  single O_APPEND write, flushed and fsynced before the lock is released.
- Trial numbers are handed out under the same lock, from the highest number ever reserved or stored
  for the cell, so two sittings of one cell never get the same number. Gaps are normal.
- An append that fails (disk full, read-only, folder gone) raises StoreError naming the store and
  the cause; bytes it did write are cut back under the lock (they were never a sample), so the
  file is as before. A store folder that vanishes mid-sitting is never silently recreated.
- A torn last line (a crash mid-write) never breaks reading: it is reported as a problem with its line
  number. The next append first terminates the torn fragment with a newline (appending, not
  rewriting), so the new sample always starts on a line of its own.
"""

from .index import agent_ms, summary_of
from .layout import (
    DEFINITIONS_DIR,
    DUPLICATE,
    INDEX_SUFFIX,
    LOCK_NAME,
    REQUIRED_SAMPLE_KEYS,
    RESERVATIONS_SUFFIX,
    SAMPLES_SUFFIX,
    UNREADABLE,
    Cell,
    CellContents,
    Layout,
    Problem,
    StoreError,
    looks_like_store,
    validate_sample,
)
from .lines import StoreLine, sample_line
from .lock import LOCK_TIMEOUT_S
from .merge import MERGE_BATCH_BYTES, MergeResult, merge_stores, other_conditions
from .reading import STALE_PREFIX, CellCount, SampleLine, count_rows, read_summaries, samples_at, store_root_of
from .stores import Store, StoreSet

__all__ = [
    "agent_ms",
    "DEFINITIONS_DIR",
    "DUPLICATE",
    "INDEX_SUFFIX",
    "LOCK_NAME",
    "LOCK_TIMEOUT_S",
    "MERGE_BATCH_BYTES",
    "REQUIRED_SAMPLE_KEYS",
    "RESERVATIONS_SUFFIX",
    "SAMPLES_SUFFIX",
    "STALE_PREFIX",
    "UNREADABLE",
    "Cell",
    "CellContents",
    "CellCount",
    "Layout",
    "MergeResult",
    "Problem",
    "SampleLine",
    "Store",
    "StoreError",
    "StoreLine",
    "StoreSet",
    "count_rows",
    "looks_like_store",
    "merge_stores",
    "other_conditions",
    "read_summaries",
    "sample_line",
    "samples_at",
    "store_root_of",
    "summary_of",
    "validate_sample",
]
