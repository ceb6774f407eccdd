"""The token file of an embedded Ray's token authentication: created owner-only, and a shared one named.

Ray (2.60) turns token authentication on for a local ``ray.init`` and, when it finds no token, writes a new
one to ``~/.ray/auth_token`` with the process's umask: usually mode 0644, which every user of the machine
can read where home folders can be entered by all (mode 0755, a common default). Whoever reads the token can
submit code to every Ray that uses it. Before raysfl starts an embedded Ray it therefore

- creates ``~/.ray/auth_token`` itself, mode 0600 (its folder 0700 when it makes it), when Ray would use that
  file and it does not exist yet: Ray then finds a token and writes none;
- says so when the file Ray will read (``$RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) can be read or
  written by other users (its mode allows it and the folders above it let them through), with the command
  that fixes it. It leaves the file as it is: the user's own file.

Nothing is done when token authentication is off (``RAY_AUTH_MODE`` other than ``token``) or the token comes
from ``RAY_AUTH_TOKEN``. The lookup order is Ray's own (its ``AuthenticationTokenLoader``):
``RAY_AUTH_TOKEN``, then ``RAY_AUTH_TOKEN_PATH``, then ``$HOME/.ray/auth_token``. POSIX only; elsewhere this
does nothing.

Joining a cluster (``--address``), the token must be the cluster's, so nothing is created; a shared token file
is named all the same when Ray will read it (:func:`joined_token_warning`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

GROUP_BITS = stat.S_IRGRP | stat.S_IWGRP  # read or write for the file's group
OTHER_BITS = stat.S_IROTH | stat.S_IWOTH  # read or write for every other user


def token_file(environ: Mapping[str, str]) -> tuple[Path | None, bool]:
    """The file an embedded Ray started under ``environ`` reads its token from, and whether it is the default.

    ``(None, False)`` when it reads none: authentication off, the token in ``RAY_AUTH_TOKEN``, or no home
    folder (Ray then falls back to a path relative to its working directory, which this leaves alone).
    """
    mode = environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":  # Ray lower-cases the mode and does not strip it
        return None, False
    if environ.get("RAY_AUTH_TOKEN"):
        return None, False
    if environ.get("RAY_AUTH_TOKEN_PATH"):
        return Path(environ["RAY_AUTH_TOKEN_PATH"]), False
    home = environ.get("HOME")
    return (Path(home) / ".ray" / "auth_token", True) if home else (None, False)


def secure_token_file(environ: Mapping[str, str] | None = None) -> str | None:
    """Create the default token file owner-only if it is missing; return a warning if the token is shared.

    The token is 64 hex digits from :func:`secrets.token_hex` (32 bytes), Ray's own format. The file is
    created with ``O_EXCL``, so a token another process wrote meanwhile is never replaced; where it cannot be
    written at all, Ray's own attempt reports that. Returns the warning text (without a prefix), or None
    when there is nothing to say.
    """
    if os.name != "posix":
        return None
    path, default = token_file(os.environ if environ is None else environ)
    if path is None:
        return None
    if default and not path.exists():
        with contextlib.suppress(OSError):  # made meanwhile (kept), or a home Ray cannot write either
            _create_owner_only(path)
    return _shared_file_warning(path, "the one raysfl starts now")


def joined_token_warning(address: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A warning if the token file Ray reads to join the cluster at ``address`` is shared; never creates one.

    Ray (2.60) reads a token to join only with ``RAY_AUTH_MODE=token``, or, with the mode unset, for
    ``address = "auto"`` when it finds a token (its ``maybe_enable_token_auth_if_token_available``); an
    explicit ``host:port`` with the mode unset joins without one.
    """
    if os.name != "posix":
        return None
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_MODE") is None and address != "auto":
        return None
    path, _ = token_file(environ)
    return None if path is None else _shared_file_warning(path, "the cluster raysfl joins now")


def _shared_file_warning(path: Path, ray_named: str) -> str | None:
    """The warning for a token file ``path`` that other users can read or change, else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # Ray reports a missing RAY_AUTH_TOKEN_PATH itself
    if not stat.S_ISREG(mode) or not _reachable_by_others(path.resolve(), mode):
        return None
    return (
        f"{path} (Ray's authentication token) can be read or changed by other users of this machine "
        f"(mode {stat.S_IMODE(mode):04o}); whoever reads it can run code in every Ray that uses it, "
        f"{ray_named} included. `chmod 600 {path}` makes it yours alone."
    )


def _create_owner_only(path: Path) -> None:
    """Write a new token to ``path`` (mode 0600; a missing parent folder is made with mode 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))


def _reachable_by_others(path: Path, mode: int) -> bool:
    """Whether users other than the owner can read or write the file ``path`` (whose mode is ``mode``).

    They can when its mode gives them read or write and every folder above it lets them through (the
    search bit for others, or for the group when the group's bits are the ones set): a 0644 file in a
    0700 home folder is the owner's alone.
    """
    folders = [folder.stat().st_mode for folder in path.parents]
    others_pass = all(m & stat.S_IXOTH for m in folders)
    group_pass = all(m & (stat.S_IXGRP | stat.S_IXOTH) for m in folders)
    return bool((mode & OTHER_BITS and others_pass) or (mode & GROUP_BITS and group_pass))
