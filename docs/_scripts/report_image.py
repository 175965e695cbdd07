"""Regenerate the image of the HTML report on "Reading a report" (docs/reading-a-report.md).

    .venv/bin/python docs/_scripts/report_image.py

runs the page's own commands (its first ```bash block, a scripted sitting of the example bench and
the report) in a scratch copy of the example bench, opens the HTML report in headless Chromium at
1280 px and writes:

- docs/_static/report.png: the top of the report as a reader first sees it;
- docs/_static/report.sections.txt: the report's sections (its <h2> headings, in order) and the
  image's SHA-256.

tests/test_reading_a_report.py runs the same commands, reads the sections of the report they make
and fails when they differ from the sidecar's: the report changed and the image shows the old one.
Run this script then, and commit the image with its sidecar.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
PAGE = REPO / "docs" / "reading-a-report.md"
IMAGE = REPO / "docs" / "_static" / "report.png"
SIDECAR = REPO / "docs" / "_static" / "report.sections.txt"
WIDTH, HEIGHT = 1280, 1400
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]  # fmt: skip
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Ran:
    """One of the page's commands as it ran: its words, its exit status and what it printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str


def page_commands(page: Path = PAGE) -> list[list[str]]:
    """The commands of the page's first ```bash block, one per logical line (`\\` continues a line)."""
    found = re.search(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert found, f"{page} has no ```bash block"
    joined = re.sub(r"\\\n\s*", " ", found.group(1))
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def copy_example_bench(folder: Path) -> Path:
    """The repository's example bench (bench.toml, conftest.py, bench/) without its results."""
    for name in ("bench.toml", "conftest.py"):
        shutil.copy(REPO / name, folder / name)
    shutil.copytree(REPO / "bench", folder / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    (folder / "pytest.ini").write_text("[pytest]\n")  # the rootdir is here, not a project around it
    return folder


def environment() -> dict[str, str]:
    """This environment, as a reader's shell has it: no options a calling pytest set for itself."""
    unset = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER", "PYTHONDONTWRITEBYTECODE")
    return {key: value for key, value in os.environ.items() if key not in unset}


def run_page(folder: Path) -> list[Ran]:
    """Run the page's commands in `folder` (a copy of the example bench), in order."""
    ran = []
    for argv in page_commands():
        program = Path(argv[0]).name
        command = {"pytest": [sys.executable, "-m", "pytest", "-p", "no:randomly"], "benchcell": [str(BIN / "benchcell")]}.get(program)
        assert command is not None, f"{PAGE.name}: the page runs pytest and benchcell only, not {program}"
        done = subprocess.run([*command, *argv[1:]], cwd=folder, capture_output=True, text=True, env=environment(), timeout=900)
        ran.append(Ran(tuple(argv), done.returncode, done.stdout))
    return ran


def report_sections(report_html: str) -> list[str]:
    """The HTML report's sections: its <h2> headings, in order."""
    return [html.unescape(re.sub(r"<[^>]+>", "", title)).strip() for title in re.findall(r"<h2[^>]*>(.*?)</h2>", report_html, flags=re.S)]


def sidecar_text(sections: list[str], image: bytes) -> str:
    lines = ["# The sections of the HTML report shown in report.png (docs/_scripts/report_image.py writes this file).", *sections]
    return "\n".join([*lines, f"# report.png sha256 {hashlib.sha256(image).hexdigest()}"]) + "\n"


def read_sidecar(text: str) -> tuple[list[str], str]:
    """(sections, the image's sha256) as the sidecar records them."""
    digest = re.search(r"^# report\.png sha256 ([0-9a-f]{64})$", text, flags=re.M)
    return [line for line in text.splitlines() if line and not line.startswith("#")], digest.group(1) if digest else ""


def screenshot(report: Path, image: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install -y chromium)")
    done = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={image}", report.as_uri()],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    if done.returncode != 0 or image.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"chromium made no screenshot of {report}: {done.stderr[-2000:]}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="report-image-") as scratch:
        folder = copy_example_bench(Path(scratch))
        for ran in run_page(folder):
            print(f"ran {shlex.join(ran.argv)}: exit {ran.returncode}")
        report = folder / "report.html"
        if not report.is_file():
            raise SystemExit(f"the page's commands wrote no report.html: {PAGE}")
        screenshot(report, IMAGE)
        sections = report_sections(report.read_text(encoding="utf-8"))
    SIDECAR.write_text(sidecar_text(sections, IMAGE.read_bytes()), encoding="utf-8")
    print(f"wrote {IMAGE.relative_to(REPO)} and {SIDECAR.relative_to(REPO)}: {len(sections)} sections")
    return 0


if __name__ == "__main__":
    sys.exit(main())
