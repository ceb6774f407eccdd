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


def computing_processors(placement: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The processor models whose last bits a run's numbers carry: (the server's, each pool's).

    From a backend's placement (``processor``: the server's node's model; ``pool_processors``). A server on
    a GPU computes on the GPU (``device_name``), on the node its request fixes, so its host CPU is ``None``
    here; so is a server whose placement records no processor (runs made before they were recorded).
    """
    pools = [p for p in placement.get("pool_processors") or () if p]
    on_cpu = placement.get("device", "cpu") == "cpu"
    return (placement.get("processor") or None) if on_cpu else None, pools


def mixed_processors_note(placement: Mapping[str, Any]) -> str | None:
    """A note when the server and the pools ran on more than one processor model, else ``None``.

    The models are :func:`computing_processors`' (a GPU server counts by its GPU, so only its pools do).
    Each processor model computes its own last bits of a convolution or a matmul, and training grows them
    into points of accuracy. The engine fixes which client's job runs when, not on which node: a run on such
    a cluster repeats bit for bit only where its actors land on the same processor models again.
    """
    server, pools = computing_processors(placement)
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
