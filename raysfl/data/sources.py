"""Read a located :class:`~raysfl.data.locate.Source` into arrays and check them against the registry.

``READERS`` maps each layout kind to its reader. Slow formats (JPEG/PNG trees and LEAF JSON) go through
:func:`raysfl.data.cache.cached_arrays`; IDX and CIFAR pickles are read directly (a second or two).
:func:`check_raw` enforces the registry's sample counts and image shape (GAS spec §10.11 and
``shared/data/README.md``: 60000/10000 for MNIST and Fashion-MNIST, 50000/10000 for CIFAR-10, 90000 per
split for CINIC-10), raising :class:`DataCorruptError` naming the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from raysfl.data.cache import cached_arrays
from raysfl.data.cifar import read_cifar_batches, read_cifar_tarball
from raysfl.data.errors import DataCorruptError
from raysfl.data.idx import read_idx
from raysfl.data.imagefolder import read_image_folder, read_image_tarball
from raysfl.data.leaf import read_leaf_femnist
from raysfl.data.locate import Source, idx_file
from raysfl.data.registry import IDX_FILES, DatasetInfo


@dataclass(frozen=True, eq=False)
class RawData:
    """Arrays read from one source, before normalization constants are attached."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: tuple[str, ...] = ()
    train_writers: np.ndarray | None = None
    test_writers: np.ndarray | None = None
    writer_names: tuple[str, ...] = ()


def _read_idx_folder(source: Source, info: DatasetInfo) -> RawData:
    arrays = {}
    for stem in IDX_FILES:
        path = idx_file(source.path, stem)
        if path is None:
            raise DataCorruptError(f"{source.path}: missing {stem}[.gz]")
        arr = read_idx(path)
        want_ndim = 3 if "images" in stem else 1
        if arr.ndim != want_ndim or arr.dtype != np.uint8:
            raise DataCorruptError(
                f"{path}: expected a {want_ndim}-d uint8 IDX array, got {arr.dtype} {arr.shape}"
            )
        arrays[stem] = (path, arr)
    for split in ("train", "t10k"):
        (ipath, images), (_, labels) = (
            arrays[f"{split}-images-idx3-ubyte"],
            arrays[f"{split}-labels-idx1-ubyte"],
        )
        if images.shape[0] != labels.shape[0]:
            raise DataCorruptError(
                f"{ipath}: {images.shape[0]} images but the labels file has {labels.shape[0]}"
            )
    return RawData(
        train_x=_one_channel(arrays["train-images-idx3-ubyte"][1]),
        train_y=arrays["train-labels-idx1-ubyte"][1].astype(np.int64),
        test_x=_one_channel(arrays["t10k-images-idx3-ubyte"][1]),
        test_y=arrays["t10k-labels-idx1-ubyte"][1].astype(np.int64),
    )


def _one_channel(images: np.ndarray) -> np.ndarray:
    """``(N, H, W)`` → ``(N, 1, H, W)`` with the standard strides (a view, no copy).

    Not ``images[:, None]``: that gives the channel axis stride 0, and batches gathered from it strides
    that torch reads as channels-last (see :func:`raysfl.data.transforms.row_major`).
    """
    return images.reshape(images.shape[0], 1, *images.shape[1:])


def _read_cifar(source: Source, info: DatasetInfo) -> RawData:
    reader = read_cifar_batches if source.kind == "cifar-python" else read_cifar_tarball
    splits = reader(source.path)
    return RawData(*splits["train"], *splits["test"])


def _read_images(source: Source, info: DatasetInfo) -> RawData:
    reader = read_image_folder if source.kind == "imagefolder" else read_image_tarball

    def build() -> dict[str, np.ndarray]:
        splits, classes = reader(source.path, ("train", "test"), info.channels, info.image_size)
        return {
            "train_x": splits["train"][0],
            "train_y": splits["train"][1],
            "test_x": splits["test"][0],
            "test_y": splits["test"][1],
            "classes": np.array(classes, dtype=str),
        }

    arrays = cached_arrays(source.path, f"{info.name}-{source.kind}-{info.channels}c", build)
    return RawData(
        arrays["train_x"],
        arrays["train_y"],
        arrays["test_x"],
        arrays["test_y"],
        classes=tuple(str(c) for c in arrays["classes"]),
    )


def _read_leaf(source: Source, info: DatasetInfo) -> RawData:
    def build() -> dict[str, np.ndarray]:
        train, test, writers = read_leaf_femnist(source.path)
        return {
            "train_x": train.x,
            "train_y": train.y,
            "train_w": train.writers,
            "test_x": test.x,
            "test_y": test.y,
            "test_w": test.writers,
            "writer_names": np.array(writers, dtype=str),
        }

    arrays = cached_arrays(source.path, f"{info.name}-{source.kind}", build)
    return RawData(
        arrays["train_x"],
        arrays["train_y"],
        arrays["test_x"],
        arrays["test_y"],
        train_writers=arrays["train_w"],
        test_writers=arrays["test_w"],
        writer_names=tuple(str(w) for w in arrays["writer_names"]),
    )


READERS: dict[str, Callable[[Source, DatasetInfo], RawData]] = {
    "idx": _read_idx_folder,
    "cifar-python": _read_cifar,
    "cifar-python-tar": _read_cifar,
    "imagefolder": _read_images,
    "imagefolder-tar": _read_images,
    "leaf-json": _read_leaf,
}


def check_raw(raw: RawData, info: DatasetInfo, where: str) -> None:
    """Check sample counts, image shape and label range against ``info``.

    Raises:
        DataCorruptError: naming ``where`` and the first mismatch found.
    """
    shape = (info.channels, info.image_size, info.image_size)
    for split, x, y, expected in (
        ("training", raw.train_x, raw.train_y, info.train_size),
        ("test", raw.test_x, raw.test_y, info.test_size),
    ):
        if expected is not None and x.shape[0] != expected:
            raise DataCorruptError(
                f"{where}: expected {expected} {split} samples for {info.title}, found {x.shape[0]}"
                " (truncated or a different dataset?)"
            )
        if x.shape[1:] != shape:
            raise DataCorruptError(f"{where}: {split} images have shape {x.shape[1:]}, expected {shape}")
        if y.size and (y.min() < 0 or y.max() >= info.num_classes):
            raise DataCorruptError(f"{where}: {split} labels outside [0, {info.num_classes})")
    if raw.classes and len(raw.classes) != info.num_classes:
        raise DataCorruptError(f"{where}: {len(raw.classes)} class folders, expected {info.num_classes}")


EXACT_KINDS = ("idx",)
"""Layouts whose arrays are the release's own bytes (no lossy decoding), so a digest can identify them."""


def content_digest(raw: RawData) -> str:
    """SHA-256 of a dataset's arrays: train images, train labels, test images, test labels.

    Images as uint8, labels as little-endian int64, each in C order (the same on any machine).
    """
    digest = hashlib.sha256()
    for arr, dtype in ((raw.train_x, "u1"), (raw.train_y, "<i8"), (raw.test_x, "u1"), (raw.test_y, "<i8")):
        digest.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
    return digest.hexdigest()


def matches_release(raw: RawData, info: DatasetInfo, source: Source) -> bool | None:
    """Whether ``raw`` is ``info``'s official release; ``None`` when there is none to compare with."""
    if not info.release_digest or source.kind not in EXACT_KINDS:
        return None
    return content_digest(raw) == info.release_digest


def read_source(source: Source, info: DatasetInfo) -> RawData:
    """Read and check one located copy of ``info``."""
    raw = READERS[source.kind](source, info)
    check_raw(raw, info, str(source.path))
    return raw
