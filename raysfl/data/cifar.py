"""CIFAR-10 "python version" batches: ``cifar-10-batches-py/``, or ``cifar-10-python.tar.gz`` unextracted.

Each batch is a pickle of a dict with ``data`` (uint8 ``(n, 3072)``: 1024 red, 1024 green, 1024 blue
values of a 32x32 image, row-major) and ``labels`` (n ints). Pickles can run arbitrary code, so they are
read with :class:`SafeUnpickler`, which resolves only the few NumPy globals needed to rebuild an array;
any other global (``os.system``, ``builtins.eval``, ...) raises :class:`DataCorruptError` before it runs.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from raysfl.data.errors import DataCorruptError

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
MAX_BATCH_BYTES = 64 << 20
"""The largest batch file read (an official one is about 31 MB): a larger one is refused before it is read."""


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as Python 3 protocol-2 pickles use it for ``bytes``, limited to latin-1."""
    if encoding != "latin1" or not isinstance(text, str):
        raise pickle.UnpicklingError(f"forbidden _codecs.encode call with encoding {encoding!r}")
    return text.encode("latin1")


def _allowed_globals() -> dict[tuple[str, str], Any]:
    """The callables an ndarray pickle may name (protocols 2 to 5, NumPy 1 and 2 module names)."""
    from numpy._core import multiarray, numeric

    allowed: dict[tuple[str, str], Any] = {}
    for core in ("numpy.core", "numpy._core"):
        allowed[(f"{core}.multiarray", "_reconstruct")] = multiarray._reconstruct
        allowed[(f"{core}.multiarray", "scalar")] = multiarray.scalar
        allowed[(f"{core}.numeric", "_frombuffer")] = numeric._frombuffer  # type: ignore[attr-defined]
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    allowed[("_codecs", "encode")] = _latin1_encode
    return allowed


_ALLOWED = _allowed_globals()


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that can rebuild NumPy arrays, dicts, lists and strings, and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        """Resolve only allow-listed NumPy globals; refuse everything else."""
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"forbidden global {module}.{name}") from None


def unpickle_batch(data: bytes, where: str) -> dict[str, Any]:
    """Safely unpickle one batch; keys are returned as ``str`` whatever the pickling Python was.

    Python 2 strings (the official files) are decoded as latin-1, as NumPy expects for array payloads.

    Raises:
        DataCorruptError: the pickle is malformed or names a global that is not allow-listed.
    """
    try:
        obj = SafeUnpickler(io.BytesIO(data), encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise DataCorruptError(f"{where}: unreadable or unsafe CIFAR batch pickle: {err}") from err
    if not isinstance(obj, Mapping):
        raise DataCorruptError(f"{where}: expected a dict in the CIFAR batch, got {type(obj).__name__}")
    return {k.decode("latin1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def decode_batch(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Images uint8 ``(n, 3, 32, 32)`` and labels int64 ``(n,)`` of one pickled batch."""
    batch = unpickle_batch(data, where)
    if "data" not in batch or "labels" not in batch:
        raise DataCorruptError(f"{where}: CIFAR batch lacks 'data' or 'labels' (keys: {sorted(batch)})")
    x, labels = batch["data"], batch["labels"]
    if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3 * 32 * 32:
        got = f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}".replace("  ", " ")
        raise DataCorruptError(f"{where}: 'data' must be uint8 (n, 3072), got {got.strip()}")
    try:
        y = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError) as err:
        raise DataCorruptError(f"{where}: 'labels' is not a list of integers") from err
    if y.shape != (x.shape[0],):
        raise DataCorruptError(f"{where}: {x.shape[0]} images but {y.size} labels")
    return x.reshape(-1, 3, 32, 32).copy(), y


def _join(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def read_cifar_batches(folder: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read ``data_batch_1..5`` and ``test_batch`` from an extracted ``cifar-10-batches-py`` folder.

    Returns:
        ``{"train": (x, y), "test": (x, y)}`` with x uint8 ``(N, 3, 32, 32)`` and y int64.
    """
    folder = Path(folder)
    out = {}
    for split, names in (("train", TRAIN_BATCHES), ("test", (TEST_BATCH,))):
        parts = []
        for name in names:
            path = folder / name
            if not path.is_file():
                raise DataCorruptError(f"{path}: missing CIFAR-10 batch file")
            _check_batch_size(path.stat().st_size, str(path))
            parts.append(decode_batch(path.read_bytes(), str(path)))
        out[split] = _join(parts)
    return out


def _check_batch_size(size: int, where: str) -> None:
    """Refuse a batch larger than :data:`MAX_BATCH_BYTES` before reading it into memory."""
    if size > MAX_BATCH_BYTES:
        raise DataCorruptError(
            f"{where}: {size} bytes, more than a CIFAR-10 batch can hold "
            f"({MAX_BATCH_BYTES >> 20} MiB at most; an official batch is about 31 MB)"
        )


def read_cifar_tarball(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read the batches straight from the official ``cifar-10-python.tar.gz`` without extracting it.

    Returns:
        The same mapping as :func:`read_cifar_batches`.
    """
    path = Path(path)
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                base = member.name.rsplit("/", 1)[-1]
                if member.isfile() and base in (*TRAIN_BATCHES, TEST_BATCH):
                    _check_batch_size(member.size, f"{path}:{member.name}")
                    handle = tar.extractfile(member)
                    if handle is not None:
                        found[base] = handle.read()
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataCorruptError(
            f"{path}: unreadable tar archive ({err}); the file is truncated or corrupt"
        ) from err
    missing = [n for n in (*TRAIN_BATCHES, TEST_BATCH) if n not in found]
    if missing:
        raise DataCorruptError(f"{path}: archive lacks CIFAR-10 batches {missing}")
    return {
        "train": _join([decode_batch(found[n], f"{path}:{n}") for n in TRAIN_BATCHES]),
        "test": decode_batch(found[TEST_BATCH], f"{path}:{TEST_BATCH}"),
    }
