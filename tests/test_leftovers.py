"""What the agent leaves behind: removal that never follows a link, readers that never hang, text
printed with visible escapes, and run_trial's one sample whatever the teardown meets."""

from __future__ import annotations

import json
import shutil
import os
import pwd
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import docs_text
import pytest
from benches import BENCH_TOML

from pytest_benchcell import Environment, leftovers
from pytest_benchcell.config import load_bench
from pytest_benchcell.isolation import exec_audit
from pytest_benchcell.isolation.exec_audit import ExecAudit, ExecPolicy, Tracer
from pytest_benchcell.leftovers import Refused, Removal, printable, read_folder, read_regular, remove_tree
from pytest_benchcell.store import Store
from pytest_benchcell.trial import TrialSpec, run_trial


@pytest.fixture
def outside(tmp_path: Path) -> dict[str, Path]:
    """A file and a folder outside the tree being removed, which links inside it point to."""
    file = tmp_path / "outside.txt"
    file.write_text("the answer key")
    file.chmod(0o640)
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "kept.txt").write_text("kept")
    return {"file": file, "folder": folder}


def nest(root: Path, depth: int, name: str) -> None:
    """`depth` folders inside one another, made relative to a handle (the path is longer than PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.mkfifo("deepest-fifo", dir_fd=fd)
    finally:
        os.close(fd)


@pytest.mark.timeout(60)
def test_a_deep_tree_with_links_out_a_fifo_and_a_hard_link_is_removed_and_nothing_outside_changes(
    tmp_path: Path, outside: dict[str, Path]
) -> None:
    root = tmp_path / "trial"
    root.mkdir()
    nest(root, 1200, "n" * 40)  # 49,200 characters of path: no recursion, no path string
    (root / "link-to-file").symlink_to(outside["file"])
    (root / "link-to-folder").symlink_to(outside["folder"])
    (root / "link-to-folder-slash").symlink_to(f"{outside['folder']}/")
    os.mkfifo(root / "fifo")
    os.link(outside["file"], root / "hard-link")
    (root / "locked").mkdir()
    (root / "locked" / "inside").write_text("x")
    (root / "locked").chmod(0)
    (root / "read-only").mkdir()
    (root / "read-only" / "inside").write_text("x")
    (root / "read-only").chmod(0o555)
    before = outside["file"].stat()

    removal = remove_tree(root)

    assert removal.complete and removal.left == () and not root.exists()
    assert removal.removed == 1200 + 1 + 9 + 1  # the folders, the deepest FIFO, the entries, the root
    assert outside["file"].read_text() == "the answer key"
    after = outside["file"].stat()
    assert (after.st_nlink, stat.S_IMODE(after.st_mode), after.st_ino) == (1, 0o640, before.st_ino)
    assert [p.name for p in outside["folder"].iterdir()] == ["kept.txt"]
    assert removal.describe().startswith(f"removed {root} (")


def test_a_root_that_is_a_link_is_removed_as_a_link(tmp_path: Path, outside: dict[str, Path]) -> None:
    (tmp_path / "trial").symlink_to(outside["folder"])
    assert remove_tree(tmp_path / "trial").complete
    assert not (tmp_path / "trial").is_symlink() and (outside["folder"] / "kept.txt").read_text() == "kept"
    assert remove_tree(tmp_path / "never-there").complete  # nothing to do is not a failure


def test_the_time_limit_stops_the_removal_and_says_what_is_left(tmp_path: Path) -> None:
    root = tmp_path / "trial"
    root.mkdir()
    for index in range(50):
        (root / f"folder-{index}").mkdir()
        (root / f"folder-{index}" / "file").write_text("x")
    ticks = iter(range(10_000))
    removal = remove_tree(root, time_limit_s=20, clock=lambda: float(next(ticks)))
    assert removal.timed_out and not removal.complete and root.exists()
    assert "the time limit of 20 s was reached" in removal.describe()
    assert removal.as_dict()["timed_out"] is True
    assert remove_tree(root).complete  # what was left is removed by a later call


def test_where_the_system_has_no_handle_relative_calls_paths_are_removed_without_following_links(
    tmp_path: Path, outside: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback for Windows, exercised here by turning the capability off."""
    monkeypatch.setattr(leftovers, "_BY_HANDLE", False)
    root = tmp_path / "trial"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "link-to-folder").symlink_to(outside["folder"])
    (root / "a" / "link-to-file").symlink_to(outside["file"])
    os.mkfifo(root / "a" / "fifo")
    assert remove_tree(root).complete and not root.exists()
    assert outside["file"].read_text() == "the answer key" and [p.name for p in outside["folder"].iterdir()] == ["kept.txt"]
    (tmp_path / "linked").symlink_to(outside["folder"])
    assert remove_tree(tmp_path / "linked").complete and (outside["folder"] / "kept.txt").exists()


