"""Writing outputs into folders that may come from someone else, never through a symbolic link.

A run, sweep or report folder can be received from another person (a tarball, a shared drive), and
``raysfl run --resume`` and ``raysfl report`` write into it. A link planted under one of raysfl's output
names (``summary.json -> ~/.bashrc``) must not make raysfl overwrite, truncate or delete what it points to.

- Whole files (:func:`replace_file`, :func:`replace_text`) are written to a new file with an unguessable
  name beside the target, created exclusively, then renamed over the target: a rename replaces a link
  itself, never its target, and a crash never leaves half a file.
- Files that grow while a run goes (the Parquet event log) are opened by :func:`unlinked`, which removes a
  link in their place first.
- A folder whose files raysfl deletes (a resumed run's ``tb/``, a report's figures) must not be a link
  (:func:`refuse_link`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


class LinkedOutputError(Exception):
    """An output folder raysfl would delete files in is a symbolic link."""


def _new_file_beside(path: Path) -> Path:
    """A new, empty file in ``path``'s folder with the same suffix (writers infer formats from it).

    Created with ``O_EXCL``, so a name planted in advance fails instead of being followed; the mode is the
    process's umask applied to 0o666, as a plain ``open(..., "w")`` gives.
    """
    for _ in range(100):
        tmp = path.with_name(f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"cannot create a temporary file beside {path}")


def replace_file(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` whole: ``write(tmp)`` fills a new file beside it, which then replaces ``path``.

    A link at ``path`` is replaced by the new file; what it pointed to is left as it was.
    """
    path = Path(path)
    tmp = _new_file_beside(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` with :func:`replace_file`."""
    replace_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def unlinked(path: Path) -> Path:
    """``path``, after removing a symbolic link there: for a writer that opens and truncates it by name."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()
    return path


def refuse_link(folder: Path, what: str) -> None:
    """Refuse a ``folder`` that is a symbolic link: raysfl deletes files in it (``what`` says which).

    Raises:
        LinkedOutputError: naming the folder, where it points and what to do.
    """
    if Path(folder).is_symlink():
        raise LinkedOutputError(
            f"{folder} is a symbolic link (to {os.readlink(folder)}); raysfl deletes {what} in it, so it "
            "does not follow a link there. Replace the link with a folder (move its files into one) and run "
            "again."
        )
