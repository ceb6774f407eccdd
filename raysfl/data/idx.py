"""IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed.

Format (LeCun's MNIST page): two zero bytes, a type code, the number of dimensions ``d``, then ``d``
big-endian uint32 sizes, then the data in C order, big-endian. A file whose length disagrees with its
header raises :class:`DataCorruptError` naming the file.

Example:
    >>> import tempfile, numpy as np
    >>> path = Path(tempfile.mkdtemp()) / "x-idx3-ubyte.gz"
    >>> write_idx(path, np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    >>> read_idx(path).shape
    (2, 3, 4)
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from pathlib import Path

import numpy as np

from raysfl.data.errors import DataCorruptError

_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dt.newbyteorder(">") if dt.itemsize > 1 else dt: code for code, dt in _TYPES.items()}


def _declared_length(head: bytes) -> int | None:
    """The file length an IDX header declares (header included); None when ``head`` is no whole header."""
    if len(head) < 4 or head[0] or head[1] or head[2] not in _TYPES or len(head) < 4 + 4 * head[3]:
        return None
    dims = np.frombuffer(head, dtype=">u4", count=head[3], offset=4)
    return 4 + 4 * head[3] + math.prod(int(d) for d in dims) * _TYPES[head[2]].itemsize


def _read_bytes(path: Path) -> bytes:
    """The decompressed content of ``path`` (gzip detected from the magic bytes, not the name).

    A compressed file is decompressed only up to one byte past the length its header declares: a small
    file that decompresses to gigabytes is refused by :func:`read_idx` instead of filling the memory.
    """
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataCorruptError(f"{path}: cannot read: {err}") from err
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            data = stream.read(4)
            if len(data) == 4:
                data += stream.read(4 * data[3])
            declared = _declared_length(data)
            if declared is None:  # no readable header: read_idx names what is wrong with it
                return data
            return data + stream.read(declared - len(data) + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise DataCorruptError(
            f"{path}: broken gzip stream ({err}); the file is truncated or corrupt"
        ) from err


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file into a native-byte-order array of the dimensions its header declares.

    Raises:
        DataCorruptError: bad magic, unknown type code, or a data length that disagrees with the header.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataCorruptError(f"{path}: not an IDX file (bad magic {data[:4]!r})")
    code, ndim = data[2], data[3]
    if code not in _TYPES:
        raise DataCorruptError(f"{path}: unknown IDX type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataCorruptError(
            f"{path}: header declares {ndim} dimensions but the file ends after {len(data)} bytes"
        )
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = _TYPES[code]
    expected = header + math.prod(dims) * dtype.itemsize
    if len(data) != expected:
        found = f"more than {expected}" if len(data) > expected else str(len(data))
        raise DataCorruptError(
            f"{path}: header says {dtype.name} values of dimensions {dims} ({expected} bytes) but the"
            f" decompressed file has {found} bytes; the file is truncated or corrupt, or its header"
            " names another value type"
        )
    out = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return out.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file, gzip-compressed when ``path`` ends in ``.gz`` (used by tests)."""
    path = Path(path)
    dtype = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    if dtype not in _CODES:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    header = bytes([0, 0, _CODES[dtype], array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    payload = header + np.ascontiguousarray(array, dtype=dtype).tobytes()
    path.write_bytes(gzip.compress(payload, compresslevel=1) if path.suffix == ".gz" else payload)
