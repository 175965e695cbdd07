"""Scripted solutions of the example bench: what a model does in each (arm, task), played offline.

Each task's solution is written once, as what must be found and what must be changed; each arm
renders it the way agents use that interface: the `tracker` arm follows its skill file straight to
the commands and chains changes (its native-delivery twin loads the skill through the Skill tool
first, but for one task it answers without ever loading it: `NEVER_LOADS`); the `native` arm reads `issuectl help` first and pages through
five-issue lists; the `mcp` arm makes one tool call per read or change; the `raw-api` arm reads the
route list first and sends one curl request per change. A few cells fail the way real agents do
(`FAILURES`): a wrong count, a collateral edit, a loop to the turn cap. `INTENDED` is the verdict
each cell must reach (tests/test_example_bench.py replays every script against the real tools).
"""

from __future__ import annotations

import json
import shlex

from pytest_benchcell.scripted import Answer, Repeat, ToolUse, load_skill

AUTH = '-H "Authorization: Bearer $TRACKER_TOKEN"'
JSON = '-H "Content-Type: application/json"'

# What each task needs: reads (find) then changes (act), and the final answer.
# read ops: ("list", state[, label]) ("show", number); change ops: ("close"|"reopen", n),
# ("comment", n, text), ("label"|"unlabel", n, name), ("assign", n, user), ("create", title, body),
# ("retitle", n, title), ("create_label", name, color), ("export", state).
SOLUTIONS: dict[str, tuple[list[tuple], list[tuple], str]] = {
    "count-open": ([("list", "open")], [], "There are 9 open issues."),
    "open-bugs": ([("list", "open", "bug")], [], 'The open bugs are "CSV export drops the last row" and "Sync fails behind a proxy".'),
    "csv-assignee": ([("list", "open")], [], "The CSV export issue is assigned to dana."),
    "search-timing": ([("list", "open"), ("show", 5)], [], "lee reports that a search takes about 4 seconds on their main project."),
    "my-issues": ([("list", "all")], [], 'Two issues are assigned to you, both closed: "Document the label colors" and "Crash on startup with an empty config".'),
    "close-export": ([("list", "open")], [("close", 2)], "Closed the issue about the CSV export dropping the last row."),
    "reopen-typo": ([("list", "closed")], [("reopen", 3)], "Reopened the issue about the typo in the installation guide."),
    "comment-dark-mode": ([("list", "open")], [("comment", 1, "Planned for 2.0.")], 'Commented "Planned for 2.0." on "Add a dark mode".'),
    "file-installer": ([], [("create", "Add a Windows installer", "Users ask for an .msi package.")], 'Filed the issue "Add a Windows installer".'),
    "assign-shortcut": ([("list", "open")], [("assign", 8, "lee")], "The keyboard shortcut issue is now assigned to lee."),
    "label-crash-dialog": ([("list", "open"), ("show", 4)], [("label", 4, "bug")], 'Added the bug label to "App quits when I open Preferences".'),
    "close-duplicate": ([("list", "open"), ("show", 10)], [("close", 10)], 'Closed "Dark theme for the editor", which a comment marks as a duplicate of the dark mode request.'),
    "take-question": ([("list", "open", "question")], [("assign", 11, "me")], 'Assigned "Explain the config file format" to you.'),
    "ask-proxy-details": ([("list", "open", "bug")], [("comment", 9, "Can you share your proxy settings?")], 'Asked for the proxy settings on "Sync fails behind a proxy".'),
    "label-slow-search": ([("list", "open"), ("show", 5)], [("label", 5, "performance")], 'Added the performance label to "Search is slow on large projects".'),
    "triage-perf": (
        [("list", "open")],
        [("label", 5, "performance"), ("assign", 5, "me"), ("comment", 5, "Profiling this week.")],
        "The slow-search issue now has the performance label, is assigned to you and has the comment.",
    ),
    "hand-over-dana": (
        [("list", "open")],
        [("assign", 2, "lee"), ("assign", 8, "lee"), ("assign", 9, "lee"), ("assign", 12, "lee")],
        "Reassigned dana's four open issues to lee.",
    ),
    "reclassify-sync": (
        [("list", "open", "bug")],
        [("unlabel", 9, "bug"), ("label", 9, "enhancement"), ("comment", 9, "Reclassified as a feature request.")],
        'Relabeled "Sync fails behind a proxy" as an enhancement and commented.',
    ),
    "file-crash-report": (
        [],
        [("create", "Crash when saving an empty file", "Saving a file with no content quits the app."), ("label", 13, "bug"), ("assign", 13, "me")],
        'Filed "Crash when saving an empty file" with the bug label, assigned to you.',
    ),
    "close-dana-enhancements": (
        [("list", "open", "enhancement")],
        [("close", 8), ("comment", 8, "Moved to the roadmap."), ("close", 12), ("comment", 12, "Moved to the roadmap.")],
        "Closed dana's two open enhancement requests with the comment.",
    ),
    "export-open-csv": ([], [("export", "open")], "The CSV export of the open issues has 9 data rows."),
    "retitle-json": ([("list", "open")], [("retitle", 12, "Export issues to JSON")], 'Renamed the issue to "Export issues to JSON".'),
    "security-label": ([("list", "open", "bug")], [("create_label", "security", "b60205"), ("label", 9, "security")], 'Created the security label and added it to "Sync fails behind a proxy".'),
}

