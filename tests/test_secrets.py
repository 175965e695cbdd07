"""The redaction's matcher (pytest_benchcell/secrets.py): a secret in every spelling the harness can
write, and ordinary text left alone."""

from __future__ import annotations

import random
import re

import pytest

from pytest_benchcell.checker import Fact, StatePolicy, check_answer, diff_states, normalize_text
from pytest_benchcell.secrets import REDACTED, redact

PIN = "SGPT2"
TOKEN = "bcx_live_W9qmb8AHcsT4kLx2Zp7Rv1Nf6Ye3Uj0Do5Gi"
R = REDACTED


def cleaned(text: str, *secrets: str) -> str:
    return redact({"text": text}, list(secrets) or [TOKEN, PIN])["text"]


def letters_and_digits(text: str) -> str:
    return re.sub(r"[\W_]", "", text).lower()


@pytest.mark.parametrize(
    "answer",
    [
        f"PIN is {PIN} and token is {TOKEN}",
        f"**PIN** is `{PIN}` and the token is __{TOKEN}__",
        f"pin is {PIN.lower()} and token is {TOKEN.upper()}",
        f"PIN is _{PIN}_ and token  is\n{TOKEN.replace('_', '-')}",
    ],
)
def test_the_checkers_quote_of_a_secret_is_redacted_in_the_checkers_own_spelling(answer: str) -> None:
    forbidden = [Fact("the PIN", pattern=r"PIN is \S+"), Fact("the token", pattern=r"token is \S+")]
    differences = check_answer(answer, [], forbidden)
    assert f'"pin is {normalize_text(PIN)}"' in differences[0]  # the checker re-spelled it...
    clean = redact({"differences": differences}, [TOKEN, PIN])["differences"]
    assert clean == [f'forbidden fact present: the PIN (matched "pin is {R}")',
                     f'forbidden fact present: the token (matched "token is {R}")']  # fmt: skip


def test_a_state_diff_cut_in_the_middle_of_a_secret_shows_where_it_was() -> None:
    for before in range(144, 188):  # every cut point of show()'s 200 characters in the token
        (line,) = diff_states({}, {"note": {"text": "x" * before + TOKEN}}, StatePolicy())
        clean = cleaned(line)
        shown = letters_and_digits(clean.split('"text": "', 1)[1]).lstrip("x")
        kept = letters_and_digits(TOKEN[: 197 - len('{"text": "') - before])  # what is left before the cut
        if len(kept) >= 6:
            assert clean.endswith(f"{R}...)") and shown == "redacted", (before, clean)
        else:  # a piece of five or fewer is not told apart from ordinary text
            assert shown == kept, (before, clean)


@pytest.mark.parametrize("seed", range(40))
def test_any_case_and_any_separators_of_a_long_secret_are_redacted(seed: int) -> None:
    """Each of the token's own separators dropped or changed, up to three more between any two of its
    letters and digits, each letter in either case."""
    chance = random.Random(seed)
    runs = re.findall(r"[^\W_]|[\W_]+", TOKEN)
    spelled = ""
    for index, run in enumerate(runs):
        if run.isalnum():
            spelled += chance.choice([run.upper(), run.lower()])
            if index + 1 < len(runs) and runs[index + 1].isalnum():
                spelled += chance.choice(["", "", " ", "-", ", ", "` `", "\n", "**"])
        else:
            spelled += chance.choice(["", "", run, "-", " ", "*", "."]) + chance.choice(["", " ", "` `"])
    assert cleaned(f"it is {spelled}!") == f"it is {R}!"


@pytest.mark.parametrize("cut", range(4, 45))
def test_pieces_cut_at_an_ellipsis_at_either_end(cut: int) -> None:
    skeleton = letters_and_digits(TOKEN)
    head, tail = TOKEN[:cut], TOKEN[-cut:]
    # the piece's letters and digits go (a separator next to the ellipsis may stay)
    for text, left in ((f"head {head}... then", head), (f"tail …{tail} then", tail)):
        clean = cleaned(text)
        if len(letters_and_digits(left)) >= 6:
            assert letters_and_digits(clean.replace(R, " ")) in ("headthen", "tailthen") and R in clean, clean
        else:
            assert clean == text
    assert cleaned(f"{skeleton[:cut]}...") == (f"{R}..." if cut >= 6 else f"{skeleton[:cut]}...")


def test_a_short_secret_is_found_in_any_case_and_as_a_piece_of_four_but_never_spelled_out() -> None:
    assert cleaned("pin is sgpt2; PIN_SGPT2 reads pinsgpt2; Sgpt2") == f"pin is {R}; PIN_{R} reads pin{R}; {R}"
    assert cleaned("cut: sgpt... and ...gpt2") == f"cut: {R}... and ...{R}"
    # a shorter piece, or the five spelled out, is ordinary text as often as a secret
    assert cleaned("sgp... s g p t 2, s-g-p-t-2") == "sgp... s g p t 2, s-g-p-t-2"


def test_short_secrets_and_short_pieces_leave_ordinary_text_alone() -> None:
    text = "Counted 1, 2, 3, 4, 5 open issues; running the test... then 12 34 5; sgp... ab1..."
    assert cleaned(text, "12345", "test_9f3k", PIN, "ab-12") == text
    # a secret of four letters and digits has no pieces; its exact value and other cases are still found
    assert cleaned("ab12... AB-12 ab 12", "ab-12") == f"{R}... {R} {R}"


def test_keys_numbers_and_the_replacement_itself_are_left_alone() -> None:
    sample = {"final_answer": f"done {TOKEN.lower()}", "trial": 12345, "tags": [PIN.lower(), None, True]}
    assert redact(sample, [TOKEN, PIN, "12345"]) == {"final_answer": f"done {R}", "trial": 12345, "tags": [R, None, True]}
    assert redact({"text": f"{R} and {R}"}, [TOKEN, PIN]) == {"text": f"{R} and {R}"}
