"""The one builder of the bundled CLI's variables (pytest_benchcell.cli_environment): what a trial,
the e2e tests and the overhead benchmark all hand the CLI."""

from __future__ import annotations

from pytest_benchcell.cli_environment import (
    SCRIPTED_API_KEY,
    isolated_cli_variables,
    offline_cli_environment,
    scripted_model_variables,
)


def test_the_cli_gets_a_config_folder_and_home_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "intranet.example")
    variables = isolated_cli_variables(tmp_path / "trial")

    assert variables["CLAUDE_CONFIG_DIR"] == str(tmp_path / "trial" / "claude-config")
    assert variables["HOME"] == str(tmp_path / "trial" / "home")
    assert (tmp_path / "trial" / "claude-config").is_dir() and (tmp_path / "trial" / "home").is_dir()
    # The user's own exemptions stay; loopback (the scripted model, the bench's services) is added.
    assert variables["NO_PROXY"] == variables["no_proxy"] == "intranet.example,127.0.0.1,localhost"
    assert variables["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_the_scripted_model_gets_its_own_key_and_no_inherited_credential():
    variables = scripted_model_variables("http://127.0.0.1:4242", max_retries=1)

    assert variables["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4242"
    assert variables["ANTHROPIC_API_KEY"] == SCRIPTED_API_KEY
    assert variables["ANTHROPIC_AUTH_TOKEN"] == variables["CLAUDE_CODE_OAUTH_TOKEN"] == ""
    assert variables["CLAUDE_CODE_MAX_RETRIES"] == "1"


def test_a_bare_offline_run_gets_both_and_never_retries_by_default(tmp_path):
    variables = offline_cli_environment("http://127.0.0.1:4242", tmp_path)

    assert variables["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4242"
    assert variables["HOME"] == str(tmp_path / "home")
    assert variables["CLAUDE_CODE_MAX_RETRIES"] == "0"
