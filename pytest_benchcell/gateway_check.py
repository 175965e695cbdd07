"""What a gateway's Python must run before any trial there: the plugin, installed, at the controller's
version, in a checkout at the controller's commit. The pure part: the identity each side records,
how two identities differ, the command that installs the right plugin, and what the controller asks
a far Python before its worker starts.

Why a commit and not a derived version: `__version__` is the released version, fixed between
releases, so two checkouts at different commits carry the same one; the bench's checkout commit
(`git rev-parse HEAD`) tells them apart, costs one git call, and needs neither network nor tags
(docs/machines.md says more). Knows nothing of pytest.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import __version__

DISTRIBUTION = "pytest-benchcell"
# The extra that brings pytest-xdist (and execnet, which a worker's Python imports).
WORKER_EXTRA = "xdist"

# Sent through execnet to a far Python before xdist starts its worker there (stdlib only: that
# Python may lack everything else; `packaging`, which pytest brings, judges markers when there). It
# answers what is installed, which of the plugin's dependencies are missing, and whether it imports.
PROBE_SOURCE = """
import importlib, importlib.metadata as metadata, os, sys
found = {"python": sys.executable, "cwd": os.getcwd()}
for distribution in ("pytest-benchcell", "pytest-xdist", "execnet"):
    try:
        found[distribution] = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        found[distribution] = None
# The plugin's own dependencies, as its metadata lists them: a checkout on sys.path (a .pth, PYTHONPATH)
# with its build's metadata beside it looks installed, but brings none of them.
found["missing"], found["metadata_at"], found["source_at"] = [], None, None
try:
    distribution = metadata.distribution("pytest-benchcell")
    found["metadata_at"] = str(distribution.locate_file(""))
    if os.path.isfile(os.path.join(found["metadata_at"], "pyproject.toml")):
        found["source_at"] = found["metadata_at"]  # a checkout of the plugin, not an installed copy
    for line in distribution.requires or ():
        name, _, marker = line.partition(";")
        if "extra" in marker:
            continue
        try:
            from packaging.requirements import Requirement
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            name = requirement.name
        except ImportError:
            if marker.strip():
                continue  # no packaging to judge the marker with: the import below still tells
            name = name.split("[")[0].strip(" <>=!~(")
            for stop in "<>=!~ (":
                name = name.split(stop)[0]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            found["missing"].append(name)
except metadata.PackageNotFoundError:  # not installed; its source may still be on the path
    try:
        import importlib.util
        spec = importlib.util.find_spec("pytest_benchcell")
        folder = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else None
        if folder and os.path.isfile(os.path.join(folder, "pyproject.toml")):
            found["source_at"] = folder
    except Exception:
        pass
try:  # what a worker imports first: the plugin, then the store and the worker's side
    for module in ("pytest_benchcell.plugin", "pytest_benchcell.store", "pytest_benchcell.remote"):
        importlib.import_module(module)
    found["import_error"] = None
except Exception as exc:
    found["import_error"] = f"{type(exc).__name__}: {exc}"
try:  # an editable install names its source folder (PEP 660's direct_url.json)
    import json
    direct = json.loads(metadata.distribution("pytest-benchcell").read_text("direct_url.json") or "{}")
    editable = direct.get("dir_info", {}).get("editable") and direct.get("url", "").startswith("file://")
    found["editable_from"] = direct["url"][len("file://"):] if editable else None
except Exception:
    found["editable_from"] = None
channel.send(found)
"""


def checkout_commit(folder: Path) -> str | None:
    """The commit the git checkout holding `folder` is at, or None (not a git checkout, no git)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def plugin_in_checkout(folder: Path) -> bool:
    """Whether this plugin runs from the source of the git checkout holding `folder` (an editable
    install of that checkout): then a far checkout at the same commit installs the same plugin."""
    package = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "--full-name", "--error-unmatch", str(package / "__init__.py")],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def identity(bench_root: Path) -> dict[str, Any]:
    """What the controller records in the worker plan, and a worker compares with its own."""
    return {
        "version": __version__,
        "commit": checkout_commit(bench_root),
        "plugin_in_checkout": plugin_in_checkout(bench_root),
    }


