"""Split the long README.md into a short front page and the pages of the documentation site.

Run at the repo root, on the long README (one `# pytest-benchcell` page with every section):

    .venv/bin/python docs/_tools/split_readme.py                 # reads and rewrites README.md
    .venv/bin/python docs/_tools/split_readme.py --source long.md   # reads another copy of it

It writes README.md (the front page, from FRONT_PAGE below), every page of PAGES under docs/ and
docs/index.md (the site's root: the front page and the table of contents). Deterministic: the same
README gives the same files, so it can be run again after other branches changed the README.

- Sections move by their heading's title (`##` or `###`), as PAGES lists them. A `##` section takes
  its `###` subsections along unless PAGES places one elsewhere; a `###` placed on its own becomes a
  `##` there; a section marked `as_title` gives its text to the page's `#` title.
- A `##` section PAGES does not name stops the split with its title (nothing is ever dropped), unless
  `--unmapped-to docs/PAGE.md` says where such sections go; a new `###` follows its `##`. A title in
  PAGES that the README lacks stops it too (a renamed heading: update PAGES).
- Links within the README (`[x](#anchor)`) point at the page that now holds the anchor, and a plain
  "see <a heading's title>" becomes a link to it. Code blocks are copied untouched.
- The page intros and the front page are written here, so they are reproduced by every run. The
  table of bench.toml keys is asked of the loader (tests/docs_text.py), as its test does.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from docs_text import KEYS_TABLE, accepted_bench_keys, key_mentions, slug  # noqa: E402  (as the tests read the pages)


@dataclass(frozen=True)
class Piece:
    title: str  # the heading's text in the long README
    as_title: bool = False  # the page's `#` title replaces this heading; its subsections move up a level


@dataclass(frozen=True)
class Page:
    file: str  # relative to docs/
    title: str
    summary: str  # one line for the front page's list of pages
    intro: str
    pieces: tuple[Piece, ...]
    generated: str = ""  # a section this script adds after the pieces ("bench keys")
    outro: str = ""  # hand-written sections after the pieces


def whole(title: str) -> Piece:
    return Piece(title)


def as_title(title: str) -> Piece:
    return Piece(title, as_title=True)


# -- the pages, in the site's order ----------------------------------------------------------------

PAGES: tuple[Page, ...] = (
    Page(
        "writing-a-bench.md",
        "Writing a bench",
        "a bench.toml and the hooks in conftest.py, the example bench, the scripted model, scoring",
        """\
