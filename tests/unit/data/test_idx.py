"""IDX reader: round trips (gz and raw, several dtypes) and clean errors on damaged files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import DataCorruptError, read_idx, write_idx


@pytest.mark.parametrize("suffix", [".gz", ""])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_round_trip(tmp_path: Path, suffix: str, dtype: type) -> None:
    arr = (np.arange(2 * 3 * 5) - 7).astype(dtype).reshape(2, 3, 5)
    if dtype is np.uint8:
        arr = np.arange(30, dtype=np.uint8).reshape(2, 3, 5)
    path = tmp_path / f"x-idx3-ubyte{suffix}"
    write_idx(path, arr)
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def test_header_layout_is_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(path, np.array([1, 2, 3], dtype=np.uint8))
    assert path.read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3])


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    path = tmp_path / "no-suffix"
    path.write_bytes(gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 2, 7, 9])))
    np.testing.assert_array_equal(read_idx(path), [7, 9])


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_file_names_the_file(tmp_path: Path, gz: bool) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    payload = bytes([0, 0, 8, 3]) + np.array([10, 28, 28], dtype=">u4").tobytes() + bytes(10 * 28 * 28 - 1)
    path.write_bytes(gzip.compress(payload) if gz else payload)
    with pytest.raises(DataCorruptError, match="train-images-idx3-ubyte.*truncated"):
        read_idx(path)


def test_a_header_naming_another_value_type_says_which(tmp_path: Path) -> None:
    """uint8 pixels under a header that says int32 (0x0C): the message names the type it read."""
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(bytes([0, 0, 0x0C, 3]) + np.array([10, 28, 28], dtype=">u4").tobytes() + bytes(10 * 784))
    with pytest.raises(DataCorruptError, match=r"header says int32 values of dimensions \(10, 28, 28\)"):
        read_idx(path)


def test_cut_gzip_stream_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good-idx1-ubyte.gz"
    write_idx(good, np.arange(5000, dtype=np.uint8) % 251)
    bad = tmp_path / "bad-idx1-ubyte.gz"
    bad.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(DataCorruptError, match="bad-idx1-ubyte.gz"):
        read_idx(bad)


def test_bad_magic_and_type_code(tmp_path: Path) -> None:
    path = tmp_path / "junk"
    path.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataCorruptError, match="not an IDX file"):
        read_idx(path)
    path.write_bytes(bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 0]))
    with pytest.raises(DataCorruptError, match="type code"):
        read_idx(path)


def test_a_small_file_that_decompresses_to_far_more_than_its_header_declares_is_refused_early(
    tmp_path: Path,
) -> None:
    """A gzip bomb: 200 MB of zeros after a header declaring 2×2 bytes compress to under 1 MB. It was
    decompressed whole before the header was checked; now only one byte past the declared length is."""
    import tracemalloc

    header = bytes([0, 0, 0x08, 2]) + np.asarray((2, 2), dtype=">u4").tobytes()
    path = tmp_path / "bomb-idx3-ubyte.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(header + bytes(4))
        for _ in range(200):
            out.write(bytes(1 << 20))
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        refused = r"\(16 bytes\) but the decompressed file has more than 16 bytes"
        with pytest.raises(DataCorruptError, match=refused):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / 2**20:.0f} MiB held while reading"
