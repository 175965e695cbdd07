"""curl_rule: which curl command lines stay on the allowed base URLs (pure unit tests), and the
guard's one call into it (a real command line parsed by the guard, then checked)."""

from __future__ import annotations

import pytest

from pytest_benchcell import isolation
from pytest_benchcell.isolation.curl_rule import CurlArgument, CurlConfinement, curl_refusal, expand_fixed

BASE = "http://127.0.0.1:41234/api"
CONFINED = CurlConfinement(allowed=(BASE,), variables={"TRACKER_URL": BASE, "TRACKER_TOKEN": "secret-token-value"})


def refusal(*args: str) -> str:
    """Arguments as written; the literal value is what bash would pass when nothing is expanded."""
    return curl_refusal([CurlArgument(raw, expand_fixed(raw, {})) for raw in args], CONFINED)


@pytest.mark.parametrize(
    "raw, value",
    [
        ('"$TRACKER_URL/issues?state=open"', BASE + "/issues?state=open"),
        ("${TRACKER_URL}/issues", BASE + "/issues"),
        ("'$TRACKER_URL'", "$TRACKER_URL"),  # single quotes: no expansion
        ('"a\\"b"', 'a"b'),
        ("$OTHER/x", None),
        ('"$(echo x)"', None),
        ("`echo x`", None),
        ("${TRACKER_URL%/api}/x", None),
        ("http://host/*", None),  # a wildcard outside quotes
        ("~/x", None),
        ('"unterminated', None),
    ],
)
def test_expand_fixed_knows_only_quotes_escapes_and_the_fixed_variables(raw, value):
    assert expand_fixed(raw, CONFINED.variables) == value


@pytest.mark.parametrize(
    "args",
    [
        ("-s", "http://127.0.0.1:41234/api/issues"),
        ("-sS", "-H", "Authorization: Bearer $TRACKER_TOKEN", '"$TRACKER_URL/issues"'),
        ("-s", "-X", "PATCH", "-d", '{"state": "closed"}', "$TRACKER_URL/issues/2"),
        ("-sXPATCH", "$TRACKER_URL/issues/2"),  # a value attached to its option
        ("--url", "$TRACKER_URL/issues", "--silent", "--fail", "--no-progress-meter"),
        ("127.0.0.1:41234/api/labels",),  # no scheme: curl assumes http://
        ("-s", "$TRACKER_URL"),  # the base URL itself
        ("-s", "-w", "%{http_code}", "$TRACKER_URL"),
        ("-s", '"$TRACKER_URL/issues/$n"'),  # a loop variable in the path, quoted
        ("-s", '"$TRACKER_URL?page=$page"'),
    ],
)
def test_requests_to_the_service_are_allowed(args):
    assert refusal(*args) == ""


@pytest.mark.parametrize(
    "args, reason",
    [
        (("https://example.com/",), "may only reach http://127.0.0.1:41234/api"),
        (("http://127.0.0.1:41235/api/issues",), "may only reach"),  # another port
        (("http://localhost:41234/api/issues",), "may only reach"),  # another name for the host
        (("https://127.0.0.1:41234/api/issues",), "may only reach"),  # another scheme
        (("http://127.0.0.1:41234/other",), "may only reach"),  # outside the base path
        (("http://127.0.0.1:41234@evil.example/api",), "may only reach"),  # a user part
        (("http://127.0.0.1:41234\\@evil.example/api",), "may only reach"),
        (("$TRACKER_URL/issues", "http://evil.example/"), "may only reach"),  # a second URL
        (("--url", "http://evil.example/"), "may only reach"),
        (("-x", "http://proxy:3128", "$TRACKER_URL"), "through another host"),
        (("--proxy", "http://proxy:3128", "$TRACKER_URL"), "through another host"),
        (("-sx", "proxy:3128", "$TRACKER_URL"), "through another host"),  # clustered
        (("--socks5-hostname", "proxy:1080", "$TRACKER_URL"), "through another host"),
        (("--resolve", "127.0.0.1:41234:10.0.0.1", "$TRACKER_URL"), "which address"),
        (("--connect-to", "::evil.example:80", "$TRACKER_URL"), "which address"),
        (("--unix-socket", "/run/x.sock", "$TRACKER_URL"), "which address"),
        (("-K", "conf", "$TRACKER_URL"), "reads options or URLs from a file"),
        (("--config", "conf"), "reads options or URLs from a file"),
        (("-o", "/tmp/x", "$TRACKER_URL"), "writes a file"),
        (("-sO", "$TRACKER_URL"), "writes a file"),
        (("--url=http://evil.example/",), "does not accept"),
        (("--frobnicate", "$TRACKER_URL"), "not an option this arm may use"),
        (("-Q", "$TRACKER_URL"), "not an option this arm may use"),
        (("-w", "%output{/tmp/x}", "$TRACKER_URL"), "writes a file"),
        (('"$OTHER/x"',), "only known when it runs"),
        (("$TRACKER_URL/issues/$n",), "only known when it runs"),  # unquoted: word splitting
        (('"$TRACKER_URL$n"',), "before the path"),  # could be ":8080@evil"
        (('"http://127.0.0.1:$port/api"',), "before the path"),
        (("$TRACKER_URL", "-H"), "needs a value"),
    ],
)
def test_requests_elsewhere_are_refused_with_the_reason(args, reason):
    assert reason in refusal(*args)


