"""The files below a folder, as both the image-tree reader and the data cache's fingerprint see them.

One walk for both, so the cache's key changes whenever what the reader reads does: sorted (the same order
on every machine), symbolic links to folders followed, a folder skipped only where a link leads back to
one of its own parents (a cycle). The same real folder reached through two links is read twice, under
both names, as the reader would; reached through more than :data:`MAX_FOLDER_VISITS` paths, the walk stops
with a :class:`~raysfl.data.errors.DataCorruptError`: links that fan out level after level (a folder holding
two links to the next, which holds two links to the next, ...) would otherwise make 2**depth paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from raysfl.data.errors import DataCorruptError

MAX_FOLDER_VISITS = 64
"""The most paths through which a walk may reach one real folder (a dataset links a folder a few times)."""


def files_below(folder: Path, inside: tuple[Path, ...] = ()) -> Iterator[Path]:
    """Every non-folder entry below ``folder`` (dangling links included), depth first, names sorted.

    ``inside``: the folders above ``folder`` in a walk that started higher up (a reader of ``root/train/cat``
    passes ``root`` and ``root/train``), so a link back to any of them is a cycle here too. The walk keeps
    its own stack, so a tree thousands of folders deep is no RecursionError.
    """
    visits: dict[str, int] = {}
    first = _open(folder, tuple(os.path.realpath(p) for p in inside), visits)
    stack = [] if first is None else [first]
    while stack:
        entries, parents = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
        elif entry.is_dir():  # follows links
            # a plain folder's real path extends its parent's: realpath only for a link (linear, not
            # quadratic, in a deep tree)
            real = None if entry.is_symlink() else os.path.join(parents[-1], entry.name)
            below = _open(Path(entry.path), parents, visits, real)
            if below is not None:
                stack.append(below)
        else:
            yield Path(entry.path)


def _open(
    folder: Path, parents: tuple[str, ...], visits: dict[str, int], real: str | None = None
) -> tuple[Iterator[os.DirEntry[str]], tuple[str, ...]] | None:
    """``folder``'s entries sorted by name, and the real folders down to it; ``None`` for a link back up.

    ``real``: ``folder``'s real path where the caller knows it (else it is resolved).
    """
    real = real if real is not None else os.path.realpath(folder)
    if real in parents:  # a link back up the tree
        return None
    visits[real] = visits.get(real, 0) + 1
    if visits[real] > MAX_FOLDER_VISITS:
        raise DataCorruptError(
            f"{real} is reached through more than {MAX_FOLDER_VISITS} paths of symbolic links (the last: "
            f"{folder}); a dataset folder whose links fan out level after level would be read exponentially "
            "often. Replace the links by one copy of each folder"
        )
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    return iter(entries), (*parents, real)
