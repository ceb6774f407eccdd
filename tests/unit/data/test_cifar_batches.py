"""CIFAR-10 python batches: official (Python 2 pickle) format, tarball, and refusal of unsafe pickles."""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from raysfl.data import DataCorruptError, read_cifar_batches, read_cifar_tarball
from raysfl.data.cifar import decode_batch

NAMES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch")


def _write_batches(folder: Path, cifar_batch: Callable) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    folder.mkdir(parents=True)
    parts = {}
    for seed, name in enumerate(NAMES):
        blob, x, y = cifar_batch(4, seed, name)
        (folder / name).write_bytes(blob)
        parts[name] = (x, y)
    return parts


def test_folder_reader_matches_the_generated_batches(tmp_path: Path, cifar_batch: Callable) -> None:
    parts = _write_batches(tmp_path / "cifar-10-batches-py", cifar_batch)
    out = read_cifar_batches(tmp_path / "cifar-10-batches-py")
    np.testing.assert_array_equal(out["train"][0], np.concatenate([parts[n][0] for n in NAMES[:5]]))
    np.testing.assert_array_equal(out["train"][1], np.concatenate([parts[n][1] for n in NAMES[:5]]))
    np.testing.assert_array_equal(out["test"][0], parts["test_batch"][0])
    assert out["train"][0].shape == (20, 3, 32, 32) and out["train"][1].dtype == np.int64


def test_channel_layout_is_planar_rgb(py2_pickle: Callable) -> None:
    data = np.zeros((1, 3072), dtype=np.uint8)
    data[0, 1024:2048] = 200  # the green plane
    x, _ = decode_batch(py2_pickle({"data": data, "labels": [3]}), "mem")
    assert x[0, 1].min() == 200 and x[0, 0].max() == 0 and x[0, 2].max() == 0


def test_tarball_reader_without_extracting(tmp_path: Path, cifar_batch: Callable) -> None:
    parts = _write_batches(tmp_path / "src" / "cifar-10-batches-py", cifar_batch)
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    out = read_cifar_tarball(archive)
    np.testing.assert_array_equal(out["test"][1], parts["test_batch"][1])
    assert out["train"][0].shape[0] == 20


def test_a_batch_larger_than_any_cifar_batch_is_refused_unread(
    tmp_path: Path, cifar_batch: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An archive member's header gives its size: a gzip of zeros can claim gigabytes in a few kilobytes,
    so an oversized batch is refused from its size, in an archive or a folder, before it is read."""
    import raysfl.data.cifar as cifar

    _write_batches(tmp_path / "src" / "cifar-10-batches-py", cifar_batch)
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    size = (tmp_path / "src" / "cifar-10-batches-py" / "data_batch_1").stat().st_size
    monkeypatch.setattr(cifar, "MAX_BATCH_BYTES", size - 1)  # the test batches stand in for huge ones
    with pytest.raises(DataCorruptError, match=f"data_batch_1: {size} bytes, more than a CIFAR-10 batch"):
        read_cifar_tarball(archive)
    with pytest.raises(DataCorruptError, match=f"data_batch_1: {size} bytes, more than a CIFAR-10 batch"):
        cifar.read_cifar_batches(tmp_path / "src" / "cifar-10-batches-py")
    monkeypatch.setattr(cifar, "MAX_BATCH_BYTES", size)
    assert read_cifar_tarball(archive)["train"][0].shape[0] == 20


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_python3_pickles_also_load(protocol: int) -> None:
    data = np.arange(2 * 3072, dtype=np.uint64).astype(np.uint8).reshape(2, 3072)
    blob = pickle.dumps({b"data": data, b"labels": [1, 9]}, protocol=protocol)
    x, y = decode_batch(blob, "mem")
    np.testing.assert_array_equal(x.reshape(2, -1), data)
    assert y.tolist() == [1, 9]


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def test_pickle_that_runs_code_is_rejected_before_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    blob = pickle.dumps({"data": _Exploit(marker), "labels": []}, protocol=2)
    path = tmp_path / "data_batch_1"
    path.write_bytes(blob)
    with pytest.raises(DataCorruptError, match=r"data_batch_1.*forbidden global (posix|os)\.system"):
        decode_batch(path.read_bytes(), str(path))
    assert not marker.exists()


def test_eval_via_builtins_is_rejected() -> None:
    blob = b"cbuiltins\neval\n(S'1+1'\ntR."
    with pytest.raises(DataCorruptError, match="forbidden global builtins.eval"):
        decode_batch(blob, "mem")


def test_malformed_batches(tmp_path: Path, py2_pickle: Callable) -> None:
    with pytest.raises(DataCorruptError, match="truncated|unreadable"):
        decode_batch(py2_pickle({"data": np.zeros((1, 3072), np.uint8), "labels": [0]})[:-30], "cut")
    with pytest.raises(DataCorruptError, match="uint8 \\(n, 3072\\), got ndarray uint8 \\(1, 100\\)"):
        decode_batch(py2_pickle({"data": np.zeros((1, 100), np.uint8), "labels": [0]}), "short")
    with pytest.raises(DataCorruptError, match="got ndarray float32 \\(1, 3072\\)"):  # the type is named
        decode_batch(py2_pickle({"data": np.zeros((1, 3072), np.float32), "labels": [0]}), "floats")
    with pytest.raises(DataCorruptError, match="1 images but 2 labels"):
        decode_batch(py2_pickle({"data": np.zeros((1, 3072), np.uint8), "labels": [0, 1]}), "labels")
    (tmp_path / "b").mkdir()
    with pytest.raises(DataCorruptError, match="missing CIFAR-10 batch"):
        read_cifar_batches(tmp_path / "b")
    with pytest.raises(DataCorruptError, match="unreadable tar"):
        (tmp_path / "x.tar.gz").write_bytes(io.BytesIO(b"\x1f\x8bnot a tar").getvalue())
        read_cifar_tarball(tmp_path / "x.tar.gz")
