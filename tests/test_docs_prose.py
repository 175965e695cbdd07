"""The user pages read as pages: no run of prose longer than 600 words between two headings (a reader
loses the thread; measurement narratives fold away in <details>), and a newcomer's pages link each
glossary word to its entry where they first use it."""

from __future__ import annotations

import re
from pathlib import Path

import docs_text
from markdown_it import MarkdownIt

LONGEST_RUN = 600  # words of prose between two headings
GLOSSARY = docs_text.DOCS / "glossary.md"
# The pages a newcomer reads first, in this order: each links a glossary word at its first use.
NEWCOMER_PAGES = ("tutorial.md", "reading-a-report.md")
# Glossary words that are also plain English: a page may use them plainly before it means the term.
PLAIN_WORDS = {"error", "invalid", "definition", "sample", "store", "probe", "comparison", "bench"}


def prose_runs(path: Path) -> list[tuple[str, int]]:
    """(heading, words) of every run of prose of a page: the paragraphs and list items between two
    headings, without code, tables, HTML comments or what is folded in <details>."""
    runs, title, words, folded, in_table = [], "(the page's top)", 0, 0, 0
    tokens = MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            runs.append((title, words))
            title, words = tokens[index + 1].content, 0
        elif token.type == "html_block":
            folded += token.content.count("<details") - token.content.count("</details>")
        elif token.type in ("table_open", "table_close"):
            in_table += 1 if token.type == "table_open" else -1
        elif token.type == "inline" and not folded and not in_table and tokens[index - 1].type != "heading_open":
            words += len(token.content.split())
    return [*runs, (title, words)]


def test_no_user_page_has_a_run_of_prose_over_600_words() -> None:
    long = [
        f"{docs_text.where(path)}: {words} words under {title!r}"
        for path in docs_text.user_pages()
        for title, words in prose_runs(path)
        if words > LONGEST_RUN
    ]
    assert not long, f"runs of prose over {LONGEST_RUN} words (add a heading, or fold a measurement into <details>): {long}"


def test_the_prose_runs_are_counted_as_a_reader_meets_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nOne two three.\n\n- four five\n\n```bash\nnot counted\n```\n\n| not | counted |\n| - | - |\n\n"
        "<details><summary>x</summary>\n\nfolded words\n\n</details>\n\n## Next\n\nsix\n"
    )
    assert prose_runs(page) == [("(the page's top)", 0), ("Title", 5), ("Next", 1)]


def glossary_terms() -> dict[str, str]:
    """Each glossary word and its anchor (its entry is a heading of the glossary page)."""
    return {title: docs_text.slug(title) for level, title, _ in docs_text.headings(GLOSSARY) if level == 2}


def first_uses(path: Path, terms: dict[str, str]) -> dict[str, str | None]:
    """Each glossary word the page's prose uses, and the link around its first use (None: not linked).
    Headings and code are not prose."""
    found: dict[str, str | None] = {}
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    for index, token in enumerate(tokens):
        if token.type != "inline" or tokens[index - 1].type == "heading_open":
            continue
        link = None
        for child in token.children or ():
            if child.type == "link_open":
                link = str(child.attrs.get("href", ""))
            elif child.type == "link_close":
                link = None
            elif child.type == "text":
                for term in terms:
                    if term not in found and re.search(rf"(?<![\w-]){re.escape(term)}s?(?![\w-])", child.content, flags=re.I):
                        found[term] = link
    return found


def test_glossary_entries_are_headings_a_page_can_link_to() -> None:
    terms = glossary_terms()
    assert {"sitting", "cell", "arm", "e-value", "anytime interval", "cost-equivalent tokens", "pass^k"} <= set(terms)
    assert list(terms) == sorted(terms, key=str.lower), "the glossary's entries are in alphabetical order"


def test_a_newcomers_pages_link_each_glossary_word_at_its_first_use() -> None:
    terms = {term: anchor for term, anchor in glossary_terms().items() if term not in PLAIN_WORDS}
    unlinked = []
    for name in NEWCOMER_PAGES:
        for term, link in first_uses(docs_text.DOCS / name, terms).items():
            if link != f"glossary.md#{terms[term]}":
                unlinked.append(f"docs/{name}: {term!r} (first use linked to {link!r})")
    assert not unlinked, f"link the first use of each glossary word to its entry: {unlinked}"
