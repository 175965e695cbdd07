"""The variables the bundled Claude Code CLI runs with: one builder for a trial's confinement, the
scripted model's connection, and the tests and benchmarks that drive the CLI bare against it.

Kept in one place because each variable is a fact measured once (docs/design.md, the offline notes):
the CLI must neither read the user's settings nor phone home, and against a local fake Messages API
it must neither retry for minutes nor go through a proxy.
"""

from __future__ import annotations

import os
from pathlib import Path

# The key a scripted sitting hands the CLI: the fake API accepts any key, and a recognisable one
# tells a reader of a transcript that no real credential was ever in play.
SCRIPTED_API_KEY = "scripted-model-key"

# The CLI's traffic other than model requests (telemetry, update checks, error reports): off, so an
# offline run never waits on the network and a real one sends nothing but the trial.
_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def isolated_cli_variables(folder: Path) -> dict[str, str]:
    """A config folder and home of its own under ``folder`` (created), the CLI's extra traffic off,
    and loopback never proxied: no user settings, skills, CLAUDE.md or MCP servers leak in, and
    nothing is written into the user's ~/.claude."""
    (folder / "claude-config").mkdir(parents=True, exist_ok=True)
    (folder / "home").mkdir(parents=True, exist_ok=True)
    no_proxy = ",".join(part for part in (os.environ.get("NO_PROXY", ""), "127.0.0.1,localhost") if part)
    return {
        "CLAUDE_CONFIG_DIR": str(folder / "claude-config"),
        "HOME": str(folder / "home"),
        **_QUIET,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


def scripted_model_variables(base_url: str, *, max_retries: int = 1) -> dict[str, str]:
    """Point the CLI at a scripted model on ``base_url`` with a key of its own, every other
    credential emptied (an inherited one must never reach the fake API or a real one), and at most
    ``max_retries`` retries of a failed request (the CLI's default waits minutes)."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": SCRIPTED_API_KEY,
        "ANTHROPIC_AUTH_TOKEN": "",
        "CLAUDE_CODE_OAUTH_TOKEN": "",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
    }


def offline_cli_environment(base_url: str, folder: Path, *, max_retries: int = 0) -> dict[str, str]:
    """Both of the above: the CLI run bare (no trial, no arm) against a scripted model, as the
    end-to-end tests and the overhead benchmark do."""
    return {**isolated_cli_variables(folder), **scripted_model_variables(base_url, max_retries=max_retries)}
