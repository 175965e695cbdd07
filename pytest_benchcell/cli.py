"""The `benchcell` console script: `benchcell report` renders one or several stores without running
pytest; `benchcell merge` appends to one store the samples of others it lacks; `benchcell transcripts
prune` removes trial transcripts a store no longer needs; `benchcell export inspect DIR` writes samples
and transcripts as Inspect AI logs (export_inspect.py).

Exit codes: 0 done; 1 the report, merge or export could not be produced (unreadable store, missing optional
dependency, unwritable output file); 2 bad command-line values (argparse's own convention).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from .bench_file import BenchFileError, find_bench
from .config import positive_int
from .report import (
    DEFAULT_WEIGHTS,
    FINGERPRINT_POLICIES,
    ReportError,
    ReportSettings,
    build_report,
    discover_tasks,
    render_html,
    render_json,
    render_markdown,
    render_terminal,
    settings_for_bench,
)
from .sample import MODEL_KINDS, TOKEN_COMPONENTS
from .sitting import new_sitting_id
from .store import Store, StoreError, StoreSet, looks_like_store, merge_stores, other_conditions


class UsageError(Exception):
    """A command-line value is wrong; the message says which and what is allowed."""


def parse_weights(text: str, base: dict[str, float] | None = None) -> dict[str, float]:
    """'fresh_input=1,output=5' -> full weights; components not named keep their base value."""
    weights = dict(base or DEFAULT_WEIGHTS)
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise UsageError(f"--weights: {part!r} is not NAME=NUMBER")
        if name not in TOKEN_COMPONENTS:
            raise UsageError(f"--weights: unknown component {name!r}; allowed: {', '.join(TOKEN_COMPONENTS)}")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--weights: {name} has value {value.strip()!r}; allowed: a number >= 0") from None
        if not number >= 0 or number == float("inf"):
            raise UsageError(f"--weights: {name} has value {value.strip()!r}; allowed: a finite number >= 0")
        weights[name] = number
    return weights


OUTPUT_ALLOWED = "a file path (missing folders above it are created)"


def unusable_output(path: Path) -> str | None:
    """Why a report file cannot be written at `path`, or None: checked before any work is done."""
    if path.is_dir():
        return f"{path} is a folder; allowed: {OUTPUT_ALLOWED}"
    existing = next((folder for folder in path.parents if folder.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"{path} cannot be created: {existing} is a file, not a folder; allowed: {OUTPUT_ALLOWED}"
    blocking = path if path.exists() else existing
    if blocking is not None and not os.access(blocking, os.W_OK | (0 if blocking == path else os.X_OK)):
        return f"{path} cannot be written: {blocking} is read-only for this user; allowed: {OUTPUT_ALLOWED}"
    return None


MODEL_KIND_HELP = "which samples (default: the one kind the store holds; real when it holds both or none)"


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchcell", description="pytest-benchcell tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    report = commands.add_parser(
        "report",
        help="render a report of a sample store",
        description="Render a report of a sample store: terminal tables on stdout, optionally Markdown, JSON "
        "and HTML files. Reads the store only; never writes to it.",
    )
    report.add_argument(
        "--store", type=Path, action="append", dest="stores", metavar="DIR",
        help="a store folder (default: the store named in the bench); repeat it to read several stores as one, "
        "each sample id counted once",
    )
    report.add_argument(
        "--config", type=Path,
        help="bench.toml: arms, tasks, tiers, floor, [pricing] weights and [prices] (default, without --store: the bench a "
        "sitting started here would load)",
    )  # fmt: skip
    report.add_argument("--floor", type=positive_int, help="scored trials a cell needs to count (default 3)")
    report.add_argument(
        "--weights",
        help="cost-equivalent weights, e.g. fresh_input=1,cache_write=1.25,cache_read=0.1,output=5 "
        "(components left out keep their configured value)",
    )
    report.add_argument("--model-kind", choices=MODEL_KINDS, help=MODEL_KIND_HELP)
    report.add_argument(
        "--arm", dest="arms", action="extend", nargs="+", metavar="ARM", help="arms to report, in this order"
    )
    report.add_argument("--task", dest="tasks", action="extend", nargs="+", metavar="TASK", help="tasks to report")
    report.add_argument(
        "--fingerprints", choices=FINGERPRINT_POLICIES, default="newest",
        help="newest: each cell's newest fingerprint, older samples counted as left out (default); "
        "group: the same figures, plus every fingerprint group shown with its own figures",
    )  # fmt: skip
    report.add_argument("--seed", type=_int, default=0, help="seed of the Monte-Carlo draws behind the intervals (default 0)")
    report.add_argument("--md", type=Path, metavar="PATH", help="also write Markdown here")
    report.add_argument("--json", type=Path, metavar="PATH", help="also write JSON here")
    report.add_argument("--html", type=Path, metavar="PATH", help="also write a self-contained HTML file here")
    merge = commands.add_parser(
        "merge",
        help="append to one store the samples of others it lacks",
        description="Append to DEST every sample of the SRC stores that DEST lacks (by sample id), under DEST's "
        "lock. Merged trials get the next free trial numbers of their cell in DEST; each keeps its id, and "
        "merged_from records its source store and original number. Nothing is rewritten; SRC is only read. A folder "
        "that is not a store, and samples of conditions DEST lacks (another bench or model), are refused.",
    )
    merge.add_argument("sources", type=Path, nargs="+", metavar="SRC", help="store folders to merge from")
    merge.add_argument("--into", type=Path, required=True, metavar="DEST", help="the store folder to append to")
    merge.add_argument(
        "--allow-other-conditions", action="store_true",
        help="also merge samples whose conditions DEST does not have (another bench, another model, other "
        "definitions of a cell); reports never pool them with the current conditions",
    )  # fmt: skip
    _add_transcripts_parser(commands)
    _add_export_parser(commands)
    init = commands.add_parser(
        "init",
        help="write a new bench for your tool into a folder",
        description="Write a new bench into FOLDER: bench.toml, conftest.py, and in bench/ a stand-in for your tool "
        "(a to-do list CLI with a skill file, and an MCP server) compared in three arms on three tasks. It runs at "
        "once, offline, with --bench-scripted; then replace the stand-ins with your tool. Never overwrites a file.",
    )
    init.add_argument("folder", type=Path, nargs="?", default=Path("."), help="where to write it (default: here)")
    init.add_argument("--tool", required=True, metavar="NAME", help="your CLI's program name; the arms are named after it")
    return parser


def _add_transcripts_parser(commands: argparse._SubParsersAction) -> None:
    transcripts = commands.add_parser(
        "transcripts",
        help="manage the trial transcripts kept beside a store",
        description="Each trial's transcript is kept beside the store (transcripts/...jsonl.gz), referenced from its "
        "sample. Nothing counts or reports from them.",
    )
    actions = transcripts.add_subparsers(dest="action", required=True, metavar="ACTION")
    prune = actions.add_parser(
        "prune",
        help="remove transcripts older than a date or of an older definition",
        description="Remove the transcripts of the samples selected. The samples are never rewritten: each keeps its "
        "reference, and readers show its transcript as pruned. Given --before and --older-definitions, a transcript "
        "must meet both.",
    )
    prune.add_argument("--store", type=Path, required=True, metavar="DIR", help="the store folder")
    prune.add_argument(
        "--before", metavar="DATE",
        help="transcripts of trials started before DATE (YYYY-MM-DD or an ISO time, UTC unless given)",
    )  # fmt: skip
    prune.add_argument(
        "--older-definitions", action="store_true",
        help="transcripts of samples whose conditions are not those of their cell's newest sample",
    )  # fmt: skip
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")


def _add_export_parser(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help="write a store's samples in another tool's format",
        description="Write a store's samples in another tool's format. Reads the store only; never writes to it.",
    )  # fmt: skip
    formats = export.add_subparsers(dest="format", required=True, metavar="FORMAT")
    inspect = formats.add_parser(
        "inspect",
        help="Inspect AI logs, read with `inspect view --log-dir DIR` (needs the [inspect] extra)",
        description="Write one Inspect AI log per arm into DIR (tasks are its samples, trials its epochs, verdicts "
        "its scores), for `inspect view --log-dir DIR`. The samples are those `benchcell report` reads: each cell's "
        "current conditions with --config, else its newest; invalid and error trials included. Needs the [inspect] "
        "extra.",
    )
    inspect.add_argument("directory", type=Path, metavar="DIR", help="folder to write the logs into (created if missing)")
    inspect.add_argument(
        "--store", type=Path, action="append", dest="stores", metavar="DIR",
        help="a store folder (default: the store named in the bench); repeat it to read several stores as one",
    )  # fmt: skip
    inspect.add_argument(
        "--config", type=Path,
        help="bench.toml: its arms and the current conditions of its cells (default, without --store: the bench a "
        "sitting started here would load)",
    )  # fmt: skip
    inspect.add_argument("--model-kind", choices=MODEL_KINDS, help=MODEL_KIND_HELP)
    inspect.add_argument("--arm", dest="arms", action="extend", nargs="+", metavar="ARM", help="arms to export")
    inspect.add_argument("--task", dest="tasks", action="extend", nargs="+", metavar="TASK", help="tasks to export")


# --- LEAD: bench.toml connection ----------------------------------------------------------------------
def _settings_from_config(path: Path, *, named: bool = True) -> tuple[ReportSettings, Path | None]:
    """Report settings and store folder from a bench.toml, through config.load_bench.

    Kept deliberately small: the bench file's parsing and validation belong to config.py. Raises
    UsageError when config.py is not available or the file is invalid.
    """
    try:
        from .config import BenchConfigError, load_bench
    except ImportError as exc:
        raise UsageError(
            f"--config needs pytest_benchcell.config.load_bench, which this installation lacks ({exc}); "
            "run without --config to discover arms and tasks from the store"
        ) from None
    try:
        bench = load_bench(path)
    except BenchConfigError as exc:
        raise UsageError(f"--config {path}: {exc}" if named else str(exc)) from None
    settings = settings_for_bench(bench)
    return settings, Path(bench.store)


def _bench_of(args: argparse.Namespace) -> Path | None:
    """--config, else (when no --store is named) the bench a sitting started in the current directory
    would load (bench_file.find_bench), so `benchcell report` at a bench's root needs no option. A
    store named alone is read alone, as before."""
    if args.config is not None or args.stores:
        return args.config
    try:
        found = find_bench(Path.cwd())
    except BenchFileError as exc:
        raise UsageError(str(exc)) from None
    return found.path if found is not None else None


def _model_kind(args: argparse.Namespace, store: Store | StoreSet) -> str:
    """--model-kind, else the one kind of model the store holds samples of (real when both or none)."""
    if args.model_kind is not None:
        return str(args.model_kind)
    held = [kind for kind in MODEL_KINDS if store.cells([kind])]
    return held[0] if len(held) == 1 else "real"


def _no_store(verb: str) -> str:
    return (
        f"say which store to {verb}: --store DIR, or --config bench.toml (no bench.toml in {Path.cwd()} or its "
        "parents, nor named by the ini key bench_config)"
    )


# ------------------------------------------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> tuple[ReportSettings, Store | StoreSet]:
    for option, path in (("--md", args.md), ("--json", args.json), ("--html", args.html)):
        problem = unusable_output(path) if path is not None else None
        if problem:
            raise UsageError(f"{option} {path}: {problem}")
    bench = _bench_of(args)
    settings, config_store = _settings_from_config(bench, named=args.config is not None) if bench else (ReportSettings(), None)
    store_paths = args.stores or ([config_store] if config_store else [])
    if not store_paths:
        raise UsageError(_no_store("report"))
    for store_path in store_paths:
        if not store_path.is_dir():
            raise UsageError(f"--store: {store_path} is not a folder")
    store: Store | StoreSet = Store(store_paths[0]) if len(store_paths) == 1 else StoreSet(store_paths)
    settings.model_kind = _model_kind(args, store)
    if bench is None:  # a store read without its bench: the horizon its samples recorded
        from .horizon import the_recorded_horizon

        settings.horizon_pairs = the_recorded_horizon(getattr(store, "stores", [store]), settings.model_kind)
    settings.fingerprint_policy = args.fingerprints
    settings.seed = args.seed
    if args.floor is not None:
        settings.floor = args.floor
    if args.weights is not None:
        settings.weights = parse_weights(args.weights, settings.weights)
    _select(settings, args, store)
    settings.validate()
    return settings, store


def _select(settings: ReportSettings, args: argparse.Namespace, store: Store | StoreSet) -> None:
    """Narrow the settings to --arm and --task, each name checked against the bench or the store."""
    if args.arms:
        known = set(settings.arms or ()) | {cell.arm for cell in store.cells([settings.model_kind])}
        _check_known("--arm", args.arms, known, "arm")
        settings.arms = list(dict.fromkeys(args.arms))
    if args.tasks:
        catalogue = settings.tasks if settings.tasks is not None else discover_tasks(store, settings.model_kind)
        _check_known("--task", args.tasks, set(catalogue), "task")
        settings.tasks = {task: catalogue[task] for task in dict.fromkeys(args.tasks)}


def _export_selection(args: argparse.Namespace) -> tuple[list[Store], ReportSettings, tuple[str, ...]]:
    """The stores and the selection of an export, checked as `benchcell report` checks them; with the
    bench's declared secret names (their values are redacted once more)."""
    directory = args.directory
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"DIR {directory} is a file; allowed: a folder (created if missing)")
    existing = next((folder for folder in (directory, *directory.parents) if folder.exists()), None)
    if existing is not None and (not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK)):
        raise UsageError(f"DIR {directory} cannot be written: {existing} is not a folder this user can write")
    bench = _bench_of(args)
    settings, config_store = _settings_from_config(bench, named=args.config is not None) if bench else (ReportSettings(), None)
    declared = tuple(_bench_secrets(bench)) if bench else ()
    store_paths = args.stores or ([config_store] if config_store else [])
    if not store_paths:
        raise UsageError(_no_store("export"))
    for store_path in store_paths:
        if not store_path.is_dir():
            raise UsageError(f"--store: {store_path} is not a folder")
        if not looks_like_store(store_path):
            raise UsageError(f"--store: {store_path} is not a sample store; {STORE_HINT}")
    stores = [Store(path) for path in store_paths]
    reader: Store | StoreSet = stores[0] if len(stores) == 1 else StoreSet(store_paths)
    settings.model_kind = _model_kind(args, reader)
    if not reader.cells([settings.model_kind]):
        others = [kind for kind in MODEL_KINDS if reader.cells([kind])]
        raise UsageError(
            f"the store holds no samples of the {settings.model_kind} model"
            + (f"; it holds {others[0]} ones: add --model-kind {others[0]}" if others else " (it is empty)")
        )
    _select(settings, args, reader)
    return stores, settings, declared