ISSUE_COUNTS = {"open": 9, "closed": 3, "all": 12}  # of the seed: how many pages issuectl shows


def sh(command: str) -> ToolUse:
    return ToolUse("Bash", {"command": command})


def mcp(tool: str, **arguments) -> ToolUse:
    return ToolUse(f"mcp__tracker__{tool}", arguments)  # Claude Code's name for an MCP tool


def q(text: str) -> str:
    return shlex.quote(text)


def curl(method: str, path: str, body=None) -> str:
    data = f" {JSON} -d {q(json.dumps(body))}" if body is not None else ""
    verb = "" if method == "GET" else f" -X {method}"
    return f'curl -s{verb} {AUTH}{data} "$TRACKER_URL{path}"'


# --- each arm's words for the changes (op name -> the command or tool call) -------------------------

TRACKER_COMMANDS = {
    "close": lambda n: f"tracker close {n}",
    "reopen": lambda n: f"tracker reopen {n}",
    "comment": lambda n, text: f"tracker comment {n} --body {q(text)}",
    "label": lambda n, name: f"tracker label {n} --add {name}",
    "unlabel": lambda n, name: f"tracker label {n} --remove {name}",
    "assign": lambda n, user: f"tracker assign {n} --to {user}",
    "create": lambda title, body: f"tracker create --title {q(title)} --body {q(body)}",
    "export": lambda state: f"tracker export --state {state} | tail -n +2 | wc -l",
}
ISSUECTL_COMMANDS = {
    "close": lambda n: f"issuectl set {n} state closed",
    "reopen": lambda n: f"issuectl set {n} state open",
    "comment": lambda n, text: f"issuectl comment {n} {q(text)}",
    "label": lambda n, name: f"issuectl tag {n} {name}",
    "unlabel": lambda n, name: f"issuectl untag {n} {name}",
    "assign": lambda n, user: f"issuectl set {n} assignee {user}",
    "create": lambda title, body: f"issuectl new {q(title)} {q(body)}",
    "retitle": lambda n, title: f"issuectl set {n} title {q(title)}",
}
MCP_CALLS = {
    "close": lambda n: mcp("close_issue", number=n),
    "reopen": lambda n: mcp("reopen_issue", number=n),
    "comment": lambda n, text: mcp("comment_issue", number=n, body=text),
    "label": lambda n, name: mcp("add_label", number=n, label=name),
    "unlabel": lambda n, name: mcp("remove_label", number=n, label=name),
    "assign": lambda n, user: mcp("assign_issue", number=n, user=user),
    "create": lambda title, body: mcp("create_issue", title=title, body=body),
    "create_label": lambda name, color: mcp("create_label", name=name, color=color),
}
REST_CALLS = {
    "close": lambda n: curl("PATCH", f"/issues/{n}", {"state": "closed"}),
    "reopen": lambda n: curl("PATCH", f"/issues/{n}", {"state": "open"}),
    "comment": lambda n, text: curl("POST", f"/issues/{n}/comments", {"body": text}),
    "label": lambda n, name: curl("POST", f"/issues/{n}/labels", {"label": name}),
    "unlabel": lambda n, name: curl("DELETE", f"/issues/{n}/labels/{name}"),
    "assign": lambda n, user: curl("PATCH", f"/issues/{n}", {"assignee": user}),
    "create": lambda title, body: curl("POST", "/issues", {"title": title, "body": body}),
    "retitle": lambda n, title: curl("PATCH", f"/issues/{n}", {"title": title}),
    "create_label": lambda name, color: curl("POST", "/labels", {"name": name, "color": color}),
}


def changes(vocabulary, act):
    """The arm's command or tool call for each change, in order."""
    return [vocabulary[kind](*rest) for kind, *rest in act]


# --- one renderer per arm: how it finds things, then its changes --------------------------------------


def tracker_cli(find, act):
    steps = []
    for op in find:
        if op[0] == "list":
            steps.append(sh(f"tracker list --state {op[1]}" + (f" --label {op[2]}" if len(op) > 2 else "")))
        else:
            steps.append(sh(f"tracker show {op[1]}"))
    commands = changes(TRACKER_COMMANDS, act)
    # The skill says to chain changes to one issue with &&; creating comes first on its own.
    if commands and commands[0].startswith("tracker create"):
        steps.append(sh(commands.pop(0)))
    if commands:
        steps.append(sh(" && ".join(commands)))
    return steps


