"""Sphinx configuration of the documentation site: README.md (the front page) and the pages of docs/.

Sphinx with MyST reads the pages as CommonMark, the dialect GitHub renders them in, so each page reads
the same on GitHub and on the site; `sphinx-build -W docs OUT` turns every warning into an error
(a link to a missing page or heading, a page outside the table of contents), and the test suite runs
exactly that (tests/test_docs_site.py).
"""

project = "pytest-benchcell"
copyright = "2026, the pytest-benchcell authors"
# sphinx-copybutton: a copy button on every code block; its default prompt handling leaves our
# blocks (no "$ " prompts) as they are.
# autodoc: the Python reference (api.md) from the docstrings; sphinxarg: the `benchcell` commands'
# reference (cli.md) from their argparse parsers, so neither can drift from the code.
extensions = ["myst_parser", "sphinx_copybutton", "sphinx.ext.autodoc", "sphinxarg.ext"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
default_role = "literal"  # docstrings write `name` for code, as the Markdown pages do
smartquotes = False  # `--bench-rescore` in a docstring stays two hyphens, as a reader types it
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # GitHub's anchors for h1 to h3, so `page.md#a-heading` links resolve and are checked
html_theme = "furo"
html_title = "pytest-benchcell"
html_static_path = ["_static"]
html_css_files = ["output.css"]  # output blocks wrap instead of scrolling