def _export(args: argparse.Namespace) -> int:
    from .export_inspect import ExportError, Selection, export_inspect, harness_secrets

    try:
        stores, settings, declared = _export_selection(args)
    except (UsageError, ReportError) as exc:
        print(f"benchcell export inspect: error: {exc}", file=sys.stderr)
        return 2
    selection = Selection(
        model_kind=settings.model_kind, arms=settings.arms, tasks=list(settings.tasks) if settings.tasks is not None else None,
        definitions=settings.definitions, secrets=harness_secrets(declared), prices=settings.prices,
    )  # fmt: skip
    try:
        result = export_inspect(stores, args.directory, selection)
    except (ExportError, StoreError, OSError) as exc:
        print(f"benchcell export inspect: {exc}", file=sys.stderr)
        return 1
    print("\n".join(result.lines(args.directory)))
    return 0


def _bench_secrets(path: Path) -> list[str]:
    """The names in the bench's `[bench] secrets` (already validated by _settings_from_config)."""
    from .config import load_bench

    return list(load_bench(path).secrets)


def _check_known(option: str, given: Sequence[str], known: set[str], what: str) -> None:
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UsageError(
            f"{option}: unknown {what} {', '.join(repr(u) for u in unknown)}; "
            f"known: {', '.join(sorted(known)) or 'none (the store is empty)'}"
        )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script; returns the exit code instead of exiting (the entry point exits)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the message (2) or the help (0)
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "merge":
        return _merge(args)
    if args.command == "export":
        return _export(args)
    if args.command == "transcripts":
        return _prune_transcripts(args)
    if args.command == "init":
        return _init(args)
    try:
        settings, store = _settings(args)
    except (UsageError, ReportError) as exc:
        print(f"benchcell report: error: {exc}", file=sys.stderr)
        return 2
    try:
        report = build_report(store, settings)
        outputs: list[tuple[Path, str]] = []
        if args.md:
            outputs.append((args.md, render_markdown(report)))
        if args.json:
            outputs.append((args.json, render_json(report)))
        if args.html:
            outputs.append((args.html, render_html(report)))
        for path, text in outputs:
            _write(path, text)
    except (StoreError, ImportError, OSError) as exc:
        print(f"benchcell report: {exc}", file=sys.stderr)
        return 1
    lines = [*render_terminal(report), *(f"wrote {path}" for path, _ in outputs)]
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `benchcell report ... | head` is a normal way to read it
        # Python would complain again when flushing stdout at exit; point it at devnull instead.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


