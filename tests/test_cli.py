"""`benchcell report` through main([...]) on synthetic stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sample_factory import SMALL_BENCH, cell_samples, of_bench, scripted_bench, write_samples

from pytest_benchcell.cli import main, parse_weights


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    write_samples(
        root,
        [
            *cell_samples("cli", "t1", 3, tier="read"),
            *cell_samples("cli", "t2", 3, tier="multi-step"),
            *cell_samples("mcp", "t1", 3, tier="read", tokens=(2000, 800, 4000, 300)),
            *cell_samples("mcp", "t2", 2, tier="multi-step"),
            *cell_samples("cli", "t1", 3, model_kind="scripted"),
        ],
    )
    return root


def test_report_prints_and_writes_every_format(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(
        ["report", "--store", str(store_dir), "--md", str(out / "r.md"), "--json", str(out / "r.json"),
         "--html", str(out / "r.html")]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "Headline" in printed and "Coverage" in printed
    assert f"wrote {out / 'r.json'}" in printed
    assert (out / "r.md").read_text().startswith("# benchcell report")
    assert json.loads((out / "r.json").read_text())["arms"] == ["cli", "mcp"]
    assert "<svg" in (out / "r.html").read_text()


def test_options_reach_the_report(store_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    code = main(
        ["report", "--store", str(store_dir), "--floor", "2", "--weights", "output=0", "--arm", "mcp", "cli",
         "--task", "t1", "--fingerprints", "group", "--seed", "7", "--json", str(path)]
    )  # fmt: skip
    assert code == 0
    document = json.loads(path.read_text())
    assert document["settings"]["floor"] == 2
    expected = {"fresh_input": 1.0, "cache_write": 1.25, "cache_read": 0.1, "output": 0.0}
    assert document["settings"]["weights"] == expected
    assert document["settings"]["fingerprint_policy"] == "group" and document["settings"]["seed"] == 7
    assert document["arms"] == ["mcp", "cli"]
    assert [t["task"] for t in document["tasks"]] == ["t1"]
    assert document["tasks"][0]["tier"] == "read"  # discovered from the samples


def test_model_kind_selects_the_scripted_samples(store_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert main(["report", "--store", str(store_dir), "--model-kind", "scripted", "--json", str(path)]) == 0
    document = json.loads(path.read_text())
    assert document["settings"]["model_kind"] == "scripted" and document["arms"] == ["cli"]


def test_empty_store_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--store", str(tmp_path)]) == 0
    assert "no real-model samples" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--floor", "0"], "--floor"),
        (["--floor", "three"], "--floor"),
        (["--weights", "outputs=5"], "unknown component 'outputs'"),
        (["--weights", "output=-1"], "output"),
        (["--weights", "output"], "NAME=NUMBER"),
        (["--weights", "output=lots"], "a number"),
        (["--model-kind", "fake"], "--model-kind"),
        (["--arm", "nope"], "unknown arm 'nope'"),
        (["--task", "t9"], "unknown task 't9'"),
        (["--fingerprints", "oldest"], "--fingerprints"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_bad_values_exit_2(store_dir: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--store", str(store_dir), *extra]) == 2
    assert message in capsys.readouterr().err


def test_missing_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["report", "--store", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)  # no bench.toml here nor above (the suite's own checkout has one)
    assert main(["report"]) == 2
    error = capsys.readouterr().err
    assert "--store DIR, or --config bench.toml" in error and f"no bench.toml in {tmp_path}" in error
    assert main([]) == 2


def test_parse_weights_keeps_the_rest() -> None:
    assert parse_weights("output=4, cache_read=0.2") == {
        "fresh_input": 1.0, "cache_write": 1.25, "cache_read": 0.2, "output": 4.0,
    }  # fmt: skip


def test_config_supplies_catalogue_weights_and_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = pytest.importorskip("pytest_benchcell.config")
    if not hasattr(config, "load_bench"):
        pytest.skip("config.load_bench is not available")
    bench = tmp_path / "bench.toml"
    bench.write_text(SMALL_BENCH + '\n[tasks.t2]\ntier = "multi-step"\nintent = "Close the bug."\n\n[pricing]\noutput = 4\n')
    write_samples(tmp_path / "results", [of_bench(sample, bench) for sample in cell_samples("cli", "t1", 3, tier="read")])
    path = tmp_path / "r.json"
    assert main(["report", "--config", str(bench), "--json", str(path)]) == 0
    document = json.loads(path.read_text())
    assert document["arms"] == ["cli", "mcp"]
    assert [t["task"] for t in document["tasks"]] == ["t1", "t2"]
    assert document["settings"]["floor"] == 2 and document["settings"]["weights"]["output"] == 4.0
    assert {c["arm"]: c["covered"] for c in document["coverage"]} == {"cli": 1, "mcp": 0}
    bad = tmp_path / "bad.toml"
    bad.write_text("[bench]\n")
    assert main(["report", "--config", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_several_stores_report_as_one_counting_each_sample_once(tmp_path: Path) -> None:
    shared = cell_samples("cli", "t1", 2, tier="read")
    write_samples(tmp_path / "a", [*shared, *cell_samples("mcp", "t1", 3, tier="read")])
    write_samples(tmp_path / "b", [*shared, *cell_samples("cli", "t1", 2, tier="read", start_trial=3)])
    path = tmp_path / "r.json"
    code = main(["report", "--store", str(tmp_path / "a"), "--store", str(tmp_path / "b"), "--json", str(path)])
    assert code == 0
    document = json.loads(path.read_text())
    cells = {(cell["arm"], cell["task"]): cell["scored"] for cell in document["cells"]}
    assert cells == {("cli", "t1"): 4, ("mcp", "t1"): 3}
    assert document["store"]["duplicates"] == [sample["id"] for sample in shared]
    assert document["store"]["stores"] == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_merge_appends_what_dest_lacks_and_renumbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = cell_samples("cli", "t1", 1, tier="read")
    write_samples(tmp_path / "a", [*shared, *cell_samples("cli", "t1", 2, tier="read", start_trial=2)])
    write_samples(tmp_path / "b", [*shared, *cell_samples("cli", "t1", 2, tier="read", start_trial=2)])
    assert main(["merge", str(tmp_path / "b"), "--into", str(tmp_path / "a")]) == 0
    assert "3 samples read from 1 store: 2 appended (2 renumbered), 1 already there" in capsys.readouterr().out
    lines = (tmp_path / "a" / "real" / "cli" / "t1.jsonl").read_text().splitlines()
    assert [json.loads(line)["trial"] for line in lines] == [1, 2, 3, 4, 5]
    assert main(["merge", str(tmp_path / "b"), "--into", str(tmp_path / "a")]) == 0  # idempotent
    assert "0 appended" in capsys.readouterr().out
    assert main(["merge", str(tmp_path / "a"), "--into", str(tmp_path / "a")]) == 2
    assert main(["merge", str(tmp_path / "missing"), "--into", str(tmp_path / "a")]) == 2


def test_merge_refuses_a_folder_that_is_not_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("not samples")
    assert main(["merge", str(tmp_path / "notes"), "--into", str(tmp_path / "dest")]) == 2
    assert f"SRC {tmp_path / 'notes'} is not a sample store; a store is the folder named by [bench] store" in capsys.readouterr().err
    assert not (tmp_path / "dest").exists()


def test_merge_refuses_a_dest_folder_that_is_not_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(tmp_path / "src", cell_samples("cli", "t1", 1))
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "setup.py").write_text("")
    assert main(["merge", str(tmp_path / "src"), "--into", str(tmp_path / "project")]) == 2
    assert "is a folder with other files, not a sample store" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["setup.py"]


def test_merge_refuses_samples_of_other_conditions_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(tmp_path / "mine", cell_samples("cli", "t1", 2, fingerprint="fp-mine"))
    write_samples(tmp_path / "theirs", cell_samples("cli", "t1", 1, fingerprint="fp-theirs", model="other-model"))
    mine = (tmp_path / "mine" / "real" / "cli" / "t1.jsonl").read_bytes()
    assert main(["merge", str(tmp_path / "theirs"), "--into", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err
    assert "nothing was merged" in err
    assert "cli x t1 (real): 1 of model other-model, conditions fp-theirs (DEST has conditions fp-mine)" in err
    assert "--allow-other-conditions" in err
    assert (tmp_path / "mine" / "real" / "cli" / "t1.jsonl").read_bytes() == mine
    assert main(["merge", str(tmp_path / "theirs"), "--into", str(tmp_path / "mine"), "--allow-other-conditions"]) == 0
    assert "1 samples read from 1 store: 1 appended" in capsys.readouterr().out


def test_merge_refuses_a_new_cell_of_another_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_samples(tmp_path / "mine", cell_samples("cli", "t1", 2))
    write_samples(tmp_path / "theirs", cell_samples("cli", "t2", 1, model="other-model"))
    assert main(["merge", str(tmp_path / "theirs"), "--into", str(tmp_path / "mine")]) == 2
    assert "cli x t2 (real): 1 of model other-model" in capsys.readouterr().err
    assert not (tmp_path / "mine" / "real" / "cli" / "t2.jsonl").exists()


@pytest.mark.parametrize("option", ["--md", "--json", "--html"])
@pytest.mark.parametrize("where", ["folder", "below-a-file"])
def test_report_outputs_that_cannot_be_written_are_refused_first(
    store_dir: Path, tmp_path: Path, option: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "store" if where == "folder" else tmp_path / "afile" / "r.out"
    assert main(["report", "--store", str(store_dir), option, str(target)]) == 2
    err = capsys.readouterr().err
    why = "is a folder" if where == "folder" else f"cannot be created: {tmp_path / 'afile'} is a file, not a folder"
    assert f"benchcell report: error: {option} {target}: {target} {why}; allowed: a file path" in err


def benchcell(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    script = Path(sys.executable).parent / "benchcell"
    assert script.is_file(), f"the console script is not installed beside {sys.executable}"
    return subprocess.run([str(script), *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_report_at_the_root_of_a_bench_needs_no_option(tmp_path: Path) -> None:
    # `benchcell report` where `pytest --bench-report` would be run: the bench is found as a sitting
    # finds it, its store read, and the one model kind the store holds chosen.
    scripted_bench(tmp_path / "project")
    done = benchcell("report", "--json", "r.json", cwd=tmp_path / "project")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "project" / "r.json").read_text())
    assert document["settings"]["model_kind"] == "scripted"
    assert document["settings"]["floor"] == 2  # from the bench
    assert {c["arm"]: c["covered"] for c in document["coverage"]} == {"cli": 1, "mcp": 1}
    assert "no scripted-model samples" not in done.stdout and "Headline" in done.stdout


def test_report_below_the_bench_root_finds_the_bench_above(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_bench(tmp_path / "project")
    (tmp_path / "project" / "tasks").mkdir()
    monkeypatch.chdir(tmp_path / "project" / "tasks")
    assert main(["report", "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["settings"]["floor"] == 2


def test_the_ini_key_bench_config_names_the_bench_for_the_report_too(tmp_path: Path) -> None:
    scripted_bench(tmp_path / "project" / "benches")
    (tmp_path / "project" / "pytest.ini").write_text("[pytest]\nbench_config = benches/bench.toml\n")
    done = benchcell("report", "--json", "r.json", cwd=tmp_path / "project")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "project" / "r.json").read_text())["settings"]["floor"] == 2
    (tmp_path / "project" / "pytest.ini").write_text("[pytest]\nbench_config = benches/gone.toml\n")
    refused = benchcell("report", cwd=tmp_path / "project")
    assert refused.returncode == 2
    assert "ini key bench_config = 'benches/gone.toml' in" in refused.stderr and "no such bench file" in refused.stderr


def test_a_store_named_alone_is_read_without_the_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.json"
    assert main(["report", "--store", "results", "--json", str(path)]) == 0
    document = json.loads(path.read_text())
    assert document["settings"]["floor"] == 3  # the default: the bench beside it was not read
    assert document["settings"]["model_kind"] == "scripted"


def test_a_store_of_both_kinds_reports_real_unless_told(store_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert main(["report", "--store", str(store_dir), "--json", str(path)]) == 0
    assert json.loads(path.read_text())["settings"]["model_kind"] == "real"


def test_a_bad_bench_found_here_is_named_without_claiming_a_config_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bench.toml").write_text("[bench]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 2
    error = capsys.readouterr().err
    assert f"benchcell report: error: {tmp_path / 'bench.toml'}: [bench] lacks the required key 'model'" in error
