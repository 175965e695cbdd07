"""One document model (headings, text, tables, lists) that feeds every text format, so the terminal,
Markdown and HTML reports always say the same things. The renderers lay it out; this package decides
what is said and how each figure is written, one module a part, every public name re-exported here:

* ``blocks``: the blocks, how each figure is written, every block made printable;
* ``outline``: ``document``, the sections in order;
* ``summary``: the header, headline, cost per verified success, coverage, tiers, components, outcomes, pass^k;
* ``comparisons``: the Comparisons section and ``claim_text``;
* ``definitions``: the Definitions section (an arm's definitions side by side) and ``comparison_text``;
* ``cells``: the per-cell detail, the bonus tasks, where trials ran, provenance;
* ``failures``: the trials that did not pass, with ``viewer_command`` and ``transcript_uri``.
"""

from .blocks import COMPARISON_PLOT, DASH, HEADLINE_PLOTS, Block, Bullets, Command, Heading, Plots, Table, Text
from .comparisons import claim_text
from .failures import INSPECT_LOG_DIR, transcript_uri, viewer_command
from .outline import document

__all__ = [
    "COMPARISON_PLOT",
    "DASH",
    "HEADLINE_PLOTS",
    "INSPECT_LOG_DIR",
    "Block",
    "Bullets",
    "Command",
    "Heading",
    "Plots",
    "Table",
    "Text",
    "claim_text",
    "document",
    "transcript_uri",
    "viewer_command",
]