def native_cli(find, act):
    steps = [sh("issuectl help")]
    for op in find:
        if op[0] == "list":  # no label filter: read every page of the state
            state = op[1]
            steps.append(sh(f"issuectl issues {state}"))
            pages = -(-ISSUE_COUNTS[state] // 5)
            steps += [sh(f"issuectl issues {state} page {page}") for page in range(2, pages + 1)]
        else:
            steps.append(sh(f"issuectl issue {op[1]}"))
    return steps + [sh(command) for command in changes(ISSUECTL_COMMANDS, act)]


def mcp_tools(find, act):
    steps = []
    for op in find:
        if op[0] == "list":
            steps.append(mcp("list_issues", state=op[1], **({"label": op[2]} if len(op) > 2 else {})))
        else:
            steps.append(mcp("show_issue", number=op[1]))
    return steps + changes(MCP_CALLS, act)


def raw_api(find, act):
    steps = [sh(curl("GET", ""))]  # the route list: this arm has no other documentation
    for op in find:
        if op[0] == "list":
            query = f"?state={op[1]}" + (f"&label={op[2]}" if len(op) > 2 else "")
            fields = '.[] | "\\(.number) \\(.state) \\(.title) \\(.labels) \\(.assignees)"'
            steps.append(sh(curl("GET", f"/issues{query}") + f" | jq -r '{fields}'"))
        else:
            steps.append(sh(curl("GET", f"/issues/{op[1]}")))
    return steps + [sh(command) for command in changes(REST_CALLS, act)]


def tracker_cli_native(find, act):
    """The skill delivered natively: the agent loads it through the Skill tool, then works as with it embedded."""
    return [load_skill("tracker"), *tracker_cli(find, act)]


RENDERERS = {"cli-skill": tracker_cli, "cli-skill-native": tracker_cli_native, "native": native_cli, "mcp": mcp_tools,
             "raw-api": raw_api}  # fmt: skip
# Cells where the native-delivery agent never loads its skill: the skill's description names the
# command, and it goes straight to it (and still passes).
NEVER_LOADS = {("cli-skill-native", "count-open")}

# --- where an arm goes wrong, as real agents do -------------------------------------------------------


def _failures():
    return {
        # Counts the lines of the first page, header and footer included, and reports that.
        ("native", "count-open"): [sh("issuectl help"), sh("issuectl issues open | wc -l"), Answer("There are 7 open issues.")],
        # Closes the duplicate and, unasked, the request it duplicates: a collateral edit.
        ("mcp", "close-duplicate"): [
            *mcp_tools([("list", "open"), ("show", 10)], [("close", 10), ("close", 1)]),
            Answer("Closed both dark mode requests."),
        ],
        # Labels the new issue with a request body the API refuses, and retries it until the turn cap.
        ("raw-api", "file-crash-report"): [
            *raw_api([], [SOLUTIONS["file-crash-report"][1][0]]),
            Repeat(sh(curl("POST", "/issues/13/labels", {"labels": ["bug"]}))),
        ],
        # Reopens with -v to see the status line: the request headers, token included, reach the
        # transcript, and the harness must redact the token before anything is stored.
        ("raw-api", "reopen-typo"): [
            *raw_api([("list", "closed")], []),
            sh(curl("PATCH", "/issues/3", {"state": "open"}).replace("curl -s -X", "curl -sv -X") + " 2>&1 | head -n 20"),
            Answer(SOLUTIONS["reopen-typo"][2]),
        ],
        # Pretty-prints with python first: refused by the guard (a wasted turn), then uses jq.
        ("raw-api", "search-timing"): [
            sh(curl("GET", "")),
            sh(curl("GET", "/issues/5") + " | python3 -m json.tool"),
            sh(curl("GET", "/issues/5") + " | jq '.comments'"),
            Answer(SOLUTIONS["search-timing"][2]),
        ],
    }


FAILURES = _failures()
# The verdict each failing cell must reach; every other applicable cell passes.
INTENDED = {
    ("native", "count-open"): "incorrect",
    ("mcp", "close-duplicate"): "incorrect",
    ("raw-api", "file-crash-report"): "confused",
}


def applies(arm: str, task: str) -> bool:
    only = {"export-open-csv": {"cli-skill", "cli-skill-native"}, "retitle-json": {"native", "raw-api"}, "security-label": {"mcp", "raw-api"}}
    return arm in only.get(task, RENDERERS)


def script_for(arm: str, task: str):
    """The scripted model's steps for one cell, or None where the arm cannot do the task."""
    if arm not in RENDERERS or task not in SOLUTIONS or not applies(arm, task):
        return None
    if (arm, task) in FAILURES:
        return FAILURES[(arm, task)]
    find, act, answer = SOLUTIONS[task]
    steps = [*RENDERERS[arm](find, act), Answer(answer)]
    return steps[1:] if (arm, task) in NEVER_LOADS else steps  # without its load_skill step


def intended_outcome(arm: str, task: str) -> str:
    return INTENDED.get((arm, task), "pass")