def _init(args: argparse.Namespace) -> int:
    from .scaffold import ScaffoldError, scaffold

    try:
        written = scaffold(args.folder, args.tool)
    except (ScaffoldError, OSError) as exc:
        print(f"benchcell init: error: {exc}", file=sys.stderr)
        return 2
    where = shlex.quote(str(args.folder))
    print("\n".join(f"wrote {path}" for path in written))
    print(
        "next, a sitting of every cell against the scripted model (offline, spends no tokens):\n"
        f"    cd {where} && pytest --bench-arm all --bench-task all --bench-scripted\n"
        "then replace the stand-ins in bench/ with your tool, and the tasks and scripts with yours"
    )
    return 0


STORE_HINT = (
    "a store is the folder named by [bench] store or --bench-store, holding real/, scripted/ or definitions/"
)


def _merge(args: argparse.Namespace) -> int:
    sources = []
    for source in args.sources:
        if not source.is_dir():
            print(f"benchcell merge: error: SRC {source} is not a folder", file=sys.stderr)
            return 2
        if source.resolve() == args.into.resolve():
            print(f"benchcell merge: error: SRC {source} is DEST itself", file=sys.stderr)
            return 2
        if not looks_like_store(source):
            print(f"benchcell merge: error: SRC {source} is not a sample store; {STORE_HINT}", file=sys.stderr)
            return 2
        sources.append(Store(source))
    if args.into.exists() and not args.into.is_dir():
        print(f"benchcell merge: error: --into {args.into} is not a folder", file=sys.stderr)
        return 2
    if args.into.is_dir() and any(args.into.iterdir()) and not looks_like_store(args.into):
        print(
            f"benchcell merge: error: --into {args.into} is a folder with other files, not a sample store; {STORE_HINT} "
            "(or a new folder, created by the merge)",
            file=sys.stderr,
        )
        return 2
    dest = Store(args.into)
    try:
        foreign = [] if args.allow_other_conditions else other_conditions(sources, dest)
        if foreign:
            print(
                "benchcell merge: error: SRC holds samples of conditions DEST does not have (another bench, another "
                "model, or other definitions of these cells); nothing was merged:",
                *(f"    {line}" for line in foreign),
                "Reports never pool samples of other conditions with the current ones. To keep them in DEST anyway, "
                "merge with --allow-other-conditions.",
                sep="\n",
                file=sys.stderr,
            )
            return 2
        result = merge_stores(sources, dest, sitting=f"merge-{new_sitting_id()}")
    except (StoreError, OSError) as exc:
        print(f"benchcell merge: {exc}", file=sys.stderr)
        return 1
    stores = f"{len(sources)} store{'s' if len(sources) != 1 else ''}"
    refused = f", {result.refused} refused" + (" (listed below)" if result.refused else "")
    print(
        f"merged into {args.into}: {result.read} samples read from {stores}: {result.appended} appended "
        f"({result.renumbered} renumbered), {result.already_there} already there (same id in DEST or an earlier "
        f"SRC){refused}; {result.definitions} definitions files copied, {_transcripts_carried(result.transcripts)}"
    )
    for problem in result.problems:
        print(f"    {problem}")
    return 0


