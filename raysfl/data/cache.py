"""A cache of decoded arrays as ``.npz`` files, so JPEG trees and LEAF JSON are decoded once per machine.

The cache folder is ``$RAYSFL_CACHE`` if set, else ``~/.cache/raysfl`` (never the repository). An entry is
named ``<tag>-<source>-<content>.npz``: ``tag`` says how the data were decoded (dataset, format, channels),
``source`` hashes the source's absolute path and :data:`CACHE_VERSION`, ``content`` a fingerprint of its
content metadata: a file's size and mtime; for a folder, every file below it (symbolic links followed) by
its relative path, size and mtime. A file moved between class folders, renamed folders, or a file changed
behind a symbolic link therefore give a new entry, never stale arrays. Writing an entry removes the other
entries of the same tag and source (the arrays of an older state of the source), so the cache holds one
entry per source and decoding. Entries are written atomically; a cache that cannot be written is skipped with
a warning. Entries are loaded with ``allow_pickle=False``, so a planted cache file cannot run code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE_VERSION = 2  # 2: entries named by tag, source and content (1: one hash of all three)


def cache_dir() -> Path:
    """The cache folder: ``$RAYSFL_CACHE`` or ``~/.cache/raysfl``."""
    env = os.environ.get("RAYSFL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "raysfl"


def fingerprint(source: Path) -> str:
    """A file's size and mtime; for a folder, a hash of every file below it: relative path, size, mtime.

    Symbolic links to folders are followed (each real folder once); a file that cannot be read (a dangling
    link) is listed as such, so the reader that decodes the tree is the one to name it.
    """
    st = source.stat()
    if not source.is_dir():
        return f"file:{st.st_size}:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    visited: set[str] = set()
    for top, dirs, files in os.walk(source, followlinks=True):
        real = os.path.realpath(top)
        if real in visited:  # a link back up the tree: walk it once
            dirs.clear()
            continue
        visited.add(real)
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            try:
                fst = os.stat(path)
                entry = f"{os.path.relpath(path, source)}\0{fst.st_size}\0{fst.st_mtime_ns}\n"
            except OSError:
                entry = f"{os.path.relpath(path, source)}\0unreadable\n"
            digest.update(entry.encode("utf-8", "surrogateescape"))
    return f"dir:{digest.hexdigest()}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def cache_path(source: Path, tag: str) -> Path:
    """Where the entry for ``source`` decoded as ``tag`` lives (it may not exist)."""
    return cache_dir() / f"{_source_prefix(source, tag)}{_digest(fingerprint(source))}.npz"


def _source_prefix(source: Path, tag: str) -> str:
    """The start of the name every entry of ``source`` decoded as ``tag`` has, whatever its content."""
    return f"{tag}-{_digest(f'{CACHE_VERSION}|{source.resolve()}')}-"


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
            with open(path, "rb") as stored, np.load(stored, allow_pickle=False) as npz:
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
        _remove_older_entries(path, _source_prefix(source, tag))
    except OSError as err:
        warnings.warn(f"could not write the data cache {path}: {err}", stacklevel=2)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return arrays


def _remove_older_entries(kept: Path, prefix: str) -> None:
    """Remove the entries named ``prefix*.npz`` other than ``kept``: older states of the same source."""
    for old in kept.parent.glob(f"{glob_escape(prefix)}*.npz"):
        if old != kept:
            with contextlib.suppress(OSError):  # another process removed it first
                old.unlink()


def glob_escape(text: str) -> str:
    """``text`` with glob's special characters matched literally (a tag or path may hold ``[``)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
