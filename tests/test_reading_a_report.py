""""Reading a report" (docs/reading-a-report.md): its commands run in a copy of the example bench,
every table it shows is what they print, the claims it makes about equivalence hold, and its image
of the HTML report shows the report's sections of today (docs/_scripts/report_image.py makes the
image again, from the same commands)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import struct
import sys
from pathlib import Path
from types import ModuleType

import docs_text
import pytest
from made_once import made_once
from test_readme import page_blocks

from pytest_benchcell.config import load_bench
from pytest_benchcell.report.verdict_text import margin_text
from pytest_benchcell.statistics.decisions import Family, compare_paired, margin_of

PAGE = docs_text.DOCS / "reading-a-report.md"


def report_image() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_image", docs_text.DOCS / "_scripts" / "report_image.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules["report_image"] = script  # its dataclass looks its module up there
    spec.loader.exec_module(script)
    return script


def run_the_page(folder: Path) -> None:
    script = report_image()
    ran = script.run_page(script.copy_example_bench(folder))
    (folder / "ran.json").write_text(json.dumps([{"argv": r.argv, "returncode": r.returncode, "stdout": r.stdout} for r in ran]))


@pytest.fixture(scope="module")
def page_ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    folder = made_once(tmp_path_factory, "reading-a-report", run_the_page)
    return folder, json.loads((folder / "ran.json").read_text())


def comparable(line: str) -> str:
    """A line of output as the page may show it: durations vary from run to run, and with them the
    columns' widths."""
    return " ".join(re.sub(r"\b\d+(?:\.\d+)?s\b", "#s", line).split())


@pytest.mark.slow
@pytest.mark.e2e
def test_the_pages_commands_run_a_sitting_a_report_and_a_listing(page_ran: tuple[Path, list[dict]]) -> None:
    folder, ran = page_ran
    assert [run["argv"][:2] for run in ran] == [["pytest", "--bench-arm"], ["benchcell", "report"], ["pytest", "--bench-arm"]]
    sitting, report, listing = ran
    # The page says the sitting runs 45 trials and exits 1, with 6 failing by design.
    assert sitting["returncode"] == 1 and re.search(r"\b6 failed, 39 passed\b", sitting["stdout"]), sitting["stdout"][-3000:]
    assert report["returncode"] == 0 and (folder / "report.html").is_file(), report["stdout"][-3000:]
    assert listing["returncode"] == 0 and "nothing ran or was reserved" in listing["stdout"], listing["stdout"][-3000:]


@pytest.mark.slow
@pytest.mark.e2e
def test_every_output_the_page_shows_is_what_its_commands_print(page_ran: tuple[Path, list[dict]]) -> None:
    _, ran = page_ran
    printed = {comparable(line) for run in ran for line in run["stdout"].splitlines()}
    shown = [block for block in page_blocks(PAGE) if block.marker == "output"]
    assert len(shown) >= 4, "the page shows the headline, cost per success, the comparisons and the listing"
    for block in shown:
        missing = [line for line in block.text.splitlines() if line.strip() and comparable(line) not in printed]
        assert not missing, (
            f"{block}: these lines are not what the page's commands print today (copy the new output into the page):\n"
            + "\n".join(missing) + "\n--- printed:\n" + "\n".join(run["stdout"][-6000:] for run in ran[1:])
        )


@pytest.mark.slow
@pytest.mark.e2e
def test_the_image_shows_the_sections_the_html_report_has_today(page_ran: tuple[Path, list[dict]]) -> None:
    folder, _ = page_ran
    script = report_image()
    sections = script.report_sections((folder / "report.html").read_text(encoding="utf-8"))
    recorded, _ = script.read_sidecar(script.SIDECAR.read_text(encoding="utf-8"))
    assert sections == recorded, (
        "the HTML report's sections changed and docs/_static/report.png still shows the old ones: run "
        f"`.venv/bin/python docs/_scripts/report_image.py` and commit the image with its sidecar\nnow: {sections}\n"
        f"image: {recorded}"
    )


def test_the_image_is_the_one_its_sidecar_describes() -> None:
    script = report_image()
    image = script.IMAGE.read_bytes()
    sections, digest = script.read_sidecar(script.SIDECAR.read_text(encoding="utf-8"))
    assert digest == hashlib.sha256(image).hexdigest(), "report.png was replaced without docs/_scripts/report_image.py"
    assert image[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", image[16:24]) == (script.WIDTH, script.HEIGHT)
    assert "Headline" in sections and "Comparisons" in sections
    assert "](_static/report.png)" in PAGE.read_text(encoding="utf-8")


def test_the_page_lists_the_sections_of_the_image() -> None:
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", " ".join(PAGE.read_text(encoding="utf-8").split()))  # links' words
    listed = re.search(r"Its sections, in order \([^)]*\): (.*?)\. ", text)
    assert listed, "the page lists the report's sections after 'Its sections, in order (...): '"
    names = [re.sub(r"\s*\([^)]*\)", "", name).strip() for name in re.split(r", (?:and )?", listed.group(1))]
    script = report_image()
    assert names == script.read_sidecar(script.SIDECAR.read_text(encoding="utf-8"))[0]


def first_equivalent(differences: list[float], metric: str, margin: float, family: Family) -> int:
    for pairs in range(3, 400):
        if compare_paired(differences[:pairs], metric=metric, alpha=family.level, margin=margin).decision == "equivalent":
            return pairs
    raise AssertionError("no equivalence within 400 pairs")


def test_what_an_equivalence_takes_is_what_the_page_says() -> None:
    """Tokens that agree pair by pair (within 2%, alternating) and two arms that always pass, at the
    example's 6 comparisons and smallest effects (bench.toml: 20% of tokens, 15 percentage points)."""
    said = re.search(r"`equivalent \(±20%\)` after (\d+) pairs, and two that both always pass are shown `equivalent \(±15 pp\)` after (\d+)",
                     " ".join(PAGE.read_text(encoding="utf-8").split()))  # fmt: skip
    assert said, "the page no longer says how many pairs an equivalence takes"
    example = load_bench(docs_text.REPO / "bench.toml")
    family, smallest_effect = Family.of(len(example.comparisons)), example.smallest_effect
    assert family.claim_e == pytest.approx(120)  # "e 133 past the 120 a difference needs"
    tokens = first_equivalent([0.02 * ((i % 3) - 1) for i in range(400)], "tokens", margin_of("tokens", smallest_effect), family)
    success = first_equivalent([0.0] * 400, "success", margin_of("success", smallest_effect), family)
    assert (tokens, success) == (int(said.group(1)), int(said.group(2)))
    # The words are the report's own for these margins.
    assert margin_text("tokens", margin_of("tokens", smallest_effect)) == "±20%"
    assert margin_text("success", margin_of("success", smallest_effect)) == "±15 pp"
