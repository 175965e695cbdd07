"""Unit tests for pytest_benchcell.checker: facts in answers, state diffs, the change language."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_benchcell.checker import (
    Fact,
    StatePolicy,
    apply_changes,
    check_answer,
    diff_states,
    fact_from_config,
    fact_present,
    normalize_text,
)

FIVE_OPEN = Fact("5 issues are open", any_of=("5 open", "five open"))


# ----------------------------------------------------------------------------------------------
# normalize_text
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("**5** open", "5 open"),
        ("`#42` is *Open*", "#42 is open"),
        ("__Bold__ and _it_", "bold and it"),
        ("~~wrong~~ right", "wrong right"),
        ("  Many\t\n spaces\u00a0here  ", "many spaces here"),
        ("approx ~5", "approx ~5"),
    ],
)
def test_normalize_text(raw: str, normalized: str) -> None:
    assert normalize_text(raw) == normalized


# ----------------------------------------------------------------------------------------------
# fact_present: markdown, case, whitespace
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["There are **5** open issues.", "`5` open", "__5__ open", "**5 open**", "FIVE   OPEN", "5\n  open"],
)
def test_markdown_case_and_whitespace_are_ignored(answer: str) -> None:
    assert fact_present(answer, FIVE_OPEN)


def test_wrong_bolded_value_fails() -> None:
    assert not fact_present("There are **6** open issues.", FIVE_OPEN)


def test_rendering_is_normalized_too() -> None:
    fact = Fact("bold rendering", any_of=("**Five**   Open",))
    assert fact_present("five open", fact)


# ----------------------------------------------------------------------------------------------
# fact_present: number and word boundaries
# ----------------------------------------------------------------------------------------------


def test_issue_number_does_not_match_inside_longer_number() -> None:
    fact = Fact("issue 42", any_of=("#42",))
    assert not fact_present("see #420", fact)
    assert fact_present("see #42.", fact)
    assert fact_present("see (#42)", fact)


def test_leading_digit_does_not_match_inside_longer_number() -> None:
    assert not fact_present("15 open", FIVE_OPEN)
    assert fact_present("total: 5 open", FIVE_OPEN)


def test_number_does_not_match_inside_a_decimal() -> None:
    fact = Fact("five", any_of=("5",))
    assert not fact_present("ratio 0.5", fact)
    assert not fact_present("version 5.5", fact)
    assert fact_present("there are 5.", fact)


def test_comma_is_not_part_of_a_number() -> None:
    fact = Fact("issue 3", any_of=("3",))
    assert fact_present("issues 1,3,6", fact)


def test_digit_edge_may_touch_a_letter() -> None:
    fact = Fact("five", any_of=("5",))
    assert fact_present("the 5th issue", fact)


def test_word_boundaries_at_letter_edges() -> None:
    bug = Fact("bug label", any_of=("bug",))
    assert not fact_present("a debug build", bug)
    assert not fact_present("two bugs", bug)
    assert not fact_present("bug2", bug)
    assert fact_present("labels: bug, priority", bug)
    assert fact_present("(bug)", bug)
    assert not fact_present("it was reopened", Fact("open", any_of=("open",)))


def test_punctuation_edges_are_unguarded() -> None:
    assert fact_present("issue#3 is open", Fact("issue 3", any_of=("#3",)))
    assert fact_present("open:5", Fact("open count label", any_of=("open:",)))
    assert not fact_present("reopen: 5", Fact("open count label", any_of=("open:",)))


def test_no_rendering_matches_gives_absent() -> None:
    assert not fact_present("nothing relevant", FIVE_OPEN)


# ----------------------------------------------------------------------------------------------
# fact_present: patterns
# ----------------------------------------------------------------------------------------------


def test_pattern_matches_normalized_answer_case_insensitively() -> None:
    fact = Fact("five open", pattern=r"\b5(?: [a-z]+){0,4} open\b")
    assert fact_present("**5** Issues Are   OPEN", fact)
    assert not fact_present("5 issues in total, and 3 open", fact)


def test_pattern_is_an_alternative_to_renderings() -> None:
    fact = Fact("five open", any_of=("five open",), pattern=r"open: ?5\b")
    assert fact_present("Open:5", fact)
    assert fact_present("five open", fact)
    assert not fact_present("open: 6", fact)


def test_pattern_sees_markdown_stripped() -> None:
    fact = Fact("bold count", pattern=r"count 7")
    assert fact_present("count **7**", fact)


# ----------------------------------------------------------------------------------------------
# check_answer
# ----------------------------------------------------------------------------------------------


def test_check_answer_passes_with_all_required_and_no_forbidden() -> None:
    assert check_answer("**5** open issues", [FIVE_OPEN], [Fact("six", any_of=("6 open",))]) == []


def test_missing_fact_message() -> None:
    assert check_answer("3 open", [FIVE_OPEN]) == [
        'missing fact: 5 issues are open (expected one of: "5 open", "five open")'
    ]


def test_missing_fact_message_with_pattern() -> None:
    fact = Fact("count", any_of=("5 open",), pattern=r"open: 5")
    only_pattern = Fact("only pattern", pattern=r"x+y")
    assert check_answer("", [fact, only_pattern]) == [
        'missing fact: count (expected one of: "5 open"; or pattern /open: 5/)',
        "missing fact: only pattern (expected pattern /x+y/)",
    ]


def test_forbidden_fact_message_quotes_the_matched_text() -> None:
    forbidden = Fact("lists a closed issue as a bug", any_of=("Crash in export dialog",))
    assert check_answer("1. **Crash in Export Dialog**", [], [forbidden]) == [
        'forbidden fact present: lists a closed issue as a bug (matched "crash in export dialog")'
    ]


def test_forbidden_pattern_message_quotes_the_match() -> None:
    forbidden = Fact("wrong count", pattern=r"[0-46-9] open")
    assert check_answer("I see 4 open", [], [forbidden]) == [
        'forbidden fact present: wrong count (matched "4 open")'
    ]


def test_listing_everything_fails_through_forbidden_facts() -> None:
    required = [Fact(t, any_of=(t,)) for t in ("Fix crash on startup", "Crash when saving large files")]
    forbidden = [Fact("not a bug: " + t, any_of=(t,)) for t in ("Add CSV export option", "Typo in error message")]
    everything = "Fix crash on startup; Add CSV export option; Crash when saving large files; Typo in error message"
    assert check_answer(everything, required, forbidden) == [
        'forbidden fact present: not a bug: Add CSV export option (matched "add csv export option")',
        'forbidden fact present: not a bug: Typo in error message (matched "typo in error message")',
    ]
    assert check_answer("Fix crash on startup and Crash when saving large files", required, forbidden) == []


def test_required_are_reported_before_forbidden_in_declaration_order() -> None:
    a, b = Fact("a", any_of=("alpha",)), Fact("b", any_of=("beta",))
    bad = Fact("bad", any_of=("gamma",))
    assert check_answer("gamma", [b, a], [bad]) == [
        'missing fact: b (expected one of: "beta")',
        'missing fact: a (expected one of: "alpha")',
        'forbidden fact present: bad (matched "gamma")',
    ]


# ----------------------------------------------------------------------------------------------
# Fact construction and fact_from_config
# ----------------------------------------------------------------------------------------------


def test_fact_coerces_a_list_to_a_tuple() -> None:
    fact = Fact("x", any_of=["a", "b"])  # type: ignore[arg-type]
    assert fact.any_of == ("a", "b")
    assert hash(fact) == hash(Fact("x", any_of=("a", "b")))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"description": "x"}, "at least one rendering"),
        ({"description": "x", "any_of": "abc"}, "not a single string"),
        ({"description": "x", "any_of": ("**",)}, "empty after normalization"),
        ({"description": "x", "pattern": "("}, "invalid pattern"),
        ({"description": "", "any_of": ("a",)}, "description"),
    ],
)
def test_fact_rejects_bad_definitions(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Fact(**kwargs)


def test_fact_from_config_plain_string() -> None:
    assert fact_from_config("Fix crash on startup") == Fact(
        "Fix crash on startup", any_of=("Fix crash on startup",)
    )


def test_fact_from_config_table() -> None:
    fact = fact_from_config({"description": "five open", "any_of": ["5 open", "five open"], "pattern": "open: 5"})
    assert fact == Fact("five open", any_of=("5 open", "five open"), pattern="open: 5")


def test_fact_from_config_default_descriptions() -> None:
    assert fact_from_config({"any_of": ["5 open", "x"]}).description == "5 open"
    assert fact_from_config({"pattern": "a+b"}).description == "/a+b/"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "must be a string or a table"),
        (["5 open"], "must be a string or a table"),
        ("  ", "empty after normalization"),
        ({"any_of": ["a"], "patern": "x"}, "unknown key.*patern"),
        ({"any_of": "5 open"}, r"any_of must be a list of strings, e\.g\. any_of = \['5 open'\]"),
        ({"any_of": {"a": 1}}, "any_of must be a list of strings"),
        ({"any_of": ["a", 3]}, "is not a string"),
        ({"pattern": 5}, "pattern must be a string"),
        ({"pattern": "[unclosed"}, "invalid pattern"),
        ({"description": "only a description"}, "needs any_of"),
        ({"description": 3, "any_of": ["a"]}, "description must be a string"),
    ],
)
def test_fact_from_config_rejects_bad_shapes(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fact_from_config(value)


# ----------------------------------------------------------------------------------------------
# diff_states
# ----------------------------------------------------------------------------------------------


def _state() -> dict[str, Any]:
    return {
        "labels": [
            {"name": "bug", "color": "#d73a4a"},
            {"name": "priority", "color": "#b60205"},
        ],
        "issues": [
            {
                "id": 101,
                "number": 1,
                "title": "Fix crash on startup",
                "body": "It crashes.",
                "state": "open",
                "labels": ["bug"],
                "assignees": ["me"],
                "comments": [{"id": 7, "author": "me", "body": "Seen it.", "createdAt": "2026-01-01"}],
                "updatedAt": "2026-01-01T00:00:00Z",
            },
            {
                "id": 102,
                "number": 2,
                "title": "Add CSV export option",
                "body": "",
                "state": "open",
                "labels": [],
                "assignees": [],
                "comments": [],
            },
        ],
    }


def test_identical_states_pass() -> None:
    assert diff_states(_state(), _state()) == []


def test_missing_intended_change_is_reported() -> None:
    expected = _state()
    expected["issues"][1]["state"] = "closed"
    assert diff_states(expected, _state()) == ['issues[number=2].state: expected "closed", got "open"']


def test_collateral_field_change_is_reported() -> None:
    actual = _state()
    actual["issues"][0]["title"] = "Fix crash on start"
    assert diff_states(_state(), actual) == [
        'issues[number=1].title: expected "Fix crash on startup", got "Fix crash on start"'
    ]


def test_unexpected_and_missing_entities() -> None:
    expected, actual = _state(), _state()
    actual["issues"].append({"number": 12, "title": "Investigate memory leak"})
    del actual["issues"][0]
    assert diff_states(expected, actual) == [
        "missing issues[number=1]",
        "unexpected issues[number=12] (collateral change)",
    ]


def test_entities_are_matched_by_identity_not_position() -> None:
    actual = _state()
    actual["issues"].reverse()
    actual["labels"].reverse()
    assert diff_states(_state(), actual) == []


def test_entities_are_reported_in_numeric_identity_order() -> None:
    expected = {"issues": [{"number": n, "state": "open"} for n in (2, 10, 1)]}
    actual = {"issues": [{"number": n, "state": "closed"} for n in (10, 1, 2)]}
    assert diff_states(expected, actual) == [
        'issues[number=1].state: expected "open", got "closed"',
        'issues[number=2].state: expected "open", got "closed"',
        'issues[number=10].state: expected "open", got "closed"',
    ]


def test_label_definitions_are_matched_by_name() -> None:
    actual = _state()
    actual["labels"][0]["color"] = "#000000"
    actual["labels"].append({"name": "stale", "color": "#cccccc"})
    assert diff_states(_state(), actual) == [
        'labels[name=bug].color: expected "#d73a4a", got "#000000"',
        "unexpected labels[name=stale] (collateral change)",
    ]


def test_duplicate_identity_is_reported() -> None:
    expected = {"labels": [{"name": "stale"}]}
    actual = {"labels": [{"name": "stale"}, {"name": "stale"}]}
    assert diff_states(expected, actual) == ["labels[name=stale]: expected 1 entries with this identity, got 2"]


def test_multiset_labels_message() -> None:
    actual = _state()
    actual["issues"][0]["labels"] = ["bug"]
    expected = _state()
    expected["issues"][0]["labels"] = ["priority"]
    assert diff_states(expected, actual) == ['issues[number=1].labels: missing "priority"; unexpected "bug"']


def test_multiset_ignores_order() -> None:
    expected = {"issues": [{"number": 1, "labels": ["bug", "priority"], "assignees": ["a", "b"]}]}
    actual = {"issues": [{"number": 1, "labels": ["priority", "bug"], "assignees": ["b", "a"]}]}
    assert diff_states(expected, actual) == []


def test_multiset_honours_duplicates() -> None:
    comment = {"author": "me", "body": "I can reproduce this too."}
    expected = {"issues": [{"number": 3, "comments": [comment, comment]}]}
    actual = {"issues": [{"number": 3, "comments": [comment]}]}
    assert diff_states(expected, actual) == [
        'issues[number=3].comments: missing {"author":"me","body":"I can reproduce this too."}'
    ]
    assert diff_states(actual, expected) == [
        'issues[number=3].comments: unexpected {"author":"me","body":"I can reproduce this too."}'
    ]


def test_multiset_comments_ignore_volatile_keys_and_whitespace() -> None:
    expected = {"comments": [{"author": "me", "body": "Seen it."}]}
    actual = {"comments": [{"id": 99, "createdAt": "now", "author": "me", "body": "  Seen   it.\n"}]}
    assert diff_states(expected, actual) == []


def test_non_multiset_list_is_compared_in_order() -> None:
    expected = {"steps": ["a", "b"]}
    assert diff_states(expected, {"steps": ["b", "a"]}) == [
        'steps[0]: expected "a", got "b"',
        'steps[1]: expected "b", got "a"',
    ]
    assert diff_states(expected, {"steps": ["a"]}) == ['steps[1]: missing in actual (expected "b")']
    assert diff_states(expected, {"steps": ["a", "b", "c"]}) == ['steps[2]: unexpected in actual (got "c")']


def test_volatile_keys_are_ignored_at_every_depth() -> None:
    actual = _state()
    actual["issues"][0]["id"] = 999
    actual["issues"][0]["updatedAt"] = "2027-01-01"
    actual["issues"][1]["created_at"] = "2027-01-01"
    actual["issues"][0]["comments"][0]["createdAt"] = "2027-01-01"
    assert diff_states(_state(), actual) == []


def test_custom_ignore_keys() -> None:
    policy = StatePolicy(ignore_keys=frozenset({"etag"}))
    assert diff_states({"etag": "a", "x": 1}, {"etag": "b", "x": 1}, policy) == []
    assert diff_states({"id": 1}, {"id": 2}, policy) == ["id: expected 1, got 2"]


def test_missing_and_unexpected_dict_keys() -> None:
    expected = {"issues": [{"number": 4, "title": "Typo", "body": "Fix it."}]}
    actual = {"issues": [{"number": 4, "title": "Typo", "milestone": "v1"}]}
    assert diff_states(expected, actual) == [
        'issues[number=4].body: missing in actual (expected "Fix it.")',
        'issues[number=4].milestone: unexpected in actual (got "v1")',
    ]


def test_nested_paths() -> None:
    expected = {"pullRequests": [{"number": 10, "reviews": [], "meta": {"ci": {"status": "green"}}}]}
    actual = {"pullRequests": [{"number": 10, "reviews": [], "meta": {"ci": {"status": "red"}}}]}
    assert diff_states(expected, actual) == ['pullRequests[number=10].meta.ci.status: expected "green", got "red"']


@pytest.mark.parametrize(
    ("whitespace", "actual_body", "differs"),
    [
        ("exact", "Fix it.", False),
        ("exact", "Fix it. ", True),
        ("strip", "  Fix it.\n", False),
        ("strip", "Fix  it.", True),
        ("collapse", "  Fix \n\t it.\n", False),
        ("collapse", "Fixit.", True),
    ],
)
def test_whitespace_policies(whitespace: Any, actual_body: str, differs: bool) -> None:
    policy = StatePolicy(whitespace=whitespace)
    result = diff_states({"body": "Fix it."}, {"body": actual_body}, policy)
    assert result == ([f'body: expected "Fix it.", got {actual_body!r}'.replace("'", '"')] if differs else [])


def test_whitespace_policy_message_shows_raw_strings() -> None:
    assert diff_states({"body": "a b"}, {"body": "a\nb "}, StatePolicy(whitespace="exact")) == [
        'body: expected "a b", got "a\\nb "'
    ]


def test_numbers_compare_by_value_but_booleans_are_not_numbers() -> None:
    assert diff_states({"n": 1}, {"n": 1.0}) == []
    assert diff_states({"n": 1}, {"n": True}) == ["n: expected 1, got true"]
    assert diff_states({"n": 1}, {"n": "1"}) == ['n: expected 1, got "1"']
    assert diff_states({"n": None}, {"n": 0}) == ["n: expected null, got 0"]


def test_type_mismatch_between_containers() -> None:
    assert diff_states({"labels": ["bug"]}, {"labels": None}) == ['labels: expected ["bug"], got null']


def test_root_level_difference() -> None:
    assert diff_states([1, 2], {"a": 1}) == ['<root>: expected [1, 2], got {"a": 1}']


def test_string_identity_values_that_need_quoting() -> None:
    expected = {"labels": [{"name": "42"}, {"name": "needs review"}]}
    assert diff_states(expected, {"labels": []}) == ['missing labels[name="42"]', "missing labels[name=needs review]"]


def test_identity_falls_back_to_next_key() -> None:
    policy = StatePolicy(ignore_keys=frozenset())
    expected = {"things": [{"id": "a", "v": 1}, {"id": "b", "v": 2}]}
    actual = {"things": [{"id": "b", "v": 2}, {"id": "a", "v": 3}]}
    assert diff_states(expected, actual, policy) == ["things[id=a].v: expected 1, got 3"]


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        StatePolicy(whitespace="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a string"):
        StatePolicy(multiset_keys="labels")  # type: ignore[arg-type]
    assert StatePolicy(identity_keys=["name"]).identity_keys == ("name",)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# apply_changes
# ----------------------------------------------------------------------------------------------


def test_apply_set_closes_an_issue() -> None:
    state = _state()
    expected = apply_changes(state, [{"op": "set", "path": "issues[number=2].state", "value": "closed"}])
    assert expected["issues"][1]["state"] == "closed"
    assert diff_states(expected, state) == ['issues[number=2].state: expected "closed", got "open"']


def test_apply_changes_leaves_the_input_and_value_untouched() -> None:
    state, value = _state(), {"author": "me", "body": "x"}
    before = copy.deepcopy(state)
    result = apply_changes(state, [{"op": "append", "path": "issues[number=2].comments", "value": value}])
    assert state == before
    result["issues"][1]["comments"][0]["body"] = "mutated"
    assert value == {"author": "me", "body": "x"}


def test_apply_append() -> None:
    comment = {"author": "me", "body": "I can reproduce this too."}
    result = apply_changes(_state(), [{"op": "append", "path": "issues[number=1].comments", "value": comment}])
    assert result["issues"][0]["comments"][-1] == comment
    assert len(result["issues"][0]["comments"]) == 2


def test_apply_add_appends_to_a_list() -> None:
    issue = {"number": 12, "title": "Investigate memory leak", "state": "open"}
    result = apply_changes(_state(), [{"op": "add", "path": "issues", "value": issue}])
    assert [i["number"] for i in result["issues"]] == [1, 2, 12]


def test_apply_add_creates_a_missing_key() -> None:
    result = apply_changes(_state(), [{"op": "add", "path": "issues[number=2].milestone", "value": "v1"}])
    assert result["issues"][1]["milestone"] == "v1"


def test_apply_remove_removes_one_occurrence() -> None:
    state = {"issues": [{"number": 1, "labels": ["bug", "priority", "bug"]}]}
    result = apply_changes(state, [{"op": "remove", "path": "issues[number=1].labels", "value": "bug"}])
    assert result["issues"][0]["labels"] == ["priority", "bug"]


def test_apply_remove_does_not_confuse_booleans_with_numbers() -> None:
    result = apply_changes({"flags": [True, 1]}, [{"op": "remove", "path": "flags", "value": 1}])
    assert result == {"flags": [True]}


def test_apply_delete_entity_key_and_index() -> None:
    result = apply_changes(
        _state(),
        [
            {"op": "delete", "path": "issues[number=1]"},
            {"op": "delete", "path": "issues[0].body"},
            {"op": "delete", "path": "labels[-1]"},
        ],
    )
    assert [i["number"] for i in result["issues"]] == [2]
    assert "body" not in result["issues"][0]
    assert [label["name"] for label in result["labels"]] == ["bug"]


def test_apply_selector_by_string_and_quoted_value() -> None:
    state = {"labels": [{"name": "bug", "color": "#d73a4a"}, {"name": "42", "color": "#000000"}]}
    result = apply_changes(
        state,
        [
            {"op": "set", "path": "labels[name=bug].color", "value": "#ffffff"},
            {"op": "set", "path": 'labels[name="42"].color', "value": "#111111"},
        ],
    )
    assert [label["color"] for label in result["labels"]] == ["#ffffff", "#111111"]


def test_apply_changes_run_in_order() -> None:
    result = apply_changes(
        _state(),
        [
            {"op": "append", "path": "issues[number=1].comments", "value": {"author": "me", "body": "Consolidating."}},
            {"op": "set", "path": "issues[number=1].state", "value": "closed"},
            {"op": "add", "path": "issues[number=1].labels", "value": "priority"},
        ],
    )
    issue = result["issues"][0]
    assert (issue["state"], issue["labels"], issue["comments"][-1]["body"]) == ("closed", ["bug", "priority"], "Consolidating.")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"op": "set", "path": "issues[number=99].state", "value": "x"}, r"issues\[number=99\] matches no element \(number values present: 1, 2\)"),
        ({"op": "set", "path": "issues[number=2].stat", "value": "x"}, r"issues\[number=2\] has no key 'stat'"),
        ({"op": "set", "path": "isues", "value": []}, r"<root> has no key 'isues'"),
        ({"op": "set", "path": "issues[5]", "value": {}}, "index 5 is out of range"),
        ({"op": "set", "path": "issues.number", "value": 1}, "is a list, not a table"),
        ({"op": "set", "path": "issues[number=1].title[0]", "value": "x"}, "is a str, not a list"),
        ({"op": "append", "path": "issues[number=1].state", "value": "x"}, "is a str, not a list"),
        ({"op": "add", "path": "issues[number=1].state", "value": "x"}, "not a list; use set"),
        ({"op": "remove", "path": "issues[number=1].labels", "value": "priority"}, r'does not contain "priority"'),
        ({"op": "delete", "path": "issues[number=3]"}, "matches no element"),
        ({"op": "delete", "path": "issues[title]"}, r"bad selector \[title\]"),
        ({"op": "set", "path": "issues[number=1", "value": 1}, "unclosed"),
        ({"op": "set", "path": "issues..state", "value": 1}, "empty key"),
        ({"op": "set", "path": "", "value": 1}, "non-empty string"),
        ({"op": "rename", "path": "issues"}, "op must be one of"),
        ({"op": "set", "path": "issues[number=1].state"}, "set needs a value"),
        ({"op": "delete", "path": "issues[number=1]", "value": 1}, "delete takes no value"),
        ({"op": "set", "path": "x", "value": 1, "extra": 2}, "unknown key"),
        ({"op": "set", "value": 1}, "missing path"),
    ],
)
def test_apply_changes_errors(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        apply_changes(_state(), [change])
    assert str(info.value).startswith("change 1")


def test_apply_changes_error_names_the_failing_change() -> None:
    changes = [
        {"op": "set", "path": "issues[number=1].state", "value": "closed"},
        {"op": "set", "path": "issues[number=7].state", "value": "closed"},
    ]
    with pytest.raises(ValueError, match=r"^change 2 \(set issues\[number=7\]\.state\): "):
        apply_changes(_state(), changes)


def test_apply_selector_matching_several_elements_is_an_error() -> None:
    state = {"labels": [{"name": "stale"}, {"name": "stale"}]}
    with pytest.raises(ValueError, match="matches 2 elements"):
        apply_changes(state, [{"op": "delete", "path": "labels[name=stale]"}])


def test_apply_changes_rejects_a_single_table() -> None:
    with pytest.raises(ValueError, match="list of change tables"):
        apply_changes(_state(), {"op": "delete", "path": "issues"})  # type: ignore[arg-type]


def test_end_to_end_expected_state_catches_collateral_change() -> None:
    ground_truth = _state()
    expected = apply_changes(ground_truth, [{"op": "add", "path": "issues[number=2].labels", "value": "priority"}])
    actual = copy.deepcopy(expected)
    actual["issues"][0]["state"] = "closed"
    assert diff_states(expected, actual) == ['issues[number=1].state: expected "open", got "closed"']
    assert diff_states(expected, ground_truth) == ['issues[number=2].labels: missing "priority"']
