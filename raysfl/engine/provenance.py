"""Which code made a run: the raysfl version and, in a git checkout, the commit (``+dirty`` if modified)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[2]


@functools.cache
def source_commit() -> str:
    """The commit of the git checkout raysfl runs from, ``"<sha>+dirty"`` with local changes, else ``""``.

    Only tracked files count as changes; an installed (non-checkout) raysfl gives ``""``.
    """
    if not (_SOURCE / ".git").exists():
        return ""
    try:
        sha = subprocess.run(
            ["git", "-C", str(_SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return ""
        dirty = subprocess.run(
            ["git", "-C", str(_SOURCE), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
