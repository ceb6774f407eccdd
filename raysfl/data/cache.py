"""A cache of decoded arrays as ``.npz`` files, so JPEG trees and LEAF JSON are decoded once per machine.

The cache folder is ``$RAYSFL_CACHE`` if set, else ``~/.cache/raysfl`` (never the repository). An entry is
keyed by the source's absolute path, a fingerprint of its content metadata (a file's size and mtime; for a
folder, the number, total size and latest mtime of the files below it), a tag naming how it was decoded,
and :data:`CACHE_VERSION`. Changing the source, or the decoding, therefore never returns stale arrays.
Entries are written atomically; a cache that cannot be written is skipped with a warning. Entries are loaded
with ``allow_pickle=False``, so a planted cache file cannot run code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE_VERSION = 1


def cache_dir() -> Path:
    """The cache folder: ``$RAYSFL_CACHE`` or ``~/.cache/raysfl``."""
    env = os.environ.get("RAYSFL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "raysfl"


def fingerprint(source: Path) -> str:
    """Size and mtime of a file, or count, total size and latest mtime of the files under a folder."""
    st = source.stat()
    if not source.is_dir():
        return f"file:{st.st_size}:{st.st_mtime_ns}"
    count = total = latest = 0
    for top, _, files in os.walk(source):
        for name in files:
            fst = os.stat(os.path.join(top, name))
            count, total, latest = count + 1, total + fst.st_size, max(latest, fst.st_mtime_ns)
    return f"dir:{count}:{total}:{latest}"


def cache_path(source: Path, tag: str) -> Path:
    """Where the entry for ``source`` decoded as ``tag`` lives (it may not exist)."""
    key = f"{CACHE_VERSION}|{source.resolve()}|{fingerprint(source)}|{tag}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / f"{tag}-{digest}.npz"


def cached_arrays(
    source: Path, tag: str, build: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Return the arrays cached for ``(source, tag)``, or call ``build()``, store its result and return it.

    Args:
        source: The file or folder the arrays are decoded from; its fingerprint is part of the key.
        tag: Short file-name-safe label of the decoding (dataset, format, channels), part of the key.
        build: Produces the arrays on a miss; must be deterministic for a given source.
    """
    path = cache_path(source, tag)
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            warnings.warn(f"ignoring unreadable cache entry {path}", stacklevel=2)
    arrays = build()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub reads any keyword as allow_pickle
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        warnings.warn(f"could not write the data cache {path}: {err}", stacklevel=2)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return arrays
