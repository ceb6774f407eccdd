"""Where a dataset is looked for, in order, and how a folder is recognised as holding it.

Search order (first hit wins):
1. ``--data-dir`` (``data_dir_override`` of :func:`raysfl.data.load_dataset`), then ``data.data_dir``;
2. ``$RAYSFL_DATA``;
3. ``./data`` (relative to the working directory);
4. system folders of the dataset (Debian's ``/usr/share/datasets/fashion-mnist``);
5. a download into ``./data/<dataset>/`` (:mod:`raysfl.data.download`), when allowed.

Inside each of those roots the dataset's own folder names are tried first (``<root>/fashion-mnist/``,
``<root>/cifar-10-batches-py`` via ``<root>/cifar10/``, ...), then the root itself, and in each folder the
dataset's :class:`~raysfl.data.registry.Layout` s in registry order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from raysfl.data.errors import DataCorruptError
from raysfl.data.registry import IDX_FILES, DatasetInfo

CIFAR_BATCH_FILES = ("data_batch_1", "test_batch")
"""The files that tell a folder of CIFAR-10 python batches (the reader checks the other four)."""


@dataclass(frozen=True)
class Source:
    """A recognised on-disk copy: the file or folder ``path`` to read as format ``kind``."""

    path: Path
    kind: str


@dataclass(frozen=True)
class Place:
    """A searched root and why it was searched (``--data-dir``, ``$RAYSFL_DATA``, ...)."""

    root: Path
    why: str


def idx_file(folder: Path, stem: str) -> Path | None:
    """The IDX file ``stem`` in ``folder``: gzipped or raw, dash or dot spelling."""
    for name in (stem, stem.replace("-idx", ".idx")):
        for suffix in (".gz", ""):
            path = folder / f"{name}{suffix}"
            if path.is_file():
                return path
    return None


def _has_splits(folder: Path, *splits: str) -> bool:
    return all((folder / s).is_dir() for s in splits)


def _matches(path: Path, kind: str) -> bool:
    """Whether ``path`` looks like a copy in format ``kind`` (cheap checks; reading verifies the rest)."""
    if kind == "idx":
        return path.is_dir() and all(idx_file(path, stem) is not None for stem in IDX_FILES)
    if kind == "cifar-python":
        return all((path / name).is_file() for name in CIFAR_BATCH_FILES)
    if kind in ("cifar-python-tar", "imagefolder-tar"):
        return path.is_file()
    if kind == "imagefolder":
        return _has_splits(path, "train", "test")
    if kind == "leaf-json":
        return _has_splits(path, "train", "test") and any((path / "train").glob("*.json"))
    raise ValueError(f"unknown layout kind {kind!r}")


def folders_to_try(info: DatasetInfo, root: Path) -> list[Path]:
    """The folders probed under one root: the dataset's own folder names first, then the root itself."""
    return [root / name for name in info.folders] + [root]


def probe(info: DatasetInfo, folder: Path) -> Source | None:
    """The first layout of ``info`` present in ``folder``, or None."""
    for layout in info.layouts:
        path = folder / layout.relpath if layout.relpath != "." else folder
        if _matches(path, layout.kind):
            return Source(path, layout.kind)
    return None


def search_places(
    info: DatasetInfo,
    data_dir_override: str | None,
    data_dir: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> list[Place]:
    """The roots searched for ``info``, in priority order (module docstring, steps 1 to 4)."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    places = []
    if data_dir_override:
        places.append(Place(Path(data_dir_override).expanduser(), "--data-dir"))
    if data_dir:
        places.append(Place(Path(data_dir).expanduser(), "data.data_dir"))
    if environ.get("RAYSFL_DATA"):
        places.append(Place(Path(environ["RAYSFL_DATA"]).expanduser(), "$RAYSFL_DATA"))
    places.append(Place(cwd / "data", "./data"))
    places.extend(Place(Path(d), "system folder") for d in info.system_dirs)
    return places


NAMED_PLACES = ("--data-dir", "data.data_dir", "$RAYSFL_DATA")
"""Places the user named: an incomplete copy there is an error, not a reason to look elsewhere."""


def missing_part(info: DatasetInfo, folder: Path) -> str | None:
    """What an incomplete copy of ``info`` in ``folder`` lacks; ``None`` when it holds none or all of one.

    Incomplete: some of the four IDX files, or one CIFAR batch file without the other. Names this specific
    only: a ``train/`` folder alone may well be another dataset's.
    """
    for layout in info.layouts:
        path = folder / layout.relpath if layout.relpath != "." else folder
        if not path.is_dir():
            continue
        if layout.kind == "idx":
            missing = [stem for stem in IDX_FILES if idx_file(path, stem) is None]
            if 0 < len(missing) < len(IDX_FILES):
                return f"{path} lacks {', '.join(f'{m}[.gz]' for m in missing)} (or it is not a regular file)"
        if layout.kind == "cifar-python":
            present = [n for n in CIFAR_BATCH_FILES if (path / n).exists()]
            if 0 < len(present) < len(CIFAR_BATCH_FILES):
                absent = next(n for n in CIFAR_BATCH_FILES if n not in present)
                return f"{path} has {present[0]} but not {absent}"
    return None


def find_source(info: DatasetInfo, places: list[Place]) -> Source | None:
    """The first recognised copy of ``info`` under ``places``, or None.

    Raises:
        DataCorruptError: a place the user named (:data:`NAMED_PLACES`) holds an incomplete copy and no
            complete one: it was passed over for the next place without a word. A complete copy in a
            later place does not help: the named place is the one meant.
    """
    for place in places:
        folders = folders_to_try(info, place.root)
        for folder in folders:
            found = probe(info, folder)
            if found is not None:
                return found
        if place.why in NAMED_PLACES:
            for folder in folders:
                lacks = missing_part(info, folder)
                if lacks is not None:
                    raise DataCorruptError(
                        f"{place.why} {place.root}: an incomplete copy of {info.title}: {lacks}. Complete "
                        f"it, or point {place.why} at another copy."
                    )
    return None


def describe_places(info: DatasetInfo, places: list[Place]) -> list[str]:
    """One line per searched root naming the sub-folders tried, for :class:`DataNotFoundError` messages."""
    lines = []
    for place in places:
        state = "" if place.root.is_dir() else " [does not exist]"
        subs = ", ".join(f"{name}/" for name in info.folders)
        tried = f"; tried {subs} and the folder itself" if subs else ""
        lines.append(f"  - {place.root} ({place.why}){state}{tried}")
    return lines
