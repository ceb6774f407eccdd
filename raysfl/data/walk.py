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
    passes ``root`` and ``root/train``), so a link back to any of them is a cycle here too.
    """
    yield from _below(folder, tuple(os.path.realpath(p) for p in inside), {})


def _below(folder: Path, parents: tuple[str, ...], visits: dict[str, int]) -> Iterator[Path]:
    real = os.path.realpath(folder)
    if real in parents:  # a link back up the tree
        return
    visits[real] = visits.get(real, 0) + 1
    if visits[real] > MAX_FOLDER_VISITS:
        raise DataCorruptError(
            f"{real} is reached through more than {MAX_FOLDER_VISITS} paths of symbolic links (the last: "
            f"{folder}); a dataset folder whose links fan out level after level would be read exponentially "
            "often. Replace the links by one copy of each folder"
        )
    parents = (*parents, real)
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir():  # follows links
            yield from _below(Path(entry.path), parents, visits)
        else:
            yield Path(entry.path)