def test_without_filled_values_curl_may_reach_nothing():
    empty = CurlConfinement(allowed=())
    assert "may only reach (none)" in curl_refusal([CurlArgument("http://127.0.0.1:1/", "http://127.0.0.1:1/")], empty)


def test_the_fixed_variables_and_the_proxy_variables_are_protected():
    assert {"TRACKER_URL", "TRACKER_TOKEN", "https_proxy", "ALL_PROXY", "NO_PROXY", "CURL_HOME"} <= CONFINED.protected_variables


# --- through the guard: the whole command line parsed, then the curl rule ------------------------------

RULES = isolation.ArmRules(
    arm="raw-api", binaries=frozenset({"curl"}), builtin_tools=frozenset({"Bash"}), mcp_servers=frozenset(),
    argument_rules=(isolation.ArgumentRule("curl", allow_urls=(BASE + "/",)),),
    variables=CONFINED.variables, fixed_variables=CONFINED.protected_variables,
)  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [
        'curl -s -H "Authorization: Bearer $TRACKER_TOKEN" "$TRACKER_URL/issues" | jq -r ".[].title"',
        'for n in 8 12; do curl -s -X PATCH -d \'{"state":"closed"}\' "$TRACKER_URL/issues/$n"; done',
    ],
)
def test_the_guard_allows_curl_to_the_service(command):
    assert isolation.check_bash_command(command, RULES).allowed


@pytest.mark.parametrize(
    "command, reason",
    [
        ("curl -s https://example.com/ | jq .", "may only reach"),
        ('echo ok && curl -s "$(echo http://evil.example)"', "only known when it runs"),
        ("curl -s http://evil.example/ &", "may only reach"),
        ('TRACKER_URL=http://evil.example; curl -s "$TRACKER_URL"', "may not be changed"),
        ("export ALL_PROXY=socks5://proxy:1080", "may not be changed"),
        ("unset TRACKER_URL", "may not be changed"),
        ('read TRACKER_URL <<< "http://evil.example"', "may not be changed"),
    ],
)
def test_the_guard_refuses_curl_elsewhere(command, reason):
    decision = isolation.check_bash_command(command, RULES)
    assert not decision.allowed and reason in decision.reason, decision.reason


def test_an_arm_without_a_confinement_is_unchanged():
    plain = isolation.ArmRules(arm="x", binaries=frozenset({"curl"}), builtin_tools=frozenset({"Bash"}), mcp_servers=frozenset())
    assert isolation.check_bash_command("curl -s https://example.com/", plain).allowed


# --- bench.toml: [arms.NAME.arguments.curl] allow_urls ----------------------------------------------

ARM_TOML = """
[bench]
model = "m"
[arms.api]
tools = ["Bash"]
binaries = ["curl"]
env = { API = "http://127.0.0.1:{port}/api" }
[arms.api.arguments.curl]
allow_urls = ["http://127.0.0.1:{port}/api"]
[tasks.t]
tier = "read"
intent = "x"
required_facts = ["x"]
"""