NOBODY = next((user for user in pwd.getpwall() if user.pw_name == "nobody"), None)
# An interpreter another user may start (this venv's may live under /root); leftovers.py needs only the standard library.
OTHERS_PYTHON = next((path for path in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(path) and os.stat(path).st_mode & 0o001), None)


@pytest.fixture
def public_tmp() -> Any:
    """A folder another user can reach (pytest's tmp_path sits in a folder only its owner may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="benchcell-test-leftovers-"))
    folder.chmod(0o755)
    yield folder
    assert remove_tree(folder).complete


def remove_as_nobody(root: Path, prepare: str = "") -> dict[str, Any]:
    """Run `prepare` (Python, with `root` bound) and then remove_tree(root) in a child process as
    the user nobody; return the removal's record."""
    assert NOBODY is not None
    script = "\n".join([
        "import importlib.util, json, os, sys",
        "from pathlib import Path",
        f"spec = importlib.util.spec_from_file_location('leftovers', {leftovers.__file__!r})",
        "module = importlib.util.module_from_spec(spec); sys.modules['leftovers'] = module; spec.loader.exec_module(module)",
        "remove_tree = module.remove_tree",
        f"root = Path({str(root)!r})",
        prepare,
        "print(json.dumps(remove_tree(root).as_dict()))",
    ])  # fmt: skip
    assert OTHERS_PYTHON is not None
    done = subprocess.run([OTHERS_PYTHON, "-I", "-c", script], user=NOBODY.pw_uid, group=NOBODY.pw_gid,
                          capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(os.geteuid() != 0 or NOBODY is None or OTHERS_PYTHON is None, reason="needs root, the user nobody and a Python it may run")
def test_as_an_ordinary_user_locked_folders_are_reopened_and_what_cannot_go_is_reported(public_tmp: Path) -> None:
    """Root ignores permissions, so the unprivileged path runs in a child process as `nobody`:
    folders the agent made read-only or unreadable are made writable by handle and removed; a file
    in a folder of another owner cannot be, and is named with why."""
    assert NOBODY is not None
    work = public_tmp / "work"
    work.mkdir()
    os.chown(work, NOBODY.pw_uid, NOBODY.pw_gid)
    locked = remove_as_nobody(work / "trial", "\n".join([
        "(root / 'read-only' / 'deep').mkdir(parents=True)",
        "(root / 'read-only' / 'deep' / 'file').write_text('x')",
        "(root / 'read-only' / 'deep').chmod(0o500)",
        "(root / 'read-only').chmod(0o500)",
        "(root / 'unreadable').mkdir()",
        "(root / 'unreadable' / 'file').write_text('x')",
        "(root / 'unreadable').chmod(0)",
    ]))  # fmt: skip
    assert (locked["left"], locked["removed"]) == ([], 6) and not (work / "trial").exists()

    (work / "trial" / "owned-by-root").mkdir(parents=True)
    os.chown(work / "trial", NOBODY.pw_uid, NOBODY.pw_gid)
    (work / "trial" / "owned-by-root" / "file").write_text("x")
    report = remove_as_nobody(work / "trial")
    assert (report["left"], report["left_count"]) == (["owned-by-root/file: Permission denied"], 1)
    assert "was not removed entirely" in report["description"]
    assert (work / "trial" / "owned-by-root" / "file").exists()


@pytest.mark.timeout(30)
def test_read_regular_refuses_links_fifos_devices_hard_links_and_huge_files_without_blocking(
    tmp_path: Path, outside: dict[str, Path]
) -> None:
    (tmp_path / "plain.log").write_bytes(b"12345")
    assert read_regular(tmp_path / "plain.log", limit=5) == b"12345"
    (tmp_path / "link.log").symlink_to(outside["file"])
    os.mkfifo(tmp_path / "fifo.log")
    os.link(outside["file"], tmp_path / "hard.log")
    with open(tmp_path / "sparse.log", "wb") as handle:
        handle.truncate(1 << 40)  # a terabyte that takes no space
    refusals = {}
    for name in ("link.log", "fifo.log", "hard.log", "sparse.log", "plain.log"):
        with pytest.raises(Refused) as refused:
            read_regular(tmp_path / name, limit=4)
        refusals[name] = str(refused.value)
    with pytest.raises(Refused, match="a character device, not a regular file"):
        read_regular("/dev/zero", limit=4)
    assert refusals == {
        "link.log": "a symbolic link, not a regular file",
        "fifo.log": "a FIFO, not a regular file",
        "hard.log": "a file with 2 names (a hard link may lead outside the trial's folders)",
        "sparse.log": f"{1 << 40} bytes, over the limit of 4",
        "plain.log": "5 bytes, over the limit of 4",
    }


@pytest.mark.timeout(30)
def test_read_folder_reads_regular_files_only_and_never_through_a_linked_folder(tmp_path: Path, outside: dict[str, Path]) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "1.log").write_text("one")
    (folder / "2.log").write_text("two")
    (folder / "notes.txt").write_text("not a log")
    os.mkfifo(folder / "0.log")
    read, refused = read_folder(folder, suffix=".log", limit=100, count_limit=1)
    assert read == {"1.log": b"one"}
    assert refused == {"0.log": "a FIFO, not a regular file", "2.log": "over the limit of 1 files"}
    (folder / "3.log").write_text("three")
    read, refused = read_folder(folder, suffix=".log", limit=4, count_limit=10, total_limit=6)
    assert read == {"1.log": b"one", "2.log": b"two"}
    assert refused["3.log"] == "5 bytes, over the limit of 0 (what is left of the total limit of 6 bytes)"
    (tmp_path / "linked").symlink_to(outside["folder"])
    assert read_folder(tmp_path / "linked", suffix=".txt", limit=100, count_limit=10) == ({}, {".": "a symbolic link, not a folder"})


