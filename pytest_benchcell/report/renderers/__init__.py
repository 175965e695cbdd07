"""One module per output format; document/ holds what every text format says."""

from .html import render_html
from .json import render_json
from .markdown import render_markdown
from .terminal import render_terminal

__all__ = ["render_html", "render_json", "render_markdown", "render_terminal"]
