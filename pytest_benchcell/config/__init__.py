"""Load and validate bench.toml into frozen dataclasses.

Every problem becomes one BenchConfigError whose message names the file, the key, the bad value and
what is allowed. The plugin turns it into pytest.UsageError; this package knows nothing of pytest.
Unknown keys are errors too: a typo such as `turncap` must not silently fall back to a default.

One module a responsibility, lower ones never importing higher ones: `model` (defaults, rules, the
dataclasses) <- `reader` (one table read, its refusals) and `placeholders` <- `arms`, `tasks` <-
`loading` (`load_bench`, `parse_bench`). Every public name is re-exported here.
"""

from .loading import (
    COMPARISONS_ALLOWED,
    TOP_LEVEL_TABLES,
    load_bench,
    parse_bench,
)
from .model import (
    ARGUMENT_RULE_KEYS,
    BUILTIN_TOOLS,
    CHANGE_OPS,
    DEFAULT_EXEC_AUDIT,
    DEFAULT_FLOOR,
    DEFAULT_MCP_TIMEOUT_MS,
    DEFAULT_READY_TIMEOUT_MS,
    DEFAULT_SANDBOX,
    DEFAULT_STORE,
    DEFAULT_TIERS,
    DEFAULT_TRIALS,
    DEFAULT_TURN_CAP,
    DEFAULT_WALL_CLOCK_MS,
    DEFAULT_WEIGHTS,
    EXEC_AUDIT_MODES,
    MIN_MCP_TIMEOUT_MS,
    OPTION_NAME,
    SANDBOX_LIMIT_KEYS,
    SANDBOX_MODES,
    SMALLEST_EFFECT_RULES,
    URL_PREFIX,
    WHITESPACE_POLICIES,
    Arm,
    Bench,
    BenchConfigError,
    McpServer,
    Task,
    did_you_mean,
)
from .placeholders import (
    PLACEHOLDER,
    fill_placeholders,
)
from .reader import (
    positive_int,
)

__all__ = [
    "ARGUMENT_RULE_KEYS",
    "BUILTIN_TOOLS",
    "CHANGE_OPS",
    "COMPARISONS_ALLOWED",
    "DEFAULT_EXEC_AUDIT",
    "DEFAULT_FLOOR",
    "DEFAULT_MCP_TIMEOUT_MS",
    "DEFAULT_READY_TIMEOUT_MS",
    "DEFAULT_SANDBOX",
    "DEFAULT_STORE",
    "DEFAULT_TIERS",
    "DEFAULT_TRIALS",
    "DEFAULT_TURN_CAP",
    "DEFAULT_WALL_CLOCK_MS",
    "DEFAULT_WEIGHTS",
    "EXEC_AUDIT_MODES",
    "MIN_MCP_TIMEOUT_MS",
    "OPTION_NAME",
    "PLACEHOLDER",
    "SANDBOX_LIMIT_KEYS",
    "SANDBOX_MODES",
    "SMALLEST_EFFECT_RULES",
    "TOP_LEVEL_TABLES",
    "URL_PREFIX",
    "WHITESPACE_POLICIES",
    "Arm",
    "Bench",
    "BenchConfigError",
    "McpServer",
    "Task",
    "did_you_mean",
    "fill_placeholders",
    "load_bench",
    "parse_bench",
    "positive_int",
]