@pytest.mark.timeout(30)
def test_the_execution_audit_refuses_planted_logs_and_says_so(tmp_path: Path, outside: dict[str, Path]) -> None:
    audit = ExecAudit(tmp_path / "exec-audit", Tracer(True, program="strace"))
    os.mkfifo(audit.logs / "100-1.log")  # a reader that opened it would block for ever
    (audit.logs / "101-1.log").symlink_to(outside["file"])
    with open(audit.logs / "102-1.log", "wb") as handle:
        handle.truncate(1 << 40)
    policy = ExecPolicy(arm="a", shell=audit.shell, binaries={}, harmless={})
    started = time.monotonic()
    report = audit.report(policy, commands_ran=0)
    assert time.monotonic() - started < 5
    assert (report.commands, report.refused[0]) == (0, "100-1.log: a FIFO, not a regular file")
    assert report.lines() == [
        "exec records refused: 3 file(s) in the log folder were not read (100-1.log: a FIFO, not a regular file; "
        "101-1.log: a symbolic link, not a regular file; 102-1.log: 1099511627776 bytes, over the limit of "
        f"{64 * 1024 * 1024}), so what ran is not fully known"
    ]
    assert report.as_dict()["refused"] == list(report.refused)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, accents: é ü, CJK: 漢字, emoji: 👩‍💻", "plain text, accents: é ü, CJK: 漢字, emoji: 👩‍💻"),
        ("a\tb", "a\tb"),
        ("\x1b[2J\x1b]0;title\x07red", r"\x1b[2J\x1b]0;title\x07red"),
        ("cr\rover\x08\x7f", r"cr\x0dover\x08\x7f"),
        ("two\nlines", r"two\x0alines"),
        ("c1 \x9b31m", r"c1 \x9b31m"),
        ("bidi \u202eevil\u2066 \u200b", r"bidi \u202eevil\u2066 \u200b"),
        ("separator\u2028here", r"separator\u2028here"),
        ("not utf-8 \udcff", r"not utf-8 \udcff"),
    ],
)
def test_printable_writes_what_a_terminal_would_act_on_as_visible_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(shown) == shown  # what it writes is itself printable


def test_printable_keeps_newlines_only_when_asked() -> None:
    assert printable("one\ntwo\x1b", newlines=True) == "one\ntwo\\x1b"


# --- run_trial: one sample whatever the teardown meets ---------------------------------------


class Hooks:
    """The bench hooks run_trial calls; `raising` maps a hook name to what it raises."""

    def __init__(self, raising: dict[str, BaseException] | None = None, extra: dict[str, Any] | None = None) -> None:
        self.raising = raising or {}
        self.extra = extra or {}

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("pytest_benchcell_"):
            raise AttributeError(name)
        short = name.removeprefix("pytest_benchcell_")

        def hook(**kwargs: Any) -> Any:
            if short in self.raising:
                raise self.raising[short]
            if short == "provision":
                return Environment(values={"marker": "m"})
            if short == "update_sample":
                kwargs["sample"].update(self.extra)
            return None

        return hook


def littering_runner(folders: list[Path], spec: TrialSpec) -> Any:
    """An agent run that leaves a deep tree, a link to bench.toml and a FIFO, then fails."""

    def run(request: Any) -> Any:
        cwd = Path(request.cwd)
        folders.append(cwd.parent)
        nest(cwd, 1200, "d")
        (cwd / "key.toml").symlink_to(spec.bench.path)
        os.mkfifo(cwd / "fifo")
        raise TypeError("the agent runner broke")

    return run


