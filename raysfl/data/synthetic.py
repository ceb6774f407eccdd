"""A small, learnable, clearly-marked synthetic image dataset for fast tests.

Each class ``c`` owns a prototype: a coarse random grid of intensities in [0, 1] (one grid cell covers
about ``image_size / 4`` pixels per side), upsampled to the image size. A sample is its class prototype
plus i.i.d. Gaussian noise of std ``synthetic_noise``, clipped to [0, 1] and stored as uint8. Labels are
balanced (``n // classes`` or one more per class) and shuffled. Everything is drawn from
``numpy.random.default_rng(synthetic_seed)``, so the same options give the same bytes on every machine.
A nearest-centroid classifier separates the classes almost perfectly at the default noise; raise
``synthetic_noise`` to make the task harder.

The result has ``synthetic=True`` and the name ``"synthetic"``; it must never be reported as real data.
Its ``standard`` normalization is the per-channel mean/std of its own training images.
"""

from __future__ import annotations

import numpy as np

from raysfl.data.config import DataConfig
from raysfl.data.dataset import ImageDataset

GRID = 4


def _prototypes(rng: np.random.Generator, classes: int, channels: int, size: int) -> np.ndarray:
    """Class prototypes, float64 ``(classes, C, size, size)`` in [0, 1]."""
    coarse = rng.uniform(0.0, 1.0, size=(classes, channels, GRID, GRID))
    cell = np.arange(size) * GRID // size
    return coarse[:, :, cell[:, None], cell[None, :]]


CHUNK = 4096
"""Samples generated at a time: the float64 work arrays stay a few MB however many samples are asked for."""


def _samples(
    rng: np.random.Generator, protos: np.ndarray, n: int, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` shuffled, balanced labels and their noisy uint8 images.

    The noise is drawn ``CHUNK`` samples at a time: a Generator's normal draws continue one stream, so the
    bytes are those of one draw of all ``n`` at once.
    """
    classes = protos.shape[0]
    y = rng.permutation(np.arange(n) % classes).astype(np.int64)
    x = np.empty((n, *protos.shape[1:]), dtype=np.uint8)
    for start in range(0, n, CHUNK):
        rows = y[start : start + CHUNK]
        noisy = protos[rows] + noise * rng.standard_normal((len(rows), *protos.shape[1:]))
        x[start : start + len(rows)] = np.rint(np.clip(noisy, 0.0, 1.0) * 255)
    return x, y


def make_synthetic(cfg: DataConfig) -> ImageDataset:
    """Generate the synthetic dataset described by the ``synthetic_*`` options of ``cfg``.

    Example:
        >>> from raysfl.data.config import DataConfig
        >>> ds = make_synthetic(DataConfig(dataset="synthetic", synthetic_train=100, synthetic_test=20))
        >>> ds.synthetic, ds.train_x.shape, ds.train_x.dtype.name
        (True, (100, 1, 28, 28), 'uint8')
    """
    rng = np.random.default_rng(cfg.synthetic_seed)
    c, size, classes = cfg.synthetic_channels, cfg.synthetic_image_size, cfg.synthetic_classes
    protos = _prototypes(rng, classes, c, size)
    train_x, train_y = _samples(rng, protos, cfg.synthetic_train, cfg.synthetic_noise)
    test_x, test_y = _samples(rng, protos, cfg.synthetic_test, cfg.synthetic_noise)
    scaled = train_x / 255.0
    own_mean = tuple(float(v) for v in scaled.mean(axis=(0, 2, 3)))
    own_std = tuple(max(float(v), 1e-3) for v in scaled.std(axis=(0, 2, 3)))
    mean, std = ((0.5,) * c, (0.5,) * c) if cfg.normalization == "half" else (own_mean, own_std)
    return ImageDataset(
        name="synthetic",
        train_x=train_x,
        train_y=train_y,
        test_x=test_x,
        test_y=test_y,
        num_classes=classes,
        mean=mean,
        std=std,
        synthetic=True,
        source=(
            f"synthetic (generated: seed={cfg.synthetic_seed}, {classes} classes, {c}x{size}x{size},"
            f" noise={cfg.synthetic_noise})"
        ),
        classes=tuple(f"pattern-{i}" for i in range(classes)),
        title="synthetic (not real data)",
    )
