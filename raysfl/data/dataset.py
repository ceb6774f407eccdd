"""The in-memory dataset returned by :func:`raysfl.data.load_dataset`.

Images stay uint8 in ``(N, C, H, W)`` layout (a quarter of the float32 size, and what Ray can share
zero-copy between workers); labels are int64. Conversion to normalized float32 happens per batch in
:mod:`raysfl.data.transforms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from raysfl.data.errors import DataError


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """A labelled image classification dataset with a train and a test split.

    Attributes:
        name: Registry name (``"cifar10"``, ...); contains ``"synthetic"`` for generated data.
        train_x: C-contiguous uint8 array ``(N_train, C, H, W)``.
        train_y: int64 array ``(N_train,)`` with values in ``[0, num_classes)``.
        test_x: uint8 array ``(N_test, C, H, W)``.
        test_y: int64 array ``(N_test,)``.
        num_classes: Number of classes.
        mean: Per-channel mean on the [0, 1] scale, chosen by ``DataConfig.normalization``.
        std: Per-channel std on the [0, 1] scale, chosen by ``DataConfig.normalization``.
        synthetic: True for generated data, which must never be reported as a real-data result.
        source: Where the data was read from (a path, or a description of the generator).
        train_writers: LEAF only: int64 ``(N_train,)`` index into ``writer_names`` per training sample.
        test_writers: LEAF only: int64 ``(N_test,)`` index into ``writer_names`` per test sample.
        writer_names: LEAF only: the writer (user) id of each writer index.
        classes: Class names in label order where the source provides them.
        title: Human-readable name for reports, naming the variant read (e.g. ``"CIFAR-10 (JPEG q75)"``).
        release: Whether the arrays are the dataset's official release (MNIST, Fashion-MNIST read from IDX);
            ``None`` when there is no release to compare with.

    The constructor checks shapes, dtypes and label ranges and raises :class:`DataError` on a violation.
    """

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    synthetic: bool
    source: str
    train_writers: np.ndarray | None = None
    test_writers: np.ndarray | None = None
    writer_names: tuple[str, ...] = ()
    classes: tuple[str, ...] = field(default=())
    title: str = ""
    release: bool | None = None

    def __post_init__(self) -> None:
        """Check the invariants stated in the class docstring."""
        for split, x, y in (("train", self.train_x, self.train_y), ("test", self.test_x, self.test_y)):
            if x.dtype != np.uint8 or x.ndim != 4 or not x.flags.c_contiguous:
                raise DataError(
                    f"{self.name} {split}_x: expected C-contiguous uint8 (N, C, H, W),"
                    f" got {x.dtype} {x.shape}"
                )
            if y.dtype != np.int64 or y.shape != (x.shape[0],):
                raise DataError(
                    f"{self.name} {split}_y: expected int64 ({x.shape[0]},), got {y.dtype} {y.shape}"
                )
            if y.size and (y.min() < 0 or y.max() >= self.num_classes):
                raise DataError(f"{self.name} {split}_y: labels outside [0, {self.num_classes})")
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise DataError(
                f"{self.name}: train images {self.train_x.shape[1:]} vs test {self.test_x.shape[1:]}"
            )
        if not len(self.mean) == len(self.std) == self.channels:
            raise DataError(f"{self.name}: mean/std need {self.channels} channel values")
        for split, writers, n in (
            ("train", self.train_writers, self.train_x.shape[0]),
            ("test", self.test_writers, self.test_x.shape[0]),
        ):
            if writers is not None and (writers.shape != (n,) or writers.dtype != np.int64):
                raise DataError(f"{self.name} {split}_writers: expected int64 ({n},), got {writers.shape}")

    @property
    def channels(self) -> int:
        """Number of image channels C."""
        return int(self.train_x.shape[1])

    @property
    def image_size(self) -> int:
        """Image height (= width for every supported dataset)."""
        return int(self.train_x.shape[2])

    def __repr__(self) -> str:
        """A short summary without the arrays."""
        tag = " SYNTHETIC" if self.synthetic else ""
        return (
            f"ImageDataset({self.name!r}{tag}, train={tuple(self.train_x.shape)},"
            f" test={tuple(self.test_x.shape)}, classes={self.num_classes}, source={self.source!r})"
        )