def spec_for(tmp_path: Path) -> TrialSpec:
    (tmp_path / "bench.toml").write_text(BENCH_TOML)
    bench = load_bench(tmp_path / "bench.toml")
    return TrialSpec(bench=bench, arm="bare", task="say-hello", trial=1, model_kind="scripted", sitting="s",
                     turn_cap=4, wall_clock_ms=30_000, store=Store(bench.store))  # fmt: skip


def stored(spec: TrialSpec) -> list[dict[str, Any]]:
    path = spec.store.root / "scripted" / spec.arm / f"{spec.task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("hook", ["teardown", "update_sample"])
def test_an_interrupt_in_teardown_or_update_sample_is_recorded_then_passed_on(tmp_path: Path, hook: str) -> None:
    spec = spec_for(tmp_path)
    folders: list[Path] = []
    with pytest.raises(KeyboardInterrupt):
        run_trial(spec, Hooks(raising={hook: KeyboardInterrupt()}), agent_runner=littering_runner(folders, spec))
    (sample,) = stored(spec)
    assert sample["status"] == "error" and sample["reason"].startswith("internal: TypeError: the agent runner broke")
    assert sample["reason"].endswith(f"; {hook} interrupted: Ctrl-C during the trial")
    assert not folders[0].exists() and "leftovers" not in sample
    assert spec.bench.path.read_text() == BENCH_TOML


def test_what_a_hook_adds_that_json_cannot_hold_is_stored_as_text(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    with pytest.raises(TypeError):
        run_trial(spec, Hooks(extra={"checked_folder": tmp_path, "tags": {"one"}}), agent_runner=littering_runner([], spec))
    (sample,) = stored(spec)
    assert sample["checked_folder"] == str(tmp_path) and sample["tags"] == "{'one'}"


def test_what_could_not_be_removed_is_kept_in_the_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A removal cut short (here: a time limit of zero) leaves the trial's sample a `leftovers` record."""
    spec = spec_for(tmp_path)
    monkeypatch.setattr(leftovers, "REMOVAL_TIME_LIMIT_S", 0.0)  # the setting, not the removal
    folders: list[Path] = []
    with pytest.raises(TypeError):
        run_trial(spec, Hooks(), agent_runner=littering_runner(folders, spec))
    (sample,) = stored(spec)
    assert sample["leftovers"]["timed_out"] is True and sample["leftovers"]["root"] == str(folders[0])
    assert "was not removed entirely" in sample["leftovers"]["description"]
    monkeypatch.undo()
    assert remove_tree(folders[0]).complete and spec.bench.path.read_text() == BENCH_TOML


def test_the_readme_states_the_guarantee_with_the_limits_the_code_applies() -> None:
    paragraph = docs_text.paragraph("What the agent leaves behind is handled as hostile input")
    assert f"within {leftovers.REMOVAL_TIME_LIMIT_S:g} s" in paragraph
    assert f"up to {exec_audit.LOG_BYTE_LIMIT // (1024 * 1024)} MiB each" in paragraph
    assert "exactly one sample" in paragraph and "`exec records refused: ...`" in paragraph
    assert printable("\x1b[31m") in paragraph  # the escape shown is the one printable() writes
    row = docs_text.table_row("| `leftovers` |")
    record = Removal("r", 0, ("x: why",), 1).as_dict()
    assert [f"`{key}`" in row for key in record] == [True] * len(record)


def test_text_reports_show_names_from_a_store_with_visible_escapes_and_the_json_keeps_them(tmp_path: Path) -> None:
    """A store can come from anyone (benchcell report reads several): its folder names and lines
    reach the report, and the terminal, Markdown and HTML renderings must not carry their escapes."""
    from sample_factory import cell_samples, write_samples

    from pytest_benchcell.report import ReportSettings, build_report, render_html, render_json, render_markdown, render_terminal

    arm = "cli\x1b]0;pwned\x07\x1b[31m"
    store = write_samples(tmp_path, [*cell_samples("cli", "t1", 3), *cell_samples("mcp", "t1", 3)])
    # The store refuses such a name itself: this one was written by hand, as a store from anyone can be.
    hostile = tmp_path / "real" / arm
    hostile.mkdir(parents=True)
    lines = (tmp_path / "real" / "cli" / "t1.jsonl").read_text().splitlines()
    (hostile / "t1.jsonl").write_text("".join(json.dumps({**json.loads(line), "arm": arm}) + "\n" for line in lines))
    shutil.rmtree(tmp_path / "real" / "cli")
    report = build_report(store, ReportSettings())
    for text in ("\n".join(render_terminal(report)), render_markdown(report), render_html(report) if _has_matplotlib() else ""):
        assert "\x1b" not in text and "\x07" not in text
    assert r"cli\x1b]0;pwned\x07\x1b[31m" in "\n".join(render_terminal(report))
    assert arm in {row["arm"] for row in json.loads(render_json(report))["headline"]["rows"]}


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