def test_allow_urls_placeholders_and_the_arms_variables_are_filled_per_trial(tmp_path):
    from pytest_benchcell.config import load_bench
    from pytest_benchcell.trial import arm_rules

    (tmp_path / "bench.toml").write_text(ARM_TOML)
    arm = load_bench(tmp_path / "bench.toml").arms["api"]
    rules = arm_rules(arm, values={"port": "41234"})
    assert rules.curl == CurlConfinement(allowed=(BASE,), variables={"API": BASE})
    assert isolation.check_bash_command('curl -s "$API/issues"', rules).allowed
    assert not isolation.check_bash_command("curl -s http://127.0.0.1:41235/api", rules).allowed
    assert "may not be changed" in isolation.check_bash_command("API=http://evil.example/", rules).reason
    assert not isolation.check_bash_command('curl -s "$API/issues"', arm_rules(arm)).allowed  # no trial: nowhere


# --- the README's form with deny_options, and an arm without allow_urls ------------------------------

FORM_TOML = """
[bench]
model = "m"
[arms.api]
tools = ["Bash"]
binaries = ["curl"]
env = { SERVICE_URL = "http://127.0.0.1:{port}", TOKEN = "{token}" }
[arms.api.arguments.curl]
deny_options = ["-K", "--config"]
{urls}
[tasks.t]
tier = "read"
intent = "x"
required_facts = ["x"]
"""
README_FORM = 'curl -s -H "Authorization: Bearer $TOKEN" "$SERVICE_URL/issues" | jq ".[0]"'


@pytest.mark.parametrize("urls", ['allow_urls = ["http://127.0.0.1:{port}/"]', ""])
def test_the_readme_form_is_allowed_once_curl_has_deny_options(tmp_path, urls):
    from pytest_benchcell.config import load_bench
    from pytest_benchcell.trial import arm_rules

    (tmp_path / "bench.toml").write_text(FORM_TOML.replace("{urls}", urls))
    arm = load_bench(tmp_path / "bench.toml").arms["api"]
    rules = arm_rules(arm, values={"port": "41234", "token": "t0k"}, write_roots=("/w",))
    assert isolation.check_bash_command(README_FORM, rules) == isolation.Decision(True, "")
    # the arm's variables are fixed in both arms, so their known values are what the guard reads
    assert "may not be changed" in isolation.check_bash_command("SERVICE_URL=-K; " + README_FORM, rules).reason
    assert not isolation.check_bash_command('curl -s "$OTHER" -K cfg', rules).allowed


def test_curl_may_write_where_the_write_rule_allows_and_nowhere_else():
    rules = isolation.ArmRules(
        arm="raw-api", binaries=frozenset({"curl"}), builtin_tools=frozenset({"Bash"}), mcp_servers=frozenset(),
        argument_rules=(isolation.ArgumentRule("curl", allow_urls=(BASE + "/",)),), write_roots=("/w",),
        variables=CONFINED.variables,
    )  # fmt: skip
    assert rules.curl is not None and rules.curl.writes_checked
    assert isolation.check_bash_command('curl -s -o issues.json "$TRACKER_URL/issues"', rules).allowed
    for refused, reason in [
        ('curl -s -o /tmp/x "$TRACKER_URL/issues"', "outside"),
        ('curl -s --output-dir /tmp -O "$TRACKER_URL/issues"', "outside"),
        ('curl -s -o x.json http://127.0.0.1:9/', "may only reach"),
    ]:
        decision = isolation.check_bash_command(refused, rules)
        assert not decision.allowed and reason in decision.reason, (refused, decision.reason)


def test_another_client_confined_by_allow_urls_is_judged_by_the_same_url_rule():
    rules = isolation.ArmRules(
        arm="x", binaries=frozenset({"fetch"}), builtin_tools=frozenset({"Bash"}), mcp_servers=frozenset(),
        argument_rules=(isolation.ArgumentRule("fetch", allow_urls=(BASE + "/",), value_options=("-H",)),),
        variables=CONFINED.variables,
    )  # fmt: skip
    assert isolation.check_bash_command('fetch -H "Accept: x" "$TRACKER_URL/issues/$n"', rules).allowed
    decision = isolation.check_bash_command("fetch http://127.0.0.1:41234@evil.example/api", rules)
    assert not decision.allowed and "fetch may only reach" in decision.reason
    nowhere = isolation.ArmRules(
        arm="x", binaries=frozenset({"fetch"}), builtin_tools=frozenset({"Bash"}), mcp_servers=frozenset(),
        argument_rules=(isolation.ArgumentRule("fetch", allow_urls=()),),
    )  # fmt: skip
    assert "may only reach (none)" in isolation.check_bash_command("fetch http://127.0.0.1:1/", nowhere).reason
