"""Where trials ran: the report's table per machine and arm (docs/machines.md), from provenance.host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from benches import write_bench
from sample_factory import cell_samples, make_sample, of_bench, write_samples

from pytest_benchcell.cli import main
from pytest_benchcell.report import ReportSettings, build_report, render_markdown, render_terminal
from pytest_benchcell.report.figures import where_trials_ran
from pytest_benchcell.report.reading import PlaceTally

pytest.importorskip("matplotlib.pyplot")  # before any in-process pytester run (numpy imports once)

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "pytest_benchcell/data/report.schema.json").read_text())


def ran_on(samples: list[dict[str, Any]], host: str | None, gateway: str | None = None) -> list[dict[str, Any]]:
    """The samples as a trial on `host` through `gateway` records them (None host: stored before hosts
    were recorded, so provenance has neither key)."""
    for sample in samples:
        if host is not None:
            sample["provenance"] = {**sample["provenance"], "host": host, "gateway": gateway}
    return samples


def tally(samples: int, scored: int, passes: int, costs: list[float], durations: list[float]) -> PlaceTally:
    return PlaceTally(samples, scored, passes, costs, durations)


def test_grouping_merges_cells_and_gateways_per_host_and_arm_with_unknown_last() -> None:
    rows = where_trials_ran(
        [
            ("mcp", "box-b", "gw0", tally(2, 2, 1, [100.0, 300.0], [1.0, 3.0])),
            ("cli", "box-b", "gw10", tally(1, 1, 1, [50.0], [2.0])),
            ("cli", "box-b", "gw2", tally(3, 2, 2, [10.0, 20.0], [4.0, 6.0])),
            ("cli", "unknown", "", tally(1, 1, 0, [], [5.0])),
            ("cli", "box-a", "", tally(2, 0, 0, [], [])),
        ],
        ["mcp", "cli"],
    )
    assert [(row.host, row.arm, row.gateways) for row in rows] == [
        ("box-a", "cli", []), ("box-b", "mcp", ["gw0"]), ("box-b", "cli", ["gw2", "gw10"]), ("unknown", "cli", []),
    ]  # fmt: skip
    box_b_cli = rows[2]
    assert (box_b_cli.samples, box_b_cli.scored, box_b_cli.passed, box_b_cli.success_rate) == (4, 3, 3, 1.0)
    assert (box_b_cli.cost_equivalent_median, box_b_cli.duration_s_median) == (20.0, 4.0)
    assert (rows[0].success_rate, rows[0].cost_equivalent_median, rows[0].duration_s_median) == (None, None, None)
    assert rows[3].cost_equivalent_median is None and rows[3].duration_s_median == 5.0  # usage unknown


def test_one_host_gives_no_rows_however_many_gateways() -> None:
    places = [("cli", "box-a", gateway, tally(1, 1, 1, [1.0], [1.0])) for gateway in ("gw0", "gw1", "")]
    assert where_trials_ran(places, ["cli"]) == []


def two_hosts(root: Path) -> None:
    write_samples(
        root,
        [
            *ran_on(cell_samples("cli", "t1", 3, tier="read"), "box-a", "gw0"),
            *ran_on(cell_samples("cli", "t1", 2, tier="read", start_trial=4, minutes=5, duration_ms=30000,
                                 outcomes=["incorrect", "pass"]), "box-b", "gw1"),  # fmt: skip
            *ran_on(cell_samples("mcp", "t1", 3, tier="read", tokens=(2000, 0, 0, 100)), "box-b", None),
            *ran_on(cell_samples("mcp", "t1", 1, tier="read", start_trial=4, minutes=9, status="error"), None),
        ],
    )


def test_the_report_groups_the_samples_it_uses_by_host_and_keeps_older_ones_as_unknown(tmp_path: Path) -> None:
    two_hosts(tmp_path)
    report = build_report(write_samples(tmp_path, []), ReportSettings())
    assert [(r.host, r.arm, r.gateways, r.samples, r.scored, r.passed) for r in report.hosts] == [
        ("box-a", "cli", ["gw0"], 3, 3, 3), ("box-b", "cli", ["gw1"], 2, 2, 1), ("box-b", "mcp", [], 3, 3, 3),
        ("unknown", "mcp", [], 1, 0, 0),
    ]  # fmt: skip
    assert report.hosts[1].duration_s_median == 30.0 and report.hosts[0].duration_s_median == 7.0
    assert report.hosts[2].cost_equivalent_median == 2500.0  # 2000 fresh + 5 x 100 output
    assert sum(row.samples for row in report.hosts) == report.store.samples_used


def test_a_store_of_one_host_reports_exactly_as_before(tmp_path: Path) -> None:
    one, none = tmp_path / "one", tmp_path / "none"
    write_samples(one, ran_on(cell_samples("cli", "t1", 3, tier="read"), "box-a", "gw0"))
    write_samples(none, cell_samples("cli", "t1", 3, tier="read"))
    reports = [build_report(write_samples(root, []), ReportSettings()) for root in (one, none)]
    assert [report.hosts for report in reports] == [[], []]
    assert render_markdown(reports[0]) == render_markdown(reports[1])
    assert "Where trials ran" not in "\n".join(render_terminal(reports[0]))


def test_every_format_of_benchcell_report_shows_where_trials_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    two_hosts(store)
    code = main(["report", "--store", str(store), "--floor", "2", "--md", str(out / "r.md"),
                 "--json", str(out / "r.json"), "--html", str(out / "r.html")])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    start = printed.index("Where trials ran")
    table = printed[start + 3 : start + 9]
    assert table[0].split() == ["host", "arm", "gateways", "samples", "scored", "pass", "cost-eq", "median",
                                "duration", "median"]  # fmt: skip
    assert table[2].split() == ["box-a", "cli", "gw0", "3", "3", "3/3", "100%", "3,900", "7.0s"]
    assert table[3].split() == ["box-b", "cli", "gw1", "2", "2", "1/2", "50%", "3,900", "30.0s"]
    assert table[4].split() == ["box-b", "mcp", "\u2014", "3", "3", "3/3", "100%", "2,500", "7.0s"]
    assert table[5].split() == ["unknown", "mcp", "\u2014", "1", "0", "\u2014", "\u2014", "\u2014"]
    markdown = (out / "r.md").read_text()
    assert "## Where trials ran" in markdown and "| box-b | cli | gw1 | 2 | 2 | 1/2 50% | 3,900 | 30.0s |" in markdown
    page = (out / "r.html").read_text()
    assert "<h2>Where trials ran</h2>" in page and "<td>unknown</td>" in page
    document = json.loads((out / "r.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert [(row["host"], row["arm"], row["gateways"]) for row in document["hosts"]] == [
        ("box-a", "cli", ["gw0"]), ("box-b", "cli", ["gw1"]), ("box-b", "mcp", []), ("unknown", "mcp", []),
    ]  # fmt: skip


def test_pytest_bench_report_shows_where_trials_ran(pytester: pytest.Pytester) -> None:
    write_bench(pytester)
    bench = pytester.path / "bench.toml"
    samples = [
        *ran_on([make_sample("shell", "say-hello", trial=t, tier="read", minutes=t) for t in (1, 2)], "box-a", "gw0"),
        *ran_on([make_sample("shell", "say-hello", trial=3, tier="read", minutes=3)], "box-b", "gw0"),
    ]
    write_samples(pytester.path / "results", [of_bench(sample, bench) for sample in samples])
    result = pytester.runpytest("--bench-report", "--bench-arm", "shell", "--bench-task", "say-hello")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["Where trials ran", "*", "*host*arm*gateways*", "*", "*box-a*shell*gw0*2*2*2/2*",
                                 "*box-b*shell*gw0*1*1*1/1*"])  # fmt: skip