def _transcripts_carried(counts: dict[str, int]) -> str:
    from .transcript import DAMAGED, KEPT, PRUNED

    missing = [f"{counts[status]} {status} in the source" for status in (PRUNED, DAMAGED) if counts.get(status)]
    return f"{counts.get(KEPT, 0)} transcripts copied" + (f" ({', '.join(missing)}; DEST reads them as pruned)" if missing else "")


def _prune_transcripts(args: argparse.Namespace) -> int:
    from .transcript import parse_utc, prune

    def refuse(message: str) -> int:
        print(f"benchcell transcripts prune: error: {message}", file=sys.stderr)
        return 2

    if args.before is None and not args.older_definitions:
        return refuse("say which transcripts to remove: --before DATE, --older-definitions, or both")
    try:
        before = parse_utc(args.before) if args.before is not None else None
    except ValueError as exc:
        return refuse(f"--before: {exc}")
    if not args.store.is_dir() or not looks_like_store(args.store):
        return refuse(f"--store {args.store} is not a sample store; {STORE_HINT}")
    store = Store(args.store)
    problems: list = []
    try:
        pruning = prune(
            args.store, store.iter_samples(problems), before=before, older_definitions=args.older_definitions,
            dry_run=args.dry_run,
        )  # fmt: skip
    except OSError as exc:
        print(f"benchcell transcripts prune: {exc}", file=sys.stderr)
        return 1
    verb = "would be removed" if args.dry_run else "removed"
    print(
        f"{pruning.removed} transcripts {verb} ({pruning.bytes:,} bytes) from {args.store}, {pruning.kept} kept"
        + (f", {pruning.already_gone} pruned before" if pruning.already_gone else "")
    )
    for problem in problems:
        print(f"    {problem}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
