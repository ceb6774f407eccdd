"""The files below a folder, as both the image-tree reader and the data cache's fingerprint see them.

One walk for both, so the cache's key changes whenever what the reader reads does: sorted (the same order
on every machine), symbolic links to folders followed, a folder skipped only where a link leads back to
one of its own parents (a cycle). The same real folder reached through two links is read twice, under
both names, as the reader would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def files_below(folder: Path, inside: tuple[Path, ...] = ()) -> Iterator[Path]:
    """Every non-folder entry below ``folder`` (dangling links included), depth first, names sorted.

    ``inside``: the folders above ``folder`` in a walk that started higher up (a reader of ``root/train/cat``
    passes ``root`` and ``root/train``), so a link back to any of them is a cycle here too.
    """
    yield from _below(folder, tuple(os.path.realpath(p) for p in inside))


def _below(folder: Path, parents: tuple[str, ...]) -> Iterator[Path]:
    real = os.path.realpath(folder)
    if real in parents:  # a link back up the tree
        return
    parents = (*parents, real)
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir():  # follows links
            yield from _below(Path(entry.path), parents)
        else:
            yield Path(entry.path)
