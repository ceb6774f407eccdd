"""LEAF FEMNIST JSON (``train/*.json``, ``test/*.json``), keeping which writer produced each sample.

Each file holds ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [[784 floats in
[0, 1]]], "y": [...]}}}``. Samples are concatenated file by file (sorted file names), user by user in the
order of ``users``, which is the order CSE-FSL's code sees them (CSE-FSL spec §2.7-8). Pixels are stored as
uint8 ``round(255·x)``: the [0, 1] floats LEAF writes are multiples of 1/255, so nothing is lost.
Writers are numbered in order of first appearance in the training files; a writer seen only in the test
files gets the next free number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from raysfl.data.errors import DataCorruptError

FEMNIST_CLASSES = 62
FEMNIST_SIZE = 28


@dataclass(frozen=True, eq=False)
class LeafSplit:
    """One LEAF split: images uint8 ``(N, 1, 28, 28)``, labels int64 ``(N,)``, writer index int64 ``(N,)``."""

    x: np.ndarray
    y: np.ndarray
    writers: np.ndarray


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            obj = json.load(fh)
    except (OSError, ValueError) as err:
        raise DataCorruptError(f"{path}: not a readable LEAF JSON file: {err}") from err
    if not isinstance(obj, dict) or not {"users", "user_data"} <= obj.keys():
        raise DataCorruptError(f"{path}: LEAF JSON needs 'users' and 'user_data' keys")
    return obj


def _labels(values: object) -> np.ndarray:
    """``values`` as int64 class indices; a value that is not a whole number is refused (never truncated)."""
    raw = np.asarray(values)
    if raw.dtype.kind in "iu":
        return raw.astype(np.int64)
    if raw.dtype.kind != "f":
        raise ValueError(f"labels must be whole numbers, got values of type {raw.dtype}")
    fractional = raw[~np.isfinite(raw) | (raw != np.round(raw))]
    if fractional.size:
        raise ValueError(f"labels must be whole numbers, got {fractional[:3].tolist()}")
    return raw.astype(np.int64)


def _read_split(folder: Path, writer_ids: dict[str, int]) -> LeafSplit:
    """Read every ``*.json`` in ``folder``, extending ``writer_ids`` with writers not seen before."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DataCorruptError(f"{folder}: no LEAF *.json files")
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    ws: list[np.ndarray] = []
    seen: dict[str, Path] = {}
    for path in files:
        obj = _read_json(path)
        counts = obj.get("num_samples", [None] * len(obj["users"]))
        if not isinstance(counts, list) or len(counts) != len(obj["users"]):
            kind = type(counts).__name__
            what = f"has {len(counts)} entries" if isinstance(counts, list) else f"is a {kind}"
            users = len(obj["users"])
            raise DataCorruptError(f"{path}: num_samples {what} for {users} users (a list, one count each)")
        for user, count in zip(obj["users"], counts, strict=True):
            if str(user) in seen:
                raise DataCorruptError(f"{path}: user {user!r} is listed twice in this split (also in "
                                       f"{seen[str(user)].name}); its samples would count twice")  # fmt: skip
            seen[str(user)] = path
            record = obj["user_data"].get(user)
            if record is None:
                raise DataCorruptError(f"{path}: user {user!r} listed but has no user_data")
            try:
                x = np.asarray(record["x"], dtype=np.float64)
                y = _labels(record["y"])
            except (KeyError, TypeError, ValueError) as err:
                raise DataCorruptError(f"{path}: user {user!r}: malformed x/y ({err})") from err
            n = y.shape[0]
            if x.size == 0:
                x = x.reshape(0, FEMNIST_SIZE * FEMNIST_SIZE)
            if x.shape != (n, FEMNIST_SIZE * FEMNIST_SIZE) or (count is not None and count != n):
                raise DataCorruptError(
                    f"{path}: user {user!r}: x has shape {x.shape}, y has {n} labels,"
                    f" num_samples says {count}; expected x of shape ({n}, {FEMNIST_SIZE * FEMNIST_SIZE})"
                )
            if n and (x.min() < 0 or x.max() > 1 or y.min() < 0 or y.max() >= FEMNIST_CLASSES):
                raise DataCorruptError(
                    f"{path}: user {user!r}: pixels outside [0, 1] or labels outside [0, 62)"
                )
            writer = writer_ids.setdefault(str(user), len(writer_ids))
            xs.append(np.rint(x * 255).astype(np.uint8).reshape(n, 1, FEMNIST_SIZE, FEMNIST_SIZE))
            ys.append(y)
            ws.append(np.full(n, writer, dtype=np.int64))
    if not ys:
        raise DataCorruptError(f"{folder}: the LEAF files list no users")
    return LeafSplit(np.concatenate(xs), np.concatenate(ys), np.concatenate(ws))


def read_leaf_femnist(root: str | Path) -> tuple[LeafSplit, LeafSplit, tuple[str, ...]]:
    """Read ``root/train/*.json`` and ``root/test/*.json``.

    Returns:
        ``(train, test, writer_names)`` where ``writer_names[i]`` is the LEAF user id of writer index ``i``.
    """
    root = Path(root)
    writer_ids: dict[str, int] = {}
    train = _read_split(root / "train", writer_ids)
    test = _read_split(root / "test", writer_ids)
    return train, test, tuple(writer_ids)
