"""What made a run: the raysfl version, the commit, the processors.

In a git checkout the commit is recorded (``+dirty`` if modified); the processors of the machines that ran
the driver, the server and the pools matter because processors can differ in a result's last bits.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def mixed_processors_note(placement: Mapping[str, Any]) -> str | None:
    """A note when the server and the pools ran on more than one processor model, else ``None``.

    ``placement`` is a backend's (``processor``: the server's node's model; ``pool_processors``: each pool's).
    Each processor model computes its own last bits of a convolution or a matmul, and training grows them
    into points of accuracy. The engine fixes which client's job runs when, not on which node: a run on such
    a cluster repeats bit for bit only where its actors land on the same processor models again. A server on
    a GPU computes on the GPU (``device_name``), whose node its request fixes, so only its pools count.
    """
    pools = list(placement.get("pool_processors") or ())
    on_cpu = placement.get("device", "cpu") == "cpu"
    server = placement.get("processor") if on_cpu else None
    models = list(dict.fromkeys(p for p in [server, *pools] if p))
    if len(models) < 2:
        return None

    def ran_there(name: str) -> str:
        count = pools.count(name)
        actors = (["the server"] if name == server else []) + (
            [f"{count} pool{'s' * (count > 1)}"] if count else []
        )
        return " and ".join(actors)

    where = "; ".join(f"{name}: {ran_there(name)}" for name in models)
    return (
        f"the server and the pools ran on {len(models)} processor models ({where}); each computes its own "
        "last bits, so this run repeats bit for bit only where its actors land on the same processor models "
        "(summary.json's placement records them)"
    )