def install_command(python: str, checkout: Path | None, controller: Mapping[str, Any]) -> str:
    """The command that gives a far Python the controller's plugin: the checkout at the controller's
    commit, installed from itself, when the controller runs the plugin from its bench's checkout;
    else the controller's release."""
    if controller.get("plugin_in_checkout") and checkout is not None:
        step = f"git -C {checkout} checkout {controller['commit']} && " if controller.get("commit") else ""
        return f"{step}{python} -m pip install -e '{checkout}[{WORKER_EXTRA}]'"
    return f"{python} -m pip install '{DISTRIBUTION}[{WORKER_EXTRA}]=={controller.get('version')}'"


def identity_mismatch(mine: Mapping[str, Any], controller: Mapping[str, Any], *, python: str, checkout: Path | None) -> str | None:
    """Why this worker must not run the controller's trials (another plugin version, or its bench's
    checkout at another commit), with the command that fixes it; None when both match."""
    differs = [key for key in ("version", "commit") if mine.get(key) != controller.get(key)]
    if not differs:
        return None

    def described(side: Mapping[str, Any]) -> str:
        return f"pytest-benchcell {side.get('version')} with its bench's checkout at {_commit(side.get('commit'))}"

    here = f"{python}" + (f" in {checkout}" if checkout is not None else "")
    if "version" not in differs and not controller.get("plugin_in_checkout"):
        fix = f"git -C {checkout} checkout {controller.get('commit')}" if controller.get("commit") else "check out the controller's bench"
    else:
        fix = install_command(python, checkout, controller)
    return (
        f"this worker runs {described(mine)} ({here}), the controller {described(controller)}: samples of "
        f"another plugin or bench would be pooled as the controller's; run there: {fix}"
    )


def _commit(commit: Any) -> str:
    return f"commit {str(commit)[:12]}" if commit else "no git commit"


def probe_problem(found: Mapping[str, Any], controller: Mapping[str, Any], *, checkout: str | None) -> str | None:
    """What a far Python lacks to run a worker (from PROBE_SOURCE's answer, `checkout` being the
    gateway's folder), with the command that installs it; None when the plugin and xdist are there
    (the worker compares versions and commits itself)."""
    python = str(found.get("python") or "its python")
    install = install_command(python, Path(checkout) if checkout else None, controller)
    if found.get("source_at") and not controller.get("plugin_in_checkout"):
        install = f"{python} -m pip install -e '{found['source_at']}[{WORKER_EXTRA}]'"  # the source it finds already
    if found.get(DISTRIBUTION) is None:
        where = f" (it finds only the plugin's source, in {found['source_at']})" if found.get("source_at") else ""
        return f"pytest-benchcell is not installed in {python}{where}: install it there with {install}"
    if found.get("missing"):  # the plugin's metadata is on the path (a checkout's build), its dependencies are not
        return (
            f"pytest-benchcell is not installed in {python}: that Python finds the plugin (its metadata in "
            f"{found.get('metadata_at')}) but not its dependencies ({', '.join(found['missing'])}); install it there "
            f"with {install}"
        )
    if found.get("import_error"):
        source = found.get("editable_from")
        again = (
            f"{python} -m pip install -e '{source}[{WORKER_EXTRA}]'" if source
            else f"{python} -m pip install --force-reinstall '{DISTRIBUTION}[{WORKER_EXTRA}]=={found.get(DISTRIBUTION)}'"
        )  # fmt: skip
        return (
            f"pytest-benchcell {found.get(DISTRIBUTION)} is installed in {python} but does not import "
            f"({found['import_error']}): install it there with its dependencies, {again}"
        )
    if found.get("pytest-xdist") is None or found.get("execnet") is None:
        missing = "pytest-xdist" if found.get("pytest-xdist") is None else "execnet"
        return (
            f"{missing} is not installed in {python} (a worker needs pytest-benchcell's [{WORKER_EXTRA}] extra): "
            f"install it there with {python} -m pip install 'pytest-xdist>=3.5'"
        )
    return None
