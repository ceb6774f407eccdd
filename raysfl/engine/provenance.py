"""What made a run: the raysfl version, the commit, the processor.

In a git checkout the commit is recorded (``+dirty`` if modified); the processor of the machine that ran
the driver matters because processors can differ in a result's last bits.
"""

from __future__ import annotations

import functools
import platform
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


@functools.cache
def processor_name() -> str:
    """The processor's model name (Linux's ``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