How a bench is put together, taking the example bench at the repo root apart: its service, its four
arms and twenty tasks, the hooks that provision and script it, and how each trial is scored. Every
key of bench.toml is in [the reference](#benchtoml-reference); what keeps an arm to its tools is in
[Tool isolation](#tool-isolation).
""",
        (as_title("Writing your own bench"), whole("Scoring")),
    ),
    Page(
        "bench-toml.md",
        "The bench.toml reference",
        "every table and key of bench.toml, with what it does and its default",
        """\
One example of every table and key, each with what it does and its default. The loader refuses any
key it does not know, with the file, the key and what is allowed, and the table at the end of this
page is compared with the loader itself by the test suite, so a key the loader gains or loses fails
the suite until this page says so.
""",
        (as_title("bench.toml reference"),),
        generated="bench keys",
    ),
    Page(
        "sittings.md",
        "Running sittings",
        "what a sitting does, its options, how it lives with your pytest habits, sittings at scale",
        """\
A sitting is one pytest run with `--bench-arm` and `--bench-task`: it plans new trials for the
selected cells, runs each as a test item and stores one sample per trial. This page is the
reference for running them; [Several machines](machines.md) spreads them over more machines
and [Deciding where trials go](#deciding-where-trials-go) spends trials where a comparison is still
open.
""",
        (
            whole("How a sitting works"),
            whole("With your pytest habits"),
            whole("Options"),
            whole("Sittings at scale"),
            whole("Running with the real model"),
        ),
    ),
    Page(
        "isolation.md",
        "Tool isolation",
        "the sandbox, the guard, the tool and execution audits, secrets, what the agent leaves behind",
        """\
Each arm must get exactly its declared tools, or the comparison measures something else. Five
layers hold it there, each independent of the others; the end of this page says what they cannot
guarantee.
""",
        (as_title("Tool isolation"),),
    ),
    Page(
        "statistics.md",
        "Reports and statistics",
        "reading a report, how every figure and comparison is computed and calibrated, deciding where trials go",
        """\
A report turns the store into tables: per arm, per cell, per tier, and comparisons between arms,
each figure with its interval and each claim with the scope it is about. This page says what the
tables show, how every figure is computed, what each rule was measured to deliver, and how
`--bench-fill decide` uses the same evidence to place trials.
""",
        (
            as_title("Reports"),
            whole("How the figures are computed"),
            whole("Deciding where trials go"),
            whole("The JSON report"),
            whole("Transcripts in Inspect's viewer"),
        ),
    ),
    Page(
        "machines.md",
        "Several machines",
        "one report or one store from several machines, and sittings whose trials run on other machines",
        """\
Two ways to use more than one machine: each runs its own sittings into its own store, and the
stores are reported together or merged; or one sitting sends its trials to workers on other
machines (xdist gateways) and keeps the only store.
""",
        (whole("Several machines: one report, one store"), whole("Trials on other machines (xdist gateways)")),
    ),
    Page(
        "store.md",
        "The store and its samples",
        "which samples count together, the sample format, transcripts, why the store can be trusted",
        """\
Every trial ends as one JSON line in an append-only store. This page says which samples are pooled
(conditions and scoring), what a sample holds, where its transcript is, and what keeps the store
trustworthy under crashes, concurrent sittings and damage.
""",
        (whole("Accumulating samples: conditions and scoring"), whole("The sample format")),
    ),
    Page(
        "benchmarks.md",
        "Benchmarks",
        "what each speed and cost target is, the script that measures it, and what it measured",
        """\
Speed and cost are measured by the scripts under `benchmarks/`, each printing its own figures and
breakdown; the tests stay free of timing assertions. The statistical calibration is on
[Reports and statistics](#how-the-figures-are-computed).
""",
        (as_title("Benchmarks"),),
    ),
    Page(
        "design.md",
        "Design notes",
        "how the plugin is built and which libraries it relies on, and why",
        """\
The layout of the code is in [Architecture](architecture.md); these notes say why it is so.
""",
        (as_title("Design notes"),),
        outro="""\
## The documentation site

README.md and the pages under docs/ are plain Markdown, built into a site by Sphinx with MyST
(`docs/conf.py`, the Furo theme; `pip install -e '.[docs]'`). Chosen over MkDocs with Material for
three reasons. MyST reads CommonMark, the dialect GitHub renders, so a page reads the same on GitHub
and on the site; MkDocs' Python-Markdown (without extra extensions) turns a fenced block in a
two-space list item into a paragraph and leaves Markdown inside `<details>` unparsed, and these pages
have both. `sphinx-build -W` makes every warning an error, among them a link to a page or a heading
that does not exist (`myst_heading_anchors`) and a page outside the table of contents. And both are
maintained: MkDocs' last release is 1.6.1 of August 2024 and Material for MkDocs is in maintenance
mode while its authors build a successor, where Sphinx and MyST release several times a year.

The test suite builds the site that way (tests/test_docs_site.py) and runs or checks every code
block of every page (tests/test_readme.py), finding the blocks with markdown-it, the parser MyST
itself uses. sybil and pytest-examples were considered for the second: either would find the blocks
and make test items of them, but the checks (commands run in a copy of the example bench, options
against the real `--help`, pip extras against pyproject.toml, example hooks called with the example
bench's tools, blocks in the site's order so a later one can read what an earlier command wrote)
would stay this project's own code. Tests that keep a sentence or a figure of the documentation true
find it by its heading or its words through tests/docs_text.py, not by the page that holds it.
""",
    ),
)
# Pages of docs/ written by hand, listed in the site after the generated ones.
HAND_WRITTEN = (("architecture.md", "Architecture", "the modules, their one job each, the sample record and the store layout"),)

FRONT_PAGE = """\
{{preamble}}

{{section: Two commands on a fresh machine}}

## A five-minute tour

After the first command above, the example bench's store holds five scripted trials of one cell, and
the sitting ended with its summary:

<!-- readme-test: output -->
```
============================== benchcell sitting ===============================
cli-skill x close-export: 5 recorded this sitting (5 passed, 0 failed, 0 invalid, 0 errors)
    scored samples of the current definition: 0 -> 5 (meets the reporting floor of 3)
spent: 34,493 cost-equivalent tokens this sitting
store: /home/me/project/bench/results/scripted
```

**1. Preview before spending.** `--collect-only` lists the trials a sitting would run, with the
numbers they would get, and reserves nothing:

```
pytest --bench-arm all --bench-task close-export --bench-scripted --collect-only -q
```

**2. Read a sample.** Each trial is one JSON line in `bench/results/scripted/<arm>/<task>.jsonl`: the
verdict and its reason, every tool call with the guard's decision, the final answer, turns and tokens
([the sample format](#the-sample-format)).

```python
import json
from pathlib import Path

for line in Path("bench/results/scripted/cli-skill/close-export.jsonl").read_text().splitlines():
    sample = json.loads(line)
    print(sample["trial"], sample["status"], sample["outcome"], sample["turns"], "turns", sample["usage"]["total"])
```

**3. Compare with another arm.** `--bench-fill` runs only what each cell lacks to reach the reporting
floor (3 scored samples): here three trials of the `mcp` arm, none of `cli-skill`.

```
pytest --bench-arm cli-skill,mcp --bench-task close-export --bench-scripted --bench-fill
```

**4. Read the report.** `--bench-report` renders the store as tables and runs no trial; add
`--bench-report-html report.html` for a page with plots (the `[html]` extra). With one task the
headline gives means without intervals (intervals need 3 tasks), and the comparison of the two arms
reads "not distinguishable at this sample size" ([how the figures are computed](#how-the-figures-are-computed)).

```
pytest --bench-report --bench-scripted
```

**5. Make it yours.** Copy `bench.toml` and `conftest.py` and change the service, the arms and the
tasks ([Writing a bench](#writing-your-own-bench)); test it for free with `--bench-scripted`; then
drop that option to spend real tokens ([Running with the real model](#running-with-the-real-model)).

## The documentation

{{pages}}

The pages are plain Markdown, readable here, and built into a site with Sphinx and MyST:
`pip install -e '.[docs]'`, then `sphinx-build -W docs docs/_build/html` (the test suite builds it
the same way, and runs or checks every code block of every page).
"""

INDEX = """\
```{{include}} ../README.md
:relative-docs: docs/
:relative-images:
```

```{{toctree}}
:hidden:
:maxdepth: 2

{entries}
```
"""

# -- reading the long README -----------------------------------------------------------------------


@dataclass
class Heading:
    level: int
    title: str  # as written
    plain: str  # as rendered (what the anchor is made of)
    line: int  # 0-based
    end: int = 0  # the line after its section (the next heading of its level or above)
    parent: Heading | None = None
    children: list[Heading] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return slug(self.plain)


class SplitError(Exception):
    pass


def read_headings(text: str) -> tuple[list[Heading], set[int]]:
    """Every heading, and the lines inside code blocks (fenced or indented)."""
    tokens = MarkdownIt("commonmark").parse(text)
    headings, code_lines = [], set()
    for index, token in enumerate(tokens):
        if token.type in ("fence", "code_block") and token.map:
            code_lines.update(range(*token.map))
        if token.type == "heading_open" and token.map:
            if token.markup not in ("#", "##", "###", "####", "#####", "######"):
                raise SplitError(f"README.md:{token.map[0] + 1}: write headings with #, not underlined")
            inline = tokens[index + 1]
            plain = "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))
            headings.append(Heading(int(token.tag[1]), inline.content.strip(), plain, token.map[0]))
    total = len(text.splitlines())
    for position, heading in enumerate(headings):
        heading.end = next((h.line for h in headings[position + 1 :] if h.level <= heading.level), total)
        heading.parent = next((h for h in reversed(headings[:position]) if h.level < heading.level), None)
        if heading.parent:
            heading.parent.children.append(heading)
    return headings, code_lines


# -- writing ---------------------------------------------------------------------------------------


class Splitter:
    def __init__(self, text: str, unmapped_to: str | None) -> None:
        self.lines = text.splitlines()
        self.headings, self.code_lines = read_headings(text)
        titles = [h for h in self.headings if h.level in (2, 3)]
        self.by_title: dict[str, Heading] = {}
        for heading in titles:
            if heading.title in self.by_title:
                raise SplitError(f"README.md:{heading.line + 1}: two sections are titled {heading.title!r}; rename one")
            self.by_title[heading.title] = heading
        self.placed: dict[int, tuple[str, bool]] = {}  # heading line -> (page file, became the page's title)
        self.emitted: set[int] = set()  # lines of the README written to some page
        self.pages = list(PAGES)
        self._place(unmapped_to)

    def _heading(self, title: str) -> Heading:
        if title not in self.by_title:
            near = difflib.get_close_matches(title, list(self.by_title), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise SplitError(f"PAGES names the section {title!r}, which README.md does not have{hint}: "
                             f"update PAGES in {Path(__file__).relative_to(REPO)}")  # fmt: skip
        return self.by_title[title]

    def _place(self, unmapped_to: str | None) -> None:
        front = [title.strip() for title in re.findall(r"^\{\{section:(.*)\}\}$", FRONT_PAGE, flags=re.M)]
        for title in front:
            self.placed[self._heading(title).line] = ("README.md", False)
        for page in self.pages:
            for piece in page.pieces:
                heading = self._heading(piece.title)
                if heading.line in self.placed:
                    raise SplitError(f"the section {piece.title!r} is placed twice (on {self.placed[heading.line][0]} and {page.file})")
                self.placed[heading.line] = (page.file, piece.as_title)
        unmapped = [h for h in self.headings if h.level == 2 and h.line not in self.placed]
        if unmapped and not unmapped_to:
            raise SplitError(
                "README.md has sections PAGES does not place: "
                + "; ".join(f"{h.title!r} (line {h.line + 1})" for h in unmapped)
                + f". Add each to a page in PAGES ({Path(__file__).relative_to(REPO)}), "
                "or pass --unmapped-to docs/PAGE.md to append them to one page"
            )
        if unmapped:
            name = Path(str(unmapped_to)).name
            target = next((page for page in self.pages if page.file == name), None)
            if target is None:
                raise SplitError(f"--unmapped-to {unmapped_to}: not a page of PAGES ({', '.join(p.file for p in self.pages)})")
            extra = tuple(whole(h.title) for h in unmapped)
            self.pages[self.pages.index(target)] = Page(target.file, target.title, target.summary, target.intro,
                                                        target.pieces + extra, target.generated, target.outro)  # fmt: skip
            for heading in unmapped:
                self.placed[heading.line] = (name, False)
                print(f"note: the section {heading.title!r} has no place in PAGES; appended to docs/{name}", file=sys.stderr)
        for heading in self.headings:
            if heading.level == 3 and heading.line not in self.placed and heading.parent and heading.parent.line not in self.placed:
                raise SplitError(f"README.md:{heading.line + 1}: {heading.title!r} is under no placed section")

    # where each anchor went
    def page_of(self, heading: Heading) -> tuple[str, bool]:
        """The file that holds this heading and whether it became that page's title."""
        node: Heading | None = heading
        while node is not None:
            if node.line in self.placed:
                file, became_title = self.placed[node.line]
                return file, became_title and node is heading
            node = node.parent
        return "README.md", False  # the preamble's own title

    def target(self, anchor: str, here: str, where: str) -> str:
        for heading in self.headings:
            if heading.anchor == anchor:
                file, became_title = self.page_of(heading)
                break
        else:
            raise SplitError(f"{where}: the link to #{anchor} names no heading of README.md")
        fragment = "" if became_title else f"#{anchor}"
        if file == here:
            return fragment or "#"
        if here == "README.md":
            return f"docs/{file}{fragment}"
        if file == "README.md":
            return f"index.md{fragment}"
        return f"{file}{fragment}"

    def rewrite(self, line: str, here: str, where: str) -> str:
        """Links to anchors, and "see <title>", pointed at the page that holds them (outside code spans)."""
        parts = re.split(r"(`+[^`]*`+)", line)
        for index in range(0, len(parts), 2):
            part = re.sub(r"\]\(#([^)\s]+)\)", lambda m: f"]({self.target(m.group(1), here, where)})", parts[index])
            for title in sorted(self.by_title, key=len, reverse=True):
                anchor = self.by_title[title].anchor
                pattern = re.compile(rf'\bsee ("?)({re.escape(title)})\1(?![\w-])')
                part = pattern.sub(lambda m, a=anchor: f"see [{m.group(1)}{m.group(2)}{m.group(1)}]({self.target(a, here, where)})", part)
            parts[index] = part
        return "".join(parts)

    def render_lines(self, start: int, end: int, here: str, shift: int, skip: set[int]) -> list[str]:
        out = []
        heading_lines = {h.line: h for h in self.headings}
        for number in range(start, end):
            if number in skip:
                continue
            self.emitted.add(number)
            line = self.lines[number]
            if number in self.code_lines:
                out.append(line)
                continue
            if number in heading_lines and shift:
                level = heading_lines[number].level + shift
                line = "#" * level + line.lstrip("#")
            out.append(self.rewrite(line, here, f"README.md:{number + 1}"))
        return out

    def section(self, heading: Heading, here: str, shift: int, drop_heading: bool) -> str:
        """A section with the subsections placed elsewhere left out, its headings shifted."""
        skip: set[int] = set()
        for child in self._descendants(heading):
            if child.line in self.placed:
                skip.update(range(child.line, child.end))
        if drop_heading:
            skip.add(heading.line)
        return "\n".join(self.render_lines(heading.line, heading.end, here, shift, skip)).strip("\n")

    def _descendants(self, heading: Heading) -> list[Heading]:
        found = []
        for child in heading.children:
            found.append(child)
            found.extend(self._descendants(child))
        return found

    def page(self, page: Page) -> str:
        parts = [f"# {page.title}", self.rewrite_block(page.intro, page.file)]
        for piece in page.pieces:
            heading = self._heading(piece.title)
            shift = 1 - heading.level if piece.as_title else 2 - heading.level
            parts.append(self.section(heading, page.file, shift, drop_heading=piece.as_title))
        if page.outro:
            parts.append(self.rewrite_block(page.outro, page.file))
        return "\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n"

    def rewrite_block(self, text: str, here: str) -> str:
        return "\n".join(self.rewrite(line, here, f"the template of {here}") for line in text.splitlines())

    def front_page(self) -> str:
        first = min((h.line for h in self.headings if h.level == 2), default=len(self.lines))
        preamble = "\n".join(self.render_lines(0, first, "README.md", 0, set())).strip("\n")
        listing = "\n".join(f"- [{page.title}](docs/{page.file}): {page.summary}" for page in self.pages)
        listing += "".join(f"\n- [{title}](docs/{file}): {summary}" for file, title, summary in HAND_WRITTEN)
        # the template's own prose gets the links rewritten as the README's does; its code blocks stay
        _, template_code = read_headings(FRONT_PAGE)
        out: list[str] = []
        for number, line in enumerate(FRONT_PAGE.splitlines()):
            if line == "{{preamble}}":
                out.append(preamble)
            elif line == "{{pages}}":
                out.append(listing)
            elif line.startswith("{{section:"):
                out.append(self.section(self._heading(line[len("{{section:") : -2].strip()), "README.md", 0, False))
            elif number in template_code:
                out.append(line)
            else:
                out.append(self.rewrite(line, "README.md", "the front page's template"))
        return "\n".join(out) + "\n"

    def check_nothing_lost(self) -> None:
        titles = {self._heading(piece.title).line for page in self.pages for piece in page.pieces if piece.as_title}
        lost = [n for n in range(len(self.lines)) if n not in self.emitted and n not in titles and self.lines[n].strip()]
        if lost:
            raise SplitError(f"{len(lost)} lines of README.md would be lost, the first at line {lost[0] + 1}: {self.lines[lost[0]]!r}")

    def index(self) -> str:
        entries = [page.file.removesuffix(".md") for page in self.pages] + [f.removesuffix(".md") for f, _, _ in HAND_WRITTEN]
        return INDEX.format(entries="\n".join(entries))


def bench_keys_section(reference: str, pages: dict[str, str]) -> str:
    """The keys the loader accepts, each linked to where it is described when that is not this page."""
    documents = [(reference, pages[reference])] + [(name, text) for name, text in pages.items() if name != reference]

    def cell(key: str) -> str:
        mentions = key_mentions(key, documents)
        if not mentions or mentions[0][0] == reference:
            return f"`{key}`"
        name, anchor = mentions[0]
        return f"[`{key}`]({name}{'#' + anchor if anchor else ''})"

    rows = "\n".join(f"| `{table}` | {', '.join(cell(key) for key in keys)} |" for table, keys in accepted_bench_keys().items())
    return (
        f"## {KEYS_TABLE}\n\n"
        "The keys the loader accepts in each kind of table; a key described on another page links there.\n"
        "tests/test_docs_site.py asks the loader and compares: a key added to or removed from the loader\n"
        "fails the suite until this table, and a description, follow.\n\n"
        "| table | keys |\n| --- | --- |\n" + rows + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO / "README.md", help="the long README (default: README.md)")
    parser.add_argument("--unmapped-to", metavar="docs/PAGE.md", help="append sections PAGES does not place to this page")
    options = parser.parse_args(argv)
    source = options.source.read_text(encoding="utf-8")
    if "\n## A five-minute tour\n" in source:
        print(f"split_readme: {options.source} is already the front page; give the long README with --source "
              "(for example `git show main:README.md > /tmp/README.long.md`)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        splitter = Splitter(source, options.unmapped_to)
        pages = {page.file: splitter.page(page) for page in splitter.pages}
        for page in splitter.pages:
            if page.generated == "bench keys":
                pages[page.file] += "\n" + bench_keys_section(page.file, pages)
        written = {REPO / "docs" / name: text for name, text in pages.items()}
        written[REPO / "README.md"] = splitter.front_page()
        written[REPO / "docs" / "index.md"] = splitter.index()
        splitter.check_nothing_lost()
    except SplitError as error:
        print(f"split_readme: {error}", file=sys.stderr)
        return 2
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
