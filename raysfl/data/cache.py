"""A cache of decoded arrays as ``.npz`` files, so JPEG trees and LEAF JSON are decoded once per machine.

The cache folder is ``$RAYSFL_CACHE`` if set, else ``~/.cache/raysfl`` (never the repository). An entry is
named ``<tag>-<source>-<content>.npz``: ``tag`` says how the data were decoded (dataset, format, channels),
``source`` hashes :data:`CACHE_VERSION`, the host and the source's absolute path, ``content`` a fingerprint
of its content metadata: a file's size and mtime; for a folder, every file the image-tree reader reads
(:func:`raysfl.data.walk.files_below`, symbolic links followed) by its relative path, size and mtime. A file
moved between class folders, renamed folders, a file changed behind a symbolic link or a second link to a
folder therefore give a new entry, never stale arrays. Writing an entry removes the other entries of the
same tag, host and source (the arrays of an older state of the source), so the cache holds one entry per
source, host and decoding. Entries are written atomically; a cache that cannot be written is skipped with
a warning. Entries are loaded with ``allow_pickle=False``, so a planted cache file cannot run code, and the
cache is used only when its folder belongs to this user and no other account can write to it (raysfl makes
it with mode 0700), so no one else can plant entries with wrong arrays.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import socket
import stat
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from raysfl.data.walk import files_below

CACHE_VERSION = 2  # 2: entries named by tag, source and content (1: one hash of all three)


def cache_dir() -> Path:
    """The cache folder: ``$RAYSFL_CACHE`` or ``~/.cache/raysfl``."""
    env = os.environ.get("RAYSFL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "raysfl"


def untrusted_reason(st: os.stat_result) -> str | None:
    """Why another account could have written the cache folder or entry ``st`` describes; ``None`` if none.

    Another user's folder, or one that group or others can write to (a shared ``/tmp`` folder named by
    ``$RAYSFL_CACHE``, a home under ``umask 002``), could hold planted entries: arrays that load as a
    dataset without being it. An entry is checked too: one planted while its folder was open stays after a
    ``chmod go-w``. Systems without POSIX owners (Windows) are not checked.
    """
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return None
    if st.st_uid != getuid():
        return f"it belongs to user id {st.st_uid}, not to this user ({getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group or others can write to it (mode {stat.filemode(st.st_mode)}; `chmod go-w` fixes that)"
    return None


def fingerprint(source: Path) -> str:
    """A file's size and mtime; for a folder, a hash of every file below it: relative path, size, mtime.

    The files are those :func:`raysfl.data.walk.files_below` lists, as the image-tree reader reads them; a
    file that cannot be read (a dangling link) is listed as such, so the reader is the one to name it.
    """
    st = source.stat()
    if not source.is_dir():
        return f"file:{st.st_size}:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    for path in files_below(source):  # what the image-tree reader walks
        name = path.relative_to(source).as_posix()
        try:
            fst = path.stat()
            entry = f"{name}\0{fst.st_size}\0{fst.st_mtime_ns}\n"
        except OSError:
            entry = f"{name}\0unreadable\n"
        digest.update(entry.encode("utf-8", "surrogateescape"))
    return f"dir:{digest.hexdigest()}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def cache_path(source: Path, tag: str) -> Path:
    """Where the entry for ``source`` decoded as ``tag`` lives (it may not exist)."""
    return cache_dir() / f"{_source_prefix(source, tag)}{_digest(fingerprint(source))}.npz"


def _source_prefix(source: Path, tag: str) -> str:
    """The start of the name every entry of ``source`` decoded as ``tag`` has, whatever its content.

    The host is part of it: nodes sharing a cache folder (an NFS home) with copies of their own at one path
    keep an entry each, instead of removing each other's.
    """
    return f"{tag}-{_digest(f'{CACHE_VERSION}|{socket.gethostname()}|{source.resolve()}')}-"


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
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        reason = untrusted_reason(path.parent.stat())
    except OSError as err:
        warnings.warn(f"could not use the data cache {path.parent}: {err}", stacklevel=2)
        return build()
    if reason is not None:
        warnings.warn(f"not using the data cache {path.parent}: {reason}", stacklevel=2)
        return build()
    try:
        with open(path, "rb") as stored:
            planted = untrusted_reason(os.fstat(stored.fileno()))
            if planted is None:
                with np.load(stored, allow_pickle=False) as npz:
                    return {k: npz[k] for k in npz.files}
        warnings.warn(f"replacing the data cache entry {path}: {planted}", stacklevel=2)
    except FileNotFoundError:  # not cached (or removed by another process since)
        pass
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        warnings.warn(f"ignoring unreadable cache entry {path}", stacklevel=2)
    arrays = build()
    tmp = None
    try:
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
    """Remove the entries named ``prefix*.npz`` other than ``kept``: older states of the same source.

    Also the entries of the first cache format with the same tag (``<tag>-<24 hex>.npz``), which no key
    names any more: at worst another copy is decoded again.
    """
    tag = prefix.rsplit("-", 2)[0]
    first_format = re.compile(rf"{re.escape(tag)}-[0-9a-f]{{24}}\.npz")
    for old in kept.parent.glob(f"{glob.escape(tag)}-*.npz"):  # this source's entries start so too
        if old != kept and (old.name.startswith(prefix) or first_format.fullmatch(old.name)):
            with contextlib.suppress(OSError):  # another process removed it first
                old.unlink()
