"""The plugin's folder in the user's cache: what is worth keeping between sittings on this machine
and is safe to lose (the exec notifier's build, the pre-flights that passed).

`$XDG_CACHE_HOME/pytest-benchcell`, else `~/.cache/pytest-benchcell`, else, where HOME cannot be
written, `pytest-benchcell-UID` in the temporary folder, made by and for this user alone. A folder
that another user could write is not used: what the plugin reads back from it (a program it runs,
a pre-flight it skips) must be its own. Knows nothing of pytest.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_folders() -> list[Path]:
    """Where the cache may be, in order: the user's cache folder, else a folder of this user's own
    in the temporary folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [Path(base) / "pytest-benchcell", Path(tempfile.gettempdir()) / f"pytest-benchcell-{os.geteuid()}"]


def cache_folder() -> Path | None:
    """The first of cache_folders() that is this user's own (made here when missing), else None."""
    return next((folder for folder in cache_folders() if own_folder(folder)), None)


def own_folder(folder: Path) -> bool:
    """Whether `folder` exists or was made here, is this user's and writable by no one else."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = folder.stat()
    except OSError:
        return False
    return status.st_uid == os.geteuid() and not status.st_mode & 0o022 and os.access(folder, os.W_OK)
